"""The JSON rows scripts depend on: their keys, in order, for a ``kvplan plan`` and a ``kvplan pd`` call.

The library returns typed results and makes rows only when output asks for them
(:mod:`kvplan.plans.fleet.rows`, :mod:`kvplan.plans.pd.rows`); these lists are the rows' keys as
they were before the typed results, written out by hand, so a renamed, dropped or reordered key fails.
Keys may be added (a test here then needs the new key appended), never renamed.
"""

from __future__ import annotations

import json

from ..conftest import DATA

PLAN_KEYS = {
    "plan": ["kind", "model", "hardware", "engine", "tp", "pp", "rate_per_s", "instances", "gpus_per_instance",
        "total_gpus", "batch_per_instance", "batch_kv", "batch_kv_mean", "batch_kv_p99", "batch_tpot", "batch_mean",
        "concurrency", "running_concurrency", "kv_bytes_per_sequence_mean", "kv_bytes_per_sequence_p99",
        "kv_demand_mean_bytes", "kv_demand_p99_bytes", "kv_demand_mean_bytes_per_instance",
        "kv_demand_p99_bytes_per_instance", "kv_held_mean_bytes", "kv_capacity_bytes",
        "kv_capacity_bytes_per_instance", "headroom_bytes", "weights_bytes", "activation_bytes",
        "memory_demand_bytes", "gpu_memory_bytes", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s",
        "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "decode_step_s",
        "prefill_mean_s", "prefill_utilization", "slot_utilization", "interference_share", "ttft_slo", "tpot_slo",
        "binding_constraint", "feasible", "reason", "binding_detail", "sized_by", "closed_form_instances", "system",
        "accelerators_per_node", "nodes", "gpu_cost_per_gpu_hour", "fleet_cost_per_hour",
        "cost_per_million_output_tokens", "dp", "ep", "expert_parallel", "redundant_experts", "batch_per_rank"],
    "candidate": ["kind", "tp", "pp", "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "ttft_p99_s",
        "tpot_p99_s", "binding_constraint", "binding_detail", "feasible", "reason", "sized_by", "nodes",
        "gpu_cost_per_gpu_hour", "fleet_cost_per_hour", "cost_per_million_output_tokens", "dp", "ep", "expert_parallel", "redundant_experts", "batch_per_rank"],
    "scale": ["kind", "rate_multiplier", "rate_per_s", "sized_by", "instances", "gpus_per_instance", "total_gpus",
        "batch_per_instance", "batch_mean", "concurrency", "kv_demand_mean_bytes", "ttft_p50_s", "ttft_p90_s",
        "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "binding_constraint", "feasible", "reason", "nodes",
        "gpu_cost_per_gpu_hour", "fleet_cost_per_hour", "cost_per_million_output_tokens"],
}

PLAN_REPLAY_KEYS = {
    "plan": ["kind", "model", "hardware", "engine", "tp", "pp", "rate_per_s", "instances", "gpus_per_instance",
        "total_gpus", "batch_per_instance", "batch_kv", "batch_kv_mean", "batch_kv_p99", "batch_tpot", "batch_mean",
        "concurrency", "running_concurrency", "kv_bytes_per_sequence_mean", "kv_bytes_per_sequence_p99",
        "kv_demand_mean_bytes", "kv_demand_p99_bytes", "kv_demand_mean_bytes_per_instance",
        "kv_demand_p99_bytes_per_instance", "kv_held_mean_bytes", "kv_capacity_bytes",
        "kv_capacity_bytes_per_instance", "headroom_bytes", "weights_bytes", "activation_bytes",
        "memory_demand_bytes", "gpu_memory_bytes", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s",
        "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "decode_step_s",
        "prefill_mean_s", "prefill_utilization", "slot_utilization", "interference_share", "ttft_slo", "tpot_slo",
        "binding_constraint", "feasible", "reason", "binding_detail", "sized_by", "closed_form_instances", "system",
        "accelerators_per_node", "nodes", "sim_ttft_mean_s", "sim_ttft_p50_s", "sim_ttft_p90_s", "sim_ttft_p95_s",
        "sim_ttft_p99_s", "sim_tpot_mean_s", "sim_tpot_p50_s", "sim_tpot_p90_s", "sim_tpot_p95_s", "sim_tpot_p99_s",
        "sim_requests", "sim_measured", "sim_rejected", "sim_batch_mean", "sim_steps", "sim_mixed_steps",
        "sim_preemptions", "sim_recomputed_tokens", "dp", "ep", "expert_parallel", "redundant_experts", "batch_per_rank"],
    "scale": ["kind", "rate_multiplier", "rate_per_s", "sized_by", "instances", "gpus_per_instance", "total_gpus",
        "batch_per_instance", "batch_mean", "concurrency", "kv_demand_mean_bytes", "ttft_p50_s", "ttft_p90_s",
        "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "binding_constraint", "feasible", "reason", "nodes"],
}

PD_ROW_KEYS = [
    "scenario", "mode", "model", "prefill_hardware", "decode_hardware", "xpyd", "prefill_instances",
    "decode_instances", "prefill_tp", "decode_tp", "prefill_dp", "decode_dp", "prefill_ep", "decode_ep",
    "prefill_nodes", "decode_nodes", "prefill_gpus", "decode_gpus", "total_gpus", "qps", "arrival_scv",
    "isl_mean", "osl_mean", "cached_prefix_fraction", "link_kind", "link", "link_bandwidth_bytes_per_s",
    "link_latency_s", "links_per_transfer", "kv_transfer_bytes", "kv_transfer_s", "exposed_transfer_s",
    "link_utilization", "link_wait_s", "prefill_s", "prefill_dispatch_s", "prefill_utilization", "first_decode_step_s",
    "decode_batch_mean", "decode_batch_at_slo", "decode_kv_budget_bytes_per_gpu", "decode_kv_used_bytes_per_gpu",
    "decode_staging_bytes_per_gpu", "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s",
    "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "ttft_slo", "tpot_slo",
    "goodput_per_gpu", "capacity_per_gpu", "prefill_goodput_per_gpu", "decode_goodput_per_gpu",
    "rate_matched_xpyd", "feasible", "binding_constraint", "prefill_binding", "decode_binding",
    "best_achievable_ttft_s", "best_achievable_tpot_s", "interference_share", "reason", "placement",
    "placement_fits", "placement_picked", "placement_reason", "checklist", "cost_per_hour"]
PD_KEYS = {"disaggregated": PD_ROW_KEYS, "aggregated": PD_ROW_KEYS}  # every pd row has the same keys

PLAN = ["plan", "llama-3.1-8b", "h100-sxm", "--qps", "10", "--isl", "1k:4k", "--osl", "200", "--ttft", "p99<=2s",
        "--tpot", "p90<=50ms", "--sample", "5000", "--gpu-cost", "h100-sxm=2.5", "--format", "json"]
PD = ["pd", "llama-3.1-8b", "h100-sxm", "--qps", "5", "--isl", "2k", "--osl", "256", "--format", "json"]


def _keys_by_kind(result, field: str) -> dict[str, list[str]]:
    assert result.exit_code == 0, result.stderr
    found: dict[str, list[str]] = {}
    for row in json.loads(result.stdout):
        keys = found.setdefault(row[field], list(row))
        assert list(row) == keys, f"rows of {field} {row[field]} differ in their keys"
    return found


def test_plan_row_keys_are_unchanged(invoke):
    assert _keys_by_kind(invoke(*PLAN), "kind") == PLAN_KEYS


def test_plan_row_keys_with_a_replay_are_unchanged(invoke):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--trace", DATA / "traces" / "azure_conv_head200.csv",
                 "--ttft", "p99<=2s", "--tp", "1", "--scale", "2", "--format", "json")
    assert _keys_by_kind(res, "kind") == PLAN_REPLAY_KEYS


def test_pd_row_keys_are_unchanged(invoke):
    assert _keys_by_kind(invoke(*PD), "mode") == PD_KEYS

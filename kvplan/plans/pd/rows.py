"""The JSON rows of ``kvplan pd``: the one place its typed results become flat dicts.

Every row (disaggregated, aggregated, sensitivity, placement) has the same keys (:data:`ROW_KEYS`),
SI units, ``None`` where a figure does not apply or is not finite; an SLO statistic outside
``STATS`` (``p99.9``) adds its ``ttft_…_s`` / ``tpot_…_s`` keys at the end. Nothing in the library
reads a row back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.plans.pd.result import PdAnswer, PdPlan

STATS = ("mean", "p50", "p90", "p95", "p99")
ROW_KEYS = [
    "scenario", "mode", "model", "prefill_hardware", "decode_hardware", "xpyd", "prefill_instances",
    "decode_instances", "prefill_tp", "decode_tp", "prefill_dp", "decode_dp", "prefill_ep", "decode_ep",
    "prefill_nodes", "decode_nodes", "prefill_gpus", "decode_gpus", "total_gpus", "qps", "arrival_scv",
    "isl_mean", "osl_mean", "cached_prefix_fraction", "link_kind", "link", "link_bandwidth_bytes_per_s",
    "link_latency_s", "links_per_transfer", "kv_transfer_bytes", "kv_transfer_s", "exposed_transfer_s",
    "link_utilization", "link_wait_s", "prefill_s", "prefill_dispatch_s", "prefill_utilization", "first_decode_step_s", "decode_batch_mean",
    "decode_batch_at_slo", "decode_kv_budget_bytes_per_gpu", "decode_kv_used_bytes_per_gpu",
    "decode_staging_bytes_per_gpu", *(f"ttft_{s}_s" for s in STATS), *(f"tpot_{s}_s" for s in STATS), "ttft_slo",
    "tpot_slo", "goodput_per_gpu", "capacity_per_gpu", "prefill_goodput_per_gpu", "decode_goodput_per_gpu",
    "rate_matched_xpyd", "feasible", "binding_constraint", "prefill_binding", "decode_binding",
    "best_achievable_ttft_s", "best_achievable_tpot_s", "interference_share", "reason",
    "placement", "placement_fits", "placement_picked", "placement_reason", "checklist", "cost_per_hour",
]
POOL_KEYS = ("instances", "tp", "dp", "ep", "nodes", "gpus")


def plan_row(plan: PdPlan) -> dict:
    """One plan as one row, keys in :data:`ROW_KEYS` order."""
    row = dict.fromkeys(ROW_KEYS)
    for key in ROW_KEYS:
        if hasattr(plan, key) and key not in ("placement", "checklist"):
            row[key] = getattr(plan, key)
    for side, pool in (("prefill", plan.prefill), ("decode", plan.decode)):
        for key in POOL_KEYS:
            row[f"{side}_{key}"] = getattr(pool, key)
        row[f"{side}_binding"] = pool.binding
        row[f"{side}_goodput_per_gpu"] = pool.goodput_per_gpu
    for s in STATS:
        row[f"ttft_{s}_s"], row[f"tpot_{s}_s"] = plan.ttft.get(s), plan.tpot.get(s)
    if plan.placement is not None:
        row.update({"placement": plan.placement.name, "placement_fits": plan.placement.fits,
                    "placement_picked": plan.placement.picked or None, "placement_reason": plan.placement.reason})
    row["checklist"] = plan.checklist
    for key, value in plan.extra:
        row.setdefault(key, value)
    return row


def answer_rows(answer: PdAnswer) -> list[dict]:
    return [plan_row(p) for p in answer.plans]

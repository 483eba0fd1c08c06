"""Wide-EP PD pools: TP × attention DP × EP per pool, whole nodes, and DeepSeek's day-6 deployment.

The reference is DeepSeek's published V3/R1 inference system (tests/data/measurements/deepseek_day6.yaml):
prefill units of 4 H800 nodes (EP32, DP32), decode units of 18 nodes (EP144, DP144), 32 redundant
experts in both; ~95.5 prefill and ~131 decode nodes on average; 73.7k input tok/s per prefill node
and 14.8k output tok/s per decode node. It is a scoring case: nothing is tuned on it.
"""

from __future__ import annotations

import math

import pytest
import yaml

from kvplan.calc.memory import weight_bytes
from kvplan.calc.roofline import model_cost
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile, serving_dtype
from kvplan.errors import InputError
from kvplan.plans import deployment
from kvplan.plans.deployment import Parallelism
from kvplan.plans.pd.plan import plan_pd

from ..conftest import DATA


def _day6():
    d = yaml.safe_load((DATA / "measurements" / "deepseek_day6.yaml").read_text())
    return {k: v["value"] for k, v in d["figures"].items()}


def _day6_inputs():
    """Mean ISL/OSL from the published totals: I/O = 608B/168B, I + O/2 = 4,989 (mean KV length per output token)."""
    f = _day6()
    ratio = f["input_tokens_per_day"] / f["output_tokens_per_day"]
    osl = f["mean_kv_length_per_output_token"] / (ratio + 0.5)
    isl = ratio * osl
    qps = f["input_tokens_per_day"] / 86400 / isl
    return f, isl, osl, qps


def _day6_plan(**extra):
    f, isl, osl, qps = _day6_inputs()
    result = plan_pd("deepseek-v3", "h800", system="hgx-h800-8", expert_parallel=True, prefill_tp=[1], decode_tp=[1],
                     prefill_dp=[32], decode_dp=[144], redundant_experts=32, qps=qps, isl=round(isl),
                     osl=round(osl), cached_prefix_fraction=f["cache_hit_fraction"], tpot="p50<=50ms",
                     settings=deployment.EngineSettings(kv_dtype="fp8"), aggregated=False, sensitivity=False,
                     **extra)
    return f, isl, osl, qps, result.rows[0]


def test_day6_inputs_follow_the_published_totals():
    _, isl, osl, qps = _day6_inputs()
    assert osl == pytest.approx(1211.2, abs=0.05) and isl == pytest.approx(4383.4, abs=0.05)
    assert qps == pytest.approx(1605.4, abs=0.05)


def test_day6_decode_pool_within_25_percent_of_the_published_split():
    """The issue's command (no overlap flag): decode nodes and output tok/s per decode node within 25%."""
    f, isl, osl, qps, row = _day6_plan()
    assert row["feasible"] and row["prefill_dp"] == 32 and row["decode_dp"] == 144
    assert row["prefill_ep"] == 32 and row["decode_ep"] == 144
    published_decode = f["output_tokens_per_day"] / 86400 / f["decode_output_tokens_per_s_per_node"]  # 131.4
    assert row["decode_nodes"] == pytest.approx(published_decode, rel=0.25)
    per_node = qps * osl / row["decode_nodes"]
    assert per_node == pytest.approx(f["decode_output_tokens_per_s_per_node"], rel=0.25)
    # whole deployment units: 18-node decode units and 4-node prefill units
    assert row["decode_nodes"] % f["decode_unit_nodes"] == 0 and row["prefill_nodes"] % f["prefill_unit_nodes"] == 0
    assert row["decode_nodes"] == row["decode_instances"] * 144 / 8
    assert row["total_gpus"] == 8 * (row["prefill_nodes"] + row["decode_nodes"])


def test_day6_prefill_pool_within_25_percent_at_the_utilisation_ceiling():
    """The issue's command: the prefill pool lands within 25% of the published ~95.5 nodes, sized by the
    utilisation ceiling (ρ ≤ 0.9: one instance fewer would run above it), not at the edge of saturation.
    The EP32 dispatch/combine is priced as DeepEP runs it (FP8 dispatch, one RDMA copy per destination node),
    the GEMMs at DeepGEMM's H800 figures. Input tok/s per node (including cache hits, as published) is within
    25% of 73.7k too; with two-batch overlap both pools undershoot (docs/examples/deepseek-v3-day6.md)."""
    f, isl, osl, qps, row = _day6_plan()
    assert row["feasible"]
    published_prefill = f["input_tokens_per_day"] / 86400 / f["prefill_input_tokens_per_s_per_node"]  # 95.5
    assert row["prefill_nodes"] == pytest.approx(published_prefill, rel=0.25)
    assert qps * isl / row["prefill_nodes"] == pytest.approx(f["prefill_input_tokens_per_s_per_node"], rel=0.25)
    assert row["prefill_utilization"] <= 0.9
    assert row["prefill_binding"] == "prefill_utilization"
    # one instance fewer: above the ceiling
    assert qps * row["prefill_s"] / ((row["prefill_instances"] - 1) * 32) > 0.9


def test_day6_layout_on_h100_tables_both_pools_within_25_percent_of_published():
    """The same layout on h100-sxm's measured (aiconfigurator) kernel tables: the prefill pool and its input
    tok/s per node land within 25% of DeepSeek's (96 nodes, 73.3k per node), and so does the decode pool (162
    nodes against 131.4). Before the routed experts at EP > 8 read DeepGEMM's figures instead of the table's EP32
    rows, this was 312 / 504 nodes; before vLLM's eager-timed fp8_block GEMM rows were dropped for SGLang's
    graph-timed DeepGEMM rows (kvplan/data/perf/README.md "Dropped"), the decode pool was 216 nodes; with DeepGEMM's
    figures in place of SGLang's measured DeepEP layer (moe_wideep.csv), 88 / 144."""
    f, isl, osl, qps = _day6_inputs()
    row = plan_pd("deepseek-v3", "h100-sxm", system="hgx-h100-8", expert_parallel=True, prefill_tp=[1],
                  decode_tp=[1], prefill_dp=[32], decode_dp=[144], redundant_experts=32, qps=qps, isl=round(isl),
                  osl=round(osl), cached_prefix_fraction=f["cache_hit_fraction"], tpot="p50<=50ms",
                  settings=deployment.EngineSettings(kv_dtype="fp8"), aggregated=False, sensitivity=False).rows[0]
    published_prefill = f["input_tokens_per_day"] / 86400 / f["prefill_input_tokens_per_s_per_node"]  # 95.5
    published_decode = f["output_tokens_per_day"] / 86400 / f["decode_output_tokens_per_s_per_node"]  # 131.4
    assert row["feasible"] and row["prefill_nodes"] == pytest.approx(published_prefill, rel=0.25)
    assert qps * isl / row["prefill_nodes"] == pytest.approx(f["prefill_input_tokens_per_s_per_node"], rel=0.25)
    assert row["decode_nodes"] == pytest.approx(published_decode, rel=0.25)
    assert row["decode_nodes"] >= published_decode      # still not below what DeepSeek's own kernels need


def test_day6_decode_step_at_deepseeks_occupancy_against_the_published_speed():
    """Scoring the step itself (not fitted): DeepSeek's decode nodes hold 14.8k / 20–22 tok/s / 8 GPUs = 84–92
    sequences per GPU at a mean KV length of 4,989, and users see 20–22 tok/s, i.e. 45.5–50 ms per token. The
    decode step without overlap at 92 sequences per rank lands within 25% of that; with two-batch overlap (the
    day-6 5-stage pipeline, each micro-batch re-reading the weights) the step is shorter than the published
    45.5 ms: the overlapped model is the optimistic one (the page quantifies it)."""
    f = _day6()
    per_gpu = f["decode_output_tokens_per_s_per_node"] / f["output_speed_tokens_per_s_per_user_min"] / 8   # 92.5
    lo = 1 / f["output_speed_tokens_per_s_per_user_max"]
    hi = 1 / f["output_speed_tokens_per_s_per_user_min"]
    dep = deployment.resolve(load_model("deepseek-v3"), "h800", system="hgx-h800-8",
                             parallel=Parallelism(tp=1, dp=144, expert_parallel=True, redundant_experts=32),
                             engine=deployment.EngineSettings(kv_dtype="fp8"))
    batch = 144 * math.floor(per_gpu)
    steps = dep.steps.with_dp_imbalance(1.0)          # a decode-only pool steps balanced, as pd prices it
    plain = float(steps.decode_s(batch, f["mean_kv_length_per_output_token"]))
    overlapped = float(steps.with_machine(None, True).decode_s(batch, f["mean_kv_length_per_output_token"]))
    assert 0.75 * lo <= plain <= 1.25 * hi
    assert overlapped < plain and overlapped < lo


def test_prefill_pool_honours_the_utilisation_ceiling():
    """--max-utilization: the prefill pool's ρ = λ E[S] / (x dp) stays at or below it; a lower ceiling never
    plans fewer prefill instances, and the TTFT SLO alone (ceiling 1) sizes the pool nearer saturation."""
    rows = {u: _day6_plan(max_utilization=u)[4] for u in (0.7, 0.9, 1.0)}
    for u, row in rows.items():
        assert row["prefill_utilization"] <= u
    assert rows[0.7]["prefill_instances"] >= rows[0.9]["prefill_instances"] >= rows[1.0]["prefill_instances"]
    assert rows[1.0]["prefill_utilization"] > 0.9


def test_max_utilization_out_of_range_is_one_error(invoke):
    result = invoke("pd", "llama-3.1-8b", "hgx-h100-8", "--qps", "10", "--isl", "4k", "--osl", "256",
                    "--max-utilization", "0")
    assert result.exit_code == 2, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(("Error:", "Hint:"))]
    assert [ln.split(":")[0] for ln in lines] == ["Error", "Hint"] and "--max-utilization" in lines[0]
    assert result.stdout == ""


def test_redundant_experts_weights_per_gpu_closed_form():
    """EP144 with 32 redundant experts: each GPU holds (256 + 32)/144 = 2 routed experts per MoE layer (published),
    weights = (W − E) + E × 288/256 / 144 at tp = 1."""
    card = load_model("deepseek-v3")
    par = Parallelism(tp=1, dp=144, expert_parallel=True, redundant_experts=32)
    assert par.experts_per_gpu(card) == _day6()["decode_routed_experts_per_gpu"] == 2
    assert Parallelism(tp=1, dp=32, expert_parallel=True, redundant_experts=32).experts_per_gpu(card) == 9
    dep = deployment.resolve(card, "h800", system="hgx-h800-8", parallel=par,
                             engine=deployment.EngineSettings(kv_dtype="fp8"))
    profile = get_profile("vllm")
    cost = model_cost(card, profile, "auto", "fp8", tps=(1,))
    experts = 58 * 256 * cost.expert_weight_bytes
    total = weight_bytes(card, "auto", serving_dtype(card.dtype, profile))
    expected = (total - experts) + experts * 288 / 256 / 144
    assert dep.memory.weights_bytes_per_gpu == pytest.approx(expected, rel=1e-9)
    # 3 × 7168 × 2048 fp8 parameters per expert (plus block scales): 58 layers × 2 experts ≈ 5.1 GB per GPU
    assert 58 * 2 * cost.expert_weight_bytes == pytest.approx(58 * 2 * 3 * 7168 * 2048, rel=0.01)


def test_dp_instance_is_dp_prefill_servers_and_dp_decode_ranks():
    """A DP instance is dp prefill servers (M/G/c with c = x·dp) and holds dp × max_num_seqs sequences."""
    f, isl, osl, qps, row = _day6_plan()
    per_server = row["prefill_s"]
    servers = row["prefill_instances"] * 32
    assert row["prefill_utilization"] == pytest.approx(qps * per_server / servers, rel=1e-9)
    assert row["prefill_utilization"] < 1
    # decode KV per GPU: the batch at the SLO spread over 144 ranks, each request's KV once on its rank
    assert row["decode_kv_used_bytes_per_gpu"] < row["decode_kv_budget_bytes_per_gpu"]


def test_dense_model_pinned_dp1_keeps_todays_answer():
    base = plan_pd("llama-3.1-8b", "hgx-h100-8", qps=10, isl="4k", osl="256", ttft="p99<=2s", tpot="p99<=50ms",
                   aggregated=False, sensitivity=False).rows[0]
    pinned = plan_pd("llama-3.1-8b", "hgx-h100-8", qps=10, isl="4k", osl="256", ttft="p99<=2s", tpot="p99<=50ms",
                     aggregated=False, sensitivity=False, prefill_dp=[1], decode_dp=[1]).rows[0]
    assert base == pinned
    assert base["prefill_dp"] == base["decode_dp"] == 1
    assert base["prefill_nodes"] == base["prefill_gpus"] / 8 and base["decode_nodes"] == base["decode_gpus"] / 8


def test_dense_dp_shares_the_rate_like_separate_replicas():
    """A dense TP1×DP2 decode instance steps like two TP1 replicas in lockstep: same TPOT at half the
    instances (the rate each rank sees is the same)."""
    kw = dict(qps=20, isl="2k", osl="256", ttft="p99<=4s", tpot="p99<=100ms", aggregated=False, sensitivity=False,
              prefill_tp=[1], decode_tp=[1])
    one = plan_pd("llama-3.1-8b", "hgx-h100-8", prefill_instances=2, decode_instances=2, **kw).rows[0]
    two = plan_pd("llama-3.1-8b", "hgx-h100-8", prefill_instances=1, decode_instances=1, prefill_dp=[2],
                  decode_dp=[2], **kw).rows[0]
    assert two["total_gpus"] == one["total_gpus"] == 4
    assert two["tpot_p50_s"] == pytest.approx(one["tpot_p50_s"], rel=1e-3)
    assert two["decode_batch_mean"] == pytest.approx(2 * one["decode_batch_mean"], rel=1e-3)
    assert math.isclose(two["prefill_utilization"], one["prefill_utilization"], rel_tol=1e-9)


@pytest.mark.parametrize("args, message", [
    (["llama-3.1-8b", "hgx-h100-8", "--enable-expert-parallel"], "dense model"),
    (["llama-3.1-8b", "hgx-h100-8", "--ep-redundant-experts", "8"], "dense model"),
    (["deepseek-v3", "h800", "--system", "hgx-h800-8", "--enable-expert-parallel", "--decode-dp", "3"],
     "does not divide a 8-GPU node"),
    (["deepseek-v3", "h800", "--system", "hgx-h800-8", "--enable-expert-parallel", "--prefill-dp", "12"],
     "does not divide a 8-GPU node"),
])
def test_bad_parallelism_is_one_error_and_hint(invoke, args, message):
    result = invoke("pd", *args, "--qps", "10", "--isl", "4k", "--osl", "256")
    assert result.exit_code == 2, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(("Error:", "Hint:"))]
    assert [ln.split(":")[0] for ln in lines] == ["Error", "Hint"]
    assert message in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_prefix_tier_load_is_timed_layer_by_layer():
    """--prefix-read-bandwidth: the cached prefix (⌊0.563 × 4383⌋ = 2467 tokens of MLA latent on the rank) loads
    layer by layer ahead of the suffix prefill; hidden behind it but for one layer's share: + load / 61."""
    _, _, _, _, plain = _day6_plan()
    _, _, _, _, tiered = _day6_plan(prefix_read_bandwidth_bytes_per_s=6.25e9)
    dep = deployment.resolve("deepseek-v3", "h800", system="hgx-h800-8",
                             parallel=Parallelism(tp=1, dp=32, expert_parallel=True, redundant_experts=32),
                             engine=deployment.EngineSettings(kv_dtype="fp8"))
    load = math.floor(0.563 * 4383) * dep.layout.bytes_per_token_per_gpu / 6.25e9
    assert load < plain["prefill_s"]
    assert tiered["prefill_s"] - plain["prefill_s"] == pytest.approx(load / 61, rel=1e-6)
    # a tier slower than the prefill itself is exposed beyond (L − 1)/L of the compute
    _, _, _, _, slow = _day6_plan(prefix_read_bandwidth_bytes_per_s=1e8)
    slow_load = load * 6.25e9 / 1e8
    assert slow_load > plain["prefill_s"]
    assert slow["prefill_s"] == pytest.approx(plain["prefill_s"] + slow_load - 60 / 61 * plain["prefill_s"], rel=1e-6)


def test_trace_hit_curve_feeds_the_cached_prefix_fraction():
    """--prefix-cache-tokens with a block trace: an unbounded cache gives the unbounded prefix hit rate
    (:func:`kvplan.workload.reuse.unlimited_hit_rates`, computed without stack distances)."""
    from kvplan.workload.reuse import unlimited_hit_rates
    from kvplan.workload.traces import read_trace

    trace = read_trace(DATA / "traces" / "mooncake_conversation_head200.jsonl")
    prefix, _, _ = unlimited_hit_rates(trace)
    assert 0 < prefix < 1
    rows = plan_pd("llama-3.1-8b", "hgx-h100-8", trace=trace, prefix_cache_tokens=1e12, ttft="p99<=4s",
                   tpot="p99<=100ms", aggregated=False, sensitivity=False).rows
    assert rows[0]["cached_prefix_fraction"] == pytest.approx(prefix, abs=1e-12)
    small = plan_pd("llama-3.1-8b", "hgx-h100-8", trace=trace, prefix_cache_tokens=512, ttft="p99<=4s",
                    tpot="p99<=100ms", aggregated=False, sensitivity=False).rows[0]
    assert small["cached_prefix_fraction"] <= rows[0]["cached_prefix_fraction"]
    with pytest.raises(InputError):
        plan_pd("llama-3.1-8b", "hgx-h100-8", qps=1, isl="1k", osl="64", prefix_cache_tokens=1e6)


def test_the_issue_command_without_redundant_experts_takes_deepseeks_32(invoke):
    """EP144 does not divide 256 experts: with no --ep-redundant-experts the decode pool takes the fewest replicas
    that make it divide, (−256) mod 144 = 32 — DeepSeek's published figure — and says so; EP32 needs none."""
    f, isl, osl, qps = _day6_inputs()
    result = invoke("pd", "deepseek-v3", "h800", "--system", "hgx-h800-8", "--enable-expert-parallel",
                    "--prefill-dp", "32", "--decode-dp", "144", "--qps", f"{608e9 / 86400 / round(isl):.1f}",
                    "--isl", str(round(isl)), "--osl", str(round(osl)), "--cached-prefix-fraction", "0.563",
                    "--kv-dtype", "fp8", "--tpot", "p50<=50ms", "--no-sensitivity", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "32 redundant experts make it divide (2 per GPU" in result.stderr
    row = __import__("json").loads(result.stdout)[0]
    published_decode = f["output_tokens_per_day"] / 86400 / f["decode_output_tokens_per_s_per_node"]
    assert row["decode_nodes"] == pytest.approx(published_decode, rel=0.25)

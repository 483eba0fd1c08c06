"""Tier placement: load versus recompute, hit rate per tier, spilled decode KV, and the Mooncake trace.

Hand-worked closed forms in the comments. Mooncake's own load-versus-recompute condition (FAST'25
Eq. 2) is unit-tested in tests/unit/test_transfer.py; here the planner's functions must agree with it.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc import tiering
from kvplan.calc.roofline import model_cost, prefill
from kvplan.calc.transfer import break_even_tokens, mooncake_min_bandwidth, transfer_s
from kvplan.cards.loader import load_hardware, load_model
from kvplan.engines import get_profile
from kvplan.errors import CardError, InfeasibleError, InputError
from kvplan.plans.sizing.latency import Efficiencies, resolve_machine
from kvplan.plans.tiers.inputs import CapacityOverrides, read_tiers_file, resolve_tiers
from kvplan.plans.tiers.reuse import (from_trace, from_workload, request_hit_blocks, reuse_holding_blocks,
                                     with_rag_documents)
from kvplan.plans.tiers.plan import tier_plan
from kvplan.workload.reuse import simulate_lru
from kvplan.workload.synthetic import workload_from_flags
from kvplan.workload.traces import read_trace

from ..conftest import DATA, TRACES_DIR

TIERS = DATA / "tiers"
HEAD200 = DATA / "traces" / "mooncake_conversation_head200.jsonl"
CONVERSATION = TRACES_DIR / "conversation_trace.jsonl"
M = 1024**2  # the workload engineer's "3M" = 3 × 1024² tokens


@pytest.fixture(scope="module")
def llama70b_h100_half_mfu():
    """Llama-3-70B architecture (the llama-3.1-70b card) on 8×H100 at 50% MFU, TP all-reduces overlapped."""
    card, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    cost = model_cost(card, get_profile("vllm"), tps=[8])
    machine, _ = resolve_machine(hw, "bf16", "bf16", cost.layers, Efficiencies(eta_flops=0.5), 8)
    return card, cost, machine


# --------------------------------------------------------------------------- closed form


def test_llama70b_8k_prefix_recompute_versus_load(llama70b_h100_half_mfu):
    """8k-token prefix of Llama-3-70B on 8×H100:

    recompute: FLOPs = 2·P·n + causal attention = 2 × 68.45e9 × 8192 + 80 × 2·64·256 × 8192·8193/2 (+ the LM
    head on one row) = 1.2095e15 over 8 × 989.5e12 × 0.5 = 3.958e15 FLOP/s → 0.3056 s (+ 0.72 ms step
    overhead); with every parameter counted (P = 70.55e9) 0.3143 s. ~0.31 s either way.
    load: 8192 × 327,680 B = 2.684 GB → 0.0268 s at 100 GB/s, 0.383 s through one 7 GB/s NVMe: about
    break-even (the drive loses by ~25% at 8k).
    """
    card, cost, machine = llama70b_h100_half_mfu
    n, g = 8192, 8 * 989.5e12 * 0.5
    recompute = float(tiering.recompute_s(cost, machine, n, tp=8, overlap_comm=True))
    hand = (2 * cost.dense_params_per_token * n + 2 * cost.lm_head_params + 80 * 2 * 64 * 256 * n * (n + 1) / 2) / g
    assert_allclose(recompute - machine.step_overhead_s, hand, rtol=1e-9)  # compute-bound: FLOPs / (G × η)
    assert_allclose(recompute, 0.31, atol=0.01)
    every_param = (2 * card.params_total * n + 80 * 2 * 64 * 256 * n * (n + 1) / 2) / g
    assert_allclose(every_param, 0.3143, atol=5e-4)
    assert_allclose(recompute, every_param, rtol=0.03)
    # the planner's recompute is the roofline prefill of one prompt
    assert_allclose(recompute, prefill(cost, machine, 1, n, tp=8, overlap_comm=True).time_s, rtol=1e-12)

    kv = n * 327_680
    assert_allclose(kv / 1e9, 2.684, atol=1e-3)
    per_gpu = float(cost.kv_token_bytes(8))
    assert per_gpu == 40_960  # 327,680 / 8: one KV head per rank
    fast = float(tiering.load_s(n, per_gpu, 100e9 / 8))    # 100 GB/s for the node = 12.5 GB/s per GPU
    drive = float(tiering.load_s(n, per_gpu, 7e9 / 8))     # one 7 GB/s drive shared by the 8 GPUs
    assert_allclose(fast, transfer_s(kv, 100e9), rtol=1e-12)
    assert_allclose(drive, transfer_s(kv, 7e9), rtol=1e-12)
    assert_allclose(fast, 0.027, atol=5e-4)
    assert_allclose(drive, 0.38, atol=5e-3)
    assert 1.0 < drive / recompute < 1.4  # about break-even, the drive slightly slower

    # Mooncake Eq. 2 at 50% MFU: B_min = G × 4,096 B / (4·n·d + 22·d²) ≈ 9.3 GB/s at 8k; 7 GB/s is below it
    b_min = float(mooncake_min_bandwidth(g, 4096, card.hidden_size, n))
    assert_allclose(b_min / 1e9, 9.29, atol=0.01)
    assert 7e9 < b_min < 100e9


def test_break_even_per_tier(llama70b_h100_half_mfu):
    """Loading a context of n tokens pays once load(n) < suffix(0, n) − suffix(n − 1, n).

    The shared 7 GB/s drive: 46.8 µs/token against a marginal recompute of ~37 µs/token at 8k that
    grows with attention (∝ n) → break-even in the tens of thousands (Eq. 2 alone: ~26k); a drive per
    GPU (6.9 GB/s each, 90 µs) or 100 GB/s pays from a few hundred tokens, where prefill turns
    compute-bound.
    """
    card, cost, machine = llama70b_h100_half_mfu

    def saved(n):
        return tiering.context_recompute_s(cost, machine, n, tp=8, overlap_comm=True)

    shared = break_even_tokens(40_960, 7e9 / 8, 0.0, saved, upper=card.max_context)
    per_gpu = break_even_tokens(40_960, 6.9e9, 90e-6, saved, upper=card.max_context)
    fast = break_even_tokens(40_960, 100e9 / 8, 0.0, saved, upper=card.max_context)
    assert 20_000 < shared < 60_000
    assert fast < per_gpu < 1_000
    # at the break-even the load is just below what caching saves, one token earlier it is not
    for bandwidth, latency, n in ((7e9 / 8, 0.0, shared), (6.9e9, 90e-6, per_gpu)):
        assert float(tiering.load_s(n, 40_960, bandwidth, latency)) < float(saved(n))
        assert float(tiering.load_s(n - 1, 40_960, bandwidth, latency)) >= float(saved(n - 1))
    # Eq. 2 agrees on the side of 8k: below its minimum at 8k, above it past the break-even
    g = 8 * 989.5e12 * 0.5
    assert float(mooncake_min_bandwidth(g, 4096, 8192, 8192)) > 7e9
    assert float(mooncake_min_bandwidth(g, 4096, 8192, shared)) < 7e9


def test_suffix_prefill_is_prefill_minus_the_cached_part(llama70b_h100_half_mfu):
    _, cost, machine = llama70b_h100_half_mfu
    s = np.array([512.0, 8192.0, 65536.0])
    whole = tiering.suffix_prefill_s(cost, machine, 0, s, tp=8)
    assert_allclose(whole, prefill(cost, machine, 1, s, tp=8).time_s, rtol=1e-12)
    half = tiering.suffix_prefill_s(cost, machine, s / 2, s, tp=8)
    assert np.all(half < whole) and np.all(half > 0)
    # a full hit still computes the last token; more cache never costs more
    assert np.all(tiering.suffix_prefill_s(cost, machine, s, s, tp=8) > 0)
    a = np.linspace(0, 8191, 50)
    assert np.all(np.diff(tiering.suffix_prefill_s(cost, machine, a, 8192.0, tp=8)) <= 1e-12)


# --------------------------------------------------------------------------- small math


def test_tier_hit_rates_are_differences_of_the_cumulative_curve():
    assert_allclose(tiering.cumulative_capacities([10, 0, 5]), [10, 10, 15])
    assert_allclose(tiering.tier_hit_rates([0.2, 0.3, 0.3, 0.36]), [0.2, 0.1, 0.0, 0.06])


def test_spill_fills_tiers_in_order_and_penalty_reads_them():
    # 100 B of decode KV, 60 B of HBM: 40 B spill; tier 1 takes 30, tier 2 the last 10
    placed, left = tiering.spill(100.0, 60.0, [30.0, 50.0])
    assert_allclose(placed, [30.0, 10.0])
    assert left == 0
    penalty = tiering.decode_penalty_s(placed, [10.0, 5.0], [0.5, 1.0])
    assert_allclose(penalty, 30 / 10 + 0.5 + 10 / 5 + 1.0)
    placed, left = tiering.spill(np.array([50.0, 200.0]), 60.0, [30.0, 50.0])
    assert_allclose(placed, [[0, 0], [30, 50]])
    assert_allclose(left, [0, 60])
    assert_allclose(tiering.decode_penalty_s(placed[0], [10.0, 5.0], [0.5, 1.0]), 0.0)  # nothing read


def test_demotion_writes_and_littles_law():
    # 1,000 block accesses/s; 30% hit above tier 2 → 700 blocks/s pushed into it
    assert_allclose(tiering.demotion_blocks_per_s(1000.0, [0.0, 0.3]), [1000.0, 700.0])
    assert tiering.littles_law_tokens(0.4, 120.0, 1000.0) == pytest.approx(48_000.0)
    assert_allclose(tiering.load_s([0, 1000], 100.0, 1e6, 1e-3), [0.0, 1e-3 + 0.1])


def test_hierarchy_equals_one_lru_of_the_summed_capacity():
    """An exclusive hierarchy of C1 + C2 blocks hits like one LRU of C1 + C2 (replayed with an OrderedDict)."""
    reuse = from_trace(HEAD200)
    prof = reuse.profile
    for c1, c2 in ((50, 100), (400, 1000), (3000, 0)):
        h1, h12 = prof.prefix_hit_rate([c1, c1 + c2])
        assert_allclose(h12, simulate_lru(reuse.trace, c1 + c2)[0])
        assert_allclose(h1, simulate_lru(reuse.trace, c1)[0])
        per_request = request_hit_blocks(reuse, [c1, c1 + c2])
        assert_allclose(per_request.sum(axis=1) / reuse.trace.block_ids.size, [h1, h12])


def test_littles_law_holding_from_a_trace_by_hand():
    # tiny_mooncake: R1 t=0 [0, 1]; R2 t=1 [0, 1, 2]; R3 t=3 [0, 3]; R4 t=6 [4, 1, 2]; R5 t=10 [0, 1, 2, 5]
    # reuse gaps (s): block 0: 1, 2, 7; block 1: 1, 5, 4; block 2: 5, 4 → 29 s over a 10 s trace = 2.9 blocks
    trace = read_trace(DATA / "traces" / "tiny_mooncake.jsonl")
    assert_allclose(reuse_holding_blocks(trace), 2.9)


# --------------------------------------------------------------------------- inputs


def test_tiers_file_rejects_zero_bandwidth():
    with pytest.raises(CardError) as err:
        read_tiers_file(TIERS / "zero_bandwidth.yaml")
    assert "tiers.0.read_bytes_per_s: Input should be greater than or equal to 1000000 (got 0)" in err.value.message


def test_capacity_overrides_scale_per_node_and_need_a_tier():
    from kvplan.cards.loader import load_system

    system, hw = load_system("hgx-h100-8"), load_hardware("h100-sxm")
    tiers, _ = resolve_tiers(hw, system, 4, overrides=CapacityOverrides(host_dram=1e12, remote=20e12))
    dram, remote = tiers
    assert dram.kind == "host_dram" and dram.capacity_bytes == 4e12 and dram.read_bytes_per_s == 64e9
    assert remote.capacity_bytes == 20e12  # a pool's total, not per node
    assert remote.read_bytes_per_s == pytest.approx(50e9 * 0.87)  # NIC efficiency on a remote read
    with pytest.raises(InputError, match="has no cxl tier"):
        resolve_tiers(hw, system, 1, overrides=CapacityOverrides(cxl=1e12))


def test_azure_trace_has_no_hash_ids():
    with pytest.raises(InputError, match="reuse needs hash_ids"):
        from_trace(DATA / "traces" / "azure_code_head200.csv")


def test_weights_that_leave_no_kv_memory_are_infeasible():
    reuse = from_trace(HEAD200)
    with pytest.raises(InfeasibleError, match="leaves no KV memory"):
        tier_plan("llama-3.1-405b", "h100-sxm", reuse=reuse, tp=1, nodes=1)


# --------------------------------------------------------------------------- decode KV out of HBM


def test_long_contexts_spill_decode_kv_and_pay_per_step():
    """32 sequences of ~121k tokens per tp=8 instance: 32 × 121k × 40,960 B ≈ 159 GB per GPU of decode KV
    against a ~58.8 GB budget, so ~100 GB per GPU is read from DRAM on every step.

    TPOT penalty = spilled bytes per GPU / 64 GB/s + 1 µs (≈ 1.6 s), at the p50 and p99 of the batch's KV.
    """
    spec = workload_from_flags(rate_per_s=0.05, isl="120k", osl="2k")
    plan = tier_plan("llama-3.1-70b", "h100-sxm", reuse=from_workload(spec, sample_requests=2000), tp=8, nodes=1,
                     decode_batch=32, tiers_file=TIERS / "big_dram.yaml")
    summary = plan.result.rows[-1]
    assert not summary["active_kv_fits_hbm"] and plan.result.failed
    budget = summary["hbm_kv_budget_bytes_per_gpu"]
    for q in ("p50", "p99"):
        spilled = summary[f"active_kv_{q}_bytes_per_gpu"] - budget
        assert spilled > 0
        assert_allclose(summary[f"tpot_penalty_{q}_s"], spilled / 64e9 + 1e-6, rtol=1e-9)
    assert summary["tpot_penalty_p99_s"] >= summary["tpot_penalty_p50_s"]
    assert plan.result.rows[0]["capacity_tokens"] == 0  # HBM holds decode KV only
    assert "The hot path belongs in HBM" in plan.result.verdict
    dram = plan.result.rows[1]
    assert dram["active_kv_bytes_per_gpu"] == pytest.approx(summary["active_kv_spilled_bytes_per_gpu"])
    assert dram["content"].startswith("SPILLED decode KV")


def test_decode_kv_that_fits_nowhere_is_infeasible():
    spec = workload_from_flags(rate_per_s=0.05, isl="120k", osl="2k")
    with pytest.raises(InfeasibleError, match="every tier together hold"):
        tier_plan("llama-3.1-70b", "h100-sxm", reuse=from_workload(spec, sample_requests=2000), tp=8, nodes=1,
                  decode_batch=32, tiers_file=TIERS / "tiny_dram.yaml")


# --------------------------------------------------------------------------- reuse from parameters


def test_sessions_littles_law_capacity_and_hits():
    """5-turn sessions, 30 s think time, 2k shared system prompt, 2 req/s, 1k new + 200 output tokens a turn.

    Little's law: idle sessions = 2/5 × 4 gaps × 30 s = 48, each holding T/2 (μN + μO) = 2.5 × 1224 = 3,060
    tokens → 146,880 + the 2,048 shared = 148,928 tokens.
    """
    spec = workload_from_flags(rate_per_s=2, isl="1k", osl="200", turns=5, think_time="30s", shared_prefix="2k")
    reuse = from_workload(spec, sample_requests=5000)
    assert_allclose(reuse.littles_law_tokens, 48 * 2.5 * 1224 + 2048)
    plan = tier_plan("llama-3.1-8b", system="hgx-h100-8", reuse=reuse, tp=1, nodes=1)
    summary = plan.result.rows[-1]
    assert summary["reuse_capacity_tokens_littles_law"] == reuse.littles_law_tokens
    # the fleet's HBM alone (8 × ~56 GB of KV) holds far more than that: everything reusable hits in HBM
    hbm = plan.result.rows[0]
    assert hbm["capacity_tokens"] > 10 * reuse.littles_law_tokens
    assert_allclose(hbm["cumulative_hit_rate"], summary["unlimited_hit_rate"])
    assert summary["unlimited_hit_rate"] > 0.5


def test_rag_documents_by_hand():
    """1,000 requests: a 512-token system prompt (block 0), one of 2 documents of 1,024 tokens (2 blocks each,
    uniform popularity), 100 own tokens (a fresh last block): 4 blocks a request.

    Unlimited prefix hits: block 0 every time but the first (999), each document's 2 blocks every time but its
    first use (2 × 998) → 2,995 / 4,000. Little's law: 512 + 2 × 1,024 tokens.
    """
    spec = workload_from_flags(rate_per_s=1, isl="100", osl="10", shared_prefix=512)
    reuse = with_rag_documents(from_workload(spec, sample_requests=1000), 2, 1024, zipf_s=0.0)
    assert np.all(np.diff(reuse.trace.block_offsets) == 4) and np.all(reuse.trace.isl == 1636)
    prof = reuse.profile
    assert_allclose(prof.prefix_hit_rate(prof.accesses), 2995 / 4000)
    assert reuse.littles_law_tokens == 512 + 2 * 1024
    # the LRU replay agrees with an OrderedDict LRU at a small capacity
    assert_allclose(prof.prefix_hit_rate(6), simulate_lru(reuse.trace, 6)[0])
    with pytest.raises(InputError, match="single-turn"):
        with_rag_documents(from_workload(workload_from_flags(rate_per_s=1, isl="100", osl="10", turns=2,
                                                             think_time="5s"), sample_requests=100), 2, 1024)


def test_more_dram_never_lowers_the_hit_rate():
    reuse = from_trace(HEAD200)
    previous = -1.0
    for size in (1e9, 1e11, 1e12, 4e12):
        plan = tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=reuse, nodes=3,
                         overrides=CapacityOverrides(host_dram=size))
        hit = plan.result.rows[-1]["hit_rate"]
        assert hit >= previous
        previous = hit


# --------------------------------------------------------------------------- the Mooncake conversation trace


@pytest.fixture(scope="module")
def conversation():
    if not CONVERSATION.is_file():
        pytest.fail(f"{CONVERSATION} is missing: the real traces ship in examples/traces")
    return from_trace(CONVERSATION)


def test_mooncake_conversation_hit_rates(conversation):
    """Unlimited prefix hit 36.64% per block (Mooncake reports ~40%); 3M → 14.10%, 10M → 29.04%, 50M → 36.41%."""
    prof = conversation.profile
    assert conversation.trace.requests == 12_031
    assert_allclose(prof.prefix_hit_rate(prof.accesses), 0.3664, atol=5e-5)
    blocks = np.array([3, 10, 50]) * M // 512
    assert_allclose(prof.prefix_hit_rate(blocks), [0.1410, 0.2904, 0.3641], atol=5e-5)


def test_mooncake_conversation_tier_plan(conversation):
    """Llama-3.1-70B on hgx-h100-8 nodes with 1 TB of DRAM per node."""
    plan = tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=conversation,
                     overrides=CapacityOverrides(host_dram=1e12))
    rows, summary = plan.result.rows[:-1], plan.result.rows[-1]
    hbm, dram, remote = rows
    prof = conversation.profile
    nodes = summary["nodes"]
    assert summary["active_kv_fits_hbm"] and not plan.result.failed
    # DRAM: 1e12 B per node / 327,680 B per token, whole nodes
    assert dram["capacity_tokens"] == pytest.approx(nodes * 1e12 / 327_680, abs=nodes)
    # per-tier hits are the LRU curve at the cumulative capacities
    depth = np.cumsum([hbm["capacity_tokens"], dram["capacity_tokens"]]) // 512
    assert_allclose([hbm["cumulative_hit_rate"], dram["cumulative_hit_rate"]], prof.prefix_hit_rate(depth))
    assert_allclose(hbm["hit_rate"] + dram["hit_rate"] + remote["hit_rate"], summary["hit_rate"])
    assert remote["capacity_tokens"] == 0 and remote["hit_rate"] == 0  # no pool capacity on the card
    assert 0.25 < summary["hit_rate"] <= summary["unlimited_hit_rate"]
    # savings are positive and below the prefill they come from
    assert 0 < summary["ttft_saved_p50_s"] < summary["prefill_p50_s"]
    assert 0 < summary["ttft_saved_p99_s"] < summary["prefill_p99_s"]
    assert 0 < summary["prefill_gpu_s_saved_per_s"] < summary["prefill_gpu_s_per_s_without_cache"]
    assert_allclose(sum(r["prefill_gpu_s_saved_per_s"] for r in rows), summary["prefill_gpu_s_saved_per_s"])
    assert dram["break_even_tokens"] < 100  # 64 GB/s per GPU: loading always beats recompute
    assert len(plan.boundaries) == 3 and plan.boundaries[-1][2] == summary["capacity_tokens"]


def test_mooncake_savings_feed_the_pd_recommendation(conversation):
    """plan_pd at cached_prefix_fraction 0 and at the measured token share, TTFT p99 <= 10 s: the cache never
    needs more prefill GPUs (on this trace it needs fewer)."""
    plan = tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=conversation,
                     overrides=CapacityOverrides(host_dram=1e12), ttft_slo="p99<=10s")
    summary = plan.result.rows[-1]
    hits = request_hit_blocks(conversation, [conversation.profile.accesses])[0]  # every reuse, as a bound
    isl = conversation.trace.isl
    bound = np.minimum(hits * 512, isl - 1).sum() / isl.sum()
    assert 0.25 < summary["cached_prefix_fraction"] <= bound
    assert summary["pd_feasible_without_cache"] and summary["pd_feasible_with_cache"]
    assert summary["pd_prefill_gpus_with_cache"] < summary["pd_prefill_gpus_without_cache"]
    assert summary["pd_total_gpus_with_cache"] <= summary["pd_total_gpus_without_cache"]
    assert "PD with the cache" in plan.result.verdict

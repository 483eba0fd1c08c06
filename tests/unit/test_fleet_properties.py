"""Invariants of the fleet planner for a dense, an MoE and a hybrid model (hypothesis).

More load (rate, prompt length, output length) never needs fewer GPUs, a tighter SLO never needs
fewer, and the binding constraint is always a user SLO or a named engine resource.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.plans.fleet.aggregated import Shape, plan_aggregated
from kvplan.plans.fleet.model import Slo
from kvplan.plans.fleet.plan import fleet_workload

MODELS = {  # dense, MoE (128 experts, 4 active), the MoE as attention DP 4 × EP 4, hybrid (Gated DeltaNet + GQA, MoE)
    "dense": ("llama-3.1-8b", Shape(1)), "moe": ("gpt-oss-120b", Shape(2)),
    "moe-dp-ep": ("gpt-oss-120b", Shape(1, 1, 4, True)), "hybrid": ("qwen3-next-80b-a3b", Shape(4)),
}
ALLOWED = {"none", "ttft_slo", "tpot_slo", "kv_capacity", "memory", "max_num_seqs", "max_num_batched_tokens", "link"}
NEVER = 10**9  # an infeasible plan counts as needing more GPUs than any feasible one
CACHE: dict = {}


def gpus(kind: str, qps: float, isl: str = "1k:4k", osl: str = "200:800", ttft_s: float = 2.0, tpot_s: float = 0.05):
    key = (kind, qps, isl, osl, ttft_s, tpot_s)
    if key not in CACHE:
        model, shape = MODELS[kind]
        plan = plan_aggregated(model, "h100-sxm", fleet_workload(qps=qps, isl=isl, osl=osl, sample_requests=2_000),
                               [Slo("ttft", "p99", ttft_s), Slo("tpot", "p90", tpot_s)], shape)
        assert plan.binding_constraint in ALLOWED, (key, plan.binding_constraint)
        if plan.feasible and plan.binding_constraint != "none":
            assert plan.row()["binding_detail"].startswith(f"at N − 1 = {plan.instances - 1:,} instance")
        CACHE[key] = plan.total_gpus if plan.feasible else NEVER
    return CACHE[key]


KINDS = st.sampled_from(sorted(MODELS))
RATES = st.sampled_from([1.0, 3.0, 8.0, 20.0, 50.0, 120.0])
FACTORS = st.sampled_from([1.25, 2.0, 4.0])
LENGTHS = ["128", "512", "1k", "2k", "4k", "8k"]


@settings(max_examples=20, deadline=None)
@given(kind=KINDS, qps=RATES, factor=FACTORS)
def test_more_requests_per_second_never_need_fewer_gpus(kind, qps, factor):
    assert gpus(kind, qps * factor) >= gpus(kind, qps)


@settings(max_examples=15, deadline=None)
@given(kind=KINDS, qps=st.sampled_from([5.0, 20.0]), i=st.integers(0, len(LENGTHS) - 2), step=st.integers(1, 2))
def test_longer_prompts_never_need_fewer_gpus(kind, qps, i, step):
    j = min(i + step, len(LENGTHS) - 1)
    assert gpus(kind, qps, isl=LENGTHS[j], osl="300") >= gpus(kind, qps, isl=LENGTHS[i], osl="300")


@settings(max_examples=15, deadline=None)
@given(kind=KINDS, qps=st.sampled_from([5.0, 20.0]), i=st.integers(0, len(LENGTHS) - 2), step=st.integers(1, 2))
def test_longer_outputs_never_need_fewer_gpus(kind, qps, i, step):
    j = min(i + step, len(LENGTHS) - 1)
    assert gpus(kind, qps, isl="2k", osl=LENGTHS[j]) >= gpus(kind, qps, isl="2k", osl=LENGTHS[i])


@settings(max_examples=20, deadline=None)
@given(kind=KINDS, qps=st.sampled_from([10.0, 40.0]), ttft=st.sampled_from([0.3, 1.0, 3.0]),
       tpot=st.sampled_from([0.02, 0.035, 0.06]), tighter=st.sampled_from([1.5, 3.0]))
def test_a_tighter_slo_never_needs_fewer_gpus(kind, qps, ttft, tpot, tighter):
    base = gpus(kind, qps, ttft_s=ttft, tpot_s=tpot)
    assert gpus(kind, qps, ttft_s=ttft / tighter, tpot_s=tpot) >= base
    assert gpus(kind, qps, ttft_s=ttft, tpot_s=tpot / tighter) >= base

"""KV preemption in the replay, worked by hand: vLLM's recompute (V1 and V0), SGLang's retraction, and a property.

The cases use a KV of one byte a token (a request of ISL + OSL tokens holds ISL bytes after its prefill and
one byte more a decode step), so a pool of P bytes is P tokens, and the llama-3.1-8b H100 step table, whose
step times the expected values are written in (``decode_base_s``, ``decode_gamma_s``, ``chunk_step_s``): a run
of j decode steps of b sequences that read T tokens takes j·(D[b] + γT) + γ·b·j(j − 1)/2.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc.roofline import compute_dtype_for, model_cost
from kvplan.cards.loader import load_hardware, load_model
from kvplan.engines import get_profile
from kvplan.plans.sizing.latency import Efficiencies, resolve_machine
from kvplan.sim import SimConfig, build_step_model, simulate


@pytest.fixture(scope="module")
def steps():
    card, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    cost = model_cost(card, get_profile("vllm"), tps=[1])
    machine, _ = resolve_machine(hw, compute_dtype_for(cost.weights_dtype, card.dtype), cost.weights_dtype,
                                 cost.layers, Efficiencies(), 1)
    return build_step_model(cost, machine, 1, 9000, 1000)


def run_s(steps, b, tokens, j):
    """j decode steps of b sequences reading ``tokens`` in the first (module docstring)."""
    d, g = steps.decode_base_s(b), steps.decode_gamma_s(b)
    return j * (d + g * tokens) + g * b * j * (j - 1) / 2


def prefill_s(steps, lengths):
    """One step of whole prompts from scratch, no decoders."""
    lengths = [int(x) for x in lengths]
    return steps.chunk_step_s(sum(lengths), len(lengths), 0.0, np.zeros(len(lengths)), np.array(lengths, float),
                              lengths, len(lengths))


def replay(steps, isl, osl, pool, policy, *, prefill_first=False, concurrency=None, chunk=8192, batch=64,
           arrival=None):
    isl, osl = np.asarray(isl), np.asarray(osl)
    arrival = np.zeros(isl.size) if arrival is None else np.asarray(arrival, float)
    config = SimConfig(1, batch, chunk, float(pool), warmup_fraction=0.0, concurrency=concurrency,
                       prefill_first=prefill_first, kv_policy=policy)
    return simulate(arrival, isl, osl, (isl + osl).astype(float), steps, config,
                    prompt_kv_bytes=isl.astype(float))


def test_vllm_v1_preempts_the_last_admitted_and_recomputes_it(steps):
    # A and B, 100 + 100 tokens each, pool 300. Step 1 prefills both (KV 200); each decode step adds 2, so after
    # 50 steps (KV 300) the next token does not fit: B, admitted last, is preempted with 51 tokens emitted (its
    # KV of 150 tokens freed, 150 to recompute). A decodes its last 49 steps alone; B waits (its 151-token
    # recompute needs 151 free, A leaves < 150), then is prefilled over 151 tokens, emits its 52nd token and
    # decodes the last 48 steps alone.
    r = replay(steps, [100, 100], [100, 100], 300, "recompute")
    assert r.preemptions == 1 and r.recomputed_tokens == 150
    t1 = prefill_s(steps, [100, 100])
    a_done = t1 + run_s(steps, 2, 202, 50) + run_s(steps, 1, 151, 49)
    b_done = a_done + prefill_s(steps, [151]) + run_s(steps, 1, 152, 48)
    assert r.ttft_s == pytest.approx([t1, t1], rel=1e-12)          # B's first token stands
    assert r.e2e_s == pytest.approx([a_done, b_done], rel=1e-9)
    assert r.tpot_s[1] == pytest.approx((b_done - t1) / 99, rel=1e-9)


def test_the_same_pair_with_room_for_both_is_never_preempted(steps):
    r = replay(steps, [100, 100], [100, 100], 400, "recompute")
    t1 = prefill_s(steps, [100, 100])
    assert r.preemptions == 0
    assert r.e2e_s == pytest.approx([t1 + run_s(steps, 2, 202, 99)] * 2, rel=1e-9)


def test_vllm_v0_admits_a_whole_prompt_only_above_the_watermark(steps):
    # pool 201: V0 admits A (100 <= 201 − 2.01) but not B (200 > 198.99), so B is prefilled when A ends.
    # V1 admits both chunks (200 <= 201); the first decode step needs 2 more, so B is preempted at once with
    # one token emitted (100 tokens of KV to recompute) and prefilled again over 101 tokens when A ends.
    v0 = replay(steps, [100, 100], [100, 100], 201, "recompute_v0")
    t_a = prefill_s(steps, [100])
    a_done = t_a + run_s(steps, 1, 101, 99)
    assert v0.preemptions == 0
    assert v0.ttft_s == pytest.approx([t_a, a_done + t_a], rel=1e-9)
    v1 = replay(steps, [100, 100], [100, 100], 201, "recompute")
    t1 = prefill_s(steps, [100, 100])
    a1 = t1 + run_s(steps, 1, 101, 99)
    assert v1.preemptions == 1 and v1.recomputed_tokens == 100
    assert v1.ttft_s == pytest.approx([t1, t1], rel=1e-12)
    assert v1.e2e_s == pytest.approx([a1, a1 + prefill_s(steps, [101]) + run_s(steps, 1, 102, 98)], rel=1e-9)


def test_sglang_retracts_the_decoder_with_the_fewest_tokens(steps):
    # prefill-first, pool 2000, A and B of 100 + 1000 tokens, B sent 1 µs after A (during A's prefill).
    # new_token_ratio starts at 0.7: after A's prefill B's room is 2000 − 100 − 0.7 × 999 = 1200.7 >= 100 + 1000,
    # so B is prefilled in step 2 (A waits). Both then decode, 2 tokens of KV a step: after 900 steps the pool
    # is full and B (as many tokens as A, admitted later) is retracted with 901 emitted (1,000 tokens of KV
    # recomputed); its estimate 1,001 + 1,000 no longer fits beside A, so it waits (batch_is_full) until A ends
    # 99 steps later, is prefilled again over 1,001 tokens, emits its 902nd token and decodes the last 98 steps.
    r = replay(steps, [100, 100], [1000, 1000], 2000, "retract", prefill_first=True, arrival=[0.0, 1e-6])
    assert r.preemptions == 1 and r.recomputed_tokens == 1000
    t_a, t_b = prefill_s(steps, [100]), prefill_s(steps, [100])
    a_done = t_a + t_b + run_s(steps, 2, 202, 900) + run_s(steps, 1, 1001, 99)
    b_done = a_done + prefill_s(steps, [1001]) + run_s(steps, 1, 1002, 98)
    assert r.ttft_s == pytest.approx([t_a, t_a + t_b - 1e-6], rel=1e-12)
    assert r.e2e_s == pytest.approx([a_done, b_done - 1e-6], rel=1e-9)


def test_sglang_waits_while_the_batch_is_full(steps):
    # the same pair sent together: B's estimate (100 + 1,000) does not fit beside A's (room 2000 − 1100 = 900),
    # which sets batch_is_full; no prompt is tried again until the running batch shrinks, so B is prefilled only
    # when A has ended (no retraction), though after A's prefill its room (1200.7) would have held it.
    r = replay(steps, [100, 100], [1000, 1000], 2000, "retract", prefill_first=True)
    t_a = prefill_s(steps, [100])
    a_done = t_a + run_s(steps, 1, 101, 999)
    assert r.preemptions == 0
    assert r.ttft_s == pytest.approx([t_a, a_done + t_a], rel=1e-9)


def test_reserve_never_preempts_and_waits_for_the_whole_context(steps):
    r = replay(steps, [100, 100], [100, 100], 300, "reserve")
    t_a = prefill_s(steps, [100])
    a_done = t_a + run_s(steps, 1, 101, 99)
    assert r.preemptions == 0 and r.ttft_s[1] == pytest.approx(a_done + t_a, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(policy=st.sampled_from(["recompute", "recompute_v0", "retract", "reserve"]),
       c=st.integers(2, 24), isl=st.integers(50, 600), osl=st.integers(20, 400), pool_seqs=st.floats(1.2, 6.0),
       more=st.floats(1.05, 4.0))
def test_more_kv_never_slows_a_closed_loop(steps, policy, c, isl, osl, pool_seqs, more):
    # Fixed-length closed loop of C requests. A pool that holds all C final contexts never preempts, and it is
    # never slower than a smaller one: throughput no lower (1% slack for the step times' batch dependence), mean
    # TTFT no higher than one decode step of the whole loop more (a prompt's first token waits for the step it
    # joins). With reservation (TensorRT-LLM) any larger pool is no slower. With preemption a somewhat larger
    # pool can be slower: it admits more at once and preempts more (vLLM, C = 19, 253 + 21 tokens, a pool of
    # 2.9 → 3.7 requests: 1% lower throughput, mean TTFT 447 → 459 ms; C = 9, 50 + 96, 5.5 → 5.8: 20.8 → 27.0 ms
    # at the same throughput), and SGLang's new_token_ratio estimate can admit more than the larger pool holds
    # and retract (C = 4, 50 + 20 tokens, 2.5 → 2.8 requests: 4% lower throughput).
    n = 3 * c
    kw = dict(prefill_first=policy == "retract", concurrency=c)
    one_step = steps.decode_base_s(c) + steps.decode_gamma_s(c) * c * (isl + osl)
    small = replay(steps, [isl] * n, [osl] * n, pool_seqs * (isl + osl), policy, **kw)
    ample = replay(steps, [isl] * n, [osl] * n, c * (isl + osl) * 1.01, policy, **kw)
    assert small.measured == ample.measured == n and ample.preemptions == 0
    if pool_seqs * (isl + osl) <= c * (isl + osl) * 1.01:
        assert ample.makespan_s <= small.makespan_s * 1.01
        assert ample.ttft_s.mean() <= small.ttft_s.mean() * 1.01 + one_step
    if policy == "reserve":
        large = replay(steps, [isl] * n, [osl] * n, pool_seqs * more * (isl + osl), policy, **kw)
        assert large.makespan_s <= small.makespan_s * 1.01
        assert large.ttft_s.mean() <= small.ttft_s.mean() * 1.01 + one_step


@pytest.mark.parametrize(("engine", "policy"), [("vllm", "recompute"), ("sglang", "retract"), ("trtllm", "reserve")])
def test_the_open_loop_replay_uses_the_engines_kv_policy(monkeypatch, engine, policy):
    # kvplan plan --simulate replays a plan with its engine's KV policy and reports the preemption counts
    import kvplan.sim as sim_module
    from kvplan.plans.deployment import EngineSettings
    from kvplan.plans.fleet.aggregated import Shape, parse_slo, plan_aggregated
    from kvplan.plans.fleet.plan import fleet_workload

    seen = {}
    real = sim_module.simulate

    def spy(*args, **kwargs):
        seen["config"] = args[5]
        seen["prompt_kv"] = kwargs.get("prompt_kv_bytes")
        return real(*args, **kwargs)

    monkeypatch.setattr(sim_module, "simulate", spy)
    workload = fleet_workload(qps=2, isl="1k", osl="200", sample_requests=2_000)
    plan = plan_aggregated("llama-3.1-8b", "h100-sxm", workload, [parse_slo("ttft", "p99<=2s")], Shape(1),
                           engine=EngineSettings(engine=engine))
    stats = sim_module.simulate_plan(plan, workload, 500, seed=0).stats()
    assert seen["config"].kv_policy == policy and seen["config"].schedule_conservativeness == 1.0
    assert seen["prompt_kv"] is not None and stats["sim_preemptions"] == 0 and stats["sim_recomputed_tokens"] == 0

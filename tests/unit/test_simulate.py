"""The discrete-event simulator: its step times equal the roofline's, small cases worked by hand, and the
closed-form fleet model checked against it.

Observed closed form vs simulation (8,000 requests, seed 1, Poisson arrivals, lognormal ISL 1k:4k and
OSL 200:800 unless noted), relative error of the closed form:

    llama-3.1-8b  H100 tp1  5 req/s  N=1   TTFT −0/+0/+0 %                TPOT +3/+5/+6 %
    llama-3.1-8b  H100 tp1 15 req/s  N=1   TTFT −1/+1/−8 %                TPOT +2/+4/+2 %
    llama-3.1-8b  H100 tp1 60 req/s  N=3   TTFT −2/−5/−6 %                TPOT +3/+10/+13 %
    llama-3.1-8b  H100 tp1 30 req/s  N=3   (ISL 2k, OSL 256 fixed) TTFT +0/−10/−8 %  TPOT +3/+10/+18 %
    qwen3-32b     H100 tp2  8 req/s  N=1   TTFT +0/+4/−6 %                TPOT +3/+4/+1 %
    llama-3.1-70b H100 tp4 10 req/s  N=1   TTFT +10/+8/−7 %               TPOT +3/−3/−11 %

Every percentile within 19 %; the tests below assert 25 % on three of these. The llama-3.1-70b case (prefill
interference ρx ≈ 0.5, the prefill busy 64 % of the time) was −1/−22/−33 % and −9/−18/−31 % before the
fleet model counted prompt packing as the replay does it (kvplan.plans.fleet.packing): a step takes every
prompt waiting when it starts, so at this load 2.2 prompts share a prompt's step (1.2 counted before, from the
arrivals of one decode step); two prompts in one step cost ~9 ms more than apart (the memory-bound step takes the
first's tokens free only once); and a decode begins with the prompts that arrived during its own step still
queued. Its TTFT was +1/−10/−16 % with an Erlang-C prefill queue of whole prompts; the wait as the engine schedules
it (kvplan.plans.fleet.stepwait: the rest of the step under way, the joiners, and whole extra steps only for the
work the token budget cannot take) gives +10/+8/−7 %. The two N=3 cases over-state TPOT p90/p99 by 10–19 %: the
join-shortest-queue router spreads prompts more evenly than the Poisson stream per instance the model assumes.
Heavy-tailed prompts (lognormal ISL with p99/mean = 8) are outside that band: the simulated p99 TTFT itself
moves by a factor of two between seeds (docs/examples/azure-conv-llama8b.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc.roofline import compute_dtype_for, decode_step, forward_pass, model_cost, prefill
from kvplan.cards.loader import load_hardware, load_model
from kvplan.engines import get_profile
from kvplan.plans.fleet.aggregated import Shape, parse_slo, plan_aggregated
from kvplan.plans.sizing.latency import Efficiencies, resolve_machine
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.sim import SimConfig, build_step_model, simulate, simulate_plan


def roofline(model: str, tp: int = 1):
    card, hw = load_model(model), load_hardware("h100-sxm")
    cost = model_cost(card, get_profile("vllm"), tps=[tp])
    machine, _ = resolve_machine(hw, compute_dtype_for(cost.weights_dtype, card.dtype), cost.weights_dtype,
                                 cost.layers, Efficiencies(), tp)
    return cost, machine


@pytest.fixture(scope="module")
def llama8b():
    cost, machine = roofline("llama-3.1-8b")
    return cost, machine, build_step_model(cost, machine, 1, 9000, 1000)


# --------------------------------------------------------------------------- step times


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("mixtral-8x7b", 2)])
def test_step_model_equals_forward_pass(model, tp):
    cost, machine = roofline(model, tp)
    steps = build_step_model(cost, machine, tp, 9000, 2000)
    rng = np.random.default_rng(0)
    for _ in range(200):
        tokens = int(rng.integers(1, 9000))
        rows = float(rng.integers(0, min(tokens, 300) + 1))
        kv, flops = float(rng.uniform(0, 4e10)), float(rng.uniform(0, 5e14))
        expected = forward_pass(cost, machine, tokens=tokens, kv_bytes=kv, attention_flops=flops, lm_head_rows=rows,
                                tp=tp).time_s
        assert_allclose(steps.step_s(tokens, rows, kv, flops), float(expected), rtol=1e-12)


def test_decode_steps_are_affine_in_the_held_tokens(llama8b):
    cost, machine, steps = llama8b
    for b, context in ((1, 100), (16, 1500), (200, 4000)):
        expected = float(decode_step(cost, machine, b, context).time_s)
        assert_allclose(steps.decode_base_s(b) + steps.decode_per_token_s * b * context, expected, rtol=1e-12)


# --------------------------------------------------------------------------- small cases by hand


def run(steps, arrival, isl, osl, *, instances=1, batch=64, chunk=8192, pool=1e12, kv=None):
    kv = np.zeros(len(arrival)) if kv is None else np.asarray(kv, dtype=float)
    return simulate(np.asarray(arrival, float), np.asarray(isl), np.asarray(osl), kv, steps,
                    SimConfig(instances, batch, chunk, pool, warmup_fraction=0.0))


def test_one_request_alone(llama8b):
    cost, machine, steps = llama8b
    r = run(steps, [0.0], [1000], [101])
    assert_allclose(r.ttft_s[0], float(prefill(cost, machine, 1, 1000).time_s), rtol=1e-12)
    # 100 decode steps of batch 1 at contexts 1,001 … 1,100
    steps_s = decode_step(cost, machine, 1, np.arange(1001, 1101)).time_s
    assert_allclose(r.tpot_s[0], steps_s.mean(), rtol=1e-9)
    assert r.steps == 101 and r.mixed_steps == 1 and r.measured == 1


def test_prompts_queued_during_a_step_share_the_next_one(llama8b):
    cost, machine, steps = llama8b
    r = run(steps, [0.0, 0.001, 0.001], [4000, 500, 700], [1, 1, 1])
    first = float(prefill(cost, machine, 1, 4000).time_s)
    attention = float(cost.prefill_attention_flops(0, 500) + cost.prefill_attention_flops(0, 700))
    packed = float(forward_pass(cost, machine, tokens=1200, kv_bytes=1200 * float(cost.kv_token_bytes(1)),
                                attention_flops=attention, lm_head_rows=2).time_s)
    assert r.mixed_steps == 2 and r.ttft_s[1] == pytest.approx(r.ttft_s[2] + 0.0)
    assert_allclose(r.ttft_s[0], first, rtol=1e-12)
    assert_allclose(r.ttft_s[1], first + packed - 0.001, rtol=1e-9)


def test_a_long_prompt_is_chunked(llama8b):
    _, _, steps = llama8b
    r = run(steps, [0.0], [8000], [1], chunk=2048)
    assert r.mixed_steps == 4 and r.steps == 4


def test_kv_pool_makes_the_second_request_wait(llama8b):
    _, _, steps = llama8b
    free = run(steps, [0.0, 0.0], [100, 100], [50, 50])
    full = run(steps, [0.0, 0.0], [100, 100], [50, 50], pool=1.5, kv=[1.0, 1.0])
    assert free.ttft_s[1] < 0.05
    first_done = full.ttft_s[0] + 49 * full.tpot_s[0]
    assert full.ttft_s[1] > first_done  # admitted only once the first has finished


def test_a_request_larger_than_the_pool_is_rejected(llama8b):
    _, _, steps = llama8b
    r = run(steps, [0.0, 0.1], [100, 100], [10, 10], pool=1.0, kv=[2.0, 0.5])
    assert r.rejected == 1 and r.measured == 1


def test_batch_cap_queues_requests(llama8b):
    _, _, steps = llama8b
    r = run(steps, [0.0, 0.0, 0.0], [100, 100, 100], [20, 20, 20], batch=2)
    assert r.max_batch_seen == 2 and r.ttft_s[2] > r.ttft_s[0] + 18 * r.tpot_s[0]


def test_router_spreads_simultaneous_arrivals(llama8b):
    _, _, steps = llama8b
    one = run(steps, [0.0, 0.0], [1000, 1000], [1, 1], instances=2)
    assert one.ttft_s[0] == one.ttft_s[1] and one.mixed_steps == 2  # one prompt on each instance


def test_deterministic(llama8b):
    _, _, steps = llama8b
    rng = np.random.default_rng(5)
    arrival = np.cumsum(rng.exponential(0.1, 500))
    isl, osl = rng.integers(50, 3000, 500), rng.integers(1, 400, 500)
    a, b = run(steps, arrival, isl, osl, instances=2), run(steps, arrival, isl, osl, instances=2)
    assert np.array_equal(a.ttft_s, b.ttft_s) and np.array_equal(a.tpot_s, b.tpot_s) and a.steps == b.steps


# --------------------------------------------------------------------------- closed form vs simulation

TOLERANCE = 0.25  # observed at most 19 % on these configurations (module docstring)


@pytest.mark.parametrize(("model", "tp", "qps", "ttft", "tpot"), [
    ("llama-3.1-8b", 1, 5, "p99<=2s", "p90<=50ms"),
    ("llama-3.1-8b", 1, 60, "p99<=2s", "p90<=50ms"),
    ("llama-3.1-70b", 4, 10, "p99<=3s", "p90<=80ms"),
])
def test_closed_form_percentiles_within_tolerance_of_simulation(model, tp, qps, ttft, tpot):
    workload = fleet_workload(qps=qps, isl="1k:4k", osl="200:800", sample_requests=20_000)
    plan = plan_aggregated(model, "h100-sxm", workload, [parse_slo("ttft", ttft), parse_slo("tpot", tpot)], Shape(tp))
    sim = simulate_plan(plan, workload, 8_000, seed=1).stats()
    for kind, values in (("ttft", plan.ttft), ("tpot", plan.tpot)):
        for stat in ("p50", "p90", "p99"):
            simulated = sim[f"sim_{kind}_{stat}_s"]
            assert abs(values[stat] - simulated) <= TOLERANCE * simulated, (kind, stat, values[stat], simulated)
    assert abs(plan.point.batch_mean - sim["sim_batch_mean"]) <= 0.25 * sim["sim_batch_mean"] + 0.5

"""The fleet planner (kvplan plan): SLO parsing, the queueing compositions worked by hand, Little's law,
binding constraints, infeasibility, and monotonicity properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc import tails
from kvplan.calc.queueing import erlang_c, wait_quantile_s
from kvplan.calc.roofline import decode_step
from kvplan.errors import InputError
from kvplan.plans.fleet.aggregated import EngineSettings, FleetWorkload, Shape, parse_slo, plan_aggregated
from kvplan.plans.fleet.model import LengthStats, Slo
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.workload.traces import make_trace

BRIEF_KEYS = ("instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "concurrency",
              "kv_demand_mean_bytes", "kv_demand_p99_bytes", "kv_capacity_bytes", "headroom_bytes",
              "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
              "binding_constraint", "feasible")


def flags(qps, isl, osl, sample=5_000):
    return fleet_workload(qps=qps, isl=isl, osl=osl, sample_requests=sample)


SLOS = [parse_slo("ttft", "p99<=2s"), parse_slo("tpot", "p90<=50ms")]
ROOFLINE = EngineSettings(perf_model="roofline")  # closed forms worked by hand on the one-η roofline


# --------------------------------------------------------------------------- SLO flags


@pytest.mark.parametrize(("text", "stat", "limit"), [
    ("p99<=2s", "p99", 2.0), ("p90<=50ms", "p90", 0.05), (" p50 <= 800us ", "p50", 800e-6),
    ("p99.9<=3s", "p99.9", 3.0), ("P95<=1s", "p95", 1.0), ("mean<=20ms", "mean", 0.02),
])
def test_slo_parses(text, stat, limit):
    slo = parse_slo("ttft", text)
    assert (slo.kind, slo.stat) == ("ttft", stat) and slo.limit_s == pytest.approx(limit)


@pytest.mark.parametrize(("text", "message"), [
    ("p99<2s", "write '<='"), ("p99>=2s", "cannot read SLO"), ("2s", "cannot read SLO"),
    ("p150<=1s", "cannot read SLO"), ("p0<=1s", "not between p0 and p100"), ("p99<=fast", "cannot read the duration"),
    ("p99<=0ms", "must be > 0"), ("p99<=-1s", "cannot read the duration"), ("", "cannot read SLO"),
    ("p99<=50", "it has no unit"), ("P95<=1", "it has no unit"),
])
def test_slo_rejects_with_the_flag_named(text, message):
    with pytest.raises(InputError) as err:
        parse_slo("tpot", text)
    assert err.value.message.startswith("--tpot: ") and message in err.value.message
    assert "--tpot 'p99<=2s'" in err.value.hint


# --------------------------------------------------------------------------- closed forms by hand


def test_normal_cdf_and_lognormal_moments():
    assert_allclose(tails.normal_cdf([0.0, 1.959963985, -1.959963985]), [0.5, 0.975, 0.025], atol=2e-7)
    mu, sigma = tails.lognormal_from_moments(10.0, 100.0)       # σ² = ln(1 + 100/100) = ln 2
    assert_allclose(sigma**2, math.log(2)) and assert_allclose(mu, math.log(10) - math.log(2) / 2)
    # a mixture of one lognormal: its median is e^μ
    assert_allclose(tails.lognormal_mixture_cdf(math.exp(mu), [mu], [sigma]), 0.5, atol=1e-7)


def test_tandem_waits_by_hand():
    # C1 = C2 = 1, θ1 = 1, θ2 = 2: P(W1 + W2 <= 2) = 1 − (e^(−2) − 2 e^(−1)) / (1 − 2) = 1 − 2/e + 1/e²
    assert_allclose(tails.tandem_wait_cdf(2.0, 1, 1.0, 1, 2.0), 1 - 2 / math.e + math.exp(-2))
    # equal scales: Erlang-2, 1 − e^(−x/θ)(1 + x/θ)
    assert_allclose(tails.tandem_wait_cdf(3.0, 1, 1.5, 1, 1.5), 1 - math.exp(-2) * 3)
    # one queue never waits: the other's atom-plus-exponential, P(W <= x) = 1 − C e^(−x/θ)
    assert_allclose(tails.tandem_wait_cdf(1.0, 0.0, 5.0, 0.4, 0.5), 1 - 0.4 * math.exp(-2))
    assert tails.tandem_wait_cdf(-1e-9, 0.3, 1.0, 0.3, 1.0) == 0.0
    # plus a service time of 0.25 s shifts the CDF
    assert_allclose(tails.wait_plus_service_cdf(1.25, [0.25], 0.0, 5.0, 0.4, 0.5), 1 - 0.4 * math.exp(-2))


def test_wait_tail_matches_the_queueing_module():
    # M/M/1, λ = 0.5, S = 1: C = ρ = 0.5, θ = 1 / (1 − 0.5) = 2; p99 = θ ln(C / 0.01) = 2 ln 50
    c, theta = tails.wait_tail(1, 0.5, 1.0, 1.0, 1.0)
    assert (c, theta) == (pytest.approx(0.5), pytest.approx(2.0))
    assert_allclose(theta * math.log(c / 0.01), wait_quantile_s(0.99, 1, 0.5, 1.0))
    # Erlang-C table value (10 servers, 8 Erlangs) and agreement with the array version at large c
    assert_allclose(tails.erlang_c_scalar(10, 8.0), 0.4092, atol=5e-4)
    for c, a in ((64, 50.0), (300, 280.0), (1000, 900.0)):
        assert_allclose(tails.erlang_c_scalar(c, a), float(erlang_c(c, a)), rtol=1e-9)
    assert tails.erlang_c_scalar(4, 4.0) == 1.0 and tails.wait_tail(2, 3.0, 1.0, 1, 1) == (1.0, math.inf)


def test_equilibrium_tail_by_hand():
    # S ∈ {1, 3}: E[S] = 2; P(S_e > x) = E[(S − x)+] / 2
    tail = tails.equilibrium_tail([1.0, 3.0])
    assert_allclose(tail([0.0, 1.0, 2.0, 3.0, 5.0]), [1.0, 0.5, 0.25, 0.0, 0.0])


def test_invert_cdf_of_an_exponential():
    quantiles = tails.invert_cdf(lambda x: 1 - np.exp(-x / 2.0), [0.5, 0.99], 1e-6, 1e3)
    assert_allclose(quantiles, [2 * math.log(2), 2 * math.log(100)], rtol=1e-9)


def test_length_statistics_by_hand():
    # ISL 1,000, OSL 201 → n = 200 steps at contexts 1,001 … 1,200: mean 1,100.5
    s = LengthStats(np.full(10, 1000), np.full(10, 201))
    assert s.decode_context == pytest.approx(1100.5) and s.mean_steps == 200
    assert s.decode_context_var == pytest.approx((200**2 - 1) / 12)  # uniform over 200 consecutive integers
    assert s.context_mean == s.context_p99 == 1201


# --------------------------------------------------------------------------- the model, checked by hand


@pytest.fixture(scope="module")
def light():
    return plan_aggregated("llama-3.1-8b", "h100-sxm", flags(5, "1000", "201"), SLOS)


def test_littles_law_ties_rate_time_and_concurrency(light):
    p, row = light.point, light.row()
    time_in_system = row["ttft_mean_s"] + 200 * row["tpot_mean_s"]
    assert_allclose(row["concurrency"], 5 * time_in_system, rtol=1e-9)
    # running requests hold KV from admission: own prefill (with its co-packed prompts) + 200 decode steps
    assert_allclose(row["running_concurrency"], 5 * (p.prefill_mean_s + 200 * row["tpot_mean_s"]), rtol=1e-9)
    assert_allclose(row["batch_mean"], row["running_concurrency"] / row["instances"], rtol=1e-6)


def test_tpot_mean_is_the_step_stretched_by_prefill_interference():
    # the roofline's step is linear in b between grid points (the per-operator one is padded to CUDA-graph sizes)
    light = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(5, "1000", "201"), SLOS, engine=ROOFLINE)
    p, cost, machine = light.point, light.setup["cost"], light.setup["machine"]
    step = float(decode_step(cost, machine, p.batch_mean + 1, 1100.5).time_s)
    assert_allclose(light.tpot["mean"], step / (1 - p.rho_interference), rtol=2e-3)  # grid interpolation in b


def test_tpot_mean_on_the_default_operator_model(light):
    """The same relation on the default model, at the grid's integer batches bracketing the mean batch."""
    p, steps = light.point, light.setup["steps"]
    assert steps.model == "operators"
    lo, hi = (float(steps.decode_s(b, 1100.5)) for b in (math.floor(p.batch_mean + 1), math.ceil(p.batch_mean + 1)))
    w = p.batch_mean + 1 - math.floor(p.batch_mean + 1)
    assert_allclose(light.tpot["mean"], ((1 - w) * lo + w * hi) / (1 - p.rho_interference), rtol=2e-3)


def test_ttft_mean_follows_the_engine_for_fixed_prompts(light):
    # one instance, fixed prompts of 1,000 tokens, Poisson arrivals at 5/s. A prompt's own prefill S = one mixed step;
    # its extra over a decode step X, and π what a second prompt in the same step adds beyond its own X (the pair
    # penalty), so a step of K prompts takes c0 + K z, c0 = S − X − π, z = X + π. The prompts that arrive during a step
    # share the next (μ = λ (P(decode step) t + ρ E[s²]/E[s]) others per prompt; E[K] = k_s = μ / (1 − e^−μ)), and
    # ρ = λ S_q, S_q = X + π (1 − 1/k_s) + (S − X)/k_s, is the share of time in mixed steps. As the engine schedules
    # it, a prompt waits the rest of the step under way and is in the next one with the prompts that arrive meanwhile
    # (kvplan.plans.fleet.stepwait):
    #   an idle instance (1 − ρ) e^(−B̄): no wait;
    #   a decode step, (1 − ρ)(1 − e^(−B̄)): the rest of it, R = t − (F mod t), F ~ Exp(1/λ) the time since the last
    #     prompt's step ended, E[F mod t] = 1/λ − t e^(−λt)/(1 − e^(−λt));
    #   a mixed step, ρ: half the length-biased step E[s̃] = E[s] + Var[s]/E[s], E[s] = c0 + k_s z, Var[s] = Var[K] z²
    #     (z fixed), Var[K] = k_s (1 + μ) − k_s² (K − 1 Poisson(μ) from a prompt's view), the previous steps' spread
    #     carried over by 1/(1 − (λz)²); a 1,000-token step is far from the budget's, so no cap;
    # and the joiners add λ z per second of it. The budget queue: each prompt needs ω = 1,000/(8,192 − B̄) of a full
    # step s_full, an M/D/1 of utilisation ρ_b = λω (Erlang-C P(wait) = ρ_b, θ = (1 + 0)/2 · ω/(1 − ρ_b)), and a
    # prompt waits only beyond the step that takes the work: with probability ρ_b e^(−s_full/θ), s_full + θ on
    # average. The slot wait is negligible here, and TTFT adds the engine's prefill dispatch d.
    p, lam = light.point, 5.0
    t, k_s, k_p = p.step_s, p.packing_step, p.packing
    z = p.rho_interference / lam                      # X + π (1 − 1/k_s): no eager dispatch here
    pi = light.figures.penalty_at(p.batch_mean)
    x = z - pi * (1 - 1 / k_s)
    s = p.prefill_mean_s - (k_p - 1) * (x + pi)
    s_q = x + pi * (1 - 1 / k_s) + (s - x) / k_s
    rho = lam * s_q
    assert_allclose(p.prefill_utilization, rho)
    c0, zz = s - x - pi, x + pi
    seen = (c0 * c0 + 2 * c0 * k_s * zz + k_s * zz * zz + k_s * (k_p - 1) * zz * zz) / (c0 + k_s * zz)
    mu = lam * (-np.expm1(-p.batch_mean) * (1 - rho) * t + rho * seen)
    assert_allclose(k_p, 1 + mu, rtol=1e-6) and assert_allclose(k_s, mu / -np.expm1(-mu), rtol=1e-6)
    decode_share = (1 - rho) * -np.expm1(-p.batch_mean)
    rest_of_decode = t - (1 / lam - t * np.exp(-lam * t) / -np.expm1(-lam * t))
    mean_step = c0 + k_s * zz
    var_step = (k_s * (1 + mu) - k_s**2) * zz**2 / (1 - (lam * zz) ** 2)
    biased = mean_step + var_step / mean_step
    assert biased < p.full_step_s / 3
    residual = decode_share * rest_of_decode + rho * biased / 2
    wait = residual + lam * zz * (decode_share * rest_of_decode + rho * biased)
    assert_allclose(p.residual_s, residual, rtol=1e-6)
    omega = 1000 * p.full_step_s / (8192 - p.batch_mean)
    rho_b = lam * omega
    theta = 0.5 * omega / (1 - rho_b)
    budget = rho_b * np.exp(-p.full_step_s / theta)
    assert_allclose(p.prefill_wait, (budget, theta), rtol=1e-6) and 0 < budget < 1e-6
    d = light.figures.request_dispatch_s
    assert p.slot_wait[0] < 1e-12
    assert_allclose(light.ttft["mean"], s + wait + budget * (p.full_step_s + theta) + d, rtol=1e-6)
    assert s > x > 0 and pi > 0 and 1 < k_s < k_p


def test_kv_batch_limits_and_demand(light):
    f, row = light.figures, light.row()
    k = light.setup["layout"].sequence_bytes(1201, per_gpu=True)
    assert f.batch_kv == f.batch_kv_mean == f.batch_kv_p99 == int(f.pool_bytes_per_gpu // k)  # one length: sd = 0
    assert_allclose(row["kv_demand_mean_bytes"], row["running_concurrency"] * k, rtol=1e-9)
    assert row["kv_capacity_bytes"] == f.pool_bytes_per_gpu and row["headroom_bytes"] == pytest.approx(
        f.pool_bytes_per_gpu - row["kv_demand_p99_bytes"])


def test_kv_batch_by_the_central_limit_theorem():
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(5, "4k:24k", "300:2k"), SLOS, allow_long_context=True)
    f = p.figures
    mean, sd, pool = f.seq_bytes_per_gpu.mean(), f.seq_bytes_per_gpu.std(), f.pool_bytes_per_gpu
    b = f.batch_kv
    assert b * mean + 2.3263478740408408 * math.sqrt(b) * sd <= pool
    assert (b + 1) * mean + 2.3263478740408408 * math.sqrt(b + 1) * sd > pool
    assert f.batch_kv_p99 < b < f.batch_kv_mean


def test_row_has_the_documented_keys(light):
    row = light.row()
    for key in BRIEF_KEYS:
        assert key in row, key
    assert row["feasible"] is True and row["binding_constraint"] == "none" and row["total_gpus"] == 1


# --------------------------------------------------------------------------- constraints


def test_tpot_slo_binds_the_batch_and_the_fleet():
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(60, "2k", "256"),
                        [parse_slo("ttft", "p99<=1s"), parse_slo("tpot", "p90<=20ms")])
    assert p.feasible and p.binding_constraint == "tpot_slo"
    assert p.point.batch_tpot == p.batch_per_instance < 256
    below = p.below
    assert below.instances == p.instances - 1 and below.failures


def test_kv_capacity_binds_a_small_pool():
    # 30% of the GPU: 0.3 × 85,520,809,984 − 16,060,522,496 weights − 5,516,034,048 activation (the sampler's
    # 10.5 × 1,024 × 128,256 × 4 B at vLLM V1's default max_num_seqs 1,024 on an H100) − 0.35 GiB non-torch
    # = 3.45 GiB → 1,766 blocks of 2 MiB; a 2,176-token request takes 136 blocks: 12 requests, 3 instances
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(20, "2k", "128"), [parse_slo("ttft", "p99<=2s")],
                        engine=EngineSettings(gpu_memory_utilization=0.3))
    assert p.feasible and p.binding_constraint == "kv_capacity" and (p.instances, p.batch_per_instance) == (3, 12)
    assert p.below.failures == ["slots"] and p.batch_per_instance == p.figures.batch_kv


def test_long_contexts_are_bound_by_the_kv_pool_not_an_internal_limit():
    # 32k + 2k tokens: a sequence holds 34,816 × 131,072 B (32 layers × 8 KV heads × (128 + 128) × 2 B) of KV;
    # each one adds 1.65 ms of KV reads to every step, so the batch feeds back on itself (loop gain above 0.5),
    # which is physics, not a constraint: the KV pool's 12 sequences bind, and N − 1 says by how much
    # (pool: 0.9 × 85,520,809,984 − 16,060,522,496 − 1,379,008,512 − 0.35 GiB → 28,206 blocks × 2 MiB
    # = 59,152,269,312 B; // 4,563,402,752 B a sequence = 12)
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(1, "32k", "2k"), [parse_slo("ttft", "p99<=30s")],
                        engine=ROOFLINE)
    assert p.feasible and p.binding_constraint == "kv_capacity"
    assert p.batch_per_instance == p.figures.batch_kv == int(p.figures.pool_bytes_per_gpu // (34_816 * 131_072)) == 12
    assert p.below.failures == ["slots"] and p.below.batch_mean > 12
    assert p.row()["binding_detail"].startswith(f"at N − 1 = {p.instances - 1} instances: the KV pool holds 12 ")


def test_max_num_seqs_binds_short_requests():
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(200, "64", "512"), [parse_slo("ttft", "p99<=1s")],
                        engine=EngineSettings(max_num_seqs=16, perf_model="roofline"))
    assert p.feasible and p.binding_constraint == "max_num_seqs" and p.batch_per_instance == 16


def test_unattainable_tpot_is_infeasible_with_the_best_value():
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(5, "1k", "100"), [parse_slo("tpot", "p99<=2ms")],
                        engine=ROOFLINE)  # 5.9 ms: the roofline's batch-1 step
    assert not p.feasible and p.binding_constraint == "tpot_slo" and p.instances is None
    assert "unattainable" in p.reason and "5.9" in p.reason
    assert p.tpot["p99"] > 0.002 and p.row()["feasible"] is False


def test_weights_that_do_not_fit_are_infeasible():
    p = plan_aggregated("llama-3.1-70b", "h100-sxm", flags(1, "1k", "100"), SLOS, Shape(tp=1))
    assert not p.feasible and p.binding_constraint == "memory" and "no KV memory" in p.reason


def test_gpu_budget():
    p = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(100, "2k", "256"), SLOS, max_gpus=2)
    assert not p.feasible and p.instances > 2 and "more than --max-gpus 2" in p.reason


def test_trace_workload_rate_and_rescaling():
    trace = make_trace(np.arange(11) * 0.5, np.full(11, 500), np.full(11, 50), source="t.csv")
    w = FleetWorkload.from_trace(trace)
    assert w.rate_per_s == pytest.approx(2.0) and w.arrival_scv == pytest.approx(0.0)
    fast = FleetWorkload.from_trace(trace, qps=8)
    assert fast.rate_per_s == 8 and fast.trace.arrival_s[-1] == pytest.approx(1.25)
    assert w.scaled(3).rate_per_s == pytest.approx(6.0) and w.scaled(3).trace.arrival_s[-1] == pytest.approx(5 / 3)
    with pytest.raises(InputError, match="at least two requests"):
        FleetWorkload.from_trace(make_trace([0.0], [5], [5], source="one.csv"))


def test_workload_flags_mean_p99_shorthand_and_errors():
    w = fleet_workload(qps=3, isl="1k:8k", osl="256", sample_requests=2_000)
    assert w.spec.isl.kind == "lognormal" and w.spec.isl.mean == pytest.approx(1024)
    with pytest.raises(InputError, match="--qps must be > 0"):
        fleet_workload(qps=-1, isl="1k", osl="1")
    with pytest.raises(InputError, match="no workload"):
        fleet_workload(qps=1, isl="1k")


def test_a_context_beyond_the_model_needs_the_flag():
    with pytest.raises(InputError, match="exceeds llama-2-7b's max_context"):
        plan_aggregated("llama-2-7b", "h100-sxm", flags(1, "8k", "256"), SLOS)


# --------------------------------------------------------------------------- properties

SMALL: dict = {}  # plans by (qps, ttft, tpot): hypothesis repeats sampled values


def _plan(qps: float, ttft_s: float = 2.0, tpot_s: float = 0.05):
    key = (qps, ttft_s, tpot_s)
    if key not in SMALL:
        SMALL[key] = plan_aggregated("llama-3.1-8b", "h100-sxm", flags(qps, "1k:4k", "200:800", sample=2_000),
                                     [Slo("ttft", "p99", ttft_s), Slo("tpot", "p90", tpot_s)])
    return SMALL[key]


@settings(max_examples=15, deadline=None)
@given(qps=st.sampled_from([2.0, 10.0, 30.0, 80.0, 200.0]), factor=st.sampled_from([1.5, 2.0, 4.0]))
def test_more_load_never_needs_fewer_gpus(qps, factor):
    assert _plan(qps * factor).total_gpus >= _plan(qps).total_gpus


@settings(max_examples=15, deadline=None)
@given(qps=st.sampled_from([10.0, 40.0, 120.0]), ttft=st.sampled_from([0.3, 1.0, 3.0]),
       tpot=st.sampled_from([0.02, 0.03, 0.06]), looser=st.sampled_from([1.5, 3.0]))
def test_a_looser_slo_never_needs_more_gpus(qps, ttft, tpot, looser):
    tight, loose_ttft, loose_tpot = _plan(qps, ttft, tpot), _plan(qps, ttft * looser, tpot), _plan(qps, ttft, tpot * looser)
    if tight.feasible:
        assert loose_ttft.total_gpus <= tight.total_gpus and loose_tpot.total_gpus <= tight.total_gpus

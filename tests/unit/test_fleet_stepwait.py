"""The wait before a prompt's own step (kvplan.plans.fleet.stepwait), worked by hand on small cases, and the seed's
online-chat case against its replay."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.plans.fleet import stepwait
from kvplan.plans.fleet.aggregated import EngineSettings, Shape, parse_slo, plan_aggregated
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.sim import simulate_plan


def test_free_period():
    # one instance: a free period ends with the next arrival, 1/λ on average whatever ρ_P
    assert stepwait.free_period_s(0.6, 10.0, 1) == pytest.approx(0.1)
    # two instances busy half the time, 10/s each: free 1 − 0.5 of the time, and the arrivals that find one of them
    # free (1 − 0.5² of them) end its free periods: 0.5 / (10 × 0.75) = 66.7 ms
    assert stepwait.free_period_s(0.5, 10.0, 2) == pytest.approx(0.5 / 7.5)
    assert stepwait.free_period_s(0.0, 4.0, 3) == pytest.approx(0.25)


def test_decode_residual_by_hand():
    # a 10 ms decode step, free periods of mean 5 ms: P(R <= r) = 1 − (1 − e^(−(t − r)/f̄)) / (1 − e^(−t/f̄)); at the
    # median, 1 − e^(−(t − r)/f̄) = (1 − e^(−2))/2 = 0.432332, so t − r = −5 ms × ln(0.567668) = 2.831 ms
    median = float(stepwait.decode_residual(0.010, 0.005, np.array([0.5]))[0])
    assert median == pytest.approx(0.010 + 0.005 * math.log(1 - (1 - math.exp(-2)) / 2), rel=1e-12)
    assert median == pytest.approx(0.007169, abs=1e-6)
    # the same from F mod t of exponential free periods, and its mean in closed form
    rng = np.random.default_rng(0)
    rest = 0.010 - np.mod(rng.exponential(0.005, 400_000), 0.010)
    q = np.array([0.1, 0.5, 0.9])
    assert_allclose(stepwait.decode_residual(0.010, 0.005, q), np.quantile(rest, q), atol=5e-5)
    assert stepwait.decode_residual_mean(0.010, 0.005) == pytest.approx(rest.mean(), abs=3e-5)
    # free periods long against the step: the rest of the step is uniform (a lone instance at light load)
    assert_allclose(stepwait.decode_residual(0.010, math.inf, q), 0.010 * q)
    assert stepwait.decode_residual_mean(0.010, 1e9) == pytest.approx(0.005)


def test_mixed_step_moments():
    # c0 = 5 ms, each prompt 10 ms (fixed), K zero-truncated Poisson(μ = 1): E[K] = 1/(1 − e^−1) = 1.58198,
    # E[K²] = E[K](1 + μ) = 3.16395, Var[K] = 3.16395 − 1.58198² = 0.66130
    k_s = 1 / (1 - math.exp(-1))
    mean, var = stepwait.mixed_step(0.005, 0.010, 0.0001, k_s, 1.0)
    assert mean == pytest.approx(0.005 + 0.0158198, rel=1e-5)
    assert var == pytest.approx(0.66130 * 1e-4, rel=1e-4)


def test_capped_biased_mean():
    # a lognormal step of mean 20 ms and sd 10 ms: length-biased mean E[s²]/E[s] = 20 + 100/20 = 25 ms; capped at
    # 30 ms, E[min(s̃, 30 ms)] by integration of the length-biased density
    assert stepwait.capped_biased_mean(0.020, 1e-4, math.inf) == pytest.approx(0.025)
    sigma2 = math.log1p(0.25)
    m = math.log(0.020) - sigma2 / 2
    z = np.array([NormalDist().inv_cdf(p) for p in (np.arange(200_000) + 0.5) / 200_000])
    s = np.exp(m + math.sqrt(sigma2) * z)
    expected = float(np.sum(s * np.minimum(s, 0.030)) / np.sum(s))
    assert stepwait.capped_biased_mean(0.020, 1e-4, 0.030) == pytest.approx(expected, rel=1e-4)


def test_joiners_atom_and_mean():
    # joiners at 10/s over 50 ms: M ~ Poisson(0.5), none with probability e^−0.5 = 0.6065, so the first 10 of 16
    # equally likely points ((i + ½)/16 < 0.6065 for i <= 9) are 0; fixed 8 ms prompts
    points = stepwait.joiners(np.array([0.050]), 10.0, 0.008, 0.008**2)[0]
    assert (points[:10] == 0).all() and (points[10:] > 0).all()
    # given M >= 1 a lognormal with the compound Poisson's conditional mean, 0.5 × 8 ms / (1 − e^−0.5) = 10.16 ms, and
    # second moment (0.5 × 8² + 0.5² × 8²) ms² / (1 − e^−0.5) = 121.97 ms²: σ² = ln(121.97 / 10.16²) = 0.1668; its
    # six points at the probabilities (i + ½)/16, i = 10 … 15, read through the conditional CDF
    some = 1 - math.exp(-0.5)
    mean, second = 0.004 / some, (0.5 * 0.008**2 + 0.25 * 0.008**2) / some
    sigma = math.sqrt(math.log(second / mean**2))
    expected = [math.exp(math.log(mean) - sigma**2 / 2 + sigma * NormalDist().inv_cdf(((i + 0.5) / 16 - (1 - some)) / some))
                for i in range(10, 16)]
    assert_allclose(points[10:], expected, rtol=1e-7)
    assert not stepwait.joiners(np.array([0.0]), 10.0, 0.008, 0.008**2).any()


def test_budget_queue_by_hand():
    # one instance, 5 prompts/s, each needing ω = 0.1 s of full steps (fixed, cs² = 0), Poisson arrivals (ca² = 1):
    # ρ_b = 0.5, Erlang-C P(wait) = 0.5, θ = (1 + 0)/2 / (1/0.1 − 5) = 0.1 s; a full step of 0.2 s takes the first
    # 0.2 s of the work beside the prompt, so it waits whole steps with probability 0.5 e^(−0.2/0.1) = 0.06767
    c_b, theta, rho, c = stepwait.budget_queue(1, 5.0, 0.1, 0.01, 0.2, 1.0)
    assert (rho, c, theta) == pytest.approx((0.5, 0.5, 0.1))
    assert c_b == pytest.approx(0.5 * math.exp(-2))
    # ω: a prompt within the budget needs its share of a full step, a longer one its own prefill's full steps
    assert_allclose(stepwait.budget_work(np.array([1000, 8000, 20000]), np.array([9.9, 9.9, 3.0]), 0.4, 8000),
                    [0.05, 0.4, 3.0])


def test_ttft_cdf_by_hand():
    # one service point a = 0.1 s, no slot wait, the budget queue (C_b, θ) = (0.2, 0.05 s) beyond a 0.3 s full step:
    # P(TTFT <= x) = 0.8 for a <= x < a + 0.3, then 0.8 + 0.2 (1 − e^(−(x − a − 0.3)/θ))
    cdf = stepwait.ttft_cdf(np.array([0.1]), np.array([1.0]), (0.0, 0.0), (0.2, 0.05), 0.3)
    assert_allclose(cdf(np.array([0.05, 0.1, 0.39, 0.4, 0.45])),
                    [0.0, 0.8, 0.8, 0.8, 0.8 + 0.2 * (1 - math.exp(-1))], rtol=1e-12)


def test_wait_points_weights_and_mean():
    # the three branches' weights: every instance busy ρ_P^N, idle (1 − ρ_P^N) e^(−B̄), the rest a decode step
    values, weights, residual, mean = stepwait.wait_points(
        t=0.02, rho=0.5, lam_i=10.0, servers=2, batch=1.0, rate=10 * 0.5 * 1.0, c0=0.01, z1=0.015, z2=0.015**2 * 1.5,
        k_s=1.2, mu=0.4, cap=0.3)
    assert weights.sum() == pytest.approx(1.0)
    assert weights[0] == pytest.approx(0.75 * math.exp(-1))
    assert weights[1:17].sum() == pytest.approx(0.75 * (1 - math.exp(-1)))
    assert weights[17:].sum() == pytest.approx(0.25)
    assert np.dot(values, weights) == pytest.approx(mean, rel=0.05) and 0 < residual < mean


@pytest.fixture(scope="module")
def seed_chat():
    workload = fleet_workload(qps=400, isl="256", osl="512")
    plan = plan_aggregated("llama-3.1-70b", "h100-sxm", workload,
                           [parse_slo("ttft", "p99<=2s"), parse_slo("tpot", "p90<=50ms")], Shape(8),
                           EngineSettings(max_num_seqs=1024))
    return plan, simulate_plan(plan, workload, 100_000).stats()


def test_seed_chat_ttft_against_its_replay(seed_chat):
    # 14 instances behind a join-shortest-queue router, 256-token prompts: every queued prompt joins the next step
    # (the replay leaves none queued), so TTFT is the prefill dispatch, the rest of the step under way (most arrivals
    # go to an instance whose last prompt just finished: nearly a whole decode step) and the prompt's own step. The
    # Erlang-C prefill queue put the p99 at 269 ms against the replay's 153 ms (+75%).
    plan, sim = seed_chat
    assert plan.instances == 14
    for stat in ("p50", "p90", "p99"):
        replayed = sim[f"sim_ttft_{stat}_s"]
        assert abs(plan.ttft[stat] - replayed) <= 0.05 * replayed, (stat, plan.ttft[stat], replayed)

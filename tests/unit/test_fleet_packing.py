"""Prompt packing in the fleet model's mixed steps (kvplan.plans.fleet.packing), worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.plans.fleet.packing import join_room, packing, pair_penalty

MEMORY_S, PER_TOKEN_S, OVERHEAD_S = 0.010, 20e-6, 0.003   # a roofline with one knee, at 500 tokens


def roofline_tokens(n_max: int = 10_000) -> tuple[np.ndarray, np.ndarray]:
    """(n, G(n)), G(n) = max(weights read, n tokens' FLOPs) + a fixed overhead: the step's linear layers."""
    n = np.arange(n_max + 1.0)
    return n, np.maximum(MEMORY_S, PER_TOKEN_S * n) + OVERHEAD_S


@pytest.mark.parametrize("batch", [0, 100, 400])
def test_two_prompts_beyond_the_knee_lose_one_steps_headroom(batch):
    # G(b + 2p) + G(b) − 2 G(b + p) = c (b + 2p) + M − 2 c (b + p) = M − c b: the tokens a memory-bound step takes free
    penalty = pair_penalty(*roofline_tokens(), np.array([batch]), 8192, np.full(256, 1000.0))
    assert_allclose(penalty, [MEMORY_S - PER_TOKEN_S * batch], rtol=1e-12)


def test_prompts_under_the_knee_pack_free_and_a_full_step_has_no_pair():
    g, b = roofline_tokens(), np.array([0])
    assert_allclose(pair_penalty(*g, b, 8192, np.full(256, 200.0)), [0.0], atol=1e-15)  # 400 < 500 tokens
    # a prompt at the budget fills its step: the other goes to the next one, as it would alone
    assert_allclose(pair_penalty(*g, b, 2048, np.full(256, 3000.0)), [0.0], atol=1e-15)


def moments(s, x):
    """The sample moments of fixed prompts of prefill S and extra X (no eager dispatch)."""
    return np.array([s, s * s, 0.0, x, x * x, s * x, 0.0, 0.0, 0.0, 0.0])


def test_free_prompts_pack_as_the_arrivals_in_one_decode_step():
    # a prompt that costs the decoders nothing (S = t, X = π = 0) leaves every step t long: the others in its step
    # are the Poisson(λ t) arrivals of the step before, k_p = 1 + λ t, and a step's mean is μ / (1 − e^−μ)
    lam, t = 20.0, 0.01
    k_p, k_s, rho, x_eff = packing(lam, t, moments(t, 0.0), 0.0, 1.0, 1)
    assert_allclose(k_p, 1 + lam * t, rtol=1e-9)
    assert_allclose(k_s, lam * t / -np.expm1(-lam * t), rtol=1e-9)
    assert_allclose(rho, lam * t / k_s, rtol=1e-9) and x_eff == 0.0


def test_no_arrivals_or_many_instances_pack_nothing():
    m = moments(0.06, 0.045)
    k_p, k_s, rho, x_eff = packing(0.0, 0.02, m, 0.008, 1.0, 1)
    assert k_p == k_s == 1.0 and x_eff == 0.045
    # a join-shortest-queue router sends a prompt where one waits only when all 40 instances hold one
    k_p, k_s, _, x_eff = packing(10.0, 0.02, m, 0.008, 1.0, 40)
    assert_allclose([k_p, k_s], [1.0, 1.0], atol=1e-6) and x_eff == pytest.approx(0.045, abs=1e-8)


def test_packing_grows_with_the_rate_and_the_penalty_with_it():
    m = moments(0.068, 0.049)
    rows = [packing(lam, 0.02, m, 0.009, 0.99, 1) for lam in (2.0, 5.0, 10.0)]
    for (kp1, ks1, _, x1), (kp2, ks2, _, x2) in zip(rows, rows[1:]):
        assert kp2 > kp1 and ks2 > ks1 and x2 > x1
    assert all(1 <= ks <= kp for kp, ks, _, _ in rows)


def test_the_fixed_point_holds_where_plain_iteration_cycles():
    # 14 instances behind a join-shortest-queue router, short prompts: a larger k_s shares more of each step, so
    # ρ_P and with it the join chance ρ_P^13 fall, and iterating μ alternates between two values; the root is found
    lam, t, s, x, servers = 400 / 14, 0.032, 0.040, 0.0075, 14
    k_p, k_s, rho, _ = packing(lam, t, moments(s, x), 0.0, 1.0, servers)
    mu = k_p - 1
    assert_allclose(k_s, mu / -np.expm1(-mu), rtol=1e-12)
    assert_allclose(rho, lam * (x + (s - x) / k_s), rtol=1e-12)
    c0 = s - x
    seen = (c0 * c0 + 2 * c0 * k_s * x + k_s * x * x + k_s * mu * x * x) / (c0 + k_s * x)
    assert_allclose(mu, lam * rho ** (servers - 1) * ((1 - rho) * t + rho * seen), rtol=1e-8)
    assert 0 < mu < 2 and 0.5 < rho < 1


@pytest.mark.parametrize(("prompt", "share"), [(1000, 1.0), (6000, 2192 / 6000), (12_000, (8192 - 3808) / 12_000)])
def test_a_later_prompt_joins_only_the_budget_a_step_has_left(prompt, share):
    # 8,192 tokens a step: a 6,000-token prompt leaves 2,192 for another; a 12,000-token one fills its first step
    # and leaves 12,000 − 8,192 = 3,808 for its last, so 4,384 of the other's tokens fit there
    assert_allclose(join_room(np.array([0.0]), 8192, np.full(256, float(prompt))), [share], rtol=1e-12)

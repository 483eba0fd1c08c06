"""The fast paths of the closed-form tails (kvplan.calc.tails) give the plain computation's answers.

- A mixture over equally likely points equals the weighted mixture over their distinct values
  (``tails.distinct``): worked by hand, and against the plain mean on random samples.
- The bracketed inversion (``invert_cdf(..., rounds=R)``) returns the plain bisection's percentiles
  bit for bit: it only skips evaluations whose outcome the CDF's monotonicity already decides.
- So does the staircase inversion (``invert_staircase``) of a CDF below the staircase of its jumps (the TTFT of
  many service points), by a margin far above the CDF's rounding noise: equal bit for bit, in fewer evaluations.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc import tails


def test_distinct_points_by_hand():
    values, weights = tails.distinct([[2.0, 1.0], [2.0, 2.0]])
    assert values.tolist() == [1.0, 2.0] and weights.tolist() == [0.25, 0.75]
    # S = 1 s with probability 1/4, 2 s with 3/4, no wait: P(TTFT <= 1.5 s) = 1/4, P(TTFT <= 2 s) = 1
    assert_allclose(tails.wait_plus_service_cdf([1.5, 2.0], values, 0.0, 1.0, 0.0, 1.0, weights=weights),
                    [0.25, 1.0])
    # two point masses (σ = 0) at e^0 = 1 and e^1, weights 3/4, 1/4: the CDF just above 1 is 3/4
    assert_allclose(tails.lognormal_mixture_cdf([1.0 + 1e-9], [0.0, 1.0], [0.0, 0.0], [0.75, 0.25]), [0.75])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=40), st.floats(0.0, 0.9), st.floats(0.01, 5.0),
       st.floats(0.0, 0.9), st.floats(0.01, 5.0))
def test_weighted_distinct_mixture_equals_the_plain_mean(points, c1, th1, c2, th2):
    service = np.asarray(points, dtype=np.float64) * 0.25
    values, weights = tails.distinct(service)
    t = np.linspace(0.0, 10.0, 41)
    assert_allclose(tails.wait_plus_service_cdf(t, values, c1, th1, c2, th2, weights=weights),
                    tails.wait_plus_service_cdf(t, service, c1, th1, c2, th2), rtol=1e-13, atol=1e-15)


QUANTILES = [0.5, 0.9, 0.95, 0.99]


def _within_one_step(plain, fast, lo, hi, iterations):
    """The bracketed answer is the plain bisection's, or its neighbour one bisection step away.

    Bit-for-bit equality holds almost always (1 case in 4,000 random lognormal mixtures differs),
    but not always: a CDF evaluated in floating point is not exactly monotone next to a jump (an
    atom at exp(mu) read back through log), so a midpoint the bracket infers can land on the other
    side of the one the plain bisection evaluates. The step is the bisection's own precision,
    (log hi - log lo) / 2**iterations in its log space.
    """
    assert np.array_equal(np.isinf(plain), np.isinf(fast)), (plain, fast)
    finite = np.isfinite(plain)
    step = (math.log(hi) - math.log(lo)) / 2**iterations if lo > 0 else (hi - lo) / 2**iterations
    gap = (np.abs(np.log(fast[finite]) - np.log(plain[finite])) if lo > 0
           else np.abs(fast[finite] - plain[finite]))
    assert np.all(gap <= step * (1 + 1e-6)), (plain, fast, gap / step)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=24), st.floats(0.0, 0.95), st.floats(1e-3, 30.0),
       st.floats(0.0, 0.95), st.floats(1e-3, 30.0), st.booleans())
def test_bracketed_inversion_is_the_bisection_to_its_last_step(points, c1, th1, c2, th2, heavy):
    # the TTFT CDF of kvplan plan: atoms at each service time (jumps), exponential waits, a heavy cap
    service = np.asarray(points, dtype=np.float64) * 0.01
    values, weights = tails.distinct(service)
    cap = (lambda x: c2 * tails.equilibrium_tail(service)(0.5 * x) ** 2) if heavy else None

    def cdf(x):
        return tails.wait_plus_service_cdf(x, values, c1, th1, c2, th2, cap, weights)
    hi = float(service.max()) + 50 * max(th1, th2) + 1
    lo = float(service.min()) * 0.5
    plain = tails.invert_cdf(cdf, QUANTILES, lo, hi, iterations=28)
    fast = tails.invert_cdf(cdf, QUANTILES, lo, hi, iterations=28, rounds=5, jumps=values)
    _within_one_step(plain, fast, lo, hi, 28)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), st.floats(0.01, 0.8)), min_size=1, max_size=16), st.floats(-4.0, 0.0),
       st.integers(0, 8))
def test_bracketed_inversion_of_a_lognormal_mixture(sigmas, mu0, rounds):
    sigma = np.asarray(sigmas)
    mu = mu0 + np.linspace(0.0, 1.0, sigma.size)

    def cdf(x):
        return tails.lognormal_mixture_cdf(x, mu, sigma)
    mean = float(np.exp(mu + sigma**2 / 2).mean())
    plain = tails.invert_cdf(cdf, QUANTILES, mean * 1e-3, mean * 1e3, iterations=24)
    fast = tails.invert_cdf(cdf, QUANTILES, mean * 1e-3, mean * 1e3, iterations=24, rounds=rounds,
                            jumps=np.exp(mu[sigma == 0]))
    _within_one_step(plain, fast, mean * 1e-3, mean * 1e3, 24)


def test_bracketed_inversion_by_hand_and_in_fewer_evaluations():
    calls = []

    def cdf(x):
        calls.append(np.size(x))
        return 1 - np.exp(-np.asarray(x) / 2.0)
    fast = tails.invert_cdf(cdf, [0.5, 0.99], 1e-6, 1e3, rounds=6)
    assert_allclose(fast, [2 * math.log(2), 2 * math.log(100)], rtol=1e-9)
    evaluations = len(calls)
    calls.clear()
    tails.invert_cdf(cdf, [0.5, 0.99], 1e-6, 1e3)
    assert len(calls) == 81 and evaluations < 20, evaluations
    # a quantile past the CDF's top is ∞ either way
    assert tails.invert_cdf(lambda x: np.minimum(np.asarray(x), 0.5), [0.9], 1e-3, 1.0, rounds=4)[0] == math.inf


def test_lognormal_mixture_floor_by_hand():
    # X lognormal(μ = 0, σ = 1): P(X <= 1) = Φ(0) = 1/2, P(X <= 2) = Φ(ln 2) = Φ(0.69315) = 0.75589.
    # max(1.5, X): no mass below 1.5, the same CDF above it
    assert_allclose(tails.lognormal_mixture_cdf([1.0, 2.0], [0.0], [1.0]), [0.5, 0.75589], atol=5e-6)
    assert_allclose(tails.lognormal_mixture_cdf([1.0, 1.4999, 1.5, 2.0], [0.0], [1.0], floor=1.5),
                    [0.0, 0.0, 0.65743, 0.75589], atol=5e-6)  # Φ(ln 1.5 = 0.40547) = 0.65743
    # its median is the floor, its 80th percentile (e^0.8416 = 2.3201) unchanged
    q = tails.invert_cdf(lambda x: tails.lognormal_mixture_cdf(x, [0.0], [1.0], floor=1.5), [0.5, 0.8], 1e-3, 1e3,
                         iterations=60, jumps=np.array([1.5]))
    assert_allclose(q, [1.5, 2.3201], rtol=1e-4)


def test_staircase_inversion_by_hand_and_in_fewer_evaluations():
    # S = 1, 2 or 3 s with probability 0.2, 0.5, 0.3 and no wait: the median is S = 2 s (0.2 below it, 0.7 at it),
    # the 90th percentile 3 s; the bisection approaches each from above, to 2⁻²⁸ of ln(10 / 0.5) in log time
    points, masses = np.array([1.0, 2.0, 3.0]), np.array([0.2, 0.5, 0.3])
    calls = []

    def cdf(x):
        calls.append(np.size(x))
        return tails.wait_plus_service_cdf(x, points, 0.0, 0.0, 0.0, 0.0, weights=masses)
    fast = tails.invert_staircase(cdf, [0.5, 0.9], 0.5, 10.0, points, masses, iterations=28)
    evaluated = sum(calls)
    calls.clear()
    plain = tails.invert_cdf(cdf, [0.5, 0.9], 0.5, 10.0, iterations=28)
    assert np.array_equal(fast, plain) and np.all((fast >= [2.0, 3.0]) & (fast <= np.array([2.0, 3.0]) * np.exp(3e-8 * 3)))
    assert sum(calls) == 2 * 28 + 2 and evaluated <= 2 + 2 * 2, evaluated  # the top, then the jumps' two sides
    # a quantile past the CDF's top is ∞ either way
    capped = lambda x: 0.5 * cdf(x)  # noqa: E731
    assert tails.invert_staircase(capped, [0.9], 0.5, 10.0, points, masses, iterations=28)[0] == math.inf


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=2, max_size=60), st.sampled_from([0.0, 1e-200, 0.05, 0.6]),
       st.sampled_from([0.0, 1e-3, 0.05, math.inf]), st.sampled_from([0.0, 1e-13, 1e-4, 0.3]),
       st.sampled_from([1e-3, 0.05, 0.5]), st.booleans(), st.integers(0, 2**31))
def test_staircase_inversion_is_the_plain_bisection(points, c1, th1, c2, th2, heavy, seed):
    # the TTFT CDF of kvplan plan (kvplan.plans.fleet.stepwait.ttft_cdf): jumps at each service time, the slot wait,
    # the budget queue's branch a full step later, a heavy cap
    from kvplan.plans.fleet import stepwait

    rng = np.random.default_rng(seed)
    service = np.unique(np.asarray(points, dtype=np.float64) * 0.01 + rng.exponential(0.01, len(points)))
    weights = rng.random(service.size)
    weights /= weights.sum()
    full = 0.2 if c2 > 0 else 0.0
    cap = stepwait.heavy_tail(rng.lognormal(-3, 1.2, 512), 0.3, 0.5, 2, 0.2) if heavy else None
    cdf = stepwait.ttft_cdf(service, weights, (c1, th1), (c2, th2), full, cap)
    lo, hi = float(service.min()) * 0.5, float(service.max()) + full + 50 * max(th1 if th1 < math.inf else 0, th2) + 3
    fast = tails.invert_staircase(cdf, [*QUANTILES, 0.3, 0.999], lo, hi,
                                  *stepwait.ttft_staircase(service, weights, (c2, th2), full), iterations=28)
    assert np.array_equal(fast, tails.invert_cdf(cdf, [*QUANTILES, 0.3, 0.999], lo, hi, iterations=28))

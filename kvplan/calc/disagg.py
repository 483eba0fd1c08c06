"""Closed forms for prefill/decode disaggregation: TTFT tails, decode occupancy, rate matching.

Prefill pool as M/G/c (c prefill instances, one prompt at a time each). A request's TTFT is
its wait W plus a request-dependent part X (prefill of its prompt + the exposed part of the KV
transfer + the first decode step). W follows :mod:`kvplan.calc.queueing`: with probability
1 − C it does not wait, else it waits an exponential tail of scale θ (Erlang-C with the
Allen–Cunneen factor), so for a discrete X (values xᵢ, weights wᵢ, e.g. quantile bins of a
trace's ISL distribution) and W independent of X::

    P(W + X > t) = Σᵢ wᵢ · G(t − xᵢ),   G(u) = 1 for u < 0,  C · exp(−u / θ) for u ≥ 0

and the p-quantile of TTFT is the t where this equals 1 − p (bisection; it decreases in t).
For a fixed ISL this is exactly ``wait_quantile_s + x``.

Decode occupancy: requests stay on a decode instance for OSL steps; the number in service is
that of a G/G/∞ queue, Poisson with mean m = λ·R for Poisson arrivals (M/G/∞). For renewal
arrivals with inter-arrival SCV ca² the variance is z·m with the peakedness z = (1 + ca²)/2
(Whitt, "Heavy-traffic approximations for service systems with blocking", AT&T Bell Labs Tech.
J. 63 (1984): exact for exponential holding times in heavy traffic). kvplan takes the continuous
normal approximation ``m + Φ⁻¹(p) · sqrt(z·m)`` so that sizes move smoothly with the inputs.

Rate matching (DistServe, OSDI'24 §2.3): with per-instance goodputs r_p (prefill alone under the
TTFT SLO) and r_d (decode alone under the TPOT SLO), a unit of x prefill and y decode instances
serves min(x·r_p, y·r_d) at x·g_p + y·g_d GPUs; with y = 1 (decode the faster side) x is
⌊r_d/r_p⌋ or ⌈r_d/r_p⌉, whichever gives more goodput per GPU — 10 / 5.6 → 2P1D, 3.3 req/s/GPU.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from kvplan.calc.tails import wait_tail


def sojourn_quantile_s(quantile, servers, rate_per_s, mean_service_s, extra_s, weights=None,
                       ca2=1.0, cs2=1.0, iterations: int = 60) -> float:
    """p-quantile of W + X for one pool (scalar servers); ∞ when the queue is unstable.

    ``extra_s`` holds the values of X, ``weights`` their probabilities (default: equal).
    """
    x = np.atleast_1d(np.asarray(extra_s, dtype=np.float64))
    w = np.full(x.shape, 1.0 / x.size) if weights is None else np.asarray(weights, dtype=np.float64)
    c_wait, theta = wait_tail(int(servers), float(rate_per_s), float(mean_service_s), float(ca2), float(cs2))
    if not math.isfinite(theta):
        return math.inf
    tail = 1.0 - float(quantile)
    if c_wait <= 0 or theta <= 0:
        return float(_discrete_quantile(x, w, quantile))

    def exceed(t: float) -> float:
        u = t - x
        g = np.where(u < 0, 1.0, c_wait * np.exp(-np.maximum(u, 0.0) / theta))
        return float((w * g).sum())

    wait_q = theta * max(math.log(c_wait / tail), 0.0)
    if x.size == 1:  # one request size: the wait's quantile plus that size, exactly
        return float(x[0]) + wait_q
    lo, hi = float(x.min()), float(x.max()) + wait_q
    if exceed(lo) <= tail:  # the quantile falls inside X's atoms with no wait
        return float(_discrete_quantile(x, w, quantile))
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if exceed(mid) > tail:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-7 * hi:
            break
    return hi


def _discrete_quantile(values, weights, quantile) -> float:
    order = np.argsort(values)
    cdf = np.cumsum(weights[order])
    i = int(np.searchsorted(cdf, float(quantile) - 1e-12))
    return float(values[order][min(i, values.size - 1)])


def peakedness(ca2) -> np.ndarray:
    """z = (1 + ca²)/2: variance-to-mean ratio of the number in a G/G/∞ system (Whitt 1984)."""
    return (1.0 + np.asarray(ca2, dtype=np.float64)) / 2.0


def occupancy_quantile(quantile, mean, ca2=1.0):
    """p-quantile of the number in service, normal approximation: m + Φ⁻¹(p)·sqrt(z·m)."""
    m = np.asarray(mean, dtype=np.float64)
    z_p = NormalDist().inv_cdf(float(quantile))
    return m + z_p * np.sqrt(peakedness(ca2) * np.maximum(m, 0.0))


def staging_bytes(rate_per_s, transfer_s, bytes_per_request):
    """Little's law: KV in flight on the receiving side = λ × transfer time × bytes per request."""
    return (np.asarray(rate_per_s, dtype=np.float64) * np.asarray(transfer_s, dtype=np.float64)
            * np.asarray(bytes_per_request, dtype=np.float64))


def rate_matched_xpyd(prefill_rate_per_instance: float, decode_rate_per_instance: float,
                      prefill_gpus_per_instance: int = 1, decode_gpus_per_instance: int = 1) -> tuple[int, int, float]:
    """Smallest xPyD unit by rate matching: (x, y, goodput per GPU of the unit).

    The faster side gets one instance; the slower side ⌊ratio⌋ or ⌈ratio⌉ instances, whichever
    serves more requests per GPU: goodput = min(x·r_p, y·r_d) / (x·g_p + y·g_d).
    """
    r_p, r_d = float(prefill_rate_per_instance), float(decode_rate_per_instance)
    if r_p <= 0 or r_d <= 0:
        return 0, 0, 0.0

    def goodput(x: int, y: int) -> float:
        return min(x * r_p, y * r_d) / (x * prefill_gpus_per_instance + y * decode_gpus_per_instance)

    if r_d >= r_p:
        ratio = r_d / r_p
        options = [(max(1, math.floor(ratio)), 1), (math.ceil(ratio), 1)]
    else:
        ratio = r_p / r_d
        options = [(1, max(1, math.floor(ratio))), (1, math.ceil(ratio))]
    x, y = max(options, key=lambda o: (goodput(*o), -(o[0] + o[1])))
    return x, y, goodput(x, y)

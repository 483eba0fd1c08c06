"""Closed-form queueing: Little's law, Erlang-C, and the Allen–Cunneen G/G/c approximation.

Notation: arrival rate λ (1/s), mean service time S (s), c servers, offered load a = λ·S,
utilisation ρ = a / c (stable only when ρ < 1).

- Little's law: L = λ · W (mean number in system = rate × mean time in system).
- Erlang B by the stable recursion B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1)); Erlang C (the
  probability an arrival waits in M/M/c) C = B / (1 − ρ·(1 − B)).
- M/M/c waiting time: P(Wq > t) = C · exp(−(c/S − λ)·t), so E[Wq] = C / (c/S − λ) and the
  p-quantile is max(0, ln(C / (1 − p)) / (c/S − λ)).
- Allen–Cunneen (Allen 1990, "Probability, Statistics and Queueing Theory"): for G/G/c,
  E[Wq] ≈ E[Wq(M/M/c)] · (ca² + cs²) / 2 with ca², cs² the squared coefficients of variation of
  inter-arrival and service times. kvplan applies the same factor to the exponential tail's
  scale to get percentiles — an approximation whose error `kvplan plan --simulate` measures.

Every function takes numpy arrays and broadcasts.
"""

from __future__ import annotations

import numpy as np


def littles_law_concurrency(rate_per_s, time_in_system_s):
    """L = λ · W: mean requests in the system."""
    return np.asarray(rate_per_s, dtype=float) * np.asarray(time_in_system_s, dtype=float)


def erlang_b(servers, offered_load):
    """Blocking probability of M/M/c/c by the recursion B(k) = a·B(k−1) / (k + a·B(k−1))."""
    c = np.asarray(servers, dtype=np.int64)
    a = np.asarray(offered_load, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    b = np.ones(a.shape)
    for k in range(1, int(c.max(initial=0)) + 1):
        step = a * b / (k + a * b)
        b = np.where(k <= c, step, b)
    return b


def erlang_c(servers, offered_load):
    """P(wait) in M/M/c: C = B / (1 − ρ(1 − B)); 1 where the queue is unstable (ρ ≥ 1)."""
    c = np.asarray(servers, dtype=float)
    a = np.asarray(offered_load, dtype=float)
    rho = a / c
    b = erlang_b(servers, offered_load)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_wait = b / (1.0 - rho * (1.0 - b))
    return np.where(rho >= 1.0, 1.0, np.clip(p_wait, 0.0, 1.0))


def wait_scale_s(servers, rate_per_s, service_s, ca2=1.0, cs2=1.0):
    """Scale θ of the waiting-time tail: θ = (ca² + cs²)/2 / (c/S − λ); ∞ when unstable."""
    c = np.asarray(servers, dtype=float)
    lam = np.asarray(rate_per_s, dtype=float)
    s = np.asarray(service_s, dtype=float)
    drain = c / s - lam
    factor = (np.asarray(ca2, dtype=float) + np.asarray(cs2, dtype=float)) / 2.0
    with np.errstate(divide="ignore"):
        return np.where(drain > 0, factor / drain, np.inf)


def mean_wait_s(servers, rate_per_s, service_s, ca2=1.0, cs2=1.0):
    """E[Wq] ≈ C(c, λS) · (ca² + cs²)/2 / (c/S − λ) (Erlang-C with the Allen–Cunneen factor)."""
    load = np.asarray(rate_per_s, dtype=float) * np.asarray(service_s, dtype=float)
    return erlang_c(servers, load) * wait_scale_s(servers, rate_per_s, service_s, ca2, cs2)


def wait_quantile_s(quantile, servers, rate_per_s, service_s, ca2=1.0, cs2=1.0):
    """p-quantile of the wait: max(0, θ · ln(C / (1 − p))); ∞ when unstable."""
    p = np.asarray(quantile, dtype=float)
    load = np.asarray(rate_per_s, dtype=float) * np.asarray(service_s, dtype=float)
    c_wait = erlang_c(servers, load)
    theta = wait_scale_s(servers, rate_per_s, service_s, ca2, cs2)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = theta * np.log(np.maximum(c_wait, 1e-300) / (1.0 - p))
    return np.where(np.isinf(theta), np.inf, np.maximum(q, 0.0))


def min_servers(rate_per_s, service_s, quantile, max_wait_s, ca2=1.0, cs2=1.0, limit: int = 100_000) -> int:
    """Fewest servers c (scalar inputs) whose p-quantile wait is ≤ ``max_wait_s``; -1 past ``limit``.

    Starts at the stability bound ceil(λS) and doubles, then bisects: the quantile is
    non-increasing in c.
    """
    load = float(rate_per_s) * float(service_s)
    lo = max(1, int(np.floor(load)) + 1)

    def ok(c: int) -> bool:
        return float(wait_quantile_s(quantile, c, rate_per_s, service_s, ca2, cs2)) <= max_wait_s

    hi = lo
    while not ok(hi):
        if hi > limit:
            return -1
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo

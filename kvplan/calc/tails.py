"""Latency tails in closed form: compositions of waits and service times, and their percentiles.

The building blocks of ``kvplan plan``'s percentile latencies (the model that uses them is in
:mod:`kvplan.plans.fleet.model`):

- A queue's wait in the Erlang-C / Allen–Cunneen form (:mod:`kvplan.calc.queueing`) is an atom
  at zero plus an exponential tail: ``P(W > x) = C · exp(−x / θ)``.
- Two such waits in tandem (a decode slot, then the prefill queue) add; with W1, W2
  independent, ``P(W1 + W2 <= x)`` is

      (1 − C1)(1 − C2) + (1 − C1) C2 E2(x) + C1 (1 − C2) E1(x) + C1 C2 H(x)

  with ``Ek(x) = 1 − exp(−x/θk)`` and the hypoexponential ``H(x) = 1 − (θ1 e^(−x/θ1) −
  θ2 e^(−x/θ2)) / (θ1 − θ2)`` (``1 − e^(−x/θ)(1 + x/θ)`` when θ1 = θ2).
- TTFT = waits + own service S: ``P(TTFT <= t) = E_S[P(W1 + W2 <= t − S)]``, the expectation
  taken over equally weighted points of S's distribution (quantile points of the prompt length).
- Heavy-tailed service (long prompts, attention ∝ S²) makes the wait's tail subexponential:
  ``P(W > x) ~ ρ/(1 − ρ) · P(S_e > x)`` for one server, S_e the equilibrium residual of S; the
  wait's tail is taken as the larger of that and the exponential one.
- A lognormal with a given mean m and variance v: ``σ² = ln(1 + v/m²)``, ``μ = ln m − σ²/2``;
  a mixture of them (one per output length) is the TPOT distribution.
- Percentiles of any of these CDFs by bisection (the CDFs are monotone); vectorised over the
  quantiles, optionally bracketed first by vectorised evaluations over candidates (:func:`invert_cdf`),
  which returns the same bisection's answer in fewer evaluations.
- Mixtures over equally likely points are evaluated once per distinct point, weighted by its share
  (:func:`distinct`): a fixed prompt length is one service time, not 256 copies of it.

Also a scalar Erlang-C fast enough for tens of thousands of servers (the numpy version in
``queueing`` loops once per server over arrays, which is slow for a fleet's decode slots).
"""

from __future__ import annotations

import math

import numpy as np

_SQRT2 = math.sqrt(2.0)


def erfc(x):
    """Complementary error function, fractional error < 1.2e-7 everywhere (Numerical Recipes ``erfcc``)."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    ans = t * np.exp(poly)
    return np.where(x >= 0, ans, 2.0 - ans)


def normal_cdf(x):
    """Φ(x) = erfc(−x/√2)/2."""
    return 0.5 * erfc(-np.asarray(x, dtype=np.float64) / _SQRT2)


def lognormal_from_moments(mean, variance):
    """(μ, σ) of the lognormal with this mean and variance: σ² = ln(1 + v/m²), μ = ln m − σ²/2."""
    m = np.asarray(mean, dtype=np.float64)
    v = np.maximum(np.asarray(variance, dtype=np.float64), 0.0)
    sigma2 = np.log1p(v / (m * m))
    return np.log(m) - sigma2 / 2.0, np.sqrt(sigma2)


def distinct(points):
    """(values, weights) of equally likely points: the distinct values and the share of points at each.

    A mixture over equally likely points equals the weighted mixture over the distinct ones (a fixed
    length gives one value, not 256): the CDFs below take ``weights`` to evaluate each value once.
    """
    values, counts = np.unique(np.asarray(points, dtype=np.float64).ravel(), return_counts=True)
    return values, counts / counts.sum()


def _average(values, weights):
    """The mean over the last axis, or with ``weights`` (summing to 1) the weighted mean."""
    return values.mean(axis=-1) if weights is None else (values * weights).sum(axis=-1)


def lognormal_mixture_cdf(t, mu, sigma, weights=None, floor: float = 0.0):
    """``mean_j Φ((ln t − μ_j)/σ_j)``: equally weighted lognormals (σ_j = 0 is a point mass at e^μ_j);
    ``weights``: the lognormals' shares instead (:func:`distinct`). ``floor``: the variable is max(floor, X),
    so the CDF is 0 below it (the mass the lognormals put there sits at the floor)."""
    below = np.asarray(t, dtype=np.float64) < floor
    t = np.asarray(t, dtype=np.float64)[..., None]
    mu, sigma = np.asarray(mu, dtype=np.float64), np.asarray(sigma, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.log(np.maximum(t, 1e-300)) - mu) / sigma
    z = np.where(sigma > 0, z, np.where(np.log(np.maximum(t, 1e-300)) >= mu, np.inf, -np.inf))
    return np.where(below, 0.0, _average(normal_cdf(z), weights))


def both_waits_cdf(xp, theta1, theta2, e1, e2):
    """``P(W1 + W2 <= x)`` for ``x = xp >= 0`` given that both wait, ``Wk`` exponential of mean ``θk`` and
    ``ek = 1 − e^(−x/θk)`` (its CDF): the hypoexponential CDF, Erlang-2 where the means are equal, ``e1·e2`` where a
    mean is 0 (that wait is none), 0 where one is infinite."""
    if not (math.isfinite(theta1) and math.isfinite(theta2)):
        return np.zeros_like(xp)
    if theta1 <= 0 or theta2 <= 0:
        return e1 * e2
    if abs(theta1 - theta2) <= 1e-9 * max(theta1, theta2):
        return 1.0 - np.exp(-xp / theta1) * (1.0 + xp / theta1)
    return 1.0 - (theta1 * np.exp(-xp / theta1) - theta2 * np.exp(-xp / theta2)) / (theta1 - theta2)


def tandem_wait_cdf(x, c1, theta1, c2, theta2):
    """``P(W1 + W2 <= x)`` for independent waits ``P(Wk > x) = Ck e^(−x/θk)`` (0 for x < 0)."""
    x = np.asarray(x, dtype=np.float64)
    xp = np.maximum(x, 0.0)

    def expo(theta):
        if not math.isfinite(theta):
            return np.zeros_like(xp)
        if theta <= 0:
            return np.ones_like(xp)
        return -np.expm1(-xp / theta)

    e1, e2 = expo(theta1), expo(theta2)
    both = both_waits_cdf(xp, theta1, theta2, e1, e2)
    cdf = (1 - c1) * (1 - c2) + (1 - c1) * c2 * e2 + c1 * (1 - c2) * e1 + c1 * c2 * both
    return np.where(x < 0, 0.0, np.clip(cdf, 0.0, 1.0))


def wait_plus_service_cdf(t, service_points, c1, theta1, c2, theta2, heavy=None, weights=None):
    """``P(W1 + W2 + S <= t)`` with S equally likely to be each of ``service_points`` (with ``weights``:
    S is ``service_points[j]`` with probability ``weights[j]``, :func:`distinct`).

    ``heavy(x)``, when given, is a subexponential tail for the waits, ``P(W1 + W2 > x) >= heavy(x)``
    (see :func:`equilibrium_tail`): the CDF is capped at ``1 − heavy``.
    """
    t = np.asarray(t, dtype=np.float64)[..., None]
    x = t - np.asarray(service_points, dtype=np.float64)
    cdf = tandem_wait_cdf(x, c1, theta1, c2, theta2)
    if heavy is not None:
        cdf = np.where(x < 0, 0.0, np.minimum(cdf, 1.0 - np.minimum(heavy(np.maximum(x, 0.0)), 1.0)))
    return _average(cdf, weights)


def equilibrium_tail(samples):
    """``x → P(S_e > x) = E[(S − x)⁺] / E[S]``: the tail of the residual of a service S given by samples.

    For M/G/1 with subexponential S the wait's tail is ``P(W > x) ~ ρ/(1 − ρ) · P(S_e > x)``
    (Pakes 1975; Embrechts & Veraverbeke 1982), heavier than any exponential.
    """
    s = np.sort(np.asarray(samples, dtype=np.float64))
    total = s.sum()
    after = total - np.concatenate(([0.0], np.cumsum(s)))  # Σ of samples from index k on

    def tail(x):
        x = np.asarray(x, dtype=np.float64)
        k = np.searchsorted(s, x, side="right")
        return np.maximum(after[k] - x * (s.size - k), 0.0) / total if total > 0 else np.zeros_like(x)
    return tail


def invert_cdf(cdf, quantiles, lo: float, hi: float, iterations: int = 80, rounds: int = 0, jumps=None):
    """Smallest t in [lo, hi] (to bisection precision) with ``cdf(t) >= q``, for each q; ∞ if cdf(hi) < q.

    Bisects in log space when ``lo > 0`` (latencies span decades), linearly otherwise.

    ``rounds`` > 0 first brackets each quantile with vectorised evaluations (:func:`_bracket`: per
    round one call of ``cdf`` on a set of candidates per q, a uniform grid across the bracket plus a
    cluster around its interpolated root, and the ``jumps``, where the CDF is known to jump, inside
    it), then runs the same bisection, evaluating ``cdf`` only at midpoints inside the bracket: the
    CDF is monotone, so a midpoint at or above a point where ``cdf >= q`` passes and one at or below
    a point where ``cdf < q`` fails without an evaluation. The answer is the plain bisection's, in
    far fewer evaluations of ``cdf``. Where the CDF is not exactly monotone in floating point
    (next to a jump read back through ``log``) an inferred midpoint can fall on the other side,
    and the answer is the plain bisection's neighbour, one bisection step away (its own precision).
    """
    q = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    log = lo > 0
    a = np.full(q.shape, math.log(lo) if log else lo)
    b = np.full(q.shape, math.log(hi) if log else hi)
    top = cdf(np.exp(b) if log else b)
    below, above = np.full(q.shape, -np.inf), np.full(q.shape, np.inf)
    if rounds > 0:
        below, above = _bracket(cdf, q, a.copy(), b.copy(), log, rounds, jumps, top)
    return _bisect(cdf, q, a, b, log, below, above, top, iterations, known_in_t=False)


def _bisect(cdf, q, a, b, log: bool, below, above, top, iterations: int, known_in_t: bool):
    """The bisection of :func:`invert_cdf` and :func:`invert_staircase` on [a, b] (log space when ``log``): a
    midpoint at or above ``above`` passes, one at or below ``below`` fails, without an evaluation (``known_in_t``:
    those bounds are times; else points of the bisection's own space); ∞ where ``top`` = cdf(hi) is below q."""
    for _ in range(iterations):
        mid = (a + b) / 2
        at = (np.exp(mid) if log else mid) if known_in_t else mid
        ok = at >= above
        need = ~ok & (at > below)
        if need.any():
            ok[need] = cdf(np.exp(mid[need]) if log else mid[need]) >= q[need]
        b = np.where(ok, mid, b)
        a = np.where(ok, a, mid)
    out = np.exp(b) if log else b
    return np.where(top >= q - 1e-12, out, np.inf)



STAIRCASE_MARGIN = 1e-9  # a value this far from q decides a comparison (far above the CDF's floating-point noise)
STAIRCASE_ROUNDS = 6     # rounds of probes at the staircase's jumps before the bisection


def invert_staircase(cdf, quantiles, lo: float, hi: float, points, masses, iterations: int = 80,
                     rounds: int = STAIRCASE_ROUNDS, margin: float = STAIRCASE_MARGIN):
    """:func:`invert_cdf`'s plain bisection (``rounds`` = 0), its answer, for a CDF that jumps at ``points`` and lies
    below their staircase, ``cdf(t) <= Σ_{points_j <= t} masses_j`` (a mixture of waits after equally likely service
    times: each point's share is 0 before it, at most its mass after).

    The bisection skips an evaluation where a known value decides it: t at or above a point where cdf >= q + margin
    passes, t at or below one where cdf < q − margin (or the staircase is) fails, a monotone CDF's ordering with a
    margin far above its rounding noise, so every comparison is the plain bisection's own. The known values come from
    ``rounds`` of probes, each one call of ``cdf``: per q a jump and the float below it, the jump first where the
    staircase reaches q, then where it reaches q plus the deficit (staircase − cdf) last seen, until q falls between a
    jump and the float below it. Where the root lies between jumps the bisection evaluates as usual inside them.
    """
    q = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    log = lo > 0
    a = np.full(q.shape, math.log(lo) if log else lo)
    b = np.full(q.shape, math.log(hi) if log else hi)
    t_hi = np.exp(b) if log else b
    top = cdf(t_hi)
    order = np.argsort(points, kind="stable")
    points = np.asarray(points, dtype=np.float64)[order]
    stairs = np.cumsum(np.asarray(masses, dtype=np.float64)[order])
    below = np.full(q.shape, -np.inf)   # t <= below: cdf(t) < q
    above = np.where(top >= q + margin, t_hi, np.inf)  # t >= above: cdf(t) >= q
    first = np.searchsorted(stairs, q - margin, side="left")  # the staircase is below q − margin before this jump
    below = np.where(first < points.size, np.nextafter(points[np.minimum(first, points.size - 1)], -np.inf), np.inf)
    guess = np.searchsorted(stairs, q, side="left")
    for _ in range(rounds):
        valid = (guess >= 0) & (guess < points.size)
        at = points[np.clip(guess, 0, points.size - 1)]
        live = valid & (at > below) & (at < above) & (np.nextafter(below, np.inf) < above)
        if not live.any():
            break
        rows = np.flatnonzero(live)
        at, g, qr = at[rows], guess[rows], q[rows]
        before = np.nextafter(at, -np.inf)
        values = np.asarray(cdf(np.concatenate([before, at])), dtype=np.float64)
        f_before, f_at = values[:rows.size], values[rows.size:]
        below[rows] = np.maximum(below[rows], np.where(f_at < qr - margin, at,
                                                       np.where(f_before < qr - margin, before, -np.inf)))
        above[rows] = np.minimum(above[rows], np.where(f_before >= qr + margin, before,
                                                       np.where(f_at >= qr + margin, at, np.inf)))
        # the next jump to try: where the staircase less the deficit (staircase − cdf) last seen reaches q
        higher = np.maximum(np.searchsorted(stairs, qr + np.maximum(stairs[g] - f_at, 0.0), side="left"), g + 1)
        lower = np.minimum(np.searchsorted(stairs, qr + np.maximum(stairs[np.maximum(g - 1, 0)] - f_before, 0.0),
                                           side="left"), g - 1)
        done = ((f_before < qr) & (f_at >= qr)) | (np.abs(f_at - qr) < margin) | (np.abs(f_before - qr) < margin)
        guess[rows] = np.where(done, -1, np.where(f_at < qr, higher, lower))
    return _bisect(cdf, q, a, b, log, below, above, top, iterations, known_in_t=True)

BRACKET_GRID = 8                                         # uniform candidates per round: the bracket shrinks >= 9×
BRACKET_CLUSTER = (0.1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8)  # ± offsets (× the bracket) around the interpolated root
BRACKET_JUMPS = 8                                        # jump points per round, the nearest the root estimate


def _bracket(cdf, q, lower, upper, log: bool, rounds: int, jumps, top):
    """(below, above) per q, in the bisection's space: points with ``cdf(below) < q <= cdf(above)``.

    ``lower``/``upper`` start at the bisection's ends (cdf there taken as 0 and ``top``); each round
    evaluates every q's candidates in one call and keeps the tightest pair.
    """
    n = q.size
    f_lo, f_hi = np.zeros(n), np.asarray(top, dtype=np.float64).copy()
    below, above = np.full(n, -np.inf), np.where(f_hi >= q, upper, np.inf)
    jumps = None if jumps is None else np.unique(np.asarray(jumps, dtype=np.float64))
    if jumps is not None and log:
        jumps = np.log(jumps[jumps > 0])
    grid = (np.arange(1, BRACKET_GRID + 1) / (BRACKET_GRID + 1))[None, :]
    offsets = np.array([0.0, *BRACKET_CLUSTER, *(-d for d in BRACKET_CLUSTER)])[None, :]
    for _ in range(rounds):
        width = upper - lower
        live = (f_hi >= q) & (width > 0)
        if not live.any():
            break
        share = np.clip((q - f_lo) / np.where(f_hi > f_lo, f_hi - f_lo, 1.0), 0.0, 1.0)
        root = (lower + share * width)[:, None]
        parts = [lower[:, None] + grid * width[:, None], root + offsets * width[:, None]]
        if jumps is not None and jumps.size:
            near = np.argsort(np.abs(jumps[None, :] - root), axis=1)[:, :BRACKET_JUMPS]
            at = jumps[near]
            parts += [at, np.nextafter(at, -np.inf)]
        points = np.concatenate(parts, axis=1)
        inside = (points > lower[:, None]) & (points < upper[:, None]) & live[:, None]
        if not inside.any():
            break
        rows, cols = np.nonzero(inside)
        x = points[rows, cols]
        values = np.asarray(cdf(np.exp(x) if log else x), dtype=np.float64)
        passed = values >= q[rows]
        for i, xi, fi, ok in zip(rows.tolist(), x.tolist(), values.tolist(), passed.tolist()):
            if ok and xi < upper[i]:
                upper[i], f_hi[i], above[i] = xi, fi, min(above[i], xi)
            elif not ok and xi > lower[i]:
                lower[i], f_lo[i], below[i] = xi, fi, max(below[i], xi)
    return below, above


def erlang_c_scalar(servers: int, offered_load: float) -> float:
    """P(wait) in M/M/c for one (c, a): the Erlang-B recursion in plain floats, then C = B / (1 − ρ(1 − B)).

    Same formula as :func:`kvplan.calc.queueing.erlang_c`, O(c) float operations instead of O(c)
    array passes; 1 where ρ >= 1.
    """
    c, a = int(servers), float(offered_load)
    if c < 1 or a >= c:
        return 1.0
    if a <= 0:
        return 0.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
        if b < 1e-300:
            return 0.0
    rho = a / c
    return min(max(b / (1.0 - rho * (1.0 - b)), 0.0), 1.0)


def wait_tail(servers: int, rate_per_s: float, service_s: float, ca2: float, cs2: float) -> tuple[float, float]:
    """(C, θ) of the wait's tail ``P(W > x) = C e^(−x/θ)``: Erlang-C, θ = (ca² + cs²)/2 / (c/S − λ).

    The same Allen–Cunneen form as :func:`kvplan.calc.queueing.wait_quantile_s`; (1, ∞) when unstable.
    """
    if service_s <= 0 or rate_per_s <= 0:
        return 0.0, 0.0
    drain = servers / service_s - rate_per_s
    if drain <= 0:
        return 1.0, math.inf
    return erlang_c_scalar(servers, rate_per_s * service_s), (ca2 + cs2) / 2.0 / drain

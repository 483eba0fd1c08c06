"""The wait before a prompt's own step, as the engine schedules it (:mod:`kvplan.plans.fleet.model`).

A step carries every decoder and then the prompts waiting when it starts, up to its token budget
(vLLM ``max_num_batched_tokens``, chunked prefill) and ``max_num_seqs`` (vLLM V1 ``vllm/v1/core/sched/scheduler.py``
``Scheduler.schedule``: the running requests first, then "Next, schedule the WAITING requests" while the token
budget lasts and fewer than max_num_seqs run; :mod:`kvplan.sim.engine` does the same). A prompt that
arrives while a step runs therefore waits the rest of that step and is then in the next one, with every prompt
routed to its instance in the meantime; it waits longer only when the prompt tokens ahead of it fill the next
step's budget. So the wait is a residual step plus the joiners' work, V, and a queue forms only for the part of
the prefill demand the budget cannot take, W_b. Notation as in :mod:`kvplan.plans.fleet.packing`: λ_i the rate per
instance, t the decode step of the batch B̄, Z = X + π what each prompt adds to a step (E[Z] = z₁, E[Z²] = z₂),
ρ_P the prefill utilisation (the share of time an instance is in a step with prompt work), N the instances,
J = ρ_P^(N − 1) the chance a later arrival is routed to a busy instance (join-shortest-queue), ψ the share of a
joiner that fits, r = λ_i·J·ψ the joiners' rate.

The joiners over a wait w: J_w = Σ_{j ≤ M} Z_j, M ~ Poisson(r w): an atom at 0 (e^(−rw)) and, given M >= 1, a
lognormal with the compound Poisson's conditional moments (mean r w z₁ / (1 − e^(−rw)), second moment
(r w z₂ + (r w z₁)²) / (1 − e^(−rw))).

An arrival finds (independent instances, each busy with probability ρ_P):

    an instance with no prompt (probability 1 − ρ_P^N): the router sends it there. That instance has been free
        since its last prompt's step ended, for F, and runs decode steps of length t back to back since then
        (with probability e^(−B̄) it has no decoders and starts at once: V = 0). Each free period ends with the
        arrival that takes it: λ_i (1 − ρ_P^N) of them a second per instance share its time fraction 1 − ρ_P, so
        F is taken exponential with mean  f̄ = (1 − ρ_P) / (λ_i (1 − ρ_P^N))  (exact for one instance: 1/λ_i).
        The prompt waits the rest of the decode step under way, R = t − (F mod t), whose CDF is
            P(R <= r) = 1 − (1 − e^(−(t − r)/f̄)) / (1 − e^(−t/f̄)),   0 <= r <= t,
            E[R] = t − f̄ + t / (e^(t/f̄) − 1)
        (uniform for f̄ >> t, as for a lone instance at light load; R → t for f̄ << t, when a JSQ router hands the
        arrival to an instance the moment its last prompt finished), and V = R + J_R.
    every instance with prompt work (probability ρ_P^N): it waits the rest of the mixed step under way, U·s̃ (U
        uniform), s̃ that step length-biased, and its own step also carries the prompts routed there during the
        step: V = U·s̃ + J_s̃. The mixed step s = c₀ + Σ_{j ≤ K} Z_j (c₀ the decoders' part, K >= 1 the
        zero-truncated Poisson(μ) prompts of a step, μ = k_p − 1: E[K] = k_s, E[K(K − 1)] = k_s μ) has
            E[s] = c₀ + k_s z₁,   Var[s] = (k_s (z₂ − z₁²) + Var[K] z₁²) / (1 − (r z₁)²),   Var[K] = k_s (1 + μ) − k_s²
        (the 1/(1 − (r z₁)²): a step's prompts are the arrivals during the step before, so a long step makes the
        next one long, Var[s] = (r z₁)² Var[s] + the step's own spread at stationarity), and is taken lognormal
        with those moments (m, σ), so s̃ is lognormal (m + σ², σ); no step is longer than a full one (its budget
        full of prompt tokens): s̃ <= s_full, E[min(s̃, s_full)] in closed form (:func:`capped_biased_mean`).

    E[V] = P(decode) E[R] (1 + r z₁) + ρ_P^N E[min(s̃, s_full)] (½ + r z₁).

The budget queue: a step takes at most C_b = max_num_batched_tokens − B̄ prompt tokens, and a step with its
budget full lasts s_full, so while prompts queue beyond the budget the instance serves them as a queue whose
service is steps: a prompt needs ω = ISL · s_full / C_b of them, its own prefill S (full chunk steps) when
ISL > C_b (utilisation ρ_b = λ_i E[ω]; ρ_b >= 1: the budget cannot take the prompts, ``prefill_compute``). The work
W of that queue ahead of a prompt is taken Allen–Cunneen over the N instances, P(W > x) = C e^(−x/θ),
θ = (ca² + cs²(ω))/2 / (N/E[ω] − λ). The prompt's own step takes the first s_full of it beside the prompt, so the
prompt waits whole extra steps only when W > s_full, with probability C_b = C e^(−s_full/θ), and then a full step
and, memoryless, an exponential rest of mean θ: W_b = 0, or s_full + Exp(θ) with probability C_b. Where long
prompts make ω heavy-tailed, its tail is at least C·P(ω_e > (1 − ρ_b)(x + s_full))^N (:func:`heavy_tail`).

TTFT = W_slot + W_b + V + S(ISL) + d, with W_slot, W_b and V independent (:func:`ttft_cdf`).

Assumptions: Poisson arrivals per instance for the joiners and the free periods (a trace's bursts enter through
W_b's Allen–Cunneen factor only), instances busy independently, the mean packing of
:mod:`~kvplan.plans.fleet.packing` for K, lognormal steps and joiners' work, and one step of its own for a prompt
within the budget (a longer one is in S's several chunk steps, the work ahead of it in W_b).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from kvplan.calc import tails

EDGES = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 1.0])
#                                      each branch's probability bins: finer in the tail, where TTFT p99 lies
STEP_POINTS, UNIFORM_POINTS, JOIN_POINTS = 64, 32, 16  # s̃, U and joiners' work points whose sums give the quantiles
_STEP_Z = np.array([NormalDist().inv_cdf(q) for q in (np.arange(STEP_POINTS) + 0.5) / STEP_POINTS])
_UNIFORM = (np.arange(UNIFORM_POINTS) + 0.5) / UNIFORM_POINTS
_JOIN_Q = (np.arange(JOIN_POINTS) + 0.5) / JOIN_POINTS
_MIDS = (EDGES[:-1] + EDGES[1:]) / 2


def _quantiles(values: np.ndarray) -> np.ndarray:
    """``values`` (equally likely) at the probabilities :data:`_MIDS`, as ``np.quantile`` interpolates them (one sort)."""
    ordered = np.sort(values.ravel())
    at = _MIDS * (ordered.size - 1)
    low = np.floor(at).astype(int)
    high = np.minimum(low + 1, ordered.size - 1)
    return ordered[low] + (at - low) * (ordered[high] - ordered[low])


def free_period_s(rho: float, lam_i: float, servers: int) -> float:
    """f̄ = (1 − ρ_P) / (λ_i (1 − ρ_P^N)): the mean time an instance stays without a prompt (module docstring)."""
    if lam_i <= 0:
        return math.inf
    rho = min(max(rho, 0.0), 1.0 - 1e-12)
    return (1 - rho) / (lam_i * -math.expm1(servers * math.log(rho))) if rho > 0 else 1 / lam_i


def decode_residual(t: float, free_s: float, q: np.ndarray) -> np.ndarray:
    """R at probabilities ``q``: the rest of the decode step under way when the free period F ~ Exp(f̄) ends,
    R = t − (F mod t), from P(F mod t <= y) = (1 − e^(−y/f̄)) / (1 − e^(−t/f̄)) on [0, t]."""
    q = np.asarray(q, dtype=np.float64)
    if not math.isfinite(free_s) or t / free_s < 1e-9:
        return t * q                  # F mod t uniform: R uniform on [0, t]
    return t + free_s * np.log1p(-(1 - q) * -math.expm1(-t / free_s))


def mixed_step(c0: float, z1: float, z2: float, k_s: float, mu: float) -> tuple[float, float]:
    """(E[s], Var[s]) of a mixed step s = c₀ + Σ_{j ≤ K} Z_j, K zero-truncated Poisson(μ) with mean k_s."""
    var_k = max(k_s * (1 + mu) - k_s * k_s, 0.0)
    return c0 + k_s * z1, max(k_s * (z2 - z1 * z1), 0.0) + var_k * z1 * z1


def normal_quantile(p) -> np.ndarray:
    """Φ⁻¹(p), vectorised (Acklam's rational approximation, relative error < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-300, 1 - 1e-16)
    q = np.minimum(p, 1 - p)
    r = np.sqrt(-2 * np.log(q))
    tail = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / \
        ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
    u = p - 0.5
    w = u * u
    body = (((((a[0] * w + a[1]) * w + a[2]) * w + a[3]) * w + a[4]) * w + a[5]) * u / \
        (((((b[0] * w + b[1]) * w + b[2]) * w + b[3]) * w + b[4]) * w + 1)
    return np.where(q < 0.02425, np.where(p < 0.5, tail, -tail), body)


def joiners(span: np.ndarray, rate: float, z1: float, z2: float) -> np.ndarray:
    """Quantile points (last axis, :data:`JOIN_POINTS`) of the joiners' work over a wait of ``span``: Σ_{j ≤ M} Z_j,
    M ~ Poisson(rate·span), an atom at 0 (e^(−rate·span)) and, given M >= 1, a lognormal with the compound
    Poisson's conditional moments (mean rate·span·z₁/(1 − p₀), second moment (rate·span·z₂ + (rate·span·z₁)²)/(1 − p₀))."""
    m = np.asarray(span, dtype=np.float64)[..., None] * rate
    none = np.exp(-m)
    some = -np.expm1(-m)
    if z1 <= 0:
        return np.zeros(m.shape[:-1] + (JOIN_POINTS,))
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(m > 0, some / m, 1.0)                      # (1 − e^(−m))/m, 1 as m → 0
        mean = z1 / np.where(m > 0, per, 1.0)                     # m z₁ / (1 − e^(−m))
        spread = np.maximum(per * z2 / (z1 * z1) + some, 1.0)     # E[J² | M >= 1] / E[J | M >= 1]²
        sigma = np.sqrt(np.log(spread))
        z = normal_quantile((_JOIN_Q - none) / np.maximum(some, 1e-300))
        values = np.exp(np.log(mean) - sigma * sigma / 2 + sigma * z)
    return np.where((_JOIN_Q > none) & (m > 0), values, 0.0)


def busy_points(mean: float, var: float, rate: float, z1: float, z2: float, cap: float) -> np.ndarray:
    """V of the busy branch at the mid-probability of each of :data:`EDGES`' bins: V = U·s̃ + the joiners' work over
    s̃, s̃ the length-biased lognormal step (E[s], Var[s]) capped at ``cap``."""
    sigma2 = math.log1p(var / (mean * mean)) if mean > 0 else 0.0
    mu_biased = math.log(max(mean, 1e-300)) + sigma2 / 2           # ln E[s] − σ²/2 + σ²: the length-biased shift
    steps = np.minimum(np.exp(mu_biased + math.sqrt(sigma2) * _STEP_Z), cap)
    values = steps[:, None, None] * _UNIFORM[None, :, None] + joiners(steps, rate, z1, z2)[:, None, :]
    return _quantiles(values)


def free_points(t: float, free_s: float, rate: float, z1: float, z2: float) -> np.ndarray:
    """V of the free branch at the mid-probability of each of :data:`EDGES`' bins: V = R + the joiners' work over R."""
    residual = decode_residual(t, free_s, _UNIFORM)
    values = residual[:, None] + joiners(residual, rate, z1, z2)
    return _quantiles(values)


def wait_points(*, t: float, rho: float, lam_i: float, servers: int, batch: float, rate: float, c0: float,
                z1: float, z2: float, k_s: float, mu: float, cap: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(V points, their weights, E[R], E[V]): the wait before a prompt's own step (module docstring); ``rate`` =
    λ_i·J·ψ, the joiners' rate, ``cap`` = s_full. E[R] is the rest of the step under way alone; E[V] adds the
    joiners' work, rate·z₁ per second of it, in closed form (the points are a discretisation)."""
    rho = min(max(rho, 0.0), 1.0)
    all_busy = rho ** servers
    idle = (1 - all_busy) * math.exp(-batch)
    free = (1 - all_busy) - idle
    free_s = free_period_s(rho, lam_i, servers)
    mean, var = mixed_step(c0, z1, z2, k_s, mu)
    var /= 1 - min(rate * z1, 0.99) ** 2  # the previous steps' spread carried into this one (module docstring)
    busy = busy_points(mean, var, rate, z1, z2, cap) if all_busy > 0 and mean > 0 else np.zeros(_MIDS.size)
    bins = np.diff(EDGES)
    values = np.concatenate([[0.0], free_points(t, free_s, rate, z1, z2), busy])
    weights = np.concatenate([[idle], free * bins, all_busy * bins])
    kept = weights > 1e-12  # a branch an arrival all but never meets (no idle instance, no busy fleet) adds no points
    values, weights = values[kept], weights[kept] / weights[kept].sum()
    step_in_progress = capped_biased_mean(mean, var, cap)
    residual = free * decode_residual_mean(t, free_s) + all_busy * step_in_progress / 2
    return values, weights, float(residual), float(residual + rate * z1 * (residual + all_busy * step_in_progress / 2))


def decode_residual_mean(t: float, free_s: float) -> float:
    """E[R] = t − E[F mod t] = t − f̄ + t e^(−t/f̄) / (1 − e^(−t/f̄)) (t/2 as f̄ → ∞)."""
    if not math.isfinite(free_s) or t / free_s < 1e-6:
        return t / 2
    return t - free_s + t / math.expm1(t / free_s)


def capped_biased_mean(mean: float, var: float, cap: float) -> float:
    """E[min(s̃, cap)], s̃ length-biased lognormal (E[s], Var[s]) = lognormal(m + σ², σ), m = ln E[s] − σ²/2:
    E[s̃] Φ((ln cap − m − 2σ²)/σ) + cap (1 − Φ((ln cap − m − σ²)/σ)), E[s̃] = E[s] + Var[s]/E[s]."""
    if mean <= 0:
        return 0.0
    biased = mean + var / mean
    if not math.isfinite(cap):
        return biased
    sigma2 = math.log1p(var / (mean * mean))
    if sigma2 <= 0:
        return min(biased, cap)
    sigma, m = math.sqrt(sigma2), math.log(mean) + sigma2 / 2  # m: the length-biased lognormal's location
    below = float(tails.normal_cdf((math.log(cap) - m - sigma2) / sigma))
    return biased * below + cap * (1 - float(tails.normal_cdf((math.log(cap) - m) / sigma)))


def budget_work(isl: np.ndarray, prefill_s: np.ndarray, full_step_s: float, budget_tokens: float) -> np.ndarray:
    """ω at each prompt length: ISL·s_full/C_b of a full step for a prompt within the budget, its own prefill S
    (its chunk steps, full, attention over the context already prefilled) beyond it."""
    isl = np.asarray(isl, dtype=np.float64)
    return np.where(isl <= budget_tokens, isl * (full_step_s / budget_tokens), prefill_s)


def budget_queue(servers: int, lam: float, omega_mean: float, omega_second: float, full_step_s: float,
                 ca2: float) -> tuple[float, float, float, float]:
    """(C_b, θ, ρ_b, C) of the budget queue (module docstring): Allen–Cunneen over ``servers`` with service ω
    (C, θ), and only the wait beyond the full step that takes it counts, C_b = C e^(−s_full/θ); ρ_b = λ_i E[ω]."""
    if not math.isfinite(full_step_s) or omega_mean <= 0:
        return 0.0, 0.0, 0.0, 0.0
    c, theta = tails.wait_tail(servers, lam, omega_mean, ca2, max(omega_second / omega_mean**2 - 1.0, 0.0))
    rho = lam * omega_mean / servers
    if not math.isfinite(theta) or theta <= 0:
        return c, theta, rho, c
    return c * math.exp(-full_step_s / theta), theta, rho, c


def heavy_tail(omega: np.ndarray, c: float, rho: float, servers: int, full_step_s: float):
    """x → C·P(ω_e > (1 − ρ_b)(x + s_full))^N: the budget queue's heavy tail beyond the full step that takes it
    (None when there is no work). Exact for M/M/1 (ρ e^(−(1−ρ)x/E[ω])); for heavy-tailed ω it keeps the
    subexponential shape of the M/G/1 asymptotic ρ/(1 − ρ)·P(ω_e > x). At N > 1 a prompt waits that long only
    when every instance is held by a long prompt (the power N): a heuristic, checked by simulation."""
    if not np.any(omega):
        return None
    residual = tails.equilibrium_tail(omega)
    return lambda x: c * residual((1 - rho) * (x + full_step_s)) ** servers


def ttft_cdf(service: np.ndarray, weights: np.ndarray, slot_wait: tuple[float, float],
             budget_wait: tuple[float, float], full_step_s: float, heavy=None):
    """x → P(TTFT <= x): the points of V + S + d (``service``, ``weights``) after the slot wait (C₁, θ₁) and the
    budget queue, which is 0, or with probability C_b (``budget_wait`` = (C_b, θ)) a full step and an exponential
    rest of mean θ (memoryless beyond the step); ``heavy`` (:func:`heavy_tail`) caps the queue's tail.

    Each branch is :func:`kvplan.calc.tails.wait_plus_service_cdf` (budget wait 0, or 1 with θ) with the terms its
    probabilities zero dropped (:func:`_branch`): the same values, fewer passes over the points."""
    (c1, th1), (c2, th2) = slot_wait, budget_wait
    service = np.asarray(service, dtype=np.float64)
    later = service + full_step_s
    shifted = None if heavy is None else (lambda x: heavy(x + full_step_s))

    def cdf(x):
        t = np.asarray(x, dtype=np.float64)[..., None]
        base = _average(_branch(t - service, c1, th1, None, heavy), weights)
        if c2 <= 1e-12:  # no step overflows its budget (its share of any percentile is below 1e-12)
            return base
        return (1 - c2) * base + c2 * _average(_branch(t - later, c1, th1, th2, shifted), weights)
    return cdf



def ttft_quantiles(cdf, quantiles, service: np.ndarray, weights: np.ndarray, budget_wait: tuple[float, float],
                   full_step_s: float, hi: float, rounds: int) -> np.ndarray:
    """TTFT percentiles of :func:`ttft_cdf` by bisection (28 steps in log time from half the shortest service to
    ``hi``): bracketed over ``rounds`` rounds (:func:`kvplan.calc.tails.invert_cdf`), or with ``rounds`` = 0 the plain
    bisection's answer with its comparisons decided at the jumps where they can be (:func:`~kvplan.calc.tails.
    invert_staircase`: the cost of an evaluation grows with the service points, the number it saves does not)."""
    lo = max(float(service.min()) * 0.5, 1e-9)
    if rounds > 0:
        jumps = np.concatenate([service, service + full_step_s]) if budget_wait[0] > 0 else service
        return tails.invert_cdf(cdf, quantiles, lo, hi, iterations=28, rounds=rounds, jumps=jumps)
    return tails.invert_staircase(cdf, quantiles, lo, hi, *ttft_staircase(service, weights, budget_wait, full_step_s),
                                  iterations=28)

def ttft_staircase(service: np.ndarray, weights: np.ndarray, budget_wait: tuple[float, float],
                   full_step_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(points, masses) of the staircase above :func:`ttft_cdf` (:func:`kvplan.calc.tails.invert_staircase`): each
    service point's weight from that point on (its branch is 0 before, at most 1 after), × (1 − C_b) and at the
    point + s_full × C_b where the budget queue's branch is taken."""
    c2 = budget_wait[0]
    service = np.asarray(service, dtype=np.float64)
    if c2 <= 1e-12:
        return service, np.asarray(weights, dtype=np.float64)
    return np.concatenate([service, service + full_step_s]), np.concatenate([(1 - c2) * weights, c2 * weights])

def _average(values: np.ndarray, weights) -> np.ndarray:
    """The mean over the last axis, or the ``weights``-weighted one (as :mod:`kvplan.calc.tails` averages)."""
    return values.mean(axis=-1) if weights is None else (values * weights).sum(axis=-1)


def _expo(xp: np.ndarray, theta: float):
    """1 − e^(−x/θ) as :func:`kvplan.calc.tails.tandem_wait_cdf` takes it: 0 for θ = ∞, 1 for θ <= 0 (scalars)."""
    if not math.isfinite(theta):
        return 0.0
    if theta <= 0:
        return 1.0
    return -np.expm1(-xp / theta)


def _branch(x: np.ndarray, c1: float, th1: float, th2: float | None, heavy) -> np.ndarray:
    """:func:`kvplan.calc.tails.tandem_wait_cdf` at (C₁, θ₁, 0, 0) (``th2`` None) or (C₁, θ₁, 1, θ₂), capped by
    ``heavy`` as :func:`~kvplan.calc.tails.wait_plus_service_cdf` caps it, term for term: with C₂ = 0 its sum is
    (1 − C₁) + C₁·E₁(x), with C₂ = 1 it is (1 − C₁)·E₂(x) + C₁·H(x) (each term it drops is an exact 0)."""
    xp = np.maximum(x, 0.0)
    if th2 is None:
        cdf = 1.0 if c1 == 0 else (1 - c1) + c1 * _expo(xp, th1)
    else:
        e2 = _expo(xp, th2)
        if c1 == 0:
            cdf = e2
        else:
            cdf = (1 - c1) * e2 + c1 * tails.both_waits_cdf(xp, th1, th2, _expo(xp, th1), e2)
    negative = x < 0
    if heavy is None:
        return np.where(negative, 0.0, np.clip(cdf, 0.0, 1.0))
    cap = 1.0 - np.minimum(heavy(xp), 1.0)
    return np.where(negative, 0.0, cap if np.ndim(cdf) == 0 and cdf == 1.0 else np.minimum(np.clip(cdf, 0.0, 1.0), cap))

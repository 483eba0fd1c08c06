"""Prompt packing in the fleet model's mixed steps (:mod:`kvplan.plans.fleet.model`).

A step carries every decoder and then every prompt waiting when it starts (up to the token budget),
so the prompts that arrive while one step runs share the next (a gated batch server). Two figures
follow, each as a prompt or as a step counts them:

    μ   = λ_i · J · ψ · w: the others that share a prompt's step, w the mean length of the step in progress at
          an arrival (length-biased), J the chance that a later arrival is routed to the prompt's instance,
          ψ the share of it that fits the budget the prompt's last chunk leaves (:func:`join_room`)
    k_p = 1 + μ: prompts in a prompt's own step (it waits for the others' chunks too: own prefill
          S + (k_p − 1)·E[X + π])
    k_s = μ / (1 − e^(−μ)) = 1 / E[1/k_p]: prompts per mixed step (the others Poisson(μ)): the share
          of a step's decoders and dispatch that each of its prompts carries

w: an arrival finds a decode step of length t running with probability (1 − e^(−B̄))(1 − ρ_P), a mixed
step with probability ρ_P (the prefill utilisation), and then the mixed step it sees is length-biased,
E[s²]/E[s] over s = c₀ + Σ_{j ≤ K} (X_j + π), c₀ = E[S − X] − π, K prompts (E[K] = k_s,
E[K(K − 1)] = k_s (k_p − 1)). J = ρ_P^(c − 1) over c instances: the join-shortest-queue router sends a
prompt to an instance that already holds one only when every instance does, each busy with probability
ρ_P as if independent (1 for one instance).

π, the pair penalty (:func:`pair_penalty`): a step's linear layers and communication cost G(b + P) for
P prompt tokens beside b decoders, and G is not additive in P: a memory-bound decode step takes the
first prompt tokens at no cost (the weights are read anyway; the roofline's max(memory, compute)), and
beyond that knee the per-token cost still grows with the GEMMs' shapes. So two prompts in one step cost
π = E[G(b + P₁ + P₂) + G(b) − G(b + P₁) − G(b + P₂)] more than each alone, the E[X] that is measured
one prompt per step; a step of K prompts is charged (K − 1)·π (exact where G is a roofline with one
knee), so the decoders see X + π(1 − 1/k_s) per prompt. μ depends on ρ_P and ρ_P on k_s, and not monotonely (a
larger k_s shares more of each step, which lowers ρ_P and with it J): μ is the root of h(μ) = G(μ) − μ (:func:`_solve`).

The wait this packing implies (the rest of the step under way and the joiners' work, before a prompt's own
step) is :mod:`kvplan.plans.fleet.stepwait`'s.
"""

from __future__ import annotations

import math

import numpy as np

PACK_ROUNDS = 64    # at most this many regula-falsi rounds for μ …
PACK_TOLERANCE = 1e-10  # … until |h(μ)| <= this × (1 + μ)
WIDEN_ROUNDS = 40   # doublings of the bracket's far end (μ up to 2⁴⁰)
PAIR_STRIDE = 8     # the pair penalty's double sum takes every 8th of the 256 equally likely prompt lengths …
PAIR_BATCHES = 12   # … at 12 batches of the figures' grid


def pair_penalty(tokens: np.ndarray, token_cost: np.ndarray, b_grid: np.ndarray, chunk_tokens: int,
                 isl_points: np.ndarray) -> np.ndarray:
    """π(b) on ``b_grid`` (module docstring): ``token_cost`` the step of ``tokens`` (increasing) without attention,
    ``chunk_tokens`` the step's token budget (less the b decoders' tokens), ``isl_points`` equally likely prompt
    lengths (every :data:`PAIR_STRIDE`-th of them is taken). Computed at :data:`PAIR_BATCHES` batches of the grid
    and linear between them. A prompt at the budget fills its step (no pair); a pair beyond it spills the rest
    into the next step."""
    points = np.asarray(isl_points, dtype=np.float64)
    p = points[PAIR_STRIDE // 2::PAIR_STRIDE] if points.size >= 2 * PAIR_STRIDE else points
    grid = np.asarray(b_grid, dtype=np.float64)
    sub = grid[np.unique(np.round(np.linspace(0, grid.size - 1, min(PAIR_BATCHES, grid.size))).astype(int))]
    b = sub[:, None, None]
    c = np.maximum(chunk_tokens - b, 1.0)
    p1, p2 = np.minimum(p[None, :, None], c), np.minimum(p[None, None, :], c)
    both = p1 + p2
    def g(n):
        return np.interp(n, tokens, token_cost)
    penalty = g(b + np.minimum(both, c)) + g(b + np.maximum(both - c, 0.0)) - g(b + p1) - g(b + p2)
    return np.interp(grid, sub, np.maximum(penalty.mean(axis=(1, 2)), 0.0))


def join_room(b_grid: np.ndarray, chunk_tokens: int, isl_points: np.ndarray) -> np.ndarray:
    """ψ(b) on ``b_grid``: the share of a later prompt's tokens that fit beside a prompt's last chunk in its step,
    E[min(P₂, C − b − R₁) / P₂], R₁ what is left of P₁ for its last step (a prompt beyond the budget fills the
    steps before): the others join a prompt's step only as far as its budget allows (1 for short prompts)."""
    points = np.asarray(isl_points, dtype=np.float64)
    p = np.maximum(points[PAIR_STRIDE // 2::PAIR_STRIDE] if points.size >= 2 * PAIR_STRIDE else points, 1.0)
    c = np.maximum(chunk_tokens - np.asarray(b_grid, dtype=np.float64), 1.0)[:, None, None]
    last = p[None, :, None] - c * (np.ceil(p[None, :, None] / c) - 1)
    fits = np.minimum(p[None, None, :], np.maximum(c - last, 0.0)) / p[None, None, :]
    return fits.mean(axis=(1, 2))


def packing(lam_i, step, moments, penalty, busy, servers: int, room=1.0):
    """(k_p, k_s, ρ_P, x_eff) vectorised over batches (module docstring): ``step`` t, ``moments`` the sample
    moments of :func:`kvplan.plans.fleet.figures._sample_moments` (last axis), ``penalty`` π, ``busy`` the
    chance the decoders are running (1 − e^(−B̄)), ``servers`` the instances the router spreads over, ``room`` ψ
    (:func:`join_room`, the join rate's factor). ``x_eff`` = E[X] + π (1 − 1/k_s)."""
    m = np.asarray(moments, dtype=np.float64)
    t, pi, busy, room = (np.asarray(v, dtype=np.float64) for v in (step, penalty, busy, room))
    shape = np.broadcast_shapes(t.shape, pi.shape, busy.shape, room.shape, m.shape[:-1])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _solve(lam_i, t, m[..., 0], m[..., 3], m[..., 4], pi, busy, servers, room, np,
                      lambda v: np.full(shape, v, dtype=np.float64))


def packing_scalar(lam_i: float, step: float, prefill: float, extra: float, extra_second: float, penalty: float,
                   busy: float, servers: int, room: float = 1.0) -> tuple[float, float, float, float]:
    """:func:`packing` at one batch in plain floats (E[S], E[X], E[X²] for the moments): the search asks thousands."""
    return _solve(float(lam_i), float(step), float(prefill), float(extra), float(extra_second), float(penalty),
                  float(busy), servers, float(room), math, float)


def _solve(lam_i, t, s1, x1, x2, pi, busy, servers, room, xp, start):
    """The root of h(μ) = G(μ) − μ (module docstring) with ``xp`` = math (floats) or numpy (arrays), by regula falsi
    (the Illinois variant) in a bracket from μ = 0, where h >= 0, out to where h < 0: G need not be monotone (a
    larger k_s shares more of each step, which lowers ρ_P and with it the join chance), so a plain iteration of μ
    can cycle; h is continuous with one sign change."""
    scalar = xp is math
    where = (lambda c, x, y: x if c else y) if scalar else np.where
    smallest, largest = (min, max) if scalar else (np.minimum, np.maximum)
    d = s1 - x1                                    # a prompt's decoders' part and dispatch, alone
    c0 = largest(d - pi, 0.0)
    z1, z2 = x1 + pi, x2 + 2 * pi * x1 + pi * pi   # X + π: what each prompt of a step adds

    def share(mu):                                 # k_s = μ / (1 − e^(−μ)), 1 + μ/2 near 0
        return _per_step(mu) if scalar else np.where(mu > 1e-9, mu / -np.expm1(-np.maximum(mu, 1e-9)), 1 + mu / 2)

    def h(mu):
        k_s = share(mu)
        rho = smallest(lam_i * (x1 + pi * (1 - 1 / k_s) + d / k_s), 0.999)  # λ_i·S_q, the prefill utilisation
        mean = c0 + k_s * z1
        seen = (c0 * c0 + 2 * c0 * k_s * z1 + k_s * z2 + k_s * mu * z1 * z1) / largest(mean, 1e-300)
        return lam_i * room * rho ** (servers - 1) * (busy * (1 - rho) * t + rho * seen) - mu, rho

    a, b = start(0.0), start(1.0)
    fa, rho = h(a)
    none = fa <= 0                                  # h(0) = 0 (no arrivals, or no join chance): no packing
    fb, _ = h(b)
    for _ in range(WIDEN_ROUNDS if lam_i > 0 else 0):  # widen until h(b) < 0 (none: the prompts' own work saturates)
        if (fb < 0) if scalar else bool(np.all((fb < 0) | (fa <= 0))):
            break
        grow = (fb >= 0) & (fa > 0) if not scalar else fb >= 0
        a, fa = where(grow, b, a), where(grow, fb, fa)
        b = where(grow, 2 * b, b)
        fb = where(grow, h(b)[0], fb)
    mu = where(none, 0.0, b)
    for _ in range(PACK_ROUNDS if lam_i > 0 else 0):
        c = where(none, 0.0, (a * fb - b * fa) / where(fb != fa, fb - fa, 1.0))
        fc, _ = h(c)
        flip = fc * fb < 0
        a, fa = where(flip, b, a), where(flip, fb, fa / 2)
        b, fb, mu = c, fc, c
        if (abs(fc) <= PACK_TOLERANCE * (1 + c)) if scalar else bool(np.all(np.abs(fc) <= PACK_TOLERANCE * (1 + c))):
            break
    _, rho = h(mu)
    k_s = share(mu)
    return 1 + mu, k_s, rho, x1 + pi * (1 - 1 / k_s)


def _per_step(mu: float) -> float:
    """k_s = μ / (1 − e^(−μ)), 1 + μ/2 near 0."""
    return mu / -math.expm1(-mu) if mu > 1e-9 else 1 + mu / 2


def interference(moments, k: float, pen: float = 0.0) -> tuple[float, float]:
    """(E[X + p + Y/k], E[(X + p + Y/k)²]): what a prompt adds to the decoders' steps when k prompts share a step's
    eager dispatch Y and it pays p of pair penalty (moments as :func:`kvplan.plans.fleet.figures._sample_moments`)."""
    x1, x2 = float(moments[3]), float(moments[4])
    x1, x2 = x1 + pen, x2 + 2 * pen * x1 + pen * pen
    if len(moments) < 10:
        return x1, x2
    y1, y2, xy = float(moments[6]), float(moments[7]), float(moments[8]) + pen * float(moments[6])
    return x1 + y1 / k, x2 + 2 * xy / k + y2 / (k * k)

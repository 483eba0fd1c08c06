"""One instance's figures for the fleet model (:mod:`kvplan.plans.fleet.model`), independent of the arrival rate.

Step times on a batch grid from the deployment's step-time model (:class:`kvplan.calc.steptime.StepTimes`:
the per-operator pass by default, the roofline with ``--perf-model roofline``) and the KV-capacity
batch limits; the formulas are in :mod:`kvplan.plans.fleet.model`'s docstring:

    t(b)      decode step of b sequences (per attention-DP rank: the instance's step at dp·b) at L̄
    δ + γL̄    one more sequence at the decode context: E[t(B + 1) − t(B)], B ~ Poisson(b) (not one graph bucket edge);
              γ: one more token of context in the batch
    S, X      a prompt's chunked prefill beside b decoders (``mixed_chunk``) and its extra over b decode steps,
              less Y: the eager-prefill dispatch of its chunks' steps under --enforce-eager (a per-step constant
              the packed prompts of a step share, :func:`kvplan.calc.operators.eager_dispatch_s`; else 0)
    d         the engine's prefill dispatch once per request, TTFT only (kvplan.plans.sizing.dispatch)
    B_kv      the largest batch whose KV fits the pool at the 99th percentile: √B solves
              μ_k B + z σ_k √B = pool (z = Φ⁻¹(0.99))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kvplan.calc.steptime import StepTimes
from kvplan.plans.fleet.packing import join_room, pair_penalty

Z99 = 2.3263478740408408  # Φ⁻¹(0.99)


@dataclass
class InstanceFigures:
    """What one instance of the shape can do, independent of the arrival rate."""

    pool_bytes_per_gpu: float
    seq_bytes_per_gpu: np.ndarray          # k(C) of every request of the sample
    b_grid: np.ndarray
    step_s: np.ndarray                     # t(b) at the decode context, on b_grid
    extra_per_seq_s: np.ndarray            # δ + γ·L̄: one more sequence at the mean context, on b_grid
    per_token_s: np.ndarray                # γ: one more token of context in the batch, on b_grid
    prefill_s: np.ndarray                  # S at the equally likely ISL points with b decoders, (b_grid, points)
    moments: np.ndarray                    # over the whole sample, per b: E[S], E[S²], E[S·n], E[X], E[X²], E[S·X],
    #                                        E[Y], E[Y²], E[X·Y], E[S·Y] (Y: the chunks' eager dispatch, not in X)
    prefill_grid_s: np.ndarray             # S on the ISL grid (b_grid, isl_grid)
    extra_grid_s: np.ndarray               # X on the ISL grid
    prefill_alone_s: np.ndarray            # S at the ISL points with no decoders (b = 0)
    batch_cap: int                         # min(B_kv, max_num_seqs, chunk budget)
    batch_kv: int
    batch_kv_mean: int
    batch_kv_p99: int
    request_dispatch_s: float = 0.0        # d: the engine's prefill dispatch, once per request, in TTFT only
    pack_penalty_s: np.ndarray | None = None  # π: what a second prompt in a step adds beyond its E[X], on b_grid
                                           # (kvplan.plans.fleet.packing.pair_penalty); None: 0
    join_room: np.ndarray | None = None    # ψ: the share of a joining prompt that fits its step (packing.join_room)
    full_step_s: np.ndarray | None = None  # a step whose token budget is full: b decoders and C − b prompt tokens,
    #                                        on b_grid (the longest step a prompt waits for; None: no cap)
    chunk_tokens: int = 0                  # the step's token budget, max_num_batched_tokens (0: not tabulated)

    def _on_grid(self, values: np.ndarray | None, b, default: float):
        """``values`` (on b_grid) at batch (array) ``b``, linear between grid points; ``default`` where not tabulated."""
        if values is None:
            return np.full(np.shape(b), default)
        return np.interp(np.asarray(b, dtype=np.float64), self.b_grid, values)

    def room_at(self, b):
        """ψ at batch (array) ``b`` (1 where not tabulated)."""
        return self._on_grid(self.join_room, b, 1.0)

    def penalty_at(self, b):
        """π at batch (array) ``b`` (0 where not tabulated)."""
        return self._on_grid(self.pack_penalty_s, b, 0.0)

    def pack_at(self, b: float) -> tuple[float, float]:
        """(π, ψ) at one batch, as :meth:`penalty_at` and :meth:`room_at` (in floats: the search asks thousands)."""
        grid = self.b_grid
        b = min(max(float(b), float(grid[0])), float(grid[-1]))
        i = min(max(int(np.searchsorted(grid, b)) - 1, 0), len(grid) - 2)
        w = (b - grid[i]) / (grid[i + 1] - grid[i])
        pi = 0.0 if self.pack_penalty_s is None else (1 - w) * self.pack_penalty_s[i] + w * self.pack_penalty_s[i + 1]
        room = 1.0 if self.join_room is None else (1 - w) * self.join_room[i] + w * self.join_room[i + 1]
        return float(pi), float(room)

    def full_step_at(self, b: float) -> float:
        """The full step's length at one batch (∞ where not tabulated)."""
        return math.inf if self.full_step_s is None else float(np.interp(float(b), self.b_grid, self.full_step_s))

    def at(self, b: float):
        """(t, δ+γL̄, γ, S at the ISL points, sample moments) at batch b, linear in b between grid points."""
        mix = self._mixer(b)
        return (mix(self.step_s), mix(self.extra_per_seq_s), mix(self.per_token_s), mix(self.prefill_s),
                mix(self.moments))

    def decode_at(self, b: float):
        """(t, δ+γL̄, γ, sample moments) at batch b: :meth:`at` without the prefill points."""
        mix = self._mixer(b)
        return mix(self.step_s), mix(self.extra_per_seq_s), mix(self.per_token_s), mix(self.moments)

    def _mixer(self, b: float):
        """a → a at batch b, linear between the grid points around it (the ends beyond the grid)."""
        b = float(min(max(b, self.b_grid[0]), self.b_grid[-1]))
        i = min(max(int(np.searchsorted(self.b_grid, b)) - 1, 0), len(self.b_grid) - 2)
        lo, hi = self.b_grid[i], self.b_grid[i + 1]
        w = (b - lo) / (hi - lo)

        def mix(a):
            return (1 - w) * a[i] + w * a[i + 1]
        return mix

    def prefill_row(self, b: float) -> np.ndarray:
        """S on the ISL grid at batch b, linear in b between grid points."""
        row = float(np.interp(b, self.b_grid, np.arange(self.b_grid.size)))
        i = int(min(row, self.b_grid.size - 2))
        return (1 - (row - i)) * self.prefill_grid_s[i] + (row - i) * self.prefill_grid_s[i + 1]

    def step_and_moments(self, b) -> tuple[np.ndarray, np.ndarray]:
        """(t, sample moments) at each batch of the array ``b``, interpolated as :meth:`at` does."""
        b = np.asarray(b, dtype=np.float64)
        step = np.interp(b, self.b_grid, self.step_s)
        if b.shape == (1,):  # one batch (the occupancy iteration): its grid interval in floats
            return step, self._moments_at(float(b[0]))[None, :]
        return step, _interp_columns(b, self.b_grid, np.asarray(self.moments), self._moment_slopes)

    @cached_property
    def _moment_slopes(self) -> np.ndarray:
        """The moments' slopes between grid points, as np.interp takes them."""
        table = np.asarray(self.moments, dtype=np.float64)
        return (table[1:] - table[:-1]) / (self.b_grid[1:] - self.b_grid[:-1])[:, None]

    def _moments_at(self, x: float) -> np.ndarray:
        """:func:`_interp_columns` at one batch."""
        grid, table = self.b_grid, np.asarray(self.moments, dtype=np.float64)
        if x >= grid[-1]:
            return table[-1].copy()
        if x < grid[0]:
            return table[0].copy()
        j = min(int(np.searchsorted(grid, x, side="right")) - 1, grid.size - 2)
        if x == grid[j]:
            return table[j].copy()
        out = self._moment_slopes[j] * (x - grid[j]) + table[j]
        return out if np.all(np.isfinite(out)) else np.array([np.interp(x, grid, col) for col in table.T])


def _interp_columns(x: np.ndarray, grid: np.ndarray, table: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """``np.interp(x, grid, column)`` for every column of ``table`` at once (last axis), value for value: numpy's
    slope·(x − grid[j]) + table[j] between grid points (``slope`` per interval), table[j] at a grid point, the end
    rows beyond the ends."""
    j = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    left = grid[j]
    out = slope[j] * (x - left)[..., None] + table[j]
    out = np.where((x == left)[..., None], table[j], out)
    out = np.where((x >= grid[-1])[..., None], table[-1], np.where((x < grid[0])[..., None], table[0], out))
    if not np.all(np.isfinite(out)):  # numpy retries a non-finite value from the right end: take its own
        return np.stack([np.interp(x, grid, col) for col in table.T], axis=-1)
    return out

def instance_figures(cost, machine, tp: int, lengths, layout, pool_bytes_per_gpu: float,
                     max_num_seqs: int, chunk_tokens: int, dp: int = 1,
                     steps: StepTimes | None = None) -> InstanceFigures:
    """Step times on a batch grid and the KV-capacity batch limits (formulas in the module docstring);
    with ``dp`` > 1 one attention-DP rank's (module docstring, "Attention data parallelism").
    ``steps``: the deployment's step-time model (its ``dp`` is this ``dp``); None the roofline."""
    steps = steps if steps is not None else StepTimes(cost, machine, tp, dp)
    isl, osl = lengths.isl.astype(np.float64), lengths.osl.astype(np.float64)
    seq_bytes = np.asarray(layout.sequence_bytes(isl + osl, per_gpu=True), dtype=np.float64)
    mean_k, sd_k = float(seq_bytes.mean()), float(seq_bytes.std())
    if pool_bytes_per_gpu > 0 and mean_k > 0:
        root = (-Z99 * sd_k + math.sqrt((Z99 * sd_k) ** 2 + 4 * mean_k * pool_bytes_per_gpu)) / (2 * mean_k)
        batch_kv = int(math.floor(root * root + 1e-9))
    else:
        batch_kv = 0
    k_at = layout.sequence_bytes(np.array([lengths.context_mean, lengths.context_p99]), per_gpu=True)
    batch_kv_mean = int(pool_bytes_per_gpu // float(k_at[0])) if pool_bytes_per_gpu > 0 else 0
    batch_kv_p99 = int(pool_bytes_per_gpu // float(k_at[1])) if pool_bytes_per_gpu > 0 else 0
    cap = max(min(batch_kv, max_num_seqs, chunk_tokens // 2), 0)
    top = max(cap, 1)
    small = np.arange(0, min(top, 32) + 1, dtype=np.float64)
    b_grid = np.unique(np.concatenate([small, np.round(np.geomspace(1, top, 64)), [top, top + 1]]))
    ctx = lengths.decode_context
    dctx = max(64.0, ctx * 0.05)
    # δ + γL̄ (one more sequence) over the batch's own spread: E[t(B + 1) − t(B)] with B ~ Poisson(b), the
    # slope of E[t(B)] in b (poisson_slope). CUDA-graph padding makes the step jump at bucket edges; a one-step
    # difference there read the whole jump as the cost of one sequence (TPOT variance ×10 at some N and not at
    # N ± 1), and a secant over b ± √b still jumped as an edge entered or left its ends
    n = b_grid.size
    ints = np.arange(0.0, poisson_support(float(b_grid[-1])) + 2.0)
    probe = steps.decode_s(dp * np.concatenate([b_grid, b_grid, ints]),
                           np.concatenate([np.full(n, ctx), np.full(n, ctx + dctx), np.full(ints.size, ctx)]))
    step, longer, at_ints = probe[:n], probe[n:2 * n], probe[2 * n:]
    more = poisson_slope(b_grid, at_ints)
    per_token = (longer - step) / (dctx * np.maximum(b_grid, 1))
    grid = lengths.isl_grid
    chunk = np.maximum(chunk_tokens - b_grid, 1)[:, None]
    # the last column: a step with its budget full (b decoders beside C − b prompt tokens), in the same pass
    budget = chunk[:, 0].astype(np.float64)
    _, both = steps.mixed_chunk(b_grid[:, None], ctx, np.concatenate([np.broadcast_to(grid, (b_grid.size, grid.size)),
                                                                      budget[:, None]], axis=1), chunk)
    prefill, full_step = both[:, :-1], both[:, -1]
    dispatch = _chunk_dispatch(steps, b_grid[:, None], grid[None, :], chunk)
    extra = np.maximum(prefill - np.ceil(grid[None, :] / chunk) * np.where(b_grid > 0, step, 0.0)[:, None]
                       - dispatch, 0.0)
    moments = _sample_moments(lengths.grid_folds, prefill, extra, dispatch)
    room = join_room(b_grid, chunk_tokens, lengths.isl_points)
    penalty = pair_penalty(*_token_cost(steps, chunk_tokens + int(b_grid[-1]) + 1, ctx), b_grid, chunk_tokens,
                           lengths.isl_points)
    points = prefill[:, lengths.points_index]
    return InstanceFigures(
        pool_bytes_per_gpu=pool_bytes_per_gpu, seq_bytes_per_gpu=seq_bytes, b_grid=b_grid, step_s=step,
        extra_per_seq_s=more, per_token_s=per_token, prefill_s=points, moments=moments, prefill_grid_s=prefill,
        extra_grid_s=extra,
        prefill_alone_s=points[0],
        batch_cap=cap, batch_kv=batch_kv, batch_kv_mean=batch_kv_mean, batch_kv_p99=batch_kv_p99,
        request_dispatch_s=steps.request_dispatch_s, pack_penalty_s=penalty, join_room=room,
        full_step_s=np.asarray(full_step, dtype=np.float64), chunk_tokens=int(chunk_tokens),
    )



def poisson_support(mean: float) -> int:
    """The largest batch a Poisson(mean) occupancy reaches with non-negligible probability (mean + 8 sd + 8)."""
    return int(math.ceil(mean + 8.0 * math.sqrt(max(mean, 1.0)) + 8.0))


def poisson_weights(means, size: int) -> np.ndarray:
    """P(B = k) for B ~ Poisson(mean), k = 0 … size − 1, one row per mean (a mean of 0 puts all on k = 0)."""
    mu = np.atleast_1d(np.asarray(means, dtype=np.float64))[:, None]
    k = np.arange(size, dtype=np.float64)[None, :]
    log_k_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, size)))])[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.where(mu > 0, k * np.log(np.where(mu > 0, mu, 1.0)) - mu - log_k_factorial,
                         np.where(k == 0, 0.0, -np.inf))
    return np.exp(log_p)


def poisson_slope(means, values_at_ints) -> np.ndarray:
    """d/db E[f(B)], B ~ Poisson(b), = E[f(B + 1) − f(B)] (the Stein–Chen identity), from f at k = 0, 1, 2, ….

    The slope of f seen by an occupancy that is itself Poisson: smooth in b where f jumps (a CUDA-graph
    bucket edge), so a figure read from it moves continuously with the load. Rows of ``values_at_ints``
    beyond the support carry no weight; a non-finite difference (f infinite there) is left out and the
    rest renormalised."""
    f = np.asarray(values_at_ints, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        diff = f[1:] - f[:-1]
    w = poisson_weights(means, diff.size)
    ok = np.isfinite(diff)
    w = np.where(ok[None, :], w, 0.0)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (w * np.where(ok, diff, 0.0)[None, :]).sum(axis=1) / total
    return np.where(total > 0, out, np.inf)


def _token_cost(steps: StepTimes, n_max: int, context: float) -> tuple[np.ndarray, np.ndarray]:
    """(n, G(n)): a mixed step of n new tokens without attention, LM-head rows or host dispatch (the linear layers and
    communication a step's tokens share; per attention-DP rank, every rank alike), at every n up to 1,024 (the
    CUDA-graph sizes) and every 8th beyond."""
    from kvplan.calc.roofline import forward_pass

    n = np.unique(np.concatenate([np.arange(min(n_max, 1024) + 1.0), np.arange(1024.0, n_max + 8.0, 8.0)]))
    zero, dp = np.zeros_like(n), steps.dp
    p = (steps.pass_fn or forward_pass)(steps.cost, steps.machine, tokens=dp * n, kv_bytes=zero, attention_flops=zero,
                                         lm_head_rows=zero, tp=steps.tp, ep=dp, overlap_comm=steps.overlap_comm,
                                         batch=dp * np.ones_like(n), context=zero + context, phase="mixed")
    return n, np.asarray(p.time_s, dtype=np.float64) - np.asarray(getattr(p, "dispatch_s", 0.0), dtype=np.float64)


def _chunk_dispatch(steps: StepTimes, batch, prompt, chunk):
    """Y: the eager-prefill dispatch of the ⌈S / C⌉ mixed steps that carry a prompt's chunks beside ``batch``
    decoders (each step of b + its chunk's tokens per rank; :func:`kvplan.calc.operators.eager_dispatch_s`)."""
    from kvplan.calc.operators import eager_dispatch_s

    parts = getattr(steps.pass_fn, "parts", None)
    shape = np.broadcast_shapes(np.shape(batch), np.shape(prompt), np.shape(chunk))
    if parts is None:                        # the roofline charges none
        return np.zeros(shape)
    effs = parts[1]
    s, c, b = (np.broadcast_to(np.asarray(x, dtype=np.float64), shape) for x in (prompt, chunk, batch))
    whole = np.floor(s / c)
    last = s - whole * c
    layers = float(steps.cost.layers)
    return (whole * eager_dispatch_s(effs, "mixed", b + c, layers)
            + np.where(last > 0, eager_dispatch_s(effs, "mixed", b + last, layers), 0.0))


def _sample_moments(folds: dict, prefill: np.ndarray, extra: np.ndarray, dispatch: np.ndarray | None = None) -> np.ndarray:
    """Per row: E[S], E[S²], E[S·n], E[X], E[X²], E[S·X], E[Y], E[Y²], E[X·Y], E[S·Y] over every request, S, X
    and Y linear in ISL between grid points (exact sums through the folded weights of :class:`LengthStats`)."""
    dispatch = np.zeros_like(extra) if dispatch is None else np.broadcast_to(dispatch, extra.shape)
    lo_s, hi_s = prefill[:, :-1], prefill[:, 1:]
    lo_x, hi_x = extra[:, :-1], extra[:, 1:]
    lo_y, hi_y = dispatch[:, :-1], dispatch[:, 1:]
    if prefill.shape[1] == 1:  # one ISL: every request at the single grid point
        lo_s = hi_s = prefill
        lo_x = hi_x = extra
        lo_y = hi_y = dispatch

    def first(lo, hi):
        return lo @ folds["a"] + hi @ folds["b"]
    def cross(lo1, hi1, lo2, hi2):  # noqa: E306
        return (lo1 * lo2) @ folds["aa"] + (lo1 * hi2 + hi1 * lo2) @ folds["ab"] + (hi1 * hi2) @ folds["bb"]

    s_n = lo_s @ folds["an"] + hi_s @ folds["bn"]
    return np.stack([first(lo_s, hi_s), cross(lo_s, hi_s, lo_s, hi_s), s_n, first(lo_x, hi_x),
                     cross(lo_x, hi_x, lo_x, hi_x), cross(lo_s, hi_s, lo_x, hi_x), first(lo_y, hi_y),
                     cross(lo_y, hi_y, lo_y, hi_y), cross(lo_x, hi_x, lo_y, hi_y), cross(lo_s, hi_s, lo_y, hi_y)],
                    axis=1)

"""The aggregated-serving fleet model behind ``kvplan plan``: one instance's figures and the queueing at N.

An instance is ``tp × pp`` GPUs running one engine with continuous batching and chunked prefill
(vLLM V1, SGLang). Requests arrive at rate λ; a router spreads them over N instances (λ_i = λ/N).
Notation: ISL prompt tokens, OSL output tokens, n = OSL − 1 decode steps after the first token,
C = ISL + OSL the context a request ends with, Cb the token budget per step (``--chunk-size``,
vLLM ``max_num_batched_tokens``), B the running batch of an instance.

KV capacity (from the engine's start-up arithmetic, :func:`kvplan.plans.fit.fit`):
    pool = num_blocks × block bytes per GPU; a request reserves k(C) = its block-rounded KV per GPU.
    B_kv = the largest B whose p99 of the sum of B requests' k(C) fits the pool, by the central
           limit theorem: B·E[k] + z₀.₉₉·√B·sd[k] <= pool. It lies between pool / k(p99 context)
           (every request at the p99, reported as ``batch_kv_p99``) and pool / k(mean context).

Step times (the roofline, :mod:`kvplan.calc.roofline` via :mod:`kvplan.plans.latency`):
    t(b)   = decode_step(b sequences at the decode context L̄); L̄ = E[Σ_j (ISL + j)] / E[n] (j = 1..n),
             the time-weighted mean context of a decoding sequence.
    S(ISL) = prefill service = Σ over its ⌈ISL / (Cb − B)⌉ chunks of the step that carries the chunk
             and the B decoders (``mixed_chunk_step``); the last chunk's step emits the first token.
    X(ISL) = S − chunks × t(B): what a prompt's chunks add to the decoders' steps.

Decode (TPOT). Prefill chunks interrupt the decoders like preemptive high-priority work arriving
at λ_i with size X. A request of n steps (work w = n·t) finishes, by the completion-time result
for preemptive-resume priority (e.g. Kleinrock, Queueing Systems II, §3.7), in
    E[D] = w / (1 − ρx),   Var[D] = w · λ_i E[X²] / (1 − ρx)³,   ρx = λ_i E[X],
so TPOT = D/n has mean m = t(b)/(1 − ρx) and variance λ_i t E[X²] / (n (1 − ρx)³). The batch it
decodes in holds itself and a Poisson number (mean B̄) of others (M/G/∞ occupancy); each other
sequence of held context h adds δ + γh to a step (step time is affine in batch and context while
memory-bound), adding B̄·E[(δ + γh)²] / (1 − ρx)² of variance. Per n the TPOT is taken lognormal
with that mean and variance; the distribution is the mixture over the workload's n (requests with
OSL >= 2, as benchmarks count TPOT), and its percentiles come by bisection.

Occupancy (Little's law): B̄ = λ_i × E[slot residence], residence R = S + n·m, solved as a fixed
point (B̄ enters t, S and X). Concurrency = λ × E[time in system] = λ (E[TTFT] + E[n]·m).

Queues (Erlang-C with the Allen–Cunneen factor, :mod:`kvplan.calc.queueing` / :mod:`kvplan.calc.tails`):
    decode slots: c = N × B_max servers, service R (cs² of S + n·m over the workload), arrivals ca²;
    prefill:      c = N servers (a join-shortest-queue router behaves close to one central queue),
                  service S (cs² over the prompt-length distribution).
    TTFT = W_slot + W_prefill + residual of the step in progress (P(B > 0)·t/2) + S, with the two
    waits atom-plus-exponential and independent, convolved with S in closed form.

Approximations, each measured by ``kvplan plan --simulate`` (:mod:`kvplan.sim`): renewal arrivals
(ca² from the gaps; a trace's minute-scale bursts are not captured), one prompt per prefill step
in the closed form (the simulator packs several short prompts into a step's token budget, as vLLM
does), a central queue for the JSQ router, lognormal TPOT per output length, independent waits,
and requests reserving their final context at admission (no preemption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kvplan.calc import tails
from kvplan.calc.roofline import decode_step
from kvplan.plans.latency import mixed_chunk_step

Z99 = 2.3263478740408408  # Φ⁻¹(0.99)
QUANTILE_POINTS = 256
STATS = ("mean", "p50", "p90", "p95", "p99")
STAT_QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


def _points(values: np.ndarray, k: int = QUANTILE_POINTS) -> np.ndarray:
    """k equally likely points of an empirical distribution (quantiles at (i + ½)/k)."""
    return np.quantile(np.asarray(values, dtype=np.float64), (np.arange(k) + 0.5) / k)


@dataclass(frozen=True, eq=False)
class LengthStats:
    """Moments and quantile points of a workload's lengths (from a trace or a seeded sample)."""

    isl: np.ndarray
    osl: np.ndarray

    def __post_init__(self):
        isl, osl = self.isl.astype(np.float64), self.osl.astype(np.float64)
        n = np.maximum(osl - 1, 0)
        ctx = isl + osl
        decoding = n[n >= 1]
        steps = n.sum()
        held = (n * isl + n * (n + 1) / 2).sum() / steps if steps > 0 else isl.mean() + 1
        held2 = ((n * isl**2 + isl * n * (n + 1) + n * (n + 1) * (2 * n + 1) / 6).sum() / steps
                 if steps > 0 else held**2)
        values = {
            "isl_points": _points(isl), "n_points": _points(decoding) if decoding.size else np.zeros(0),
            "mean_isl": float(isl.mean()), "mean_osl": float(osl.mean()), "mean_steps": float(n.mean()),
            "decode_context": float(held), "decode_context_var": float(max(held2 - held**2, 0.0)),
            "context_mean": float(ctx.mean()),
            **{f"context_p{p}": float(np.percentile(ctx, p)) for p in (50, 90, 99)},
            "context_max": float(ctx.max()),
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)


@dataclass
class InstanceFigures:
    """What one instance of the shape can do, independent of the arrival rate."""

    pool_bytes_per_gpu: float
    seq_bytes_per_gpu: np.ndarray          # k(C) of every request of the sample
    b_grid: np.ndarray
    step_s: np.ndarray                     # t(b) at the decode context, on b_grid
    extra_per_seq_s: np.ndarray            # δ + γ·L̄: one more sequence at the mean context, on b_grid
    per_token_s: np.ndarray                # γ: one more token of context in the batch, on b_grid
    prefill_s: np.ndarray                  # S(isl point) with b decoders, shape (b_grid, points)
    extra_s: np.ndarray                    # X(isl point) with b decoders
    prefill_alone_s: np.ndarray            # S with no decoders (b = 0)
    batch_cap: int                         # min(B_kv, max_num_seqs, chunk budget)
    batch_kv: int
    batch_kv_mean: int
    batch_kv_p99: int

    def at(self, b: float):
        """(t, δ+γL̄, γ, S points, X points) at batch b, linear in b between grid points."""
        b = float(min(max(b, self.b_grid[0]), self.b_grid[-1]))
        i = int(np.clip(np.searchsorted(self.b_grid, b) - 1, 0, len(self.b_grid) - 2))
        lo, hi = self.b_grid[i], self.b_grid[i + 1]
        w = (b - lo) / (hi - lo)

        def mix(a):
            return (1 - w) * a[i] + w * a[i + 1]
        return mix(self.step_s), mix(self.extra_per_seq_s), mix(self.per_token_s), mix(self.prefill_s), mix(self.extra_s)


def instance_figures(cost, machine, tp: int, lengths: LengthStats, layout, pool_bytes_per_gpu: float,
                     max_num_seqs: int, chunk_tokens: int) -> InstanceFigures:
    """Step times on a batch grid and the KV-capacity batch limits (formulas in the module docstring)."""
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
    step = decode_step(cost, machine, b_grid, ctx, tp=tp).time_s
    more = decode_step(cost, machine, b_grid + 1, ctx, tp=tp).time_s - step
    dctx = max(64.0, ctx * 0.05)
    per_token = (decode_step(cost, machine, b_grid, ctx + dctx, tp=tp).time_s - step) / (dctx * np.maximum(b_grid, 1))
    points = lengths.isl_points
    chunk = np.maximum(chunk_tokens - b_grid, 1)[:, None]
    _, prefill = mixed_chunk_step(cost, machine, b_grid[:, None], ctx, points[None, :], chunk, tp=tp)
    extra = np.maximum(prefill - np.ceil(points[None, :] / chunk) * np.where(b_grid > 0, step, 0.0)[:, None], 0.0)
    return InstanceFigures(
        pool_bytes_per_gpu=pool_bytes_per_gpu, seq_bytes_per_gpu=seq_bytes, b_grid=b_grid, step_s=step,
        extra_per_seq_s=more, per_token_s=per_token, prefill_s=prefill, extra_s=extra, prefill_alone_s=prefill[0],
        batch_cap=cap, batch_kv=batch_kv, batch_kv_mean=batch_kv_mean, batch_kv_p99=batch_kv_p99,
    )


@dataclass(frozen=True)
class Slo:
    """A latency target: ``kind`` ttft or tpot, statistic (mean, p50 … p99.9), limit in seconds."""

    kind: str
    stat: str
    limit_s: float

    @property
    def quantile(self) -> float | None:
        return None if self.stat == "mean" else float(self.stat[1:]) / 100

    @property
    def text(self) -> str:
        return f"{self.kind} {self.stat}<={self.limit_s:g}s"


@dataclass
class Point:
    """The fleet at N instances: occupancy, waits, latency percentiles, and what fails."""

    instances: int
    rate_per_s: float
    batch_max: int = 0
    batch_tpot: int = 0
    batch_mean: float = math.nan
    step_s: float = math.nan
    rho_interference: float = math.nan
    prefill_utilization: float = math.nan
    slot_utilization: float = math.nan
    prefill_mean_s: float = math.nan
    residence_s: float = math.nan
    slot_wait: tuple[float, float] = (0.0, 0.0)
    prefill_wait: tuple[float, float] = (0.0, 0.0)
    residual_s: float = 0.0
    ttft: dict = field(default_factory=dict)
    tpot: dict = field(default_factory=dict)
    concurrency: float = math.nan
    running: float = math.nan
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class FleetModel:
    """Evaluate the fleet at N instances for one workload, instance and set of SLOs."""

    def __init__(self, figures: InstanceFigures, lengths: LengthStats, rate_per_s: float, arrival_scv: float,
                 slos: dict[str, Slo], max_utilization: float = 0.9) -> None:
        self.f, self.lengths, self.rate, self.ca2 = figures, lengths, rate_per_s, arrival_scv
        self.slos, self.max_utilization = slos, max_utilization
        self._isl_sample = lengths.isl.astype(np.float64)
        self._n_sample = np.maximum(lengths.osl.astype(np.float64) - 1, 0)

    # ----------------------------------------------------------------- TPOT
    def tpot_stats(self, batch_seen: float, others: float, lam_i: float, interference_batch: float,
                   stats=STATS) -> tuple[dict, float]:
        """TPOT statistics when a request decodes among ``others`` (mean) in a batch of ``batch_seen``."""
        n_points = self.lengths.n_points
        if n_points.size == 0:
            return {s: math.nan for s in stats}, 0.0
        t, more, per_token, _, _ = self.f.at(batch_seen)
        _, _, _, _, extra = self.f.at(interference_batch)
        rho = lam_i * float(extra.mean())
        if rho >= 1:
            return {s: math.inf for s in stats}, rho
        mean = t / (1 - rho)
        per_seq2 = more**2 + per_token**2 * self.lengths.decode_context_var
        var_occ = others * per_seq2 / (1 - rho) ** 2
        var_int = lam_i * t * float((extra**2).mean()) / (n_points * (1 - rho) ** 3)
        mu, sigma = tails.lognormal_from_moments(np.full(n_points.shape, mean), var_occ + var_int)
        out = {"mean": mean}
        wanted = [s for s in stats if s != "mean"]
        if wanted:
            qs = tails.invert_cdf(lambda x: tails.lognormal_mixture_cdf(x, mu, sigma),
                                  [_quantile(s) for s in wanted], mean * 1e-3, mean * 1e3, iterations=60)
            out.update(dict(zip(wanted, (float(v) for v in qs))))
        return out, rho

    def batch_for_tpot(self, lam_i: float) -> int:
        """Largest batch (<= the KV / max_num_seqs cap) whose TPOT statistic meets the SLO; 0 if none."""
        cap = self.f.batch_cap
        slo = self.slos.get("tpot")
        if slo is None or cap < 1:
            return cap

        def meets(b: int) -> bool:
            value = self.tpot_stats(b, b - 1, lam_i, b - 1, (slo.stat,))[0][slo.stat]
            return value <= slo.limit_s

        if not meets(1):
            return 0
        if meets(cap):
            return cap
        lo, hi = 1, cap
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if meets(mid) else (lo, mid)
        return lo

    # ----------------------------------------------------------------- the fleet at N
    def evaluate(self, instances: int) -> Point:
        lam = self.rate
        lam_i = lam / instances
        point = Point(instances=instances, rate_per_s=lam)
        point.batch_tpot = self.batch_for_tpot(lam_i)
        point.batch_max = min(self.f.batch_cap, point.batch_tpot)
        if point.batch_max < 1:
            point.failures.append("tpot_slo" if self.f.batch_cap >= 1 else "kv_capacity")
            return point
        n_mean = self.lengths.mean_steps
        occupancy, stable = 0.0, True
        for _ in range(200):
            seen = min(occupancy + 1, point.batch_max)
            tp, rho = self.tpot_stats(seen, occupancy, lam_i, occupancy, ("mean",))
            _, _, _, prefill, _ = self.f.at(occupancy)
            if rho >= 1 or not math.isfinite(tp["mean"]):
                stable = False
                break
            new = lam_i * (float(prefill.mean()) + n_mean * tp["mean"])
            if new >= point.batch_max:
                occupancy, stable = new, False
                break
            if abs(new - occupancy) <= 1e-7 * (1 + new):
                occupancy = new
                break
            occupancy = new
        point.batch_mean = occupancy
        t, _, _, prefill, extra = self.f.at(min(occupancy, point.batch_max))
        point.step_s = t
        point.rho_interference = lam_i * float(extra.mean())
        point.prefill_mean_s = float(prefill.mean())
        point.prefill_utilization = lam_i * point.prefill_mean_s
        if not stable or point.rho_interference >= 1 or point.prefill_utilization >= 1:
            point.failures.append("prefill_compute" if (point.rho_interference >= 1 or point.prefill_utilization >= 1)
                                  else "slots")
            return point
        seen = min(occupancy + 1, point.batch_max)
        point.tpot, _ = self.tpot_stats(seen, occupancy, lam_i, occupancy)
        service = np.interp(self._isl_sample, self.lengths.isl_points, prefill)
        residence = service + self._n_sample * point.tpot["mean"]
        point.residence_s = float(residence.mean())
        slots = instances * point.batch_max
        point.slot_utilization = lam * point.residence_s / slots
        if point.slot_utilization >= 1:
            point.failures.append("slots")
            return point
        point.slot_wait = tails.wait_tail(slots, lam, point.residence_s, self.ca2, _scv(residence))
        point.prefill_wait = tails.wait_tail(instances, lam, float(service.mean()), self.ca2, _scv(service))
        point.residual_s = -math.expm1(-occupancy) * t / 2
        point.ttft = self.ttft_stats(point, prefill)
        point.running = lam * point.residence_s
        point.concurrency = lam * (point.ttft["mean"] + n_mean * point.tpot["mean"])
        self._judge(point)
        return point

    def ttft_stats(self, point: Point, prefill_points: np.ndarray) -> dict:
        (c1, th1), (c2, th2) = point.slot_wait, point.prefill_wait
        service = prefill_points + point.residual_s
        out = {"mean": c1 * th1 + c2 * th2 + float(service.mean())}
        wanted = [s for s in STATS if s != "mean"]
        hi = float(service.max()) + 50 * max(th1 if math.isfinite(th1) else 0, th2 if math.isfinite(th2) else 0) + 1
        qs = tails.invert_cdf(lambda x: tails.wait_plus_service_cdf(x, service, c1, th1, c2, th2),
                              [_quantile(s) for s in wanted], max(float(service.min()) * 0.5, 1e-9), hi)
        out.update(dict(zip(wanted, (float(v) for v in qs))))
        return out

    def _judge(self, point: Point) -> None:
        for kind, values in (("ttft", point.ttft), ("tpot", point.tpot)):
            slo = self.slos.get(kind)
            if slo is not None and not values.get(slo.stat, math.inf) <= slo.limit_s * (1 + 1e-12):
                point.failures.append(f"{kind}_slo")
        if "ttft" not in self.slos and max(point.slot_utilization, point.prefill_utilization) > self.max_utilization:
            point.failures.append("utilization")

    # ----------------------------------------------------------------- limits
    def best_alone(self) -> tuple[dict, dict]:
        """TTFT and TPOT statistics of requests that never meet another one (the N → ∞ limit)."""
        tpot, _ = self.tpot_stats(1, 0, 0.0, 0)
        alone = Point(instances=1, rate_per_s=0.0)
        return self.ttft_stats(alone, self.f.prefill_alone_s), tpot

    def search(self, max_instances: int = 1_000_000) -> tuple[Point, Point | None]:
        """Fewest instances whose point meets every constraint, and the point at one fewer (None at 1)."""
        hi = 1
        point = self.evaluate(1)
        if point.ok:
            return point, None
        lo_point = point
        while True:
            lo = hi
            hi *= 2
            if hi > max_instances:
                raise OverflowError(max_instances)
            point = self.evaluate(hi)
            if point.ok:
                break
            lo_point = point
        best = point
        while hi - lo > 1:
            mid = (lo + hi) // 2
            p = self.evaluate(mid)
            if p.ok:
                hi, best = mid, p
            else:
                lo, lo_point = mid, p
        return best, lo_point


def _quantile(stat: str) -> float:
    return STAT_QUANTILES.get(stat) or float(stat[1:]) / 100


def _scv(values: np.ndarray) -> float:
    mean = float(values.mean())
    return float(values.var()) / mean**2 if mean > 0 else 0.0

"""Sizing the prefill and decode pools for one (prefill TP, decode TP, path): evaluate and search.

For x prefill and y decode instances at arrival rate λ (formulas; sources in the modules named):

Decode pool (each instance a continuous batch). A request spends OSL steps on a decode
instance, so by Little's law its mean batch solves b̄ = (λ/y) · E[OSL] · T(b̄), T the step time
at the mean decode context (exact on the piecewise-linear T; unstable when even the batch cap
cannot keep up). The
batch a request sees at percentile p is b_p = b̄ + Φ⁻¹(p)·sqrt(z·b̄), z = (1 + ca²)/2
(:func:`kvplan.calc.disagg.occupancy_quantile`), and TPOT_p = T(b_p). Memory per GPU:
b_p × KV per request (mean over its decode life) + staging (KV landing from transfers in flight,
Little's law (λ/y) × E[transfer_s × bytes]) must fit the engine's KV budget; b_p ≤ max_num_seqs;
the longest request must fit alone.

Prefill pool: M/G/c with c = x × dp (each attention DP rank runs its own prompt), service S(ISL) (mean and cs² over the ISL bins), arrivals ca².
TTFT = W + S + exposed transfer + the first decode step T(b̄), its p-quantile by
:func:`kvplan.calc.disagg.sojourn_quantile_s`, plus the link's wait.

Link: the transfers share min(x·g_p, y·g_d) GPUs' links (g = tp × dp per instance) (the smaller side's), each transfer
using n = min(tp_p, tp_d) of them: utilisation ρ = λ·E[bytes] / (min(x·tp_p, y·tp_d) × bandwidth).
At ρ ≥ 1 the transfer queue grows without bound: infeasible. Below, transfers queue as M/G/k
with k = ⌊min(x·tp_p, y·tp_d) / n⌋ slots (Erlang-C + Allen–Cunneen, service = bytes / (n × bw));
the wait's p-quantile is added to TTFT (a sum of percentiles: conservative).

Utilisation ceiling: the prefill pool's ρ = λ E[S] / (x × dp) must stay ≤ ``max_utilization``
(default :data:`DEFAULT_MAX_UTILIZATION`). Near ρ = 1 the M/G/c wait is finite on paper but a
small error in the rate or the service time tips the pool past saturation; the default 0.9 is
``kvplan plan``'s ceiling too: a margin below saturation, not a figure derived from the validation page
(kvplan's prefill/TTFT error on its scoring set, docs/validation.md §e, is larger than the 10 % it leaves;
pass ``--max-utilization`` for a wider margin).

Search: y = the fewest decode instances meeting TPOT and memory (feasibility only improves
with y); then, if the link alone breaks TTFT at any x, y grows; x = the fewest prefill
instances meeting TTFT. Doubling then bisection, as :func:`kvplan.calc.queueing.min_servers`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kvplan.calc.disagg import occupancy_quantile, sojourn_quantile_s
from kvplan.calc.tails import wait_tail
from kvplan.errors import InputError
from kvplan.plans.fleet.model import Slo
from kvplan.plans.pd.model import DecodeModel, PDWorkload, PrefillModel, TransferModel

MAX_INSTANCES = 100_000
DEFAULT_MAX_UTILIZATION = 0.9   # prefill pool ρ ceiling (module docstring: basis)


def utilization_note(max_utilization: float) -> str:
    """Check ``--max-utilization`` and say which prefill-pool ceiling the plan used (module docstring: basis)."""
    if not 0 < max_utilization <= 1:
        raise InputError(f"--max-utilization must be in (0, 1] (got {max_utilization})",
                         f"the prefill pool's utilisation ceiling; kvplan's default is {DEFAULT_MAX_UTILIZATION:g}")
    return (f"prefill pool sized to utilisation ≤ {max_utilization:g}"
            + (" (kvplan default, as kvplan plan's ceiling: a margin below saturation, where the queue's wait has "
               "no bound; not derived from the validation page, whose prefill/TTFT error is larger (docs/validation.md "
               "§e): --max-utilization for a wider one)" if max_utilization == DEFAULT_MAX_UTILIZATION
               else " (--max-utilization)"))


def quantile_of(stat: str) -> float:
    """'p99' → 0.99, 'p99.9' → 0.999."""
    return float(stat[1:]) / 100


@dataclass
class Point:
    """One configuration evaluated: the numbers and what fails (empty = meets everything)."""

    x: int
    y: int
    values: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class PairModel:
    """Evaluate x prefill and y decode instances of one (prefill TP, decode TP) over one path."""

    def __init__(self, workload: PDWorkload, prefill: PrefillModel, decode: DecodeModel, transfer: TransferModel,
                 ttft: Slo, tpot: Slo, stats=("mean", "p50", "p90", "p95", "p99"),
                 max_utilization: float = DEFAULT_MAX_UTILIZATION) -> None:
        self.w, self.p, self.d, self.t = workload, prefill, decode, transfer
        self.ttft, self.tpot = ttft, tpot
        self.max_utilization = float(max_utilization)
        self.stats = tuple(dict.fromkeys([*stats, ttft.stat, tpot.stat]))
        weights = workload.weights
        moving = transfer.transfer_s - transfer.latency_s
        self.moving_mean_s = float((moving * weights).sum())
        self.moving_scv = _scv(moving, weights)
        self.bytes_mean = float((transfer.bytes * weights).sum())
        self.staging_per_rate = float((transfer.transfer_s * decode.receive_bytes_per_gpu * weights).sum())
        # the engine's prefill dispatch (once per request, kvplan.plans.sizing.dispatch) delays the first token but
        # holds no prefill server: in TTFT, not in the prefill queue's service time
        self.request_extra_s = prefill.service_s + transfer.exposed_s + prefill.request_dispatch_s

    # ----------------------------------------------------------------- decode
    def decode_batch(self, rate_per_instance: float) -> float:
        """b̄ solving b = λ_y · E[OSL] · T(b) on [0, cap] (T linear between integers); ∞ past the cap.

        g(b) = a·T(b) − b is found exactly: below 1 T is T(1), so b = a·T(1) when that is ≤ 1; else the
        first integer k with g(k) ≤ 0 and the root of the linear piece on [k − 1, k].
        """
        a = rate_per_instance * self.w.osl_mean
        batch, step = self.d.batch, self.d.step_s
        if a * step[0] <= batch[0]:  # below the first tabulated batch T is T(batch[0]) (1, or one per DP rank)
            return a * float(step[0])
        g = a * step - batch
        below = np.flatnonzero(g <= 0)
        if below.size == 0:
            return math.inf
        k = int(below[0])
        g0, g1 = g[k - 1], g[k]
        return float(batch[k - 1] + (batch[k] - batch[k - 1]) * g0 / (g0 - g1))

    def decode_point(self, y: int, rate: float, point: Point) -> float:
        """Fill the decode figures of ``point``; return b̄ (∞ when unstable)."""
        lam_y = rate / y
        mean = self.decode_batch(lam_y)
        v = point.values
        staging = lam_y * self.staging_per_rate
        v["decode_staging_bytes_per_gpu"] = staging
        if self.d.kv_longest_bytes_per_gpu > self.d.kv_budget_bytes_per_gpu:
            point.failures.append("decode_kv_capacity")
        if not math.isfinite(mean):
            point.failures.append("decode_kv_capacity" if self.d.batch_cap < self.d.max_num_seqs else "max_num_seqs")
            v.update({"decode_batch_mean": math.inf, "tpot_mean_s": math.inf})
            v.update({f"tpot_{s}_s": math.inf for s in self.stats if s != "mean"})
            return mean
        v["decode_batch_mean"] = mean
        v["tpot_mean_s"] = float(self.d.step_at(mean))
        for s in self.stats:
            if s != "mean":
                b = float(occupancy_quantile(quantile_of(s), mean, self.w.arrival_scv))
                v[f"decode_batch_{s}"] = b
                v[f"tpot_{s}_s"] = float(self.d.step_at(min(b, self.d.batch_cap)))
        b_slo = v.get(f"decode_batch_{self.tpot.stat}", mean)
        used = b_slo * self.d.kv_request_bytes_per_gpu + staging
        v["decode_kv_used_bytes_per_gpu"] = used
        v["decode_kv_utilization"] = used / self.d.kv_budget_bytes_per_gpu
        v["decode_seq_utilization"] = b_slo / self.d.max_num_seqs
        if used > self.d.kv_budget_bytes_per_gpu:
            point.failures.append("decode_kv_capacity")
        if b_slo > self.d.max_num_seqs:
            point.failures.append("max_num_seqs")
        if not v[f"tpot_{self.tpot.stat}_s"] <= self.tpot.limit_s * (1 + 1e-12):
            point.failures.append("tpot_slo")
        return mean

    # ----------------------------------------------------------------- prefill and link
    def link_wait(self, x: int, y: int, rate: float, q: float | None) -> tuple[float, float]:
        """(utilisation, wait at quantile q or mean) of the transfers over the pool's links."""
        gpus = min(x * self.p.gpus, y * self.d.gpus)
        rho = rate * self.bytes_mean / (gpus * self.t.link_bytes_per_s)
        if rho >= 1:
            return rho, math.inf
        slots = max(1, gpus // self.t.links)
        c, theta = wait_tail(slots, rate, self.moving_mean_s, self.w.arrival_scv, self.moving_scv)
        if not math.isfinite(theta):
            return rho, math.inf
        if q is None:
            return rho, c * theta
        return rho, max(0.0, theta * math.log(max(c, 1e-300) / (1 - q))) if c > 0 else 0.0

    def ttft_value(self, x: int, y: int, rate: float, first_step_s: float, stat: str) -> float:
        q = None if stat == "mean" else quantile_of(stat)
        extra = self.request_extra_s + first_step_s
        _, link = self.link_wait(x, y, rate, q)
        servers = x * self.p.dp
        if q is None:
            c, theta = wait_tail(servers, rate, self.p.mean_s, self.w.arrival_scv, self.p.scv)
            return c * theta + float((extra * self.w.weights).sum()) + link
        return sojourn_quantile_s(q, servers, rate, self.p.mean_s, extra, self.w.weights, self.w.arrival_scv,
                                  self.p.scv) + link

    def evaluate(self, x: int, y: int, rate: float | None = None, full: bool = True) -> Point:
        """The figures of xPyD at ``rate``; ``full`` False computes only the SLO statistics (searches)."""
        rate = self.w.rate_per_s if rate is None else rate
        point = Point(x, y)
        mean = self.decode_point(y, rate, point)
        first = float(self.d.step_at(mean if math.isfinite(mean) else self.d.batch_cap))
        v = point.values
        v["first_decode_step_s"] = first
        rho, _ = self.link_wait(x, y, rate, None)
        v["link_utilization"] = rho
        v["link_wait_s"] = self.link_wait(x, y, rate, self.ttft.quantile)[1]
        v["prefill_utilization"] = rate * self.p.mean_s / (x * self.p.dp)
        for s in self.stats if full else (self.ttft.stat,):
            v[f"ttft_{s}_s"] = self.ttft_value(x, y, rate, first, s)
        if not self.p.prompt_fits:
            point.failures.append("prefill_kv_capacity")
        if rho >= 1:
            point.failures.append("link")
        if v["prefill_utilization"] > self.max_utilization * (1 + 1e-12):
            point.failures.append("prefill_utilization")
        if not v[f"ttft_{self.ttft.stat}_s"] <= self.ttft.limit_s * (1 + 1e-12):
            point.failures.append("ttft_slo")
        return point

    # ----------------------------------------------------------------- limits (unlimited instances)
    def ttft_floor_s(self) -> float:
        """TTFT at the SLO statistic with no prefill wait and no link wait, first step at batch 1."""
        extra = self.request_extra_s + float(self.d.step_at(1.0))
        if self.ttft.quantile is None:
            return float((extra * self.w.weights).sum())
        return sojourn_quantile_s(self.ttft.quantile, 1, 0.0, self.p.mean_s, extra, self.w.weights)

    def tpot_floor_s(self) -> float:
        return float(self.d.step_at(1.0))

    # ----------------------------------------------------------------- search
    def search(self) -> tuple[Point | None, str | None]:
        """Fewest decode, then prefill, instances meeting every constraint; (None, reason) if none can."""
        if not self.p.prompt_fits:
            return None, "prefill_kv_capacity"
        if self.d.kv_longest_bytes_per_gpu > self.d.kv_budget_bytes_per_gpu:
            return None, "decode_kv_capacity"
        if self.tpot_floor_s() > self.tpot.limit_s:
            return None, "tpot_slo"
        if self.ttft_floor_s() > self.ttft.limit_s:
            return None, "ttft_slo"
        y = _fewest(lambda n: Point(0, n) if not self._decode_fails(n) else None)
        if y is None:
            return None, "decode_kv_capacity"
        big = MAX_INSTANCES
        for _ in range(200):  # the link alone must leave room for TTFT at any prefill count
            if self.evaluate(big, y, full=False).values[f"ttft_{self.ttft.stat}_s"] <= self.ttft.limit_s:
                break
            y += max(1, y // 8)
            if y > MAX_INSTANCES:
                return None, "link"
        else:
            return None, "link"
        x = _fewest(lambda n: n if self.evaluate(n, y, full=False).ok else None,
                    start=max(1, int(self.w.rate_per_s * self.p.mean_s / self.p.dp)))
        if x is None:
            return None, "ttft_slo"
        return self.evaluate(x, y), None

    def _decode_fails(self, y: int) -> bool:
        probe = Point(0, y)
        self.decode_point(y, self.w.rate_per_s, probe)
        return bool(probe.failures)

    def capacity_per_s(self, x: int, y: int, iterations: int = 40) -> float:
        """Largest arrival rate this configuration serves within both SLOs (bisection)."""
        lo, hi = 0.0, x * self.p.dp / self.p.mean_s
        if not self.evaluate(x, y, lo + 1e-9, full=False).ok:
            return 0.0
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.evaluate(x, y, mid, full=False).ok else (lo, mid)
        return lo

    def prefill_rate_alone(self) -> float:
        """One prefill instance alone (TTFT = wait + prefill, DistServe's prefill-only figure): max rate."""
        limit, q, c_servers = self.ttft.limit_s, self.ttft.quantile, self.p.dp

        def ok(rate: float) -> bool:
            if q is None:
                c, theta = wait_tail(c_servers, rate, self.p.mean_s, self.w.arrival_scv, self.p.scv)
                return c * theta + self.p.mean_s <= limit
            return sojourn_quantile_s(q, c_servers, rate, self.p.mean_s, self.p.service_s, self.w.weights,
                                      self.w.arrival_scv, self.p.scv) <= limit

        return _max_rate(ok, c_servers / self.p.mean_s)

    def decode_rate_alone(self) -> float:
        """One decode instance alone (TPOT and memory, staging included): max rate."""
        def ok(rate: float) -> bool:
            probe = Point(0, 1)
            self.decode_point(1, rate, probe)
            return not probe.failures

        return _max_rate(ok, self.d.batch_cap / (self.w.osl_mean * self.d.step_s[0]))


def _max_rate(ok, upper: float, iterations: int = 50) -> float:
    lo, hi = 0.0, upper
    if not ok(upper * 1e-9):
        return 0.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _fewest(test, start: int = 1) -> int | None:
    """Smallest n ≥ start with test(n) not None, test monotone (doubling, then bisection); None past the limit."""
    lo = max(1, start)
    if test(lo) is not None:
        return lo
    hi = lo
    while True:
        lo, hi = hi, hi * 2
        if hi > MAX_INSTANCES:
            return None if test(MAX_INSTANCES) is None else _bisect(test, lo, MAX_INSTANCES)
        if test(hi) is not None:
            return _bisect(test, lo, hi)


def _bisect(test, lo: int, hi: int) -> int:
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test(mid) is not None else (mid, hi)
    return hi


def _scv(values: np.ndarray, weights: np.ndarray) -> float:
    mean = float((values * weights).sum())
    if mean <= 0:
        return 0.0
    return max(float((values**2 * weights).sum()) / mean**2 - 1.0, 0.0)

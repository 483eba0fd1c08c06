"""The aggregated-serving fleet model behind ``kvplan plan``: one instance's figures and the queueing at N.

An instance is ``tp × pp`` GPUs running one engine with continuous batching and chunked prefill
(vLLM V1, SGLang). Requests arrive at rate λ; a router spreads them over N instances (λ_i = λ/N).
Notation: ISL prompt tokens, OSL output tokens, n = OSL − 1 decode steps after the first token,
C = ISL + OSL the context a request ends with, Cb the token budget per step (``--chunk-size``,
vLLM ``max_num_batched_tokens``), B the running batch of an instance.

KV capacity (from the engine's start-up arithmetic, :func:`kvplan.plans.sizing.fit.fit`):
    pool = num_blocks × block bytes per GPU; a request reserves k(C) = its block-rounded KV per GPU.
    B_kv = the largest B whose p99 of the sum of B requests' k(C) fits the pool, by the central
           limit theorem: B·E[k] + z₀.₉₉·√B·sd[k] <= pool. It lies between pool / k(p99 context)
           (every request at the p99, reported as ``batch_kv_p99``) and pool / k(mean context).

Step times (the deployment's step-time model, :class:`kvplan.calc.steptime.StepTimes`: the
per-operator model by default, the roofline with ``--perf-model roofline``):
    t(b)   = decode_step(b sequences at the decode context L̄); L̄ = E[Σ_j (ISL + j)] / E[n] (j = 1..n),
             the time-weighted mean context of a decoding sequence.
    S(ISL) = prefill service = Σ over its ⌈ISL / (Cb − B)⌉ chunks of the step that carries the chunk
             and the B decoders (``mixed_chunk_step``); the last chunk's step emits the first token.
    X(ISL) = S − chunks × t(B) − Y: what a prompt's chunks add to the decoders' steps, less Y, the eager-
             prefill dispatch of those steps under ``--enforce-eager`` (``kvplan.calc.operators.eager_dispatch_s``:
             once per forward, so the k_s prompts packed into a step share it).
    π      = the pair penalty: what a second prompt in a step adds beyond its own X (a step's token cost is not
             additive: :mod:`kvplan.plans.fleet.packing`); the decoders see X + π(1 − 1/k_s) + Y/k_s per prompt.
    d      = the engine's prefill dispatch once per request (kvplan.plans.sizing.dispatch, 0 under
             --enforce-eager): added to TTFT only, never to S, X or a step.

Decode (TPOT). Prefill chunks interrupt the decoders like preemptive high-priority work arriving
at λ_i with size X (X + π(1 − 1/k_s) + Y/k_s: packing). A request of n steps (work w = n·t) whose decode
begins with V of that work queued (the prompts that arrived during its own step: λ_i·J·E[own step] of
them, J of :mod:`~kvplan.plans.fleet.packing`) finishes, by the completion-time result for preemptive-resume
priority (e.g. Kleinrock, Queueing Systems II, §3.7, with V present at the start), in
    E[D] = (w + E[V]) / (1 − ρx),   Var[D] = w · λ_i E[X²] / (1 − ρx)³ + Var[V] / (1 − ρx)²,   ρx = λ_i E[X],
so TPOT = D/n has mean (t(b) + E[V]/n)/(1 − ρx) and variance λ_i t E[X²] / (n (1 − ρx)³) + …. The batch it
decodes in holds itself and a Poisson number (mean B̄) of others (M/G/∞ occupancy); each other
sequence of held context h adds δ + γh to a step (step time is affine in batch and context while
memory-bound), adding B̄·E[(δ + γh)²] / (1 − ρx)² of variance. Per n the TPOT is taken lognormal with that mean and
variance, and no lower than t(1), the step of a batch of one (what the lognormal puts below it sits there); the
distribution is the mixture over the workload's n (OSL >= 2, as benchmarks count TPOT), percentiles by bisection.

Occupancy (Little's law): B̄ = λ_i × E[slot residence], residence R = S + n·m (E[n]·m = E[D]), solved as a fixed
point (B̄ enters t, S and X) by iterating from an empty instance, which converges to the smallest
fixed point; none below the batch cap B_max (the engine's limits: the KV pool, ``max_num_seqs``,
``max_num_batched_tokens`` / 2, and the largest batch whose TPOT meets the SLO) means the decode
slots cannot keep up (``slots``), as does a slot utilisation λ·E[R] / (N·B_max) >= 1. The loop gain
g = dB̄_next/dB̄ (over the batch's own spread: E[B̄_next(B + 1) − B̄_next(B)], B ~ Poisson(B̄), so that a CUDA-graph
bucket edge, where the step jumps, is not read as the slope) is reported, not limited: a batch that feeds back on itself (each sequence
lengthens every step) is physics, and its limits are those caps and the SLOs. Concurrency =
λ × E[time in system] = λ (E[TTFT] + E[n]·m).

Every figure here decreases (or stays) as N grows at a fixed λ, and grows with λ at a fixed N, so
the fewest N that meets every constraint never falls as the load rises; :meth:`FleetModel.search`
finds it by doubling then bisection.

Queues:
    decode slots: Erlang-C with the Allen–Cunneen factor (:mod:`kvplan.calc.queueing` / :mod:`kvplan.calc.tails`),
                  c = N × B_max servers, service R (cs² of S + n·m over the workload), arrivals ca².
    prefill:      as the engine schedules it (:mod:`kvplan.plans.fleet.stepwait`): a prompt waits the rest of the
                  step under way (a decode step on an instance the JSQ router finds without prompts, else the
                  length-biased mixed step) and joins the next step with the prompts routed there meanwhile
                  (packing: :mod:`kvplan.plans.fleet.packing`), V; only what the step's token budget cannot take
                  queues, in full steps s_full: W_b = 0, or with probability C_b = C e^(−s_full/θ) a full step and
                  an exponential rest, C and θ Allen–Cunneen over N servers of ω = ISL·s_full/(budget) each.
                  The prefill utilisation ρ_P = λ_i E[S_q], S_q = X + π(1 − 1/k_s) + (S − X)/k_s (a step's
                  decoders shared), and a prompt's own step holds its slot for S + (k_p − 1)·E[X + π].
    TTFT = W_slot + W_b + V + S + d, independent, convolved in closed form over the points of V and S; where long
    prompts make ω heavy-tailed, W_b's tail is at least C·P(ω_e > (1 − ρ_b)(x + s_full))^N, ω_e the equilibrium
    residual of ω (:func:`kvplan.calc.tails.equilibrium_tail`; the subexponential shape of the M/G/1 asymptotic).

Attention data parallelism (dp > 1): each DP rank is an engine core (own KV pool, max_num_seqs, token
budget) in lock step with the others equally loaded: the figures are one rank's, t(b) the instance's step at
dp·b sequences, experts over ep = dp (as pd times its pools); N instances are N·dp servers of the queues.

Approximations, each measured by ``kvplan plan --simulate`` (:mod:`kvplan.sim`): renewal arrivals
(ca² from the gaps; a trace's minute-scale bursts are not captured), packing by the mean number
of arrivals per step, a central queue for the JSQ router, lognormal TPOT per output length, independent waits,
and requests reserving their final context at admission (no preemption).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np

from kvplan.calc import tails
from kvplan.plans.fleet import stepwait
from kvplan.plans.fleet.lengths import QUANTILE_POINTS, TAIL_POINTS, LengthStats, _points  # noqa: F401  (re-exported)
from kvplan.plans.fleet.packing import interference, packing, packing_scalar  # noqa: F401
from kvplan.plans.fleet.figures import Z99, InstanceFigures, instance_figures, poisson_slope, poisson_support  # noqa: F401
from kvplan.workload.slo import Slo  # noqa: F401  (the fleet model's targets; re-exported)

STATS = ("mean", "p50", "p90", "p95", "p99")
STAT_QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
BRACKET_ROUNDS = 5    # vectorised bracketing rounds before the percentiles' bisection (tails.invert_cdf), for
BRACKET_MAX_POINTS = 256  # a TTFT of at most this many distinct service times (beyond, each candidate costs as much
                          # as a bisection step: stepwait.ttft_quantiles decides the plain bisection's steps instead)


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
    gain: float = math.nan
    packing: float = 1.0           # k_p: prompts in a prompt's own mixed step (kvplan.plans.fleet.packing)
    packing_step: float = 1.0      # k_s: prompts per mixed step
    pack_penalty_s: float = 0.0    # π (1 − 1/k_s): the pair penalty a prompt pays on average
    backlog_s: float = 0.0         # E[V]: the prefill work queued when a request's decode begins
    prefill_utilization: float = math.nan
    slot_utilization: float = math.nan
    prefill_mean_s: float = math.nan
    residence_s: float = math.nan
    slot_wait: tuple[float, float] = (0.0, 0.0)
    prefill_wait: tuple[float, float] = (0.0, 0.0)
    residual_s: float = 0.0        # E[R]: the rest of the step under way (kvplan.plans.fleet.stepwait)
    busy_share: float = 0.0        # the share of arrivals that wait for a decode step (an instance without prompts)
    work_wait: tuple[float, float] = (0.0, 0.0)  # (C, θ): the prefill work queued ahead, before a full step takes it
    full_step_s: float = 0.0       # s_full: a step with its token budget full
    budget_tokens: float = 0.0     # C_b: the prompt tokens a step takes beside the decoders
    budget_utilization: float = 0.0  # ρ_b = λ_i·E[ω] (kvplan.plans.fleet.stepwait)
    wait_points: tuple = ()        # (V, weights): the wait before a prompt's own step (stepwait.wait_points) …
    wait_mean_s: float = 0.0       # … and E[V] in closed form
    ttft: dict = field(default_factory=dict)
    tpot: dict = field(default_factory=dict)
    concurrency: float = math.nan
    running: float = math.nan
    failures: list[str] = field(default_factory=list)

    ok = property(lambda self: not self.failures)


class FleetModel:
    """Evaluate the fleet at N instances for one workload, instance and set of SLOs."""

    def __init__(self, figures: InstanceFigures, lengths: LengthStats, rate_per_s: float, arrival_scv: float,
                 slos: dict[str, Slo], max_utilization: float = 0.9, dp: int = 1) -> None:
        # dp > 1: an instance is dp attention-DP ranks (the figures are one rank's), N instances N·dp servers
        self.f, self.lengths, self.rate, self.ca2, self.dp = figures, lengths, rate_per_s, arrival_scv, dp
        self.slos, self.max_utilization = slos, max_utilization
        self.stats = tuple(dict.fromkeys([*STATS, *(slo.stat for slo in slos.values())]))
        # S is increasing in ISL: the sorted sample, thinned to equally likely points, gives the residual's tail
        self._tail_isl = lengths.tail_isl
        self._batch_tpot: dict[tuple[float, int], int] = {}  # batch_for_tpot per (λ_i, servers): the search asks twice

    # ----------------------------------------------------------------- TPOT
    def tpot_stats(self, batch_seen: float, others: float, lam_i: float, interference_batch: float,
                   stats=None, gain: float = 0.0, judge: bool = False, servers: int = 1,
                   backlog: tuple[float, float] = (0.0, 0.0)) -> tuple[dict, float]:
        """TPOT statistics when a request decodes among ``others`` (mean) in a batch of ``batch_seen``.

        ``gain`` is the occupancy loop gain g: the batch's variance is B̄ / (1 − g) rather than B̄.
        ``backlog``: (E[V], E[V²]) of the prefill work V queued when a request's decode begins; the request of n
        steps then takes (n t + V)/(1 − ρx) on average (module docstring); "mean" is over requests.
        ``judge``: also set ``"meets"``, whether the TPOT SLO holds, from the CDF at its limit
        (P(TPOT <= limit) >= q, one evaluation instead of a bisection).
        """
        stats = self.stats if stats is None else stats
        slo = self.slos.get("tpot") if judge else None
        (n_points, n_weights), (t, more, per_token, _) = self.lengths.n_distinct, self.f.decode_at(batch_seen)
        t_i, _, _, moments = self.f.decode_at(interference_batch)
        _, k_s, _, pen = self._packing(interference_batch, lam_i, servers, t_i, moments)
        extra_mean, extra_second = interference(moments, k_s, pen)
        rho = lam_i * extra_mean
        if rho >= 1:
            return {**{s: math.inf for s in stats}, **({"meets": False} if slo else {})}, rho
        if n_points.size == 0:  # every request ends with its first token: no TPOT
            return {**{s: math.nan for s in stats}, **({"meets": True} if slo else {})}, rho
        v1, v2 = backlog
        mean = (t + v1 / n_points) / (1 - rho)
        per_seq2 = more**2 + per_token**2 * self.lengths.decode_context_var
        var_occ = others / (1 - min(gain, 0.99)) * per_seq2 / (1 - rho) ** 2
        var_int = lam_i * t * extra_second / (n_points * (1 - rho) ** 3)
        # a prefill burst interrupts the request and grows the batch it decodes in: comonotone, so sds add
        sd = np.sqrt(var_occ) + np.sqrt(var_int) + np.sqrt(max(v2 - v1 * v1, 0.0)) / (n_points * (1 - rho))
        floor = self._floor_step
        mu, sigma = tails.lognormal_from_moments(mean, sd * sd)
        mean = float(np.dot(n_weights, mean))
        out = {"mean": mean}
        cdf = partial(tails.lognormal_mixture_cdf, mu=mu, sigma=sigma, weights=n_weights, floor=floor)
        if slo is not None:
            out["meets"] = bool(_meets(slo, mean, cdf))
        wanted = [s for s in stats if s != "mean"]
        if wanted:
            qs = tails.invert_cdf(cdf, [_quantile(s) for s in wanted], mean * 1e-3, mean * 1e3, iterations=24,
                                  rounds=BRACKET_ROUNDS, jumps=np.append(np.exp(mu[sigma == 0]), floor))
            out.update(dict(zip(wanted, (float(v) for v in qs))))
        return out, rho

    @cached_property
    def _floor_step(self) -> float:  # t(1), the step of a batch of one: the TPOT's floor
        return float(self.f.decode_at(1.0)[0])

    def _packing(self, b, lam_i: float, servers: int, step=None, moments=None):
        """(k_p, k_s, π, π (1 − 1/k_s)) at batch b (scalar or array; :func:`kvplan.plans.fleet.packing.packing`)."""
        step, moments = self.f.step_and_moments(b) if step is None else (step, moments)
        if np.size(b) == 1:  # one batch (the occupancy iteration, the TPOT bisection): in floats
            bf, m = float(np.ravel(b)[0]), np.asarray(moments, dtype=np.float64).ravel()
            pf, room = self.f.pack_at(bf)
            k_p, k_s, _, _ = packing_scalar(lam_i, float(np.ravel(step)[0]), m[0], m[3], m[4], pf, -math.expm1(-bf),
                                            servers, room)
            if np.ndim(b) == 0:
                return k_p, k_s, pf, pf * (1 - 1 / k_s)
            k_p, k_s, pi = (np.full(np.shape(b), v) for v in (k_p, k_s, pf))
        else:
            pi = self.f.penalty_at(b)
            k_p, k_s, _, _ = packing(lam_i, step, moments, pi, -np.expm1(-np.asarray(b, dtype=np.float64)), servers,
                                     self.f.room_at(b))
        return k_p, k_s, pi, pi * (1 - 1 / k_s)

    def batch_for_tpot(self, lam_i: float, servers: int = 1) -> int:
        """Largest batch (<= the KV / max_num_seqs cap) whose TPOT statistic meets the SLO; 0 if none."""
        cap = self.f.batch_cap
        slo = self.slos.get("tpot")
        if slo is None or cap < 1:
            return cap

        def meets(b: int) -> bool:
            return self.tpot_stats(b, b - 1, lam_i, b - 1, ("mean",), judge=True, servers=servers)[0]["meets"]

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
    def evaluate(self, instances: int, full: bool = True, stats: tuple[str, ...] | None = None) -> Point:
        """The fleet at N instances; ``full=False`` computes only the SLOs' statistics (for the search), ``stats``
        these statistics (and "mean") of TTFT and TPOT instead of :data:`STATS` and the SLOs'."""
        stats = stats if stats is not None else (None if full else ("mean",))
        lam, servers = self.rate, instances * self.dp
        lam_i = lam / servers
        point = Point(instances=instances, rate_per_s=lam)
        if (lam_i, servers) not in self._batch_tpot:
            self._batch_tpot[lam_i, servers] = self.batch_for_tpot(lam_i, servers)
        point.batch_tpot = self._batch_tpot[lam_i, servers]
        point.batch_max = min(self.f.batch_cap, point.batch_tpot)
        if point.batch_max < 1:
            point.failures.append("tpot_slo" if self.f.batch_cap >= 1 else "kv_capacity")
            return point
        n_mean = self.lengths.mean_steps

        def next_occupancy(b: float) -> float:
            """Little's law with the batch b in force: λ_i (E[S(b)] + E[n]·TPOT(b)); ∞ when saturated."""
            return float(self._occupancy_map(np.array([b]), lam_i, point.batch_max, servers)[0])

        occupancy, stable = 0.0, True
        for _ in range(200):
            new = next_occupancy(occupancy)
            if not math.isfinite(new):
                stable = False
                break
            if new >= point.batch_max:
                occupancy, stable = new, False
                break
            if abs(new - occupancy) <= 1e-7 * (1 + new):
                occupancy = new
                break
            occupancy = new
        point.batch_mean = occupancy
        t, _, _, prefill, moments = self.f.at(min(occupancy, point.batch_max))
        s_mean, s_second, s_n, x_mean, x_second, s_x = (float(v) for v in moments[:6])
        point.step_s = t
        # packing (kvplan.plans.fleet.packing): prompts that arrive during a step share the next one, k_s per mixed
        # step; the queue serves S_q = X + π(1 − 1/k_s) + (S − X)/k_s (the step's decoders and its eager dispatch Y
        # shared, the pair penalty π paid by all but one), and a prompt's own step also carries k_p − 1 others' X + π
        k_p, k, pi, pen = (float(v) for v in self._packing(occupancy, lam_i, servers, t, moments))
        point.packing, point.packing_step, point.pack_penalty_s = k_p, k, pen
        point.rho_interference = lam_i * interference(moments, k, pen)[0]
        q_mean = s_mean / k + x_mean * (1 - 1 / k)
        q_mean += pen
        own_extra = (k_p - 1) * (x_mean + pi)
        point.prefill_mean_s = s_mean + own_extra
        point.prefill_utilization = lam_i * q_mean
        if not stable or point.rho_interference >= 1 or point.prefill_utilization >= 1:
            point.failures.append("prefill_compute" if (point.rho_interference >= 1 or point.prefill_utilization >= 1)
                                  else "slots")
            return point
        # the gain over the batch's own spread, E[B̄_next(B + 1) − B̄_next(B)] with B ~ Poisson(B̄), not the local
        # slope: a CUDA-graph bucket makes the step jump at a batch size, and a one-sided difference across that
        # jump read a gain > 1 (TPOT p99 ×8) at some N and not at N ± 1; a secant over B̄ ± √B̄ still jumped as an
        # edge entered or left its ends (TPOT p99 over the SLO at one N between passing ones)
        point.gain = float(poisson_slope(occupancy, self._occupancy_map(
            np.arange(0.0, poisson_support(occupancy) + 2.0), lam_i, point.batch_max, servers))[0])
        seen = min(occupancy + 1, point.batch_max)
        # the prompts that arrived during a request's own step are still to be prefilled when its decode begins: V,
        # a compound Poisson sum of X + π over λ_i·J·(own step) of them, delays it by V/(1 − ρx) (preemptive resume
        # with that work present at the start)
        join = lam_i * point.prefill_utilization ** (servers - 1)
        z1, z2 = x_mean + pi, x_second + 2 * pi * x_mean + pi * pi
        arrivals = join * point.prefill_mean_s
        v1 = arrivals * z1
        v2 = arrivals * z2 + (join * z1) ** 2 * max(s_second - s_mean**2, 0.0) + v1 * v1
        point.backlog_s = v1
        point.tpot, rho_x = self.tpot_stats(seen, occupancy, lam_i, occupancy, gain=point.gain,
                                            stats=stats, judge=True, servers=servers,
                                            backlog=(v1, v2))
        # E[n·TPOT] / E[n]: the decode time per step a request holds its slot (the request mean weights every request)
        m = (self.f.at(seen)[0] / (1 - rho_x) + v1 / ((1 - rho_x) * n_mean)) if n_mean > 0 else 0.0
        n_second = self.lengths.second_steps
        point.residence_s = s_mean + own_extra + n_mean * m
        residence_second = (s_second + 2 * own_extra * s_mean + own_extra**2 + 2 * m * (s_n + own_extra * n_mean)
                            + m * m * n_second)
        slots = servers * point.batch_max
        point.slot_utilization = lam * point.residence_s / slots
        if point.slot_utilization >= 1:
            point.failures.append("slots")
            return point
        point.slot_wait = tails.wait_tail(slots, lam, point.residence_s, self.ca2,
                                          _scv(point.residence_s, residence_second))
        # the wait before a prompt's own step, as the engine schedules it (kvplan.plans.fleet.stepwait): the rest of the
        # step under way and the joiners' work, and a queue only for the prefill work beyond a full step's budget
        join *= self.f.pack_at(occupancy)[1]
        point.full_step_s = full_step = self.f.full_step_at(occupancy)
        point.budget_tokens = max(self.f.chunk_tokens - occupancy, 1.0) if self.f.chunk_tokens else 0.0
        omega = self._budget_work(point, occupancy)
        c_b, th_b, point.budget_utilization, c_w = stepwait.budget_queue(
            servers, lam, float(omega.mean()), float((omega * omega).mean()), full_step, self.ca2)
        point.work_wait, point.prefill_wait = (c_w, th_b), (c_b, th_b)
        if point.budget_utilization >= 1:  # the budget cannot take the prompts
            return point.failures.append("prefill_compute") or point
        values, weights, point.residual_s, point.wait_mean_s = stepwait.wait_points(
            t=t, rho=point.prefill_utilization, lam_i=lam_i, servers=servers, batch=occupancy, rate=join,
            c0=max(s_mean - x_mean - pi, 0.0), z1=z1, z2=z2, k_s=k, mu=k_p - 1, cap=full_step)
        point.wait_points = (values, weights)
        point.busy_share = (1 - min(point.prefill_utilization, 1.0) ** servers) * -math.expm1(-occupancy)
        # d, the engine's prefill dispatch once per request (kvplan.plans.sizing.dispatch), is in TTFT only: a host
        # delay before the prompt is scheduled, not in its service, its residence or the decoders' steps
        point.ttft = self.ttft_stats(point, prefill + self.f.request_dispatch_s,
                                     stepwait.heavy_tail(omega, point.work_wait[0], point.budget_utilization,
                                                         servers, full_step),
                                     stats=stats, judge=True)
        point.running = lam * point.residence_s
        point.concurrency = lam * (point.ttft["mean"] + n_mean * m)
        self._judge(point)
        return point

    def _occupancy_map(self, b: np.ndarray, lam_i: float, batch_max: float, servers: int = 1) -> np.ndarray:
        """``next_occupancy`` of :meth:`evaluate` at each batch of ``b`` at once: λ_i (E[S(b)] + (k_p − 1) E[X + π]
        + E[n]·TPOT(b)), TPOT(b) = t(min(b + 1, B_max)) / (1 − ρ(b)); ∞ where ρ(b) >= 1."""
        step, moments = self.f.step_and_moments(b)
        seen, _ = self.f.step_and_moments(np.minimum(b + 1, batch_max))
        k_p, k, pi, pen = self._packing(b, lam_i, servers, step, moments)
        extra = moments[:, 3] + pen + (moments[:, 6] / k if moments.shape[1] >= 10 else 0.0)
        rho = lam_i * extra
        q = moments[:, 0] / k + moments[:, 3] * (1 - 1 / k) + pen
        own = moments[:, 0] + (k_p - 1) * (moments[:, 3] + pi)
        backlog = lam_i * np.minimum(lam_i * q, 1.0) ** (servers - 1) * own * (moments[:, 3] + pi)
        n_mean = self.lengths.mean_steps
        with np.errstate(divide="ignore", invalid="ignore"):
            decode = np.where(rho < 1, (n_mean * seen + backlog) / (1 - rho), np.inf) if n_mean > 0 else \
                np.where(rho < 1, 0.0, np.inf)
        return lam_i * (own + decode)

    def _budget_work(self, point: Point, t_decoders: float) -> np.ndarray:
        """ω at the :data:`TAIL_POINTS` prompt lengths (:func:`kvplan.plans.fleet.stepwait.budget_work`)."""
        if point.budget_tokens <= 0 or not math.isfinite(point.full_step_s):
            return np.zeros(1)
        prefill = np.interp(self._tail_isl, self.lengths.isl_grid, self.f.prefill_row(t_decoders))
        return stepwait.budget_work(self._tail_isl, prefill, point.full_step_s, point.budget_tokens)

    def ttft_stats(self, point: Point, prefill_points: np.ndarray, heavy=None, stats=None, judge: bool = False) -> dict:
        """TTFT statistics: the slot wait, the budget queue's full steps, the wait before the own step and the own
        prefill convolved (:func:`kvplan.plans.fleet.stepwait.ttft_cdf`); ``judge`` also sets ``"meets"`` from the
        CDF at the TTFT SLO's limit."""
        (c1, th1), (c2, th2) = point.slot_wait, point.prefill_wait
        skip = point.full_step_s if c2 > 0 else 0.0
        values, shares = point.wait_points if point.wait_points else (np.zeros(1), np.ones(1))
        own = np.asarray(prefill_points, dtype=np.float64)
        service, where = np.unique(own[:, None] + values[None, :], return_inverse=True)
        weights = np.bincount(where.ravel(), weights=np.broadcast_to(shares / own.size, (own.size, shares.size)).ravel())
        out = {"mean": c1 * th1 + c2 * (skip + th2) + float(own.mean()) + point.wait_mean_s}
        cdf = stepwait.ttft_cdf(service, weights, point.slot_wait, point.prefill_wait, skip, heavy)
        wanted = [s for s in (self.stats if stats is None else stats) if s != "mean"]
        hi = float(service.max()) + skip + 50 * max(th1 if math.isfinite(th1) else 0,
                                                   th2 if math.isfinite(th2) else 0) + 1
        if heavy is not None:
            hi += 10 * float(self.f.prefill_grid_s.max())
        slo = self.slos.get("ttft") if judge else None
        if slo is not None:
            out["meets"] = bool(_meets(slo, out["mean"], cdf))
        if wanted:
            qs = stepwait.ttft_quantiles(cdf, [_quantile(s) for s in wanted], service, weights, point.prefill_wait, skip,
                                         hi, BRACKET_ROUNDS if service.size <= BRACKET_MAX_POINTS else 0)
            out.update(dict(zip(wanted, (float(v) for v in qs))))
        return out

    def _judge(self, point: Point) -> None:
        for kind, values in (("ttft", point.ttft), ("tpot", point.tpot)):
            slo = self.slos.get(kind)
            if slo is not None and not values.get("meets", values.get(slo.stat, math.inf) <= slo.limit_s * (1 + 1e-12)):
                point.failures.append(f"{kind}_slo")
        if "ttft" not in self.slos and max(point.slot_utilization, point.prefill_utilization) > self.max_utilization:
            point.failures.append("utilization")

    # ----------------------------------------------------------------- limits
    def best_alone(self) -> tuple[dict, dict]:
        """TTFT and TPOT statistics of requests that never meet another one (the N → ∞ limit)."""
        tpot, _ = self.tpot_stats(1, 0, 0.0, 0)
        alone = Point(instances=1, rate_per_s=0.0)
        return self.ttft_stats(alone, self.f.prefill_alone_s + self.f.request_dispatch_s), tpot

    def search(self, max_instances: int = 1_000_000) -> tuple[Point, Point | None]:
        """Fewest instances whose point meets every constraint, and the point at one fewer (None at 1).

        Doubling then bisection on N, judging each N by the SLOs' own statistics only; the answer is then evaluated
        in full, the point below at the mean and the SLOs' statistics (all that :mod:`~.binding` reads of it).
        """
        hi = 1
        if self.evaluate(1, full=False).ok:
            return self.evaluate(1), None
        while True:
            lo, hi = hi, hi * 2
            if hi > max_instances:
                raise OverflowError(max_instances)
            if self.evaluate(hi, full=False).ok:
                break
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self.evaluate(mid, full=False).ok else (mid, hi)
        judged = tuple(dict.fromkeys(["mean", *(slo.stat for slo in self.slos.values())]))
        return self.evaluate(hi), self.evaluate(lo, stats=judged)


def _meets(slo: Slo, mean: float, cdf) -> bool:
    """Whether a statistic meets its SLO: the mean against the limit, a percentile by P(X <= limit) >= q."""
    if slo.stat == "mean":
        return mean <= slo.limit_s * (1 + 1e-12)
    return float(np.atleast_1d(cdf(np.array([slo.limit_s * (1 + 1e-12)])))[0]) >= _quantile(slo.stat) - 1e-12


def _quantile(stat: str) -> float:  # 'p99' → 0.99
    return STAT_QUANTILES.get(stat) or float(stat[1:]) / 100


def _scv(mean: float, second: float) -> float:
    """Squared coefficient of variation from the first two moments."""
    return max(second / mean**2 - 1.0, 0.0) if mean > 0 else 0.0

"""``kvplan plan``: from a workload (flags or a real trace) to an aggregated-serving fleet with percentile latencies.

For one instance shape (``tp × pp`` GPUs, one engine with continuous batching and chunked
prefill) :func:`plan_aggregated` finds the fewest instances N that hold the workload's KV, meet
the TTFT and TPOT percentile SLOs and keep every queue stable, and says which constraint binds
(what fails at N − 1, with its numbers: :mod:`kvplan.plans.fleet.binding`): a user SLO
(``ttft_slo``, ``tpot_slo``) or an engine resource (``kv_capacity``, ``max_num_seqs``,
``max_num_batched_tokens``, ``memory``), or ``utilization`` when no TTFT SLO is given (queues kept
at or below ``max_utilization``). The model and its approximations are in
:mod:`kvplan.plans.fleet.model`; :mod:`kvplan.sim` checks them by simulation.

A plan is infeasible (``FleetPlan.feasible`` false, the CLI exits 1) when no N can meet it — a
request of p99 context does not fit an instance's KV pool, the TPOT SLO fails at batch 1 with no
other traffic, the TTFT SLO fails for a prompt arriving at an empty fleet — or when it needs more
than ``max_gpus``; the reason and the best achievable value are reported.

A PD planner calls :func:`plan_aggregated` for the aggregated alternative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.errors import InputError
from kvplan.plans.fleet import model as fm
from kvplan.plans.fleet.binding import binding, binding_detail
from kvplan.plans.fleet.model import FleetModel, LengthStats, Point, Slo
from kvplan.plans.deployment import Deployment, EngineSettings, Parallelism, resolve
from kvplan.units import format_bytes, format_seconds
from kvplan.workload.slo import parse_slo  # noqa: F401  (re-exported: the one SLO grammar)
from kvplan.workload.summary import arrival_scv, rate_buckets
from kvplan.workload.synthetic import Workload
from kvplan.workload.traces import Trace

DEFAULT_SAMPLE = 100_000


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Shape:
    """One instance: tensor- and pipeline-parallel sizes, attention data parallel and expert parallel (vLLM's flags)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    redundant_experts: int = 0

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep(self) -> int:
        return self.tp * self.dp if self.expert_parallel else 1

    def parallelism(self) -> Parallelism:
        return Parallelism(self.tp, self.pp, self.dp, self.expert_parallel, self.redundant_experts)

    def label(self) -> str:
        """'tp=8', 'tp=8 pp=2', 'tp=1 dp=8 ep=8'."""
        return (f"tp={self.tp}" + (f" pp={self.pp}" if self.pp > 1 else "") + (f" dp={self.dp}" if self.dp > 1 else "")
                + (f" ep={self.ep}" if self.expert_parallel else ""))


@dataclass(frozen=True, eq=False)
class FleetWorkload:
    """Arrival rate and burstiness, the lengths' statistics, and how to replay it in the simulator."""

    rate_per_s: float
    arrival_scv: float
    lengths: LengthStats
    description: str
    trace: Trace | None = None
    spec: Workload | None = None
    peak_rate_per_s: float | None = None

    @classmethod
    def from_trace(cls, trace: Trace, qps: float | None = None) -> FleetWorkload:
        """A trace's own rate (``(n − 1) / duration``), or ``qps`` by rescaling its time axis; ca² from its
        gaps (:func:`kvplan.workload.summary.arrival_scv`, unchanged by the rescaling)."""
        if trace.requests < 2 or trace.arrival_s[-1] <= 0:
            raise InputError(f"trace '{trace.source}' needs at least two requests at different times to give a rate",
                             "use a longer trace, or workload flags (--qps, --isl, --osl)")
        original = trace.arrival_s
        rate = 1.0 / float(np.diff(original).mean())
        scale = 1.0
        if qps is not None:
            _check_rate(qps)
            scale = rate / qps
            trace = replace(trace, arrival_s=trace.arrival_s * scale)
            rate = qps
        peak = float(rate_buckets(trace.arrival_s, 60.0).max()) / 60.0 if trace.arrival_s[-1] >= 60 else None
        name = Path(trace.source).name or trace.source
        text = f"trace {name}: {trace.requests:,} requests" + (f", time axis × {scale:.4g}" if qps else "")
        return cls(rate, arrival_scv(original), LengthStats(trace.isl, trace.osl), text,
                   trace=trace, peak_rate_per_s=peak)

    @classmethod
    def from_spec(cls, spec: Workload, sample_requests: int = DEFAULT_SAMPLE, seed: int = 0) -> FleetWorkload:
        """A flag-defined workload: lengths from a seeded sample, ca² = arrival_cv² (measured for multi-turn)."""
        sample = spec.sample(sample_requests, seed)
        scv = spec.interarrival_scv(sample_requests, seed)
        return cls(spec.rate_per_s, scv, LengthStats(sample.isl, sample.osl),
                   f"flags: {sample_requests:,} sampled requests (seed {seed})", spec=spec)

    def at_peak(self) -> FleetWorkload:
        """Plan for the trace's busiest minute: the rate becomes the peak, the replay stays the trace."""
        if not self.peak_rate_per_s:
            raise InputError("--rate-basis peak needs a trace of at least a minute",
                             "use --rate-basis mean, or give the peak rate with --qps")
        return replace(self, rate_per_s=self.peak_rate_per_s,
                       description=f"{self.description}; planned at the busiest minute's rate")

    def scaled(self, multiplier: float) -> FleetWorkload:
        """The same lengths and burstiness at ``multiplier`` × the rate."""
        trace = self.trace
        if trace is not None:
            trace = replace(trace, arrival_s=trace.arrival_s / multiplier)
        spec = self.spec.model_copy(update={"rate_per_s": self.spec.rate_per_s * multiplier}) if self.spec else None
        peak = self.peak_rate_per_s * multiplier if self.peak_rate_per_s else None
        return replace(self, rate_per_s=self.rate_per_s * multiplier, trace=trace, spec=spec,
                       peak_rate_per_s=peak)

    def replay(self, requests: int | None, seed: int = 0) -> Trace:
        """What the simulator replays: the trace itself (its first ``requests``), or a fresh seeded sample."""
        if self.trace is not None:
            if requests is None or requests >= self.trace.requests:
                return self.trace
            return replace(self.trace, arrival_s=self.trace.arrival_s[:requests], isl=self.trace.isl[:requests],
                           osl=self.trace.osl[:requests], block_offsets=None, block_ids=None)
        return self.spec.sample(requests or 10_000, seed)


def _check_rate(rate) -> None:
    """A positive, finite arrival rate (InputError naming --qps otherwise)."""
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise InputError(f"--qps must be > 0 (got {rate})", "the arrival rate in requests per second, e.g. --qps 400")


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class FleetMemory:
    """The fleet's memory at its N instances (bytes; ``_per_instance`` for one instance, else the fleet).

    KV per sequence k(C) is per instance (× GPUs); demand = running requests × k(C) at the mean and at
    the p99 context; held = running × k at the decode context L̄; headroom = capacity − p99 demand.
    """

    kv_bytes_per_sequence_mean: float
    kv_bytes_per_sequence_p99: float
    kv_demand_mean_bytes: float
    kv_demand_p99_bytes: float
    kv_demand_mean_bytes_per_instance: float
    kv_demand_p99_bytes_per_instance: float
    kv_held_mean_bytes: float
    kv_capacity_bytes: float
    kv_capacity_bytes_per_instance: float
    headroom_bytes: float
    weights_bytes: float
    activation_bytes: float
    memory_demand_bytes: float
    gpu_memory_bytes: float


@dataclass
class FleetPlan:
    """An aggregated fleet for one workload: counts, batch, KV, memory, percentile latencies, binding constraint.

    Built by :func:`plan_fleet` (and grown by its replay in :mod:`kvplan.plans.fleet.plan`); its JSON
    row is :func:`kvplan.plans.fleet.rows.plan_row` (``row()``), made for output only.
    """

    model: str
    hardware: str
    shape: Shape
    engine: EngineSettings
    rate_per_s: float
    slos: dict[str, Slo]
    feasible: bool
    binding_constraint: str
    reason: str | None = None
    hint: str | None = None
    instances: int | None = None
    point: Point | None = None
    below: Point | None = None
    figures: fm.InstanceFigures | None = None
    memory: FleetMemory | None = None
    ttft: dict = field(default_factory=dict)   # {stat: seconds}, stat in model.STATS
    tpot: dict = field(default_factory=dict)
    explain: list[str] = field(default_factory=list)
    sized_by: str = "closed_form"           # or "replay": sized (and checked) by its replay (kvplan.plans.fleet.replay)
    closed_form_instances: int | None = None
    binding_note: str | None = None         # the N − 1 numbers when the replay, not the closed form, binds
    assumptions: list[str] = field(default_factory=list)
    sim: object | None = None               # the replay (kvplan.sim.SimResult) that sized or checked the plan
    setup: dict = field(default_factory=dict, repr=False)  # cost, machine, layout: for the simulator

    @property
    def gpus_per_instance(self) -> int:
        return self.shape.gpus

    @property
    def total_gpus(self) -> int | None:
        return None if self.instances is None else self.instances * self.shape.gpus

    @property
    def batch_per_rank(self) -> int | None:
        """The batch cap of one engine core (vLLM's max_num_seqs to set; one per attention-DP rank)."""
        return self.point.batch_max if self.point is not None and self.point.batch_max else None

    @property
    def batch_per_instance(self) -> int | None:
        return None if self.batch_per_rank is None else self.batch_per_rank * self.shape.dp

    @property
    def deployment(self) -> Deployment | None:
        return self.setup.get("deployment")

    @property
    def nodes(self) -> int | None:
        """Whole nodes of the deployment's system the fleet takes: ⌈instances / ⌊node / g⌋⌉ for g <= node GPUs
        per instance, else instances × ⌈g / node⌉ (an instance spans whole nodes); None without a system."""
        system = self.deployment.system if self.deployment is not None else None
        if system is None or self.instances is None:
            return None
        node, g = system.accelerators, self.shape.gpus
        return math.ceil(self.instances / (node // g)) if g <= node else self.instances * math.ceil(g / node)

    def row(self) -> dict:
        """The plan as one flat JSON row (:func:`kvplan.plans.fleet.rows.plan_row`)."""
        from kvplan.plans.fleet.rows import plan_row

        return plan_row(self)


def plan_aggregated(
    card: ModelCard | str, hw: HardwareCard | str, workload: FleetWorkload, slos: dict[str, Slo] | list[Slo] = (),
    shape: Shape = Shape(), engine: EngineSettings = EngineSettings(), *, system=None, max_gpus: int | None = None,
    max_utilization: float = 0.9, allow_long_context: bool = False, cards: tuple[Path, ...] = (),
) -> FleetPlan:
    """Fewest instances of ``shape`` that serve ``workload`` within ``slos``; see the module docstring.

    Resolves the :class:`Deployment` (``system``: the node or supernode around ``hw``) and calls
    :func:`plan_fleet`.
    """
    _check_inputs(workload, shape, engine, max_gpus, max_utilization)
    dep = resolve(card, hw, system=system, engine=engine, parallel=shape.parallelism(), cards=cards)
    return plan_fleet(dep, workload, slos, max_gpus=max_gpus, max_utilization=max_utilization,
                      allow_long_context=allow_long_context)


def plan_fleet(dep: Deployment, workload: FleetWorkload, slos: dict[str, Slo] | list[Slo] = (), *,
               max_gpus: int | None = None, max_utilization: float = 0.9, allow_long_context: bool = False) -> FleetPlan:
    """The aggregated fleet of one resolved deployment for ``workload`` within ``slos``."""
    par = dep.parallel
    card, engine, shape = dep.model, dep.engine, Shape(par.tp, par.pp, par.dp, par.expert_parallel, par.redundant_experts)
    slos = slos if isinstance(slos, dict) else {s.kind: s for s in slos}
    _check_inputs(workload, shape, engine, max_gpus, max_utilization)
    _check_context(card, workload, allow_long_context)
    cost, machine = dep.cost, dep.machine
    figures = fm.instance_figures(cost, machine, shape.tp, workload.lengths, dep.layout, dep.pool.bytes_per_gpu,
                                  engine.max_num_seqs, engine.chunk_tokens, dp=shape.dp, steps=dep.steps)
    model = FleetModel(figures, workload.lengths, workload.rate_per_s, workload.arrival_scv, slos, max_utilization,
                       dp=shape.dp)
    plan = FleetPlan(model=card.name, hardware=dep.hardware.name, shape=shape, engine=engine,
                     rate_per_s=workload.rate_per_s, slos=slos, feasible=True, binding_constraint="none",
                     figures=figures,
                     setup={"model": model, "hardware": dep.hardware, "cost": cost, "machine": machine,
                            "steps": dep.steps,
                            "layout": dep.layout, "deployment": dep,
                            "context_mean": workload.lengths.context_mean, "context_p99": workload.lengths.context_p99,
                            "decode_context": workload.lengths.decode_context})
    plan.assumptions = list(dict.fromkeys([*dep.notes, *dep.step_notes,
                                           *_notes(card, workload, shape, engine, slos, max_utilization)]))
    _solve(plan, model, card, dep.hardware, workload, dep, max_gpus)
    plan.explain = _explain(plan, workload, dep)
    return plan


def _check_inputs(workload, shape, engine, max_gpus, max_utilization) -> None:
    _check_rate(workload.rate_per_s)
    for name, value in (("--tp", shape.tp), ("--pp", shape.pp), ("--max-num-seqs", engine.max_num_seqs),
                        ("--chunk-size", engine.chunk_tokens)):
        if value is None and name in ("--max-num-seqs", "--chunk-size"):
            continue  # the engine's default for the GPU, set when the deployment is resolved
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a whole number >= 1 (got {value})", "see 'kvplan plan --help'")
    if max_gpus is not None and max_gpus < 1:
        raise InputError(f"--max-gpus must be >= 1 (got {max_gpus})", "the GPU budget of the whole fleet")
    if not 0 < max_utilization < 1:
        raise InputError(f"--max-utilization must be in (0, 1) for plan (got {max_utilization})",
                         "plan's instances queue requests, and a queue at utilisation 1 never drains; e.g. 0.9")


def _check_context(card, workload, allow_long_context) -> None:
    lengths = workload.lengths
    if lengths.context_p99 > card.max_context and not allow_long_context:
        raise InputError(
            f"the workload's p99 context (ISL + OSL = {lengths.context_p99:,.0f} tokens) exceeds {card.name}'s "
            f"max_context ({card.max_context:,})",
            "pass --allow-long-context if the deployment extends the context (RoPE scaling), or use shorter requests")


def _solve(plan: FleetPlan, model: FleetModel, card, hw, workload, dep: Deployment, max_gpus) -> None:
    f = plan.figures
    best_ttft, best_tpot = model.best_alone()
    plan.ttft, plan.tpot = best_ttft, best_tpot
    if dep.memory.kv_cache_memory_bytes <= 0 or f.batch_kv < 1:
        no_memory = dep.memory.kv_cache_memory_bytes <= 0
        plan.feasible, plan.binding_constraint = False, "memory" if no_memory else "kv_capacity"
        if no_memory:
            plan.reason = (f"no KV memory: weights ({format_bytes(dep.memory.weights_bytes_per_gpu)} per GPU) and "
                           f"reserves fill {hw.name} at {plan.shape.label()}")
        else:
            need = format_bytes(float(np.percentile(f.seq_bytes_per_gpu, 99)))
            plan.reason = (f"one request at the p99 context ({workload.lengths.context_p99:,.0f} tokens) needs "
                           f"{need} of KV per GPU; the pool holds {format_bytes(f.pool_bytes_per_gpu)}")
        plan.hint = "raise --tp or --pp, use --kv-dtype fp8, or quantise the weights (--weights-dtype fp8)"
        return
    for kind, values in (("tpot", best_tpot), ("ttft", best_ttft)):
        slo = plan.slos.get(kind)
        if kind == "tpot" and model.lengths.n_points.size == 0:
            continue  # every request ends with its first token: no TPOT to judge (the SLO holds vacuously)
        if slo is not None and not values[slo.stat] <= slo.limit_s:
            plan.feasible, plan.binding_constraint = False, f"{kind}_slo"
            what = ("a request decoding alone (batch 1, no prefill interference)" if kind == "tpot"
                    else "a request arriving at an idle instance (prefill alone, no queueing)")
            plan.reason = (f"{kind.upper()} {slo.stat} <= {format_seconds(slo.limit_s)} is unattainable: {what} "
                           f"already takes {format_seconds(values[slo.stat])} ({kind} {slo.stat}); no batch size or "
                           "instance count does better")
            plan.hint = (f"relax --{kind} to at least {format_seconds(values[slo.stat])}, or use faster hardware, "
                         "a larger --tp, or lighter weights (--weights-dtype fp8)")
            return
    try:
        point, below = model.search()
    except OverflowError:
        plan.feasible, plan.binding_constraint = False, "instances"
        plan.reason = "no fleet of up to 1,000,000 instances meets the SLOs"
        plan.hint = "check the rate and the SLOs"
        return
    plan.point, plan.below, plan.instances = point, below, point.instances
    plan.ttft, plan.tpot = point.ttft, point.tpot
    plan.binding_constraint = binding(below, f, plan.engine, plan.slos) if below is not None else "none"
    plan.memory = _memory(plan, dep)
    if max_gpus is not None and plan.total_gpus > max_gpus:
        plan.feasible = False
        plan.reason = (f"needs {plan.total_gpus:,} GPUs ({plan.instances:,} instances × {plan.shape.gpus}), more than "
                       f"--max-gpus {max_gpus:,} (binding: {plan.binding_constraint})")
        plan.hint = "raise --max-gpus, relax the SLOs, or lower the rate"


def _memory(plan: FleetPlan, dep: Deployment) -> FleetMemory:
    p, f, gpus = plan.point, plan.figures, plan.shape.gpus
    n, seq_gpus = plan.instances, plan.shape.tp * plan.shape.pp  # a sequence lives on one DP rank's GPUs
    layout = plan.setup["layout"]
    k_mean, k_p99, k_held = (float(x) for x in layout.sequence_bytes(
        np.array([plan.setup["context_mean"], plan.setup["context_p99"], plan.setup["decode_context"]]), per_gpu=True))
    per_instance_mean = p.running / n * k_mean * seq_gpus
    per_instance_p99 = p.running / n * k_p99 * seq_gpus
    capacity_instance = f.pool_bytes_per_gpu * gpus
    weights = dep.memory.weights_bytes_per_gpu * gpus * n
    activations = dep.memory.activation_bytes * gpus * n
    return FleetMemory(
        kv_bytes_per_sequence_mean=k_mean * seq_gpus, kv_bytes_per_sequence_p99=k_p99 * seq_gpus,
        kv_demand_mean_bytes=per_instance_mean * n, kv_demand_p99_bytes=per_instance_p99 * n,
        kv_demand_mean_bytes_per_instance=per_instance_mean, kv_demand_p99_bytes_per_instance=per_instance_p99,
        kv_held_mean_bytes=p.running * k_held * seq_gpus,
        kv_capacity_bytes=capacity_instance * n, kv_capacity_bytes_per_instance=capacity_instance,
        headroom_bytes=(capacity_instance - per_instance_p99) * n,
        weights_bytes=weights, activation_bytes=activations,
        memory_demand_bytes=weights + activations + per_instance_mean * n,
        gpu_memory_bytes=dep.hardware.hbm_capacity_bytes * gpus * n,
    )


def _notes(card, workload: FleetWorkload, shape: Shape, engine: EngineSettings, slos, max_utilization) -> list[str]:
    notes = [f"workload: {workload.description}; rate {workload.rate_per_s:,.4g} req/s, inter-arrival SCV "
             f"{workload.arrival_scv:.3g} (renewal arrivals assumed)"]
    if workload.peak_rate_per_s and workload.peak_rate_per_s > 1.2 * workload.rate_per_s:
        notes.append(f"the trace's busiest minute runs at {workload.peak_rate_per_s:,.3g} req/s "
                     f"({workload.peak_rate_per_s / workload.rate_per_s:.2f}× the mean); plan for it with "
                     "--rate-basis peak")
    notes.append(f"chunked prefill: {engine.chunk_tokens:,} tokens per step (max_num_batched_tokens), decode tokens "
                 "first; the step that finishes a prompt emits its first token; no prefix caching")
    if shape.dp > 1:
        notes.append(f"attention data parallel: each of the {shape.dp} DP ranks (tp={shape.tp}) is an engine core with "
                     f"its own KV pool, max_num_seqs and token budget, in lock step with the others equally loaded; "
                     + (f"experts over ep = tp × dp = {shape.ep}" + (f" with {shape.redundant_experts} redundant"
                        if shape.redundant_experts else "") if shape.expert_parallel else "MoE layers tensor parallel")
                     + "; batch_per_rank is the max_num_seqs to set")
    if shape.pp > 1:
        notes.append("pipeline parallelism: a step is timed as the whole model on tp GPUs; pp adds memory, "
                     "not modelled throughput")
    if "ttft" not in slos:
        notes.append(f"no TTFT SLO: queues kept at or below {max_utilization:.0%} utilisation")
    if "tpot" not in slos:
        notes.append("no TPOT SLO: the batch is capped by KV capacity and max_num_seqs only")
    beyond = int((workload.lengths.isl + workload.lengths.osl > card.max_context).sum())
    if beyond:
        notes.append(f"{beyond:,} requests exceed {card.name}'s max_context ({card.max_context:,}); planned as given")
    return notes


# --------------------------------------------------------------------------- explain


def _explain(plan: FleetPlan, workload: FleetWorkload, dep: Deployment) -> list[str]:
    L, f = workload.lengths, plan.figures
    lines = [
        f"workload: λ = {workload.rate_per_s:,.4g} req/s, ca² = {workload.arrival_scv:.3g}; ISL mean "
        f"{L.mean_isl:,.0f}, OSL mean {L.mean_osl:,.1f}; context C = ISL + OSL: mean {L.context_mean:,.0f}, "
        f"p99 {L.context_p99:,.0f}; decode context L̄ = E[Σj (ISL + j)] / E[n] = {L.decode_context:,.0f}",
        f"KV pool per GPU = {dep.pool.blocks_per_gpu:,} blocks × {dep.pool.block_bytes_per_gpu:,.0f} B = "
        f"{format_bytes(f.pool_bytes_per_gpu)}; k(C) per GPU: mean {format_bytes(f.seq_bytes_per_gpu.mean())}, "
        f"p99 {format_bytes(np.percentile(f.seq_bytes_per_gpu, 99))}",
        f"batch from KV: B·E[k] + 2.326·√B·sd[k] <= pool → B_kv = {f.batch_kv:,} (pool / k(mean C) = "
        f"{f.batch_kv_mean:,}, pool / k(p99 C) = {f.batch_kv_p99:,}); cap = min(B_kv, max_num_seqs "
        f"{plan.engine.max_num_seqs}, chunk/2 {plan.engine.chunk_tokens // 2}) = {f.batch_cap:,}",
        f"step t(b) at L̄: b=1 {format_seconds(f.step_s[1])}, b={int(f.b_grid[-2])} {format_seconds(f.step_s[-2])}; "
        f"prefill alone S(ISL): mean {format_seconds(f.prefill_alone_s.mean())}, max point "
        f"{format_seconds(f.prefill_alone_s.max())}",
    ]
    p = plan.point
    if p is None:
        lines.append(f"infeasible ({plan.binding_constraint}): {plan.reason}")
        return lines
    n = p.instances
    lam_i = p.rate_per_s / (n * plan.shape.dp)
    (c1, th1), (c2, th2) = p.slot_wait, p.prefill_wait
    lines += [
        f"N = {n:,} instances → λ_i = λ/N = {lam_i:,.4g} req/s per instance" if plan.shape.dp == 1 else
        f"N = {n:,} instances × {plan.shape.dp} DP ranks → λ_i = λ/(N·dp) = {lam_i:,.4g} req/s per rank (the figures "
        "below are one rank's)",
        f"batch for TPOT: largest b with TPOT {plan.slos['tpot'].stat if 'tpot' in plan.slos else '—'} <= SLO = "
        f"{p.batch_tpot:,}; batch_per_instance = min(cap, that) = {p.batch_max:,}",
        f"packing (gated): k_s = {p.packing_step:.3g} prompts per mixed step, k_p = {p.packing:.3g} in a prompt's own; "
        f"pair penalty π(1 − 1/k_s) = {format_seconds(p.pack_penalty_s)}; interference ρx = λ_i·E[X + π(1 − 1/k_s)] = "
        f"{p.rho_interference:.4g}; prefill utilisation λ_i·E[S_q] = {p.prefill_utilization:.4g}; own prefill "
        f"E[S] + (k_p − 1)·E[X + π] = {format_seconds(p.prefill_mean_s)}",
        f"TPOT mean = (t(B̄+1) + E[V]/n)/(1 − ρx) over requests, E[V] = {format_seconds(p.backlog_s)} queued at a "
        f"decode's start: {format_seconds(p.tpot['mean'])}; p50/p90/p99 = " + _three(p.tpot),
        f"occupancy B̄ = λ_i·(own prefill + E[n]·TPOT) = {lam_i:.4g} × ({format_seconds(p.prefill_mean_s)} + "
        f"{L.mean_steps:,.1f} × {format_seconds(p.tpot['mean'])}) = {p.batch_mean:,.3g} (Little's law)",
        f"decode slots: c = N × B = {n * p.batch_max:,}, utilisation {p.slot_utilization:.4g}, Erlang-C P(wait) = "
        f"{c1:.3g}, tail θ = {_th(th1)}",
        f"before its own step a prompt waits the step under way (mean {format_seconds(p.residual_s)}; a decode step "
        f"for {p.busy_share:.3g} of arrivals) and the joiners' work; token budget {p.budget_tokens:,.0f} a step, a "
        f"full step {format_seconds(p.full_step_s)}, budget utilisation ρ_b = λ_i·E[ω] = "
        f"{p.budget_utilization:.4g}; beyond it P(wait full steps) = {c2:.3g}, tail θ = {_th(th2)} (Allen–Cunneen)",
        f"TTFT = W_slot + W_budget + V + S: mean "
        f"{format_seconds(p.ttft['mean'])}, p50/p90/p99 = " + _three(p.ttft),
        f"concurrency = λ·(E[TTFT] + E[n]·TPOT) = {p.concurrency:,.4g}; running (holding KV) = "
        f"λ·(own prefill + E[n]·TPOT) = {p.running:,.4g}",
        f"KV demand = running × k(C) × GPUs/instance: mean {format_bytes(plan.memory.kv_demand_mean_bytes)}, "
        f"p99 context {format_bytes(plan.memory.kv_demand_p99_bytes)}; held on average (k at L̄) "
        f"{format_bytes(plan.memory.kv_held_mean_bytes)}; capacity {format_bytes(plan.memory.kv_capacity_bytes)}",
    ]
    if plan.below is not None:
        b = plan.below
        failed = ", ".join(b.failures)
        lines.append(f"at N − 1 = {b.instances:,}: fails {failed} → binding: {plan.binding_constraint} "
                     f"({binding_detail(plan)})")
    else:
        lines.append("one instance meets every constraint → binding: none")
    if not plan.feasible:
        lines.append(f"infeasible: {plan.reason}")
    return lines


def _three(values: dict) -> str:
    return " / ".join(format_seconds(values[s]) for s in ("p50", "p90", "p99"))


def _th(theta: float) -> str:
    return "∞" if not math.isfinite(theta) else format_seconds(theta)

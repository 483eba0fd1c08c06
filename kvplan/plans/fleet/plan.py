"""``kvplan plan``: the fleet for a workload, its scale-out table and (optionally) a simulation beside it.

Returns a typed :class:`FleetAnswer` (the chosen plan, the runners-up, one re-plan per rate
multiplier, notes, the chain of numbers); its JSON rows are made by :mod:`kvplan.plans.fleet.rows`
for output only, and :mod:`kvplan.report.fleet_tables` turns them into the tables people read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvplan.errors import InputError
from kvplan.plans.deployment import Deployment, resolve, resolve_cards
from kvplan.plans.fleet.aggregated import (EngineSettings, FleetPlan, FleetWorkload, Shape, Slo, _check_inputs, _check_rate,
                                           plan_fleet)
from kvplan.result import Answer
from kvplan.units import format_seconds
from kvplan.workload.synthetic import workload_from_flags
from kvplan.workload.traces import read_trace

# Requests a replay of a trace takes by default: its first 100,000 (the most --sim-requests accepts: the
# replay costs ~0.13 ms a request, about 14 s end to end at this size with the scale-out rows). A trace
# of millions of requests (the read cap is 4 GiB) replayed whole took minutes per replayed fleet size.
MAX_REPLAY_REQUESTS = 100_000

PLAN_COLUMNS = [
    "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "concurrency", "kv_demand_mean_bytes",
    "kv_demand_p99_bytes", "kv_capacity_bytes", "headroom_bytes", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "binding_constraint", "feasible",
]


@dataclass(frozen=True)
class ScalePoint:
    """The chosen shape re-planned at ``multiplier`` × the workload's rate."""

    multiplier: float
    plan: FleetPlan


@dataclass(frozen=True)
class FleetAnswer(Answer):
    """``kvplan plan``'s answer: the chosen plan, every shape searched (chosen first), the scale-out re-plans.

    ``notes`` are the assumptions and defaults taken, ``explain`` the chain of numbers; ``rows`` is the
    JSON form (:func:`kvplan.plans.fleet.rows.answer_rows`), made when output asks for it.
    """

    plan: FleetPlan
    candidates: tuple[FleetPlan, ...]
    scale: tuple[ScalePoint, ...]
    notes: tuple[str, ...]
    explain: tuple[str, ...]
    title: str
    rate_per_s: float
    mean_osl: float
    gpu_cost: dict | None = None
    skipped: tuple[str, ...] = ()

    @property
    def feasible(self) -> bool:
        return self.plan.feasible

    @property
    def verdict(self) -> str | None:
        return None if self.plan.feasible else f"infeasible: {self.plan.reason}"

    @property
    def failed(self) -> bool:
        return not self.plan.feasible

    @property
    def columns(self) -> list[str]:
        return list(PLAN_COLUMNS)

    @property
    def rows(self) -> list[dict]:
        from kvplan.plans.fleet.rows import answer_rows

        return answer_rows(self)


def fleet_workload(*, trace: str | Path | None = None, qps: float | None = None, isl: str | None = None,
                   osl: str | None = None, arrival_cv: float = 1.0, turns: int = 1, think_time: str | float = "0s",
                   shared_prefix: str | int = "0", trace_format: str = "auto", columns: str | dict | None = None,
                   timestamp_unit: str | None = None, skip_bad_rows: bool = False, rate_basis: str = "mean",
                   sample_requests: int = 100_000, seed: int = 0) -> FleetWorkload:
    """A workload from a trace file (``qps`` rescales its time axis) or from flags (``qps``, ``isl``, ``osl``, …).

    Lengths are written as in :func:`kvplan.workload.synthetic.parse_length` (``2k``, ``1k:8k`` = mean:p99,
    ``mean=2k,p99=16k``, ``p50=1k,p99=8k``).
    """
    if rate_basis not in ("mean", "peak"):
        raise InputError(f"unknown --rate-basis '{rate_basis}'", "choose mean or peak")
    if trace is not None:
        if isl is not None or osl is not None:
            raise InputError("give a --trace or --isl/--osl, not both", "a trace carries its own lengths")
        result = FleetWorkload.from_trace(read_trace(trace, trace_format=trace_format, columns=columns,
                                                     timestamp_unit=timestamp_unit, skip_bad_rows=skip_bad_rows), qps)
        return result.at_peak() if rate_basis == "peak" else result
    if qps is None or isl is None or osl is None:
        raise InputError("no workload: give --trace FILE, or --qps, --isl and --osl",
                         "e.g. kvplan plan llama-3.1-8b h100-sxm --qps 20 --isl 1k:8k --osl 256 --tpot 'p90<=50ms'")
    if rate_basis == "peak":
        raise InputError("--rate-basis peak applies to a trace", "with flags, give the peak rate as --qps")
    if sample_requests < 1000:
        raise InputError(f"--sample must be >= 1000 (got {sample_requests})", "it sets the length statistics")
    _check_rate(qps)
    try:
        spec = workload_from_flags(rate_per_s=qps, isl=isl, osl=osl, arrival_cv=arrival_cv,
                                   turns=turns, think_time=think_time, shared_prefix=shared_prefix)
    except InputError as exc:
        hint = exc.hint.replace("kvplan workload --help", "kvplan plan --help") if exc.hint else exc.hint
        raise InputError(exc.message.replace("--rate:", "--qps:"), hint) from None
    return FleetWorkload.from_spec(spec, sample_requests, seed)


def plan(
    model, hardware, workload: FleetWorkload, slos: Sequence[Slo] = (), shape: Shape | None = None,
    engine: EngineSettings = EngineSettings(), *, tps: Sequence[int] | None = None, pps: Sequence[int] | None = None,
    scale: Sequence[float] = (2, 5, 10), simulate: bool | None = False, sim_requests: int | None = None, seed: int = 0,
    max_gpus: int | None = None, max_utilization: float = 0.9, allow_long_context: bool = False, system=None,
    gpu_cost: dict[str, float] | None = None, cards: tuple[Path, ...] = (), dps: Sequence[int] | None = None,
    expert_parallel: bool | None = None, redundant_experts: int | None = None,
) -> FleetAnswer:
    """The fleet for ``workload`` (the chosen plan), the runners-up, a re-plan per rate multiplier.

    ``model`` is a :class:`Deployment` (then ``hardware``, ``shape``, ``engine`` and ``system`` come
    from it: the shape is pinned) or a model name or card, resolved with ``hardware``/``system``.
    ``shape`` pins the instance (one TP and PP); otherwise ``tps`` × ``pps`` are searched
    (:mod:`kvplan.plans.fleet.search`; default TP 1, 2, 4, 8 and PP where needed) and the cheapest
    feasible plan is the answer's ``plan``, every shape its ``candidates``. The scale-out re-plans
    keep the chosen shape.
    ``sim_requests``: requests to simulate; None replays a whole trace (its first ``MAX_REPLAY_REQUESTS`` when
    longer, said in a note), or samples 10,000 from a flag workload.
    ``simulate``: True sizes the fleet by its own replay (:mod:`kvplan.plans.fleet.replay`), None does
    so for a trace workload only.
    ``gpu_cost``: {hardware: price per GPU-hour}; every row then carries its cost per hour and per
    million output tokens (:mod:`kvplan.plans.fleet.cost`), and the search compares cost.
    ``dps``, ``expert_parallel``, ``redundant_experts``: vLLM's ``--data-parallel-size`` (a list is
    searched; MoE models search DP with EP by default), ``--enable-expert-parallel`` and
    ``--num-redundant-experts`` (:func:`kvplan.plans.fleet.search.candidate_shapes`).
    ``cards``: extra card folders.
    """
    from kvplan.cards.loader import load_model, usual_system
    from kvplan.plans.fleet.search import candidate_shapes, search_shapes

    pinned = shape is None and tps is not None and len(tps) == 1 and (pps is None or len(pps) == 1) and (
        dps is None or len(dps) == 1)
    dep, assumed = None, None
    if isinstance(model, Deployment):
        dep = model
    else:
        _check_inputs(workload, shape or Shape(), engine, max_gpus, max_utilization)
        hw, sys_card = resolve_cards(hardware, system, cards)
        if sys_card is None:  # multi-node by default: the accelerator's usual system (its nodes and NIC)
            sys_card, assumed = usual_system(hw, cards)
        if pinned:
            card = model if hasattr(model, "layer_groups") else load_model(model, cards)
            dp = int(dps[0]) if dps else 1
            shapes, dropped = candidate_shapes(card, hw, [int(tps[0])], [int(pps[0]) if pps else 1], sys_card, [dp],
                                               expert_parallel or (dp > 1 if card.moe is not None else expert_parallel),
                                               redundant_experts)
            if not shapes:
                raise InputError(f"tp={tps[0]}" + (f" dp={dp}" if dp > 1 else "") + f" cannot run {card.name} on "
                                 f"{hw.name}: " + "; ".join(d.removeprefix("plan ") for d in dropped),
                                 "choose another --tp/--dp, or give a --system with a NIC for multi-node EP")
            shape = shapes[0]
        if shape is not None:
            dep = resolve(model, hw, system=sys_card, engine=engine, parallel=shape.parallelism(), cards=cards)
    if any(not (isinstance(m, (int, float)) and math.isfinite(m) and m > 0) for m in scale):
        raise InputError(f"--scale multipliers must be > 0 (got {', '.join(map(str, scale))})", "e.g. --scale 2,5,10")
    capped = None
    if sim_requests is None and workload.trace is None:
        sim_requests = 10_000
    elif sim_requests is None and workload.trace.requests > MAX_REPLAY_REQUESTS:
        sim_requests = capped = MAX_REPLAY_REQUESTS
    if sim_requests is not None and sim_requests < 100:
        raise InputError(f"--sim-requests must be >= 100 (got {sim_requests})", "10000 takes about a second")
    kwargs = {"max_gpus": max_gpus, "max_utilization": max_utilization, "allow_long_context": allow_long_context}
    if simulate is None:
        simulate = workload.trace is not None

    def replay(p: FleetPlan) -> None:
        _size_by_replay(p, workload, sim_requests, seed, max_gpus)

    if dep is not None:
        main = plan_fleet(dep, workload, list(slos), **kwargs)
        if simulate and main.instances is not None:
            replay(main)
        candidates, skipped = [main], []
    else:
        card = model if hasattr(model, "layer_groups") else load_model(model, cards)
        found = search_shapes(card, hw, workload, list(slos), tps, pps, engine, system=sys_card, cards=cards,
                              gpu_cost=gpu_cost, replay=replay if simulate else None, dps=dps,
                              expert_parallel=expert_parallel, redundant_experts=redundant_experts, **kwargs)
        main, candidates, skipped = found.best, found.candidates, found.skipped
    chosen = main.deployment
    card, engine = chosen.model, chosen.engine
    notes = ([assumed] if assumed else []) + list(main.assumptions)
    explain = list(main.explain)
    if len(candidates) > 1:
        notes.append("parallelism searched: " + ", ".join(_shape_text(p) for p in candidates)
                     + f"; chosen {_shape_text(main, brief=True)} (the cheapest feasible)" + (
                         "; " + "; ".join(skipped) if skipped else ""))
    sim = main.sim
    if simulate and sim is None:
        notes.append("simulation skipped: no fleet to simulate")
    elif sim is not None:
        explain += _sim_explain(main, sim)
        source = (f"the first {capped:,} of the trace's {workload.trace.requests:,}; --sim-requests replays fewer"
                  if capped else "the trace" if workload.trace is not None else f"sampled, seed {seed}")
        notes.append(f"simulation: {sim.requests:,} requests ({source})"
                     f", {sim.measured:,} measured (warm-up and drain left out); {sim.steps:,} steps ({sim.mixed_steps:,} with prefill) "
                     f"in {sim.wall_s:.2f} s")
        if sim.rejected:
            notes.append(f"simulation: {sim.rejected:,} requests could never fit an instance's KV pool and were rejected")
        if sim.preemptions:
            notes.append(f"simulation: the KV pool ran out {sim.preemptions:,} times; {main.engine.engine} preempted "
                         f"(recompute) or retracted those requests and prefilled {sim.recomputed_tokens:,} tokens again")
    scaled_plans = []
    for multiplier in scale:
        scaled_workload = workload.scaled(multiplier)
        scaled = plan_fleet(chosen, scaled_workload, list(slos), **kwargs)
        if simulate and scaled.instances is not None:
            _size_by_replay(scaled, scaled_workload, sim_requests, seed, max_gpus)
        scaled_plans.append(ScalePoint(multiplier, scaled))
    if gpu_cost and main.hardware not in gpu_cost:
        notes.append(f"--gpu-cost names no price for {main.hardware}: costs left out")
    title = (f"Fleet plan: {card.name} on {chosen.hardware.name}"
             + (f" ({chosen.system.name} nodes)" if chosen.system is not None else "") + f", {main.shape.label()}"
             + (f" (searched {len(candidates)} shapes)" if len(candidates) > 1 else "")
             + f", {engine.engine}, {workload.rate_per_s:,.4g} req/s")
    return FleetAnswer(plan=main, candidates=tuple(candidates), scale=tuple(scaled_plans), notes=tuple(notes),
                       explain=tuple(explain), title=title, rate_per_s=workload.rate_per_s,
                       mean_osl=workload.lengths.mean_osl, gpu_cost=gpu_cost or None, skipped=tuple(skipped))


def _shape_text(p: FleetPlan, brief: bool = False) -> str:
    shape = p.shape.label()
    if brief:
        return shape
    return f"{shape} → " + (f"{p.total_gpus:,} GPUs" if p.feasible else f"infeasible ({p.binding_constraint})")


def _size_by_replay(main: FleetPlan, workload: FleetWorkload, sim_requests, seed: int, max_gpus):
    """Grow ``main`` (in place) until its replay meets every SLO; infeasible with both figures if none does."""
    from kvplan.plans.fleet.aggregated import _explain, _memory
    from kvplan.plans.fleet.replay import at_instances, broken_slo, replay_until_met

    gpus = main.shape.gpus
    limit = max_gpus // gpus if max_gpus is not None else None
    n0 = main.instances
    closed = {"ttft": dict(main.ttft), "tpot": dict(main.tpot)}
    outcome = replay_until_met(main, workload, sim_requests, seed, limit)
    main.sim = outcome.sim
    main.closed_form_instances, main.sized_by = n0, "replay"
    first_broken = outcome.trail[0][1]
    if outcome.instances is None:
        tried = max(n for n, _ in outcome.trail)
        kind = _kind(first_broken)
        slo = main.slos.get(kind)
        figure = (f" (closed form {format_seconds(closed[kind].get(slo.stat))})" if slo is not None else "")
        grown = at_instances(main, tried)
        main.instances, main.point, main.ttft, main.tpot = tried, grown.point, grown.ttft, grown.tpot
        main.memory = _memory(main, main.deployment)
        main.feasible, main.sized_by = False, "replay"
        main.binding_constraint = f"{kind}_slo" if slo is not None else "kv_capacity"
        main.reason = (f"the plan's own replay breaks the SLO: at {n0:,} instances (the closed form's fleet) "
                       f"{first_broken}{figure}; at {tried:,} instances still {outcome.failure}")
        main.binding_note = main.reason
        main.hint = ("relax the SLO, lower --chunk-size (shorter prefill chunks interrupt decoding less), or raise "
                     "--max-gpus" if limit is not None else "relax the SLO or lower --chunk-size")
        return outcome.sim
    n = outcome.instances
    if n > n0:
        grown = at_instances(main, n)
        main.instances, main.point, main.ttft, main.tpot = n, grown.point, grown.ttft, grown.tpot
        main.below = main.setup["model"].evaluate(n - 1)
        broken = broken_slo(outcome.below_sim, main.slos) if outcome.below_sim is not None else first_broken
        kind = _kind(broken)
        main.binding_constraint = f"{kind}_slo" if kind in main.slos else "kv_capacity"
        slo = main.slos.get(kind)
        closed_below = main.below.ttft if kind == "ttft" else main.below.tpot
        figure = f" (closed form {format_seconds(closed_below.get(slo.stat))})" if slo is not None else ""
        main.binding_note = (f"at N − 1 = {n - 1:,} instances the replay gives {broken}{figure}; the closed form "
                             f"alone would plan {n0:,}")
        main.memory = _memory(main, main.deployment)
        main.explain = _explain(main, workload, main.deployment) + [f"replay: the closed form's {n0:,} instances break the SLO in the replay "
                                       f"({first_broken}); tried " + ", ".join(
                                           f"{k:,} ({'meets' if b is None else b})" for k, b in outcome.trail)
                                       + f" → {n:,} instances"]
        if max_gpus is not None and main.total_gpus > max_gpus:
            main.feasible = False
            main.reason = f"needs {main.total_gpus:,} GPUs by its replay, more than --max-gpus {max_gpus:,}"
    return outcome.sim


def _kind(broken: str) -> str | None:
    """'TTFT p99 …' → 'ttft', 'TPOT …' → 'tpot', a KV rejection → None."""
    return broken[:4].lower() if broken[:4] in ("TTFT", "TPOT") else None


def _sim_explain(p: FleetPlan, sim) -> list[str]:
    lines = [f"simulation: {p.instances:,} instances × batch {p.batch_per_instance}" + (
        f" ({p.shape.dp} DP ranks × {p.batch_per_rank}, each rank a simulated engine)" if p.shape.dp > 1 else "")
             + f", chunk {p.engine.chunk_tokens:,} "
             f"tokens/step, JSQ router; mean decode batch {sim.mean_batch:,.3g} (closed form "
             f"{p.point.batch_mean:,.3g})"]
    stats = sim.stats()
    for kind, values in (("ttft", p.ttft), ("tpot", p.tpot)):
        parts = []
        for s in ("p50", "p90", "p99"):
            closed, simulated = values.get(s), stats.get(f"sim_{kind}_{s}_s")
            parts.append(f"{s} {_seconds(closed)} vs {_seconds(simulated)} ({_diff(closed, simulated)})")
        lines.append(f"  {kind.upper()} closed form vs simulation: " + "; ".join(parts))
    return lines


def _seconds(value) -> str:
    """A statistic for the explanation; — where there is none (no request decodes past its first token: no TPOT)."""
    return format_seconds(value) if value is not None and math.isfinite(value) else "—"


def _diff(closed, simulated) -> str:
    if closed is None or simulated in (None, 0) or not math.isfinite(closed):
        return "—"
    return f"{(closed - simulated) / simulated * 100:+.1f}%"

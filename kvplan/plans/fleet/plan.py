"""``kvplan plan``: the fleet for a workload, its scale-out table and (optionally) a simulation beside it.

Rows (what ``--format json`` prints):

- ``kind: plan`` — the plan at the workload's rate: every key of :meth:`FleetPlan.row`
  (``instances``, ``gpus_per_instance``, ``total_gpus``, ``batch_per_instance``, ``concurrency``,
  ``kv_demand_mean_bytes``, ``kv_demand_p99_bytes``, ``kv_capacity_bytes``, ``headroom_bytes``,
  ``ttft_{mean,p50,p90,p95,p99}_s``, ``tpot_…_s``, ``binding_constraint``, ``feasible``, …) and,
  with ``simulate``, ``sim_ttft_…_s``, ``sim_tpot_…_s``, ``sim_requests``, ``sim_batch_mean``.
- ``kind: scale`` — one row per rate multiplier (default 2×, 5×, 10×): instances, GPUs, batch,
  binding constraint, feasibility and the percentile latencies of the re-planned fleet.

``presentation`` turns that Result into the tables people read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from kvplan.errors import InputError
from kvplan.plans.deployment import Deployment, resolve, resolve_cards
from kvplan.plans.fleet.aggregated import (EngineSettings, FleetPlan, FleetWorkload, Shape, Slo, _check_inputs, _check_rate,
                                           plan_fleet)
from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds
from kvplan.workload.synthetic import workload_from_flags
from kvplan.workload.traces import read_trace

PLAN_COLUMNS = [
    "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "concurrency", "kv_demand_mean_bytes",
    "kv_demand_p99_bytes", "kv_capacity_bytes", "headroom_bytes", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "binding_constraint", "feasible",
]
SCALE_COLUMNS = ["rate_multiplier", "rate_per_s", "instances", "total_gpus", "batch_per_instance", "ttft_p99_s",
                 "tpot_p99_s", "binding_constraint", "feasible"]
BINDING_TEXT = {
    "none": "none: one instance meets every constraint",
    "kv_capacity": "KV capacity (the batch an instance's KV pool holds)",
    "max_num_seqs": "max_num_seqs (the engine's batch cap)",
    "max_num_batched_tokens": "the token budget per step (max_num_batched_tokens / 2 caps the batch)",
    "tpot_slo": "TPOT SLO (the batch whose step time meets it)",
    "ttft_slo": "TTFT SLO (prefill queueing)",
    "memory": "memory (weights and reserves leave no KV on the instance)",
    "link": "a transfer link",
    "utilization": "queue utilisation above the ceiling (no TTFT SLO)",
    "instances": "instance count limit",
}


def fleet_workload(*, trace: str | Path | None = None, qps: float | None = None, isl: str | None = None,
                   osl: str | None = None, arrival_cv: float = 1.0, turns: int = 1, think_time_s: float = 0.0,
                   shared_prefix_tokens: int = 0, trace_format: str = "auto", columns: str | dict | None = None,
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
                                   turns=turns, think_time_s=think_time_s, shared_prefix_tokens=shared_prefix_tokens)
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
) -> Result:
    """The fleet for ``workload`` (one ``kind: plan`` row), the runners-up, a re-plan per rate multiplier.

    ``model`` is a :class:`Deployment` (then ``hardware``, ``shape``, ``engine`` and ``system`` come
    from it: the shape is pinned) or a model name or card, resolved with ``hardware``/``system``.
    ``shape`` pins the instance (one TP and PP); otherwise ``tps`` × ``pps`` are searched
    (:mod:`kvplan.plans.fleet.search`; default TP 1, 2, 4, 8 and PP where needed) and the cheapest
    feasible plan is ``kind: plan``, every other shape a ``kind: candidate`` row. The scale-out rows
    keep the chosen shape.
    ``sim_requests``: requests to simulate; None replays a whole trace, or samples 10,000 from a flag workload.
    ``simulate``: True sizes the fleet by its own replay (:mod:`kvplan.plans.fleet.replay`), None does
    so for a trace workload only.
    ``gpu_cost``: {hardware: price per GPU-hour}; every row then carries its cost per hour and per
    million output tokens (:mod:`kvplan.plans.fleet.cost`), and the search compares cost.
    ``dps``, ``expert_parallel``, ``redundant_experts``: vLLM's ``--data-parallel-size`` (a list is
    searched; MoE models search DP with EP by default), ``--enable-expert-parallel`` and
    ``--num-redundant-experts`` (:func:`kvplan.plans.fleet.search.candidate_shapes`).
    """
    from kvplan.cards.loader import load_model, usual_system
    from kvplan.plans.fleet.cost import cost_fields
    from kvplan.plans.fleet.search import search_shapes

    from kvplan.plans.fleet.search import candidate_shapes

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
    if sim_requests is None and workload.trace is None:
        sim_requests = 10_000
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
    chosen = main.setup["deployment"]
    card, engine = chosen.model, chosen.engine
    row = {"kind": "plan", **main.row(), **nodes_of(main)}
    notes = ([assumed] if assumed else []) + list(main.assumptions)
    explain = list(main.explain)
    if len(candidates) > 1:
        notes.append("parallelism searched: " + ", ".join(_shape_text(p) for p in candidates)
                     + f"; chosen {_shape_text(main, brief=True)} (the cheapest feasible)" + (
                         "; " + "; ".join(skipped) if skipped else ""))
    sim = main.setup.get("sim")
    if simulate and sim is None:
        notes.append("simulation skipped: no fleet to simulate")
    elif sim is not None:
        row.update(sim.stats())
        explain += _sim_explain(main, sim)
        source = "the trace" if workload.trace is not None else f"sampled, seed {seed}"
        notes.append(f"simulation: {sim.requests:,} requests ({source})"
                     f", {sim.measured:,} measured (warm-up and drain left out); {sim.steps:,} steps ({sim.mixed_steps:,} with prefill) "
                     f"in {sim.wall_s:.2f} s")
        if sim.rejected:
            notes.append(f"simulation: {sim.rejected:,} requests could never fit an instance's KV pool and were rejected")
    rows = [row] + [_candidate_row(p) for p in candidates if p is not main]
    mean_osl = workload.lengths.mean_osl
    for multiplier in scale:
        scaled_workload = workload.scaled(multiplier)
        scaled = plan_fleet(chosen, scaled_workload, list(slos), **kwargs)
        if simulate and scaled.instances is not None:
            _size_by_replay(scaled, scaled_workload, sim_requests, seed, max_gpus)
        rows.append(_scale_row(multiplier, scaled))
    if gpu_cost:
        for r in rows:
            r.update(cost_fields(r["total_gpus"] if r.get("feasible") else None, main.hardware, r["rate_per_s"]
                                 if "rate_per_s" in r else workload.rate_per_s, mean_osl, gpu_cost))
        if main.hardware not in gpu_cost:
            notes.append(f"--gpu-cost names no price for {main.hardware}: costs left out")
    verdict = None if main.feasible else f"infeasible: {main.reason}"
    title = (f"Fleet plan: {card.name} on {chosen.hardware.name}"
             + (f" ({chosen.system.name} nodes)" if chosen.system is not None else "") + f", {main.shape.label()}"
             + (f" (searched {len(candidates)} shapes)" if len(candidates) > 1 else "")
             + f", {engine.engine}, {workload.rate_per_s:,.4g} req/s")
    return Result(title=title, rows=rows, columns=PLAN_COLUMNS, explain=explain, assumptions=notes,
                  verdict=verdict, failed=not main.feasible)


def nodes_of(p: FleetPlan) -> dict:
    """Whole nodes of the deployment's system the fleet takes: ⌈instances / ⌊node / g⌋⌉ for g <= node GPUs per
    instance, else instances × ⌈g / node⌉ (an instance spans whole nodes); None without a system."""
    dep = p.setup.get("deployment")
    system = dep.system if dep is not None else None
    if system is None or p.instances is None:
        return {"system": system.name if system is not None else None, "accelerators_per_node":
                system.accelerators if system is not None else None, "nodes": None}
    node, g = system.accelerators, p.shape.gpus
    nodes = math.ceil(p.instances / (node // g)) if g <= node else p.instances * math.ceil(g / node)
    return {"system": system.name, "accelerators_per_node": node, "nodes": nodes}


def _shape_text(p: FleetPlan, brief: bool = False) -> str:
    shape = p.shape.label()
    if brief:
        return shape
    return f"{shape} → " + (f"{p.total_gpus:,} GPUs" if p.feasible else f"infeasible ({p.binding_constraint})")


CANDIDATE_KEYS = ("tp", "pp", "dp", "ep", "expert_parallel", "redundant_experts", "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "ttft_p99_s",
                  "tpot_p99_s", "binding_constraint", "binding_detail", "feasible", "reason", "sized_by")


def _candidate_row(p: FleetPlan) -> dict:
    row = p.row()
    out = {"kind": "candidate", **{k: row.get(k) for k in CANDIDATE_KEYS}, "nodes": nodes_of(p)["nodes"]}
    sim = p.setup.get("sim")
    if sim is not None:
        stats = sim.stats()
        out.update({"sim_ttft_p99_s": stats["sim_ttft_p99_s"], "sim_tpot_p99_s": stats["sim_tpot_p99_s"]})
    return out


def _size_by_replay(main: FleetPlan, workload: FleetWorkload, sim_requests, seed: int, max_gpus):
    """Grow ``main`` (in place) until its replay meets every SLO; infeasible with both figures if none does."""
    from kvplan.plans.fleet.aggregated import _explain, _memory
    from kvplan.plans.fleet.replay import at_instances, broken_slo, replay_until_met

    gpus = main.shape.gpus
    limit = max_gpus // gpus if max_gpus is not None else None
    n0 = main.instances
    closed = {"ttft": dict(main.ttft), "tpot": dict(main.tpot)}
    outcome = replay_until_met(main, workload, sim_requests, seed, limit)
    main.setup["sim"] = outcome.sim
    main.closed_form_instances, main.sized_by = n0, "replay"
    first_broken = outcome.trail[0][1]
    if outcome.instances is None:
        tried = max(n for n, _ in outcome.trail)
        kind = _kind(first_broken)
        slo = main.slos.get(kind)
        figure = (f" (closed form {format_seconds(closed[kind].get(slo.stat))})" if slo is not None else "")
        grown = at_instances(main, tried)
        main.instances, main.point, main.ttft, main.tpot = tried, grown.point, grown.ttft, grown.tpot
        main.memory = _memory(main, main.setup["deployment"])
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
        main.memory = _memory(main, main.setup["deployment"])
        main.explain = _explain(main, workload, main.setup["deployment"]) + [f"replay: the closed form's {n0:,} instances break the SLO in the replay "
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


def _scale_row(multiplier: float, p: FleetPlan) -> dict:
    row = p.row()
    keep = ["rate_per_s", "sized_by", "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "batch_mean",
            "concurrency", "kv_demand_mean_bytes", *(f"{k}_{s}_s" for k in ("ttft", "tpot") for s in ("p50", "p90", "p99")),
            "binding_constraint", "feasible", "reason"]
    return {"kind": "scale", "rate_multiplier": multiplier, **{k: row.get(k) for k in keep}, "nodes": nodes_of(p)["nodes"]}


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
            parts.append(f"{s} {format_seconds(closed)} vs {format_seconds(simulated)} ({_diff(closed, simulated)})")
        lines.append(f"  {kind.upper()} closed form vs simulation: " + "; ".join(parts))
    return lines


def _diff(closed, simulated) -> str:
    if closed is None or simulated in (None, 0) or not math.isfinite(closed):
        return "—"
    return f"{(closed - simulated) / simulated * 100:+.1f}%"


# --------------------------------------------------------------------------- tables for people


def presentation(result: Result) -> list[Result]:
    """The plan as quantity/value rows, closed form vs simulation when present, and the scale-out table."""
    row = result.rows[0]
    items = [("rate", f"{row['rate_per_s']:,.4g} req/s")]
    if row["instances"] is not None:
        items += [
            ("instances × GPUs each = GPUs", f"{row['instances']:,} × {row['gpus_per_instance']} = {row['total_gpus']:,}"
             + (f" on {row['nodes']:,} node{'s' if row['nodes'] != 1 else ''} of {row['accelerators_per_node']} "
                f"({row['system']})" if row.get("nodes") else "")),
            ("batch per instance (max_num_seqs to set)", f"{row['batch_per_instance']:,}") if row["dp"] == 1 else
            ("batch per instance = DP ranks × batch per rank (max_num_seqs to set)",
             f"{row['dp']} × {row['batch_per_rank']:,} = {row['batch_per_instance']:,}"),
            ("batch limits: KV (CLT p99) / KV at mean C / KV at p99 C / TPOT SLO",
             " / ".join(_count(row.get(k)) for k in ("batch_kv", "batch_kv_mean", "batch_kv_p99", "batch_tpot"))),
            ("mean batch per instance", f"{row['batch_mean']:,.3g}"),
            ("concurrency (Little: λ × time in system)", f"{row['concurrency']:,.4g}"),
            ("KV demand at mean / p99 final context (fleet)",
             f"{format_bytes(row['kv_demand_mean_bytes'])} / {format_bytes(row['kv_demand_p99_bytes'])}"),
            ("KV held on average (fleet, context ISL + tokens so far)", format_bytes(row["kv_held_mean_bytes"])),
            ("KV capacity / headroom at p99 context (fleet)",
             f"{format_bytes(row['kv_capacity_bytes'])} / {format_bytes(row['headroom_bytes'])}"),
            ("memory: weights + activations + KV demand / GPU memory",
             f"{format_bytes(row['memory_demand_bytes'])} / {format_bytes(row['gpu_memory_bytes'])}"),
        ]
    for kind in ("ttft", "tpot"):
        items.append((f"{kind.upper()} mean / p50 / p90 / p99" + (f" (SLO {row[f'{kind}_slo']})" if row[f"{kind}_slo"] else ""),
                      " / ".join(format_seconds(row[f"{kind}_{s}_s"]) if row[f"{kind}_{s}_s"] is not None else "—"
                                 for s in ("mean", "p50", "p90", "p99"))))
    if row.get("fleet_cost_per_hour") is not None:
        items.append(("cost: fleet per hour / per million output tokens (at --gpu-cost "
                      f"{row['gpu_cost_per_gpu_hour']:g} per GPU-hour)",
                      f"{row['fleet_cost_per_hour']:,.4g} / {row['cost_per_million_output_tokens']:,.4g}"))
    binding = BINDING_TEXT.get(row["binding_constraint"], row["binding_constraint"])
    items.append(("binding constraint", binding + (f"; {row['binding_detail']}" if row.get("binding_detail") else "")))
    items.append(("feasible", "yes" if row["feasible"] else f"no: {row['reason']}"))
    tables = [Result(title=result.title, rows=[{"quantity": k, "value": v} for k, v in items],
                     columns=["quantity", "value"], explain=result.explain, assumptions=result.assumptions)]
    if "sim_ttft_p50_s" in row:
        compare = []
        for kind in ("ttft", "tpot"):
            for s in ("mean", "p50", "p90", "p99"):
                closed, simulated = row[f"{kind}_{s}_s"], row[f"sim_{kind}_{s}_s"]
                compare.append({"metric": f"{kind}_{s}", "closed_form_s": closed, "simulated_s": simulated,
                                "difference": _diff(closed, simulated)})
        tables.append(Result(title=f"Closed form vs simulation ({row['sim_requests']:,} requests)", rows=compare,
                             columns=["metric", "closed_form_s", "simulated_s", "difference"]))
    others = [r for r in result.rows if r.get("kind") == "candidate"]
    if others:
        shown = [{**r, "binding_constraint": r["binding_constraint"] if r["feasible"]
                  else f"{r['binding_constraint']}: {r['reason']}"} for r in others]
        tables.append(Result(title="Runners-up: the other instance shapes searched", rows=shown,
                             columns=["tp", "pp", "dp", "ep", "instances", "total_gpus", "batch_per_instance", "ttft_p99_s",
                                      "tpot_p99_s", "binding_constraint", "feasible"]))
    scale = [r for r in result.rows if r.get("kind") == "scale"]
    if scale:
        shown = [{**r, "rate_multiplier": f"{r['rate_multiplier']:g}×",
                  "binding_constraint": r["binding_constraint"] if r["feasible"] else f"{r['binding_constraint']}: {r['reason']}"}
                 for r in scale]
        tables.append(Result(title=f"Scaling out: the same workload at higher rates (tp={row['tp']}"
                             + (f" pp={row['pp']}" if row["pp"] > 1 else "") + (f" dp={row['dp']}" if row["dp"] > 1 else "")
                             + (f" ep={row['ep']}" if row["expert_parallel"] else "") + " instances)", rows=shown,
                             columns=SCALE_COLUMNS))
    return tables


def _count(value) -> str:
    return "—" if value is None else f"{value:,}"

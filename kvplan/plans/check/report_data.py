"""What ``kvplan report`` renders beyond the metrics: its optional sections, each one library answer.

Every section reads the plan's one fleet (:func:`kvplan.plans.check.fleet_metrics.fleet_answer`,
``kvplan plan``'s answer) and computes nothing the library does not:

- **PD** (``report.pd`` / ``--pd``): :func:`kvplan.plans.pd.plan.plan_pd` for the plan's engine
  settings, workload and SLOs (prefill and decode pools searched, placements planned), set
  against the one fleet: ``saving = fleet GPUs − PD GPUs`` (or cost per hour when priced:
  ``Σ pool GPUs × price``, per million output tokens ``cost per hour / (λ × E[OSL] × 3600) × 10⁶``).
- **Tiers** (``report.tiers`` / ``--tiers``): :func:`kvplan.plans.tiers.plan.tier_plan` on the
  plan's deployment and the fleet's instances (where the KV lives, hit rates, savings), and the
  spill what-if: the same fleet with every instance at its configured batch (``max_num_seqs`` to
  set), whose active decode KV may overflow HBM (its TPOT penalty).
- **Closed loop** (``report.concurrency`` / ``--concurrency``): ``kvplan plan --concurrency``'s
  replay (:func:`kvplan.plans.fleet.closed.closed_loop`) of the plan's deployment, over the
  fleet's instances, one row per level.
- **Checklist** (``report.checklist`` / ``--checklist``): the seed's §10 questions answered for the
  plan's fleet (:func:`fleet_checklist`) and by ``kvplan pd --checklist``
  (:mod:`kvplan.plans.pd.checklist`) for the PD plan of the workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvplan.errors import InfeasibleError, InputError
from kvplan.plans.check.context import PlanContext
from kvplan.plans.check.fleet_metrics import fleet_answer, fleet_cost, fleet_plan, plan_slos, plan_workload, trace_path
from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds

CHECKLIST_MARK = "checklist (seed §10):"
CLOSED_LOOP_REQUESTS = 5000   # requests sampled for the closed loop (kvplan plan --concurrency's default)


@dataclass(frozen=True)
class ReportOptions:
    """Which optional sections to build: the plan file's ``report`` section, flags replacing its entries."""

    pd: bool = False
    tiers: bool = False
    checklist: bool = False
    concurrency: tuple[int, ...] = ()

    @classmethod
    def of(cls, plan, *, pd: bool | None = None, tiers: bool | None = None, checklist: bool | None = None,
           concurrency: list[int] | None = None) -> ReportOptions:
        from kvplan.plans.check.planfile import MAX_CONCURRENCY, MAX_CONCURRENCY_LEVELS, sections_problem

        given = plan.report
        if concurrency is not None and len(set(concurrency)) != len(concurrency):
            raise InputError("--concurrency: the levels must be distinct", "e.g. --concurrency 1,8,32,128")
        options = cls(given.pd if pd is None else pd, given.tiers if tiers is None else tiers,
                      given.checklist if checklist is None else checklist,
                      tuple(given.concurrency) if concurrency is None else tuple(sorted(set(concurrency))))
        if len(options.concurrency) > MAX_CONCURRENCY_LEVELS or any(
                not 1 <= c <= MAX_CONCURRENCY for c in options.concurrency):
            raise InputError(f"--concurrency: at most {MAX_CONCURRENCY_LEVELS} levels, each 1 to {MAX_CONCURRENCY:,}",
                             "e.g. --concurrency 1,8,32,128")
        problem = sections_problem(plan, options.pd, options.tiers, options.checklist, bool(options.concurrency))
        if problem:
            raise InputError(problem, "add what the section needs to the plan, or leave the section out")
        return options


@dataclass
class PDSection:
    """``kvplan pd``'s typed answer for the plan's workload, set against the plan's one fleet."""

    answer: object                 # plan_pd's PdAnswer (plans: the recommendation, then the placements)
    plan: object                   # its recommended PdPlan
    placements: list               # the PdPlans of the placements planned
    comparison: dict               # pd_gpus, fleet_gpus, saving, costs, winner
    verdict: str
    checklist: list[str] = field(default_factory=list)
    checklist_figures: dict = field(default_factory=dict)


@dataclass
class TierSection:
    result: Result                 # tier_plan's Result on the fleet (tiers, then the summary row)
    tiers: list[dict]
    summary: dict
    what_if: dict | None           # the spill what-if's summary row (None when it could not be placed)
    what_if_batch: int | None
    what_if_note: str | None
    chart: object = None           # the TierPlan (its hit-rate curve and tier boundaries: the section's chart)


@dataclass
class ClosedLoopSection:
    result: Result
    instances: int


# --------------------------------------------------------------------------- PD and the checklist


def pd_section(context: PlanContext, checklist: bool) -> PDSection:
    from kvplan.plans.pd.plan import plan_pd

    plan, workload = context.plan, context.plan.workload
    dep = context.deployment
    answer = plan_pd(context.model_card, context.hardware_card, system=context.system_card, qps=workload.qps,
                     isl=workload.isl, osl=workload.osl, trace=trace_path(context), trace_format=workload.trace_format,
                     ttft=plan.slo.ttft, tpot=plan.slo.tpot, settings=dep.engine, aggregated=False,
                     sensitivity=False, placements=True, checklist=checklist,
                     allow_long_context=plan.engine.allow_long_context, cards=context.cards)
    best = answer.plan
    placements = [p for p in answer.plans[1:] if p.placement is not None]
    comparison, text = compare_with_fleet(context, best)
    lines = []
    explain = list(answer.explain)
    if checklist and CHECKLIST_MARK in explain:
        lines = explain[explain.index(CHECKLIST_MARK) + 1:]
    return PDSection(answer, best, placements, comparison, text, lines, best.checklist or {})


def _cost(context: PlanContext, gpus_by_hardware: dict[str, int]) -> float | None:
    prices = context.gpu_cost
    if not prices or any(hw not in prices for hw in gpus_by_hardware):
        return None
    return sum(n * prices[hw] for hw, n in gpus_by_hardware.items())


def compare_with_fleet(context: PlanContext, pd) -> tuple[dict, str]:
    """PD against the plan's one fleet: GPUs, and cost per hour and per million output tokens when priced."""
    fleet = fleet_plan(context)
    answer = fleet_answer(context).fleet
    tokens_per_hour = answer.rate_per_s * answer.mean_osl * 3600.0
    out = {"pd_feasible": pd.feasible, "fleet_feasible": fleet.feasible, "pd_gpus": pd.total_gpus,
           "fleet_gpus": fleet.total_gpus, "pd_xpyd": pd.xpyd}
    pd_cost = None
    if pd.feasible:
        counts: dict[str, int] = {}
        for hardware, pool in ((pd.prefill_hardware, pd.prefill), (pd.decode_hardware, pd.decode)):
            counts[hardware] = counts.get(hardware, 0) + int(pool.gpus)
        pd_cost = _cost(context, counts)
    priced = fleet_cost(context) if context.gpu_cost else {}
    fleet_cost_per_hour = priced.get("fleet_cost_per_hour")
    out.update(pd_cost_per_hour=pd_cost, fleet_cost_per_hour=fleet_cost_per_hour,
               pd_cost_per_million_output_tokens=pd_cost / tokens_per_hour * 1e6 if pd_cost and tokens_per_hour else None,
               fleet_cost_per_million_output_tokens=priced.get("cost_per_million_output_tokens"))
    if not pd.feasible and not fleet.feasible:
        out["winner"] = None
        return out, f"neither meets the SLOs: disaggregation: {pd.reason}; aggregated: {fleet.reason}"
    if not pd.feasible:
        out["winner"] = "aggregated"
        return out, (f"aggregated: disaggregation cannot meet the SLOs ({pd.reason}); this plan's fleet of "
                     f"{_n(fleet.total_gpus)} does")
    if not fleet.feasible:
        out["winner"] = "disaggregated"
        return out, (f"disaggregated: {pd.xpyd} on {_n(pd.total_gpus)} meets the SLOs; this plan's "
                     f"aggregated fleet cannot ({fleet.reason})")
    if pd_cost is not None and fleet_cost_per_hour is not None:
        saving, unit = fleet_cost_per_hour - pd_cost, "per hour"
        basis = (f"{pd.xpyd} costs {pd_cost:,.4g} per hour ({out['pd_cost_per_million_output_tokens']:,.4g} per "
                 f"million output tokens) against {fleet_cost_per_hour:,.4g} "
                 f"({out['fleet_cost_per_million_output_tokens']:,.4g}) for this plan's fleet")
    else:
        saving, unit = fleet.total_gpus - pd.total_gpus, "GPUs"
        basis = (f"{pd.xpyd} needs {_n(pd.total_gpus)} against {_n(fleet.total_gpus)} for this plan's "
                 "fleet")
    out["saving"], out["saving_unit"] = saving, unit
    if fleet.sized_by == "replay":  # kvplan pd has no replay: say the two are sized differently
        basis += " (this plan's fleet is sized by its own replay of the trace, the PD plan by the closed form)"
    if saving > 0:
        out["winner"] = "disaggregated"
        return out, f"disaggregation pays: {basis}, saving {saving:,.4g} {unit}"
    if saving < 0:
        out["winner"] = "aggregated"
        return out, f"aggregated serving is cheaper: {basis}, {-saving:,.4g} {unit} less"
    out["winner"] = "tie"
    return out, f"a tie: {basis}"


def _n(gpus: int) -> str:
    return f"{gpus:,} GPU" + ("" if gpus == 1 else "s")


def fleet_checklist(context: PlanContext, tiers: TierSection | None = None) -> list[str]:
    """The seed's §10 questions for the plan's aggregated fleet, from its typed figures:

    1. where the KV lives: the fleet's pool ``kv_capacity_bytes`` (pool per GPU × GPUs) against the KV
       held (running × k(C) at the mean and p99 context);
    2. decode's read per step, per GPU: ``kv_held_mean_bytes / GPUs`` over ``HBM bandwidth × η_mem``,
       against the decode step ``t(B̄ + 1)``;
    3. swapping: the batch the KV pool holds (``batch_kv``, B·E[k] + 2.326·√B·sd[k] ≤ pool) against the
       configured batch (``batch_per_instance``) and the mean batch B̄: the engine preempts only when the
       running batch's KV overflows the pool;
    4. migration: none in aggregated serving (prefill and decode share the instance's KV);
    5. the tail cost of remote KV: the tier section's TPOT penalty of a spill (none while the hot path
       stays in HBM);
    6. what breaks first as load grows: the binding constraint (what fails at N − 1 instances).
    """
    fleet = fleet_plan(context)
    if not fleet.feasible or fleet.point is None or fleet.memory is None:
        return [f"no aggregated fleet to check: {fleet.reason}"]
    dep, p, f, m = context.deployment, fleet.point, fleet.figures, fleet.memory
    gpus = fleet.total_gpus
    read = m.kv_held_mean_bytes / gpus
    machine = dep.machine
    read_s = read / (machine.bandwidth_bytes_per_s * machine.eta_mem)
    b = fleet.batch_per_instance
    lines = [
        f"1. KV lives in HBM: a pool of {format_bytes(m.kv_capacity_bytes)} over {gpus:,} GPU(s) "
        f"({format_bytes(f.pool_bytes_per_gpu)} per GPU); the running requests hold {format_bytes(m.kv_demand_mean_bytes)}"
        f" at the mean context ({format_bytes(m.kv_demand_p99_bytes)} if all were at the p99)",
        f"2. decode reads {format_bytes(read)} of KV per GPU per step (mean batch {p.batch_mean:,.3g} per instance) in "
        f"{format_seconds(read_s)} at {machine.bandwidth_bytes_per_s / 1e12:.3g} TB/s × η {machine.eta_mem:g}: "
        f"{read_s / p.step_s:.0%} of the {format_seconds(p.step_s)} decode step",
        f"3. swapping: the KV pool holds a batch of {f.batch_kv:,} per instance; the configured batch is {b:,} "
        f"(mean {p.batch_mean:,.3g}) — " + ("max_num_seqs never fills the pool: no preemption" if b <= f.batch_kv
                                          else f"at max_num_seqs {b:,} the pool overflows and the engine preempts")
        + f"; KV headroom ×{f.batch_kv / p.batch_mean:.2g} over the mean batch",
        "4. migration: none — aggregated serving keeps each request's KV on the instance that prefilled it",
    ]
    if tiers is not None and tiers.what_if is not None:
        w = tiers.what_if
        lines.append("5. remote KV tail: " + (
            "the hot path stays in HBM at the fleet's load and at the configured batch (no decode KV read remotely)"
            if w["active_kv_fits_hbm"] and tiers.summary["active_kv_fits_hbm"] else
            f"at the configured batch decode reads {format_bytes(w['active_kv_spilled_bytes_per_gpu'])} per GPU "
            f"from slower tiers each step: TPOT +{format_seconds(w['tpot_penalty_p50_s'])} (p99 "
            f"+{format_seconds(w['tpot_penalty_p99_s'])})"))
    else:
        lines.append("5. remote KV tail: no decode KV outside HBM (the fleet's KV fits its pool); add the tier "
                     "section for the spill what-if")
    from kvplan.plans.fleet.binding import binding_detail

    detail = binding_detail(fleet)
    domain = (dep.system.scale_up_domain if dep.system is not None else dep.hardware.scale_up_domain) or 1
    g = fleet.gpus_per_instance
    supernode = (f"supernode: not needed — each instance's {g} GPU(s) sit in one {domain}-GPU scale-up domain"
                 if g <= domain else
                 f"supernode: each instance's {g} GPUs span {math.ceil(g / domain)} {domain}-GPU scale-up domains, so "
                 f"its TP/PP traffic crosses the NIC; a scale-up domain of ≥ {g} GPUs would keep it on the fabric")
    lines.append(f"6. {supernode}; what breaks first as the load grows: {fleet.binding_constraint}"
                 + (f" ({detail})" if detail else ""))
    return lines


# --------------------------------------------------------------------------- tiers


def tier_section(context: PlanContext) -> TierSection:
    """The tier plan on the plan's fleet, and the spill what-if at the configured batch."""
    from kvplan.plans.check.tier_metrics import tier_plan_result

    fleet = fleet_plan(context)
    if not fleet.feasible or fleet.instances is None:
        raise InfeasibleError(f"no fleet to place the KV tiers on: {fleet.reason}",
                              "make the plan feasible first (kvplan check), or drop the tier section")
    instances = int(fleet.instances)
    tier = tier_plan_result(context, instances)
    result = tier.result
    what_if, note = None, None
    batch = fleet.batch_per_instance
    if batch:
        try:
            what_if = _what_if(context, instances, int(batch))
        except InfeasibleError as exc:
            note = exc.message
    return TierSection(result, result.rows[:-1], result.rows[-1], what_if, batch, note, tier)


def _what_if(context: PlanContext, instances: int, batch: int) -> dict:
    """Every instance at its configured batch (the spill what-if): the tier plan's summary row."""
    from kvplan.plans.check.tier_metrics import reuse_of
    from kvplan.plans.tiers.plan import tier_plan

    dep = context.deployment
    per_node = dep.system.accelerators // dep.tp if dep.system is not None else 1
    nodes = max(1, math.ceil(instances / max(per_node, 1)))
    plan = tier_plan(dep.model, reuse=reuse_of(context), resolved=dep, nodes=nodes, decode_batch=float(batch),
                     pd=False, cards=context.cards)
    return plan.result.rows[-1]


# --------------------------------------------------------------------------- closed loop


def closed_loop_section(context: PlanContext, levels: tuple[int, ...]) -> ClosedLoopSection:
    """``kvplan plan --concurrency``'s rows for the plan's deployment over the fleet's instances."""
    from kvplan.plans.fleet.closed import CLOSED_COLUMNS, closed_loop

    dep = context.deployment
    instances = 1
    if context.plan.workload.qps is not None or context.plan.workload.trace is not None:
        fleet = fleet_plan(context)
        if fleet.feasible and fleet.instances:
            instances = int(fleet.instances)
    workload = plan_workload(context, rate_needed=False)
    sample = workload.replay(CLOSED_LOOP_REQUESTS, 0)
    rows = [closed_loop(dep, sample.isl, sample.osl, int(c), instances) for c in levels]
    notes = [f"closed loop: C requests in flight, the next sent when one ends (vllm bench serve --max-concurrency); "
             f"{instances} instance(s) of tp={dep.tp}" + (f" pp={dep.pp}" if dep.pp > 1 else "")
             + " (this plan's fleet), JSQ router; the arrival rate is not used", f"workload: {workload.description}"]
    title = f"Closed loop: {dep.model.name} on {dep.name}, tp={dep.tp}, {dep.engine.engine}, {instances} instance(s)"
    return ClosedLoopSection(Result(title=title, rows=rows, columns=CLOSED_COLUMNS, assumptions=notes), instances)


__all__ = ["ClosedLoopSection", "PDSection", "ReportOptions", "TierSection", "closed_loop_section",
           "compare_with_fleet", "fleet_checklist", "pd_section", "plan_slos", "tier_section"]

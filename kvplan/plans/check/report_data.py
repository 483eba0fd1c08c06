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
- **Checklist** (``report.checklist`` / ``--checklist``): the seed's §10 questions answered by
  ``kvplan pd --checklist`` (:mod:`kvplan.plans.pd.checklist`) for the PD plan of the workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvplan.errors import InfeasibleError, InputError
from kvplan.plans.check.context import PlanContext
from kvplan.plans.check.fleet_metrics import fleet_answer, fleet_cost, fleet_plan, plan_slos, plan_workload, trace_path
from kvplan.result import Result

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
    """``kvplan pd``'s answer for the plan's workload, set against the plan's one fleet."""

    result: Result                 # plan_pd's Result (rows: the recommendation, then the placements)
    recommendation: dict           # its first row
    placements: list[dict]
    comparison: dict               # pd_gpus, fleet_gpus, gpu_saving, costs, winner
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


@dataclass
class ClosedLoopSection:
    result: Result
    instances: int


# --------------------------------------------------------------------------- PD and the checklist


def pd_section(context: PlanContext, checklist: bool) -> PDSection:
    from kvplan.plans.pd.plan import plan_pd

    plan, workload = context.plan, context.plan.workload
    dep = context.deployment
    result = plan_pd(context.model_card, context.hardware_card, system=context.system_card, qps=workload.qps,
                     isl=workload.isl, osl=workload.osl, trace=trace_path(context), trace_format=workload.trace_format,
                     ttft=plan.slo.ttft, tpot=plan.slo.tpot, settings=dep.engine, aggregated=False,
                     sensitivity=False, placements=True, checklist=checklist,
                     allow_long_context=plan.engine.allow_long_context, cards=context.cards)
    best = result.rows[0]
    placements = [r for r in result.rows[1:] if r.get("placement")]
    comparison, text = compare_with_fleet(context, best)
    lines = []
    if checklist and CHECKLIST_MARK in result.explain:
        lines = result.explain[result.explain.index(CHECKLIST_MARK) + 1:]
    return PDSection(result, best, placements, comparison, text, lines, best.get("checklist") or {})


def _cost(context: PlanContext, gpus_by_hardware: dict[str, int]) -> float | None:
    prices = context.gpu_cost
    if not prices or any(hw not in prices for hw in gpus_by_hardware):
        return None
    return sum(n * prices[hw] for hw, n in gpus_by_hardware.items())


def compare_with_fleet(context: PlanContext, pd: dict) -> tuple[dict, str]:
    """PD against the plan's one fleet: GPUs, and cost per hour and per million output tokens when priced."""
    fleet = fleet_plan(context)
    answer = fleet_answer(context).fleet
    tokens_per_hour = answer.rate_per_s * answer.mean_osl * 3600.0
    out = {"pd_feasible": bool(pd["feasible"]), "fleet_feasible": fleet.feasible,
           "pd_gpus": pd["total_gpus"], "fleet_gpus": fleet.total_gpus, "pd_xpyd": pd["xpyd"]}
    pd_cost = None
    if pd["feasible"]:
        counts: dict[str, int] = {}
        for pool in ("prefill", "decode"):
            counts[pd[f"{pool}_hardware"]] = counts.get(pd[f"{pool}_hardware"], 0) + int(pd[f"{pool}_gpus"])
        pd_cost = _cost(context, counts)
    priced = fleet_cost(context) if context.gpu_cost else {}
    fleet_cost_per_hour = priced.get("fleet_cost_per_hour")
    out.update(pd_cost_per_hour=pd_cost, fleet_cost_per_hour=fleet_cost_per_hour,
               pd_cost_per_million_output_tokens=pd_cost / tokens_per_hour * 1e6 if pd_cost and tokens_per_hour else None,
               fleet_cost_per_million_output_tokens=priced.get("cost_per_million_output_tokens"))
    if not pd["feasible"] and not fleet.feasible:
        out["winner"] = None
        return out, f"neither meets the SLOs: disaggregation: {pd['reason']}; aggregated: {fleet.reason}"
    if not pd["feasible"]:
        out["winner"] = "aggregated"
        return out, (f"aggregated: disaggregation cannot meet the SLOs ({pd['reason']}); this plan's fleet of "
                     f"{_n(fleet.total_gpus)} does")
    if not fleet.feasible:
        out["winner"] = "disaggregated"
        return out, (f"disaggregated: {pd['xpyd']} on {_n(pd['total_gpus'])} meets the SLOs; this plan's "
                     f"aggregated fleet cannot ({fleet.reason})")
    if pd_cost is not None and fleet_cost_per_hour is not None:
        saving, unit = fleet_cost_per_hour - pd_cost, "per hour"
        basis = (f"{pd['xpyd']} costs {pd_cost:,.4g} per hour ({out['pd_cost_per_million_output_tokens']:,.4g} per "
                 f"million output tokens) against {fleet_cost_per_hour:,.4g} "
                 f"({out['fleet_cost_per_million_output_tokens']:,.4g}) for this plan's fleet")
    else:
        saving, unit = fleet.total_gpus - pd["total_gpus"], "GPUs"
        basis = (f"{pd['xpyd']} needs {_n(pd['total_gpus'])} against {_n(fleet.total_gpus)} for this plan's "
                 "fleet")
    out["saving"], out["saving_unit"] = saving, unit
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


# --------------------------------------------------------------------------- tiers


def tier_section(context: PlanContext) -> TierSection:
    """The tier plan on the plan's fleet, and the spill what-if at the configured batch."""
    from kvplan.plans.check.tier_metrics import tier_plan_result

    fleet = fleet_plan(context)
    if not fleet.feasible or fleet.instances is None:
        raise InfeasibleError(f"no fleet to place the KV tiers on: {fleet.reason}",
                              "make the plan feasible first (kvplan check), or drop the tier section")
    instances = int(fleet.instances)
    result = tier_plan_result(context, instances).result
    what_if, note = None, None
    batch = fleet.batch_per_instance
    if batch:
        try:
            what_if = _what_if(context, instances, int(batch))
        except InfeasibleError as exc:
            note = exc.message
    return TierSection(result, result.rows[:-1], result.rows[-1], what_if, batch, note)


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
           "compare_with_fleet", "pd_section", "plan_slos", "tier_section"]

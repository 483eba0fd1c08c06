"""The plan file's one fleet: ``kvplan plan``'s answer for the plan's deployment, workload and SLOs.

``kvplan check``'s fleet metrics, ``kvplan report``'s executive summary and every report section
that needs a fleet (the tier section, the PD comparison, the closed-loop curve) read this one
answer, computed once per plan (:attr:`PlanContext.memo`):

- the deployment is the plan's (:attr:`PlanContext.deployment`: engine settings, tp × pp, the KV
  pool; on the plan's system or the accelerator's usual one, as ``kvplan plan`` assumes);
- the workload comes through ``kvplan plan``'s own door
  (:func:`kvplan.plans.fleet.plan.fleet_workload`: a trace as it came, rescaled to ``qps`` if
  given; flags sampled as ``kvplan plan`` samples them, 100,000 requests, seed 0);
- the call is ``kvplan plan``'s (:func:`kvplan.plans.fleet.answer.answer`) with the shape pinned:
  a trace is sized by its own replay, as ``kvplan plan --trace`` does;
- prices (``gpu_cost`` or ``--gpu-cost``) give ``fleet_cost_per_hour = GPUs × price`` and
  ``cost_per_million_output_tokens = cost per hour / (λ × E[OSL] × 3600) × 10⁶``
  (:mod:`kvplan.plans.fleet.cost`).
"""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import InputError
from kvplan.plans.check.context import PlanContext

SCALE = ()  # the report quotes one fleet: no scale-out re-plans


def trace_path(context: PlanContext) -> Path | None:
    trace = context.plan.workload.trace
    if trace is None:
        return None
    path = Path(trace)
    return path if path.is_absolute() else context.base_dir / path


def plan_workload(context: PlanContext, *, rate_needed: bool = True):
    """The plan's workload through ``kvplan plan``'s door (a ``FleetWorkload``).

    ``rate_needed=False`` (the closed loop, which does not use the rate) takes 1 req/s for a
    flag workload without ``qps``, as ``kvplan plan --concurrency`` does.
    """
    from kvplan.plans.fleet.plan import fleet_workload

    workload = context.plan.workload
    path = trace_path(context)
    if path is not None:
        return fleet_workload(trace=path, qps=workload.qps, trace_format=workload.trace_format)
    qps = workload.qps
    if qps is None:
        if rate_needed:
            raise InputError("fleet metrics need an arrival rate", "add workload.qps to the plan")
        qps = 1.0
    return fleet_workload(qps=qps, isl=str(workload.isl), osl=str(workload.osl))


def plan_slos(context: PlanContext) -> list:
    from kvplan.workload.slo import parse_slo

    slo = context.plan.slo
    return [parse_slo(kind, getattr(slo, kind)) for kind in ("ttft", "tpot")
            if slo is not None and getattr(slo, kind) is not None]


def fleet_answer(context: PlanContext):
    """``kvplan plan``'s answer (a :class:`~kvplan.plans.fleet.answer.PlanAnswer`, its ``fleet`` typed) for the
    plan, computed once."""
    if "fleet" not in context.memo:
        from dataclasses import replace

        from kvplan.plans.fleet.answer import answer

        dep = context.deployment
        prices = context.gpu_cost
        if prices and dep.hardware.name not in prices:
            raise InputError(f"gpu_cost names no price for {dep.hardware.name} (it prices "
                             f"{', '.join(sorted(prices))})", f"add {dep.hardware.name}: PRICE per GPU-hour to gpu_cost")
        found = answer(dep, None, plan_workload(context), plan_slos(context), dep.engine, scale=SCALE,
                       allow_long_context=context.plan.engine.allow_long_context, gpu_cost=prices or None,
                       cards=context.cards)
        note = context.fleet_system[1]
        if note:
            found = replace(found, fleet=replace(found.fleet, notes=(note, *found.fleet.notes)))
        context.memo["fleet"] = found
    return context.memo["fleet"]


def fleet_plan(context: PlanContext):
    """The chosen :class:`~kvplan.plans.fleet.aggregated.FleetPlan` of the plan's one fleet."""
    return fleet_answer(context).fleet.plan


def fleet_cost(context: PlanContext) -> dict:
    """``gpu_cost_per_gpu_hour``, ``fleet_cost_per_hour``, ``cost_per_million_output_tokens`` of the fleet
    (:func:`kvplan.plans.fleet.cost.cost_fields`; None entries without a price or a feasible fleet)."""
    from kvplan.plans.fleet.cost import cost_fields

    answer = fleet_answer(context).fleet
    plan = answer.plan
    return cost_fields(plan.total_gpus if plan.feasible else None, plan.hardware, plan.rate_per_s, answer.mean_osl,
                       context.gpu_cost)


def fleet_row(context: PlanContext) -> dict:
    """The ``kind: plan`` row of the fleet for output (every key of ``kvplan plan --format json``'s first row)."""
    return fleet_answer(context).fleet.rows[0]

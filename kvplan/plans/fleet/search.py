"""``kvplan plan`` without a fixed shape: search the instance's parallelism, keep the cheapest feasible fleet.

Candidates (as ``kvplan pd`` searches its pools):

- TP ∈ ``tps`` (default {1, 2, 4, 8}) that the model's heads divide and the hardware's scale-up
  domain holds (:func:`kvplan.plans.pd.model.valid_tps`; TP crosses no node boundary);
- PP = 1, and "where needed" PP ∈ {2, 4, 8} at the largest such TP when no TP at PP = 1 leaves
  KV memory for the workload's p99 context (an explicit ``pps`` list is searched whole). A step
  is timed as the whole model on ``tp`` GPUs; PP adds memory, not modelled throughput;
- DP/EP for MoE models (one expert-parallel group spanning the data-parallel ranks) needs a
  per-operator step model with expert-parallel all-to-all; none is on main yet, so MoE models
  are searched over TP and PP only. The extension point is :func:`candidate_shapes`: a shape
  with ``ep`` > 1 would be priced by such a step model.

Each shape is resolved (:func:`kvplan.plans.deployment.resolve`) and planned by
:func:`kvplan.plans.fleet.aggregated.plan_fleet`. The answer is the
feasible shape of least cost — GPU-hours when ``gpu_cost`` is given, else GPUs — ties going to
fewer GPUs per instance (finer scaling), then the lower TPOT p99; the rest are the runners-up.
When the replay sizes the fleet (:mod:`kvplan.plans.fleet.replay`), shapes are replayed in order
of their closed-form cost, and the search stops once the next shape's closed-form cost (a lower
bound: the replay only grows a fleet) is no better than the best replayed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.plans.deployment import EngineSettings, Parallelism, node_hardware, resolve
from kvplan.plans.fleet.aggregated import FleetPlan, Shape, plan_fleet

DEFAULT_TPS = (1, 2, 4, 8)
WHERE_NEEDED_PPS = (2, 4, 8)


@dataclass
class ShapeSearch:
    """The chosen plan, every shape tried (chosen first), and the shapes left out with why."""

    best: FleetPlan
    candidates: list[FleetPlan]
    skipped: list[str] = field(default_factory=list)
    searched: bool = True


def domain_of(hw) -> float:
    """GPUs one scale-up domain joins (the card's ``scale_up_domain``; 1 without a scale-up link)."""
    if hw.scale_up_domain:
        return float(hw.scale_up_domain)
    return float("inf") if hw.scale_up is not None else 1.0


def candidate_shapes(card, hw, tps, pps, system=None) -> tuple[list[Shape], list[str]]:
    """TP × PP shapes to plan (PP only where given), and the TPs dropped with the reason."""
    from kvplan.plans.pd.model import valid_tps

    ok, dropped = valid_tps(card, list(tps), domain_of(node_hardware(hw, system)), "plan")
    return [Shape(tp, pp) for pp in pps for tp in ok], dropped


def cost_of(plan: FleetPlan, gpu_cost: dict | None) -> float:
    """GPU-hour price of the fleet (``gpu_cost[hardware]`` per GPU-hour) or, without prices, its GPUs."""
    gpus = plan.total_gpus or 0
    if gpu_cost and plan.hardware in gpu_cost:
        return gpus * gpu_cost[plan.hardware]
    return float(gpus)


def _key(plan: FleetPlan, gpu_cost):
    p99 = plan.tpot.get("p99") if plan.tpot else None
    return (0 if plan.feasible else 1, cost_of(plan, gpu_cost) if plan.feasible else 0.0,
            0 if plan.sized_by == "replay" else 1, plan.shape.gpus, p99 if p99 is not None else 0.0)


def search_shapes(card, hw, workload, slos, tps=None, pps=None, engine: EngineSettings | None = None, *,
                  system=None, cards=(), gpu_cost: dict | None = None, replay=None, **kwargs) -> ShapeSearch:
    """Plan every candidate shape; the cheapest feasible first (module docstring).

    ``card``, ``hw`` and ``system`` are cards; ``kwargs`` go to :func:`plan_fleet`.
    ``replay(plan)``, when given, sizes a feasible closed-form plan by its own replay (in place).
    """
    from kvplan.errors import InputError

    engine = engine or EngineSettings()
    searched_tps = list(tps) if tps else list(DEFAULT_TPS)
    explicit_pp = pps is not None
    shapes, dropped = candidate_shapes(card, hw, searched_tps, list(pps) if pps else [1], system)
    if not shapes:
        raise InputError(f"no usable TP among {', '.join(map(str, searched_tps))} for {card.name} on {hw.name}",
                         "; ".join(dropped) or "pass other --tp values")
    def one(shape: Shape) -> FleetPlan:
        dep = resolve(card, hw, system=system, engine=engine, parallel=Parallelism(shape.tp, shape.pp), cards=cards)
        return plan_fleet(dep, workload, slos, **kwargs)

    plans = [one(shape) for shape in shapes]
    if not explicit_pp and all(p.binding_constraint in ("memory", "kv_capacity") and not p.feasible for p in plans):
        widest = max(s.tp for s in shapes)
        for pp in WHERE_NEEDED_PPS:
            plan = one(Shape(widest, pp))
            plans.append(plan)
            if plan.feasible or plan.binding_constraint not in ("memory", "kv_capacity"):
                break
    plans.sort(key=lambda p: _key(p, gpu_cost))
    if replay is not None:
        _replay_in_order(plans, replay, gpu_cost)
        plans.sort(key=lambda p: _key(p, gpu_cost))
    return ShapeSearch(plans[0], plans, dropped, searched=len(shapes) > 1 or not tps)


def _replay_in_order(plans: list[FleetPlan], replay, gpu_cost) -> None:
    """Replay feasible plans cheapest first until no unreplayed one can beat the best replayed one."""
    best = None
    for plan in plans:
        if not plan.feasible or plan.instances is None:
            continue
        if best is not None and cost_of(plan, gpu_cost) >= best:
            break
        replay(plan)
        if plan.feasible:
            best = cost_of(plan, gpu_cost) if best is None else min(best, cost_of(plan, gpu_cost))

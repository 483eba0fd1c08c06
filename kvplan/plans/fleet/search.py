"""``kvplan plan`` without a fixed shape: search the instance's parallelism, keep the cheapest feasible fleet.

Candidates (as ``kvplan pd`` searches its pools):

- TP ∈ ``tps`` (default {1, 2, 4, 8}) that the model's heads divide and the hardware's scale-up
  domain holds (:func:`kvplan.plans.pd.model.valid_tps`; TP crosses no node boundary);
- PP = 1, and "where needed" PP ∈ {2, 4, 8} at the largest such TP when no TP at PP = 1 leaves
  KV memory for the workload's p99 context (an explicit ``pps`` list is searched whole). A step
  is timed as the whole model on ``tp`` GPUs; PP adds memory, not modelled throughput;
- DP/EP for MoE models, as vLLM runs them (``-tp T -dp D --enable-expert-parallel``): attention
  data parallel over D ranks of T GPUs, the routed experts split over ``ep = T × D`` ranks with
  the fewest redundant experts ``R = (−E) mod ep`` that let ``ep`` divide ``E + R`` (as pd's pools;
  :func:`kvplan.plans.pd.pools.pool_shapes`), D ∈ ``dps`` (default {2, 4, 8, 16, 32} up to
  T × D = 32 GPUs, four 8-GPU nodes; a given list is searched whole); an instance
  of T × D GPUs must divide a node or span whole nodes (:func:`kvplan.plans.pd.pools.fits_nodes`),
  and one wider than the scale-up domain needs the system's NIC (multi-node EP: the all-to-all
  crosses it, :func:`kvplan.calc.roofline.forward_pass`). Timed by the fleet model's DP ranks
  (:mod:`kvplan.plans.fleet.model`, "Attention data parallelism"). Dense models are searched
  without DP (attention DP of a dense model is N independent instances: the fleet counts those).

Each shape is resolved (:func:`kvplan.plans.deployment.resolve`) and planned by
:func:`kvplan.plans.fleet.aggregated.plan_fleet`. The answer is the
feasible shape of least cost — GPU-hours when ``gpu_cost`` is given, else GPUs — ties going to
fewer GPUs per instance (finer scaling), then the lower TPOT p99; the rest are the runners-up.
When the replay sizes the fleet (:mod:`kvplan.plans.fleet.replay`), shapes are replayed in order
of their closed-form cost, and the search stops once the next shape's closed-form cost (a lower
bound: the replay only grows a fleet) is no better than the best replayed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvplan.plans.deployment import EngineSettings, fewest_redundant_experts, node_hardware, resolve
from kvplan.plans.fleet.aggregated import FleetPlan, Shape, plan_fleet

DEFAULT_TPS = (1, 2, 4, 8)
DEFAULT_DPS = (2, 4, 8, 16, 32)  # attention-DP ranks searched with EP for MoE models (one to four 8-GPU nodes at tp 1)
DEFAULT_MAX_EP_GPUS = 32         # default DP shapes up to tp × dp = 32 GPUs; a given --dp list is searched whole
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


def candidate_shapes(card, hw, tps, pps, system=None, dps=None, expert_parallel: bool | None = None,
                     redundant_experts: int | None = None) -> tuple[list[Shape], list[str]]:
    """TP × PP shapes (PP only where given) and, for MoE models, TP × DP shapes with EP; the dropped ones with why.

    ``dps`` None searches :data:`DEFAULT_DPS` for MoE models (none for dense ones); ``expert_parallel``
    True also puts the dp = 1 shapes under EP (``--enable-expert-parallel`` pinned); a given ``dps``
    or ``expert_parallel`` on a dense model, or a list of which no shape can run, is an InputError.
    """
    from kvplan.errors import InputError, KvplanError
    from kvplan.plans.pd.model import valid_tps
    from kvplan.plans.pd.pools import fits_nodes

    moe = card.moe is not None
    if not moe and (expert_parallel or redundant_experts or (dps and any(d != 1 for d in dps))):
        flag = ("--enable-expert-parallel" if expert_parallel else "--ep-redundant-experts" if redundant_experts
                else "--dp")
        raise InputError(f"{flag}: {card.name} is a dense model (no routed experts to split over DP ranks)",
                         "drop it: a dense model's data parallelism is independent instances, which plan counts")
    for d in dps or ():
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise InputError(f"--dp values must be whole numbers >= 1 (got {d})", "e.g. --dp 1,8,16")
    r = redundant_experts
    if r is not None and (not isinstance(r, int) or isinstance(r, bool) or r < 0):
        raise InputError(f"--ep-redundant-experts must be a whole number >= 0 (got {r})", "0 turns it off")
    node_hw = node_hardware(hw, system)
    domain = domain_of(node_hw)
    ok, dropped = valid_tps(card, list(tps), domain, "plan")
    ep_dp1 = bool(expert_parallel)
    shapes = [Shape(tp, pp, 1, ep_dp1, _redundant(card, tp, ep_dp1, redundant_experts)) for pp in pps for tp in ok
              if (dps is None or 1 in dps)]
    wanted = [d for d in (DEFAULT_DPS if dps is None else dps) if d > 1] if moe else []
    if wanted and expert_parallel is False:
        raise InputError("--dp > 1 for a MoE model is planned with expert parallelism",
                         "add --enable-expert-parallel (vLLM: -dp D --enable-expert-parallel), or drop --dp")
    node = int(getattr(system, "node_accelerators", None) or system.accelerators) if system is not None else None
    refused: list[KvplanError] = []
    if ep_dp1:  # a shape whose EP ranks cannot hold the replicas is skipped, as in the DP search below
        shapes = [shape for shape in shapes if _holds(shape, card, f"tp={shape.tp}", refused, dropped)]
    for d in wanted:
        for tp in ok:
            g = tp * d
            label = f"tp={tp} dp={d}"
            if dps is None and g > DEFAULT_MAX_EP_GPUS:
                continue
            if node is not None and not fits_nodes(g, node):
                dropped.append(f"plan {label} skipped: {g} GPUs neither divide a {node}-GPU node nor span whole nodes")
                continue
            if g > domain and node_hw.nic is None:
                dropped.append(f"plan {label} skipped: {g} GPUs exceed the {domain:g}-GPU scale-up domain and "
                               f"{node_hw.name} has no NIC card (pass --system with one)")
                continue
            shape = Shape(tp, 1, d, True, _redundant(card, tp * d, True, redundant_experts))
            if _holds(shape, card, label, refused, dropped):
                shapes.append(shape)
    if not shapes and refused:
        raise refused[0]
    if redundant_experts and not any(s.expert_parallel for s in shapes):
        raise InputError("--ep-redundant-experts needs expert parallelism",
                         "add --enable-expert-parallel, or a --dp above 1 (searched with EP)")
    return shapes, dropped


def _holds(shape: Shape, card, label: str, refused: list, dropped: list) -> bool:
    """Whether the shape's parallelism passes its checks; a refusal is kept and named as a skipped shape."""
    from kvplan.errors import KvplanError

    try:
        shape.parallelism().check(card)
    except KvplanError as exc:
        refused.append(exc)
        dropped.append(f"plan {label} skipped: {exc.message}")
        return False
    return True


def _redundant(card, ep: int, expert_parallel: bool, given: int | None) -> int:
    """Redundant experts of an EP shape: the given count, else the fewest making ep divide the experts."""
    if not expert_parallel or card.moe is None:
        return 0
    return given if given is not None else fewest_redundant_experts(card, ep)


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
                  system=None, cards=(), gpu_cost: dict | None = None, replay=None, dps=None,
                  expert_parallel: bool | None = None, redundant_experts: int | None = None,
                  deployments: dict | None = None, **kwargs) -> ShapeSearch:
    """Plan every candidate shape; the cheapest feasible first (module docstring).

    ``card``, ``hw`` and ``system`` are cards; ``kwargs`` go to :func:`plan_fleet`.
    ``replay(plan)``, when given, sizes a feasible closed-form plan by its own replay (in place).
    ``deployments``: {Shape: Deployment} already resolved (pd's pools), used instead of resolving again.
    """
    from kvplan.errors import InputError

    engine = engine or EngineSettings()
    searched_tps = list(tps) if tps else list(DEFAULT_TPS)
    explicit_pp = pps is not None
    shapes, dropped = candidate_shapes(card, hw, searched_tps, list(pps) if pps else [1], system,
                                       list(dps) if dps is not None else None, expert_parallel, redundant_experts)
    if not shapes:
        raise InputError(f"no usable TP among {', '.join(map(str, searched_tps))} for {card.name} on {hw.name}",
                         "; ".join(dropped) or "pass other --tp values")
    def one(shape: Shape) -> FleetPlan:
        dep = (deployments or {}).get(shape) or resolve(card, hw, system=system, engine=engine,
                                                        parallel=shape.parallelism(), cards=cards)
        return plan_fleet(dep, workload, slos, **kwargs)

    plans = [one(shape) for shape in shapes]
    plain = [s for s in shapes if s.dp == 1]
    if plain and not explicit_pp and all(p.binding_constraint in ("memory", "kv_capacity") and not p.feasible
                                         for p in plans):
        widest = max(plain, key=lambda s: s.tp)
        for pp in WHERE_NEEDED_PPS:
            plan = one(replace(widest, pp=pp))
            plans.append(plan)
            if plan.feasible or plan.binding_constraint not in ("memory", "kv_capacity"):
                break
    plans.sort(key=lambda p: _key(p, gpu_cost))
    if replay is not None:
        _replay_in_order(plans, replay, gpu_cost)
        plans.sort(key=lambda p: _key(p, gpu_cost))
    return ShapeSearch(plans[0], plans, dropped, searched=len(plans) > 1 or not tps)


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

"""``kvplan plan``'s one library call: the open-loop fleet plan or the closed-loop curve, and its "no".

``answer`` picks the planner from the request (``concurrency`` given: the closed loop of
``closed.closed_loop_result``; else the open-loop search of ``plan.plan``, a typed
:class:`~kvplan.plans.fleet.plan.FleetAnswer`), notes the trace rows that were skipped, and, when no plan meets the SLOs, returns the reason and a hint named by the
binding constraint (``binding.py``) beside the result, so the command can show the rows first
and say "no" once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.result import Result

if TYPE_CHECKING:
    from kvplan.plans.fleet.plan import FleetAnswer

HINTS = {
    "kv_capacity": "raise --tp or --pp, use --kv-dtype fp8, or quantise the weights (--weights-dtype fp8)",
    "tpot_slo": "relax --tpot, or use faster hardware, a larger --tp or lighter weights",
    "ttft_slo": "relax --ttft, or use faster hardware or a larger --tp",
}
DEFAULT_HINT = "raise --max-gpus, relax the SLOs or lower the rate"


@dataclass(frozen=True)
class PlanAnswer:
    """``fleet``: the open-loop answer (typed); ``curve``: the closed-loop curve; ``no`` = (reason, hint) when infeasible."""

    fleet: FleetAnswer | None = None
    curve: Result | None = None
    no: tuple[str, str] | None = None

    @property
    def closed(self) -> bool:
        return self.curve is not None

    def result(self) -> Result:
        """What the command renders; the "no" is said once, by the command, from ``no``."""
        return self.curve if self.fleet is None else self.fleet.result(with_verdict=False)


def infeasible_hint(binding_constraint: str) -> str:
    """What to change, by the binding constraint of the best plan found."""
    return HINTS.get(binding_constraint, DEFAULT_HINT)


def answer(model, hardware, workload, slos, settings, *, concurrency: list[int] | None = None, instances: int = 1,
           tps=None, pps=None, scale=(), simulate=None, sim_requests=None, seed: int = 0, max_gpus=None,
           max_utilization: float = 0.9, allow_long_context: bool = False, system=None, gpu_cost=None,
           cards: tuple = (), dps=None, expert_parallel=None, redundant_experts=None,
           warmup_requests: int = 0, phases: str | None = None) -> PlanAnswer:
    """The fleet plan for ``workload`` (open loop), or its closed-loop replay when ``concurrency`` is given."""
    if concurrency is not None:
        from kvplan.plans.fleet.closed import closed_loop_result

        return PlanAnswer(curve=closed_loop_result(model, hardware, workload, concurrency, instances=instances,
                                                   tps=tps, pps=pps, engine=settings, system=system,
                                                   requests=sim_requests, seed=seed, cards=cards, dps=dps,
                                                   expert_parallel=expert_parallel,
                                                   redundant_experts=redundant_experts, warmup=warmup_requests,
                                                   phases=phases))
    from kvplan.plans.fleet.plan import plan

    fleet = plan(model, hardware, workload, slos, None, settings, tps=tps, pps=pps, scale=list(scale),
                 simulate=simulate, sim_requests=sim_requests, seed=seed, max_gpus=max_gpus,
                 max_utilization=max_utilization, allow_long_context=allow_long_context, system=system,
                 gpu_cost=gpu_cost, cards=cards, dps=dps, expert_parallel=expert_parallel,
                 redundant_experts=redundant_experts)
    skipped = getattr(workload.trace, "skipped_lines", ())
    if skipped:
        shown = ", ".join(map(str, skipped[:5])) + (", …" if len(skipped) > 5 else "")
        fleet = replace(fleet, notes=(f"skipped {len(skipped)} malformed row{'s' if len(skipped) > 1 else ''} "
                                      f"(lines {shown})", *fleet.notes))
    no = (fleet.verdict, infeasible_hint(fleet.plan.binding_constraint)) if fleet.failed else None
    return PlanAnswer(fleet=fleet, no=no)

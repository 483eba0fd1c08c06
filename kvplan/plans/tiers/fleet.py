"""How many instances serve the workload, and how much decode KV they hold (Little's law).

The fleet is ``kvplan plan``'s (:func:`aggregated_fleet`): the same deployment, the same workload
(``kvplan plan``'s door: a trace as it came, flags sampled as ``kvplan plan`` samples them) and
SLOs give the same instances, decode batch and TPOT, placed on whole nodes: ``nodes = ⌈N / (per
node)⌉`` and the fleet model evaluated at the whole-node count (or at ``--nodes`` × per node).

With a given ``decode_batch`` (a what-if: B sequences held per instance) :func:`size_fleet` below
keeps the older stability bound:

Every instance (``tp`` GPUs) serves ``λ / I`` requests per second, interleaving prefills and decode
steps (continuous batching, aggregated serving). Per instance:

    prefill load   ρ_p = (λ / I) × E[prefill_s(ISL)]                  (share of time spent prefilling)
    decode batch   B   = (λ / I) × (E[OSL] − 1) × TPOT                 (Little's law: sequences decoding)
    TPOT           = step(B, L̄) / (1 − ρ_p)                            (decode runs between prefills)

with ``step(B, L̄)`` the roofline decode step of B sequences at the mean decode context
``L̄ = E[ISL] + E[OSL]/2``. Since step(B) grows with B, ``B_{k+1} = (λ/I)(E[OSL]−1) step(B_k)/(1−ρ_p)``
from ``B_0 = 0`` rises monotonically to the smallest fixed point, or diverges when the instance
cannot keep up. Without ``nodes`` the fleet is the fewest whole nodes for which ``ρ_p < 1`` and
the fixed point exists: a stability bound, not an SLO (TTFT/TPOT percentiles are the PD
planner's job). A given ``decode_batch`` replaces the fixed point (B sequences held per instance,
e.g. to ask what holding 32 long sequences per instance costs); then only ``ρ_p < 1`` is required.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvplan.calc.roofline import Machine, ModelCost, decode_step
from kvplan.calc.tiering import recompute_s
from kvplan.errors import InfeasibleError, InputError
from kvplan.plans.fleet.aggregated import FleetWorkload, plan_fleet
from kvplan.workload.slo import parse_slo

MAX_NODES = 4096
MAX_BATCH = 1e6


@dataclass(frozen=True)
class Fleet:
    nodes: int
    accelerators_per_node: int
    tp: int
    instances: int
    rate_per_s: float
    mean_prefill_s: float
    prefill_load: float
    decode_batch: float
    decode_step_s: float
    tpot_s: float
    decode_context: float
    auto: bool
    plan_instances: int | None = None  # kvplan plan's instance count before rounding up to whole nodes

    @property
    def gpus(self) -> int:
        return self.instances * self.tp


def decode_fixed_point(cost: ModelCost, machine: Machine, arrivals_per_s: float, decode_steps: float,
                       context: float, prefill_load: float, *, tp: int, overlap_comm: bool = False,
                       iterations: int = 100, pass_fn=None) -> tuple[float, float] | None:
    """(B, step_s) with ``B = x × step(B)``, ``x = arrivals × steps / (1 − ρ_p)``; None when no B solves it.

    Newton's method on ``g(B) = x step(B) − B`` from ``B = 0`` (g(0) > 0). The step is a sum of
    rooflines, piecewise linear and convex in B, so Newton climbs monotonically to the smallest
    root; a slope ``x step'(B) ≥ 1`` on the way means the batch outgrows the steps (no root).
    """
    if prefill_load >= 1:
        return None
    x = arrivals_per_s * max(decode_steps, 0.0) / (1.0 - prefill_load)

    def step_at(batch):
        return decode_step(cost, machine, np.asarray(batch, dtype=np.float64), context, tp=tp,
                           overlap_comm=overlap_comm, pass_fn=pass_fn).time_s

    if x == 0:
        return 0.0, float(step_at(1.0))
    batch = 0.0
    for _ in range(iterations):
        h = max(1e-3, 1e-6 * batch)
        s, s_h = step_at([batch, batch + h])
        g = x * s - batch
        slope = x * (s_h - s) / h - 1.0
        if abs(g) <= 1e-9 * max(batch, 1.0):
            return batch, float(s)
        if slope >= 0:
            return None
        batch = batch - g / slope
        if batch > MAX_BATCH:
            return None
    return None


def size_fleet(cost: ModelCost, machine: Machine, *, tp: int, accelerators_per_node: int, rate_per_s: float,
               isl_samples: np.ndarray, osl_mean: float, nodes: int | None = None,
               decode_batch: float | None = None, overlap_comm: bool = False, pass_fn=None) -> Fleet:
    """Instances, prefill load and decode batch for ``nodes`` nodes (or the fewest stable ones).

    ``pass_fn``: the deployment's per-operator pass (``Deployment.steps.pass_fn``); None is the roofline.
    """
    if accelerators_per_node % tp:
        raise InputError(f"--tp {tp} does not divide the system's {accelerators_per_node} accelerators",
                         "choose a tp that divides them (one or more instances per node)")
    if nodes is not None and nodes < 1:
        raise InputError(f"--nodes must be >= 1 (got {nodes})")
    if decode_batch is not None and not decode_batch > 0:
        raise InputError(f"--decode-batch must be > 0 (got {decode_batch:g})", "sequences decoding per instance")
    mean_prefill = float(np.mean(recompute_s(cost, machine, isl_samples, tp=tp, overlap_comm=overlap_comm,
                                             pass_fn=pass_fn)))
    context = float(np.mean(isl_samples)) + osl_mean / 2
    per_node = accelerators_per_node // tp
    candidates = [nodes] if nodes is not None else range(
        max(1, math.ceil(rate_per_s * mean_prefill / per_node)), MAX_NODES + 1)
    for n in candidates:
        instances = n * per_node
        load = rate_per_s * mean_prefill / instances
        if decode_batch is not None:
            point = None if load >= 1 else (decode_batch, float(decode_step(
                cost, machine, decode_batch, context, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn).time_s))
        else:
            point = decode_fixed_point(cost, machine, rate_per_s / instances, osl_mean - 1, context, load, tp=tp,
                                       overlap_comm=overlap_comm, pass_fn=pass_fn)
        if point is not None:
            batch, step = point
            return Fleet(n, accelerators_per_node, tp, instances, rate_per_s, mean_prefill, load, batch, step,
                         step / (1 - load), context, nodes is None)
    if nodes is not None:
        load = rate_per_s * mean_prefill / (nodes * per_node)
        raise InfeasibleError(
            f"{nodes} node(s) of {per_node} instance(s) cannot keep up with {rate_per_s:.3g} req/s: prefill alone "
            f"keeps each instance busy {load:.0%} of the time" + ("" if load >= 1 else
                                                                  " and the decode batch grows without bound"),
            "add --nodes, or omit it to size the fleet")
    raise InfeasibleError(f"no fleet of up to {MAX_NODES} nodes keeps up with {rate_per_s:.3g} req/s",
                          "lower the rate or check the workload")


def aggregated_fleet(dep, reuse, accelerators_per_node: int, nodes: int | None, ttft_slo: str | None,
                     tpot_slo: str | None, mean_prefill_s: float, fits=None,
                     instances: int | None = None) -> tuple[Fleet, list[str]]:
    """``kvplan plan``'s fleet for the tier plan's deployment and workload, on whole nodes of the system.

    Without ``nodes``, and given ``fits`` (the active decode KV fits HBM), nodes are added until it
    does: vLLM and SGLang keep every running sequence's KV in HBM and preempt when the pool is full;
    they do not stream decode KV from host memory, so a fleet whose hot path spills is not one they
    run. With ``nodes`` given, a spill is the what-if the tier plan prices (its TPOT penalty).
    """
    tp = dep.tp
    if accelerators_per_node % tp:
        raise InputError(f"--tp {tp} does not divide the system's {accelerators_per_node} accelerators",
                         "choose a tp that divides them (one or more instances per node)")
    if nodes is not None and nodes < 1:
        raise InputError(f"--nodes must be >= 1 (got {nodes})")
    spec = reuse.fleet_spec
    workload = FleetWorkload.from_spec(spec) if spec is not None else FleetWorkload.from_trace(reuse.trace,
                                                                                             reuse.rate_per_s)
    slos = [parse_slo(kind, text) for kind, text in (("ttft", ttft_slo), ("tpot", tpot_slo)) if text is not None]
    plan = plan_fleet(dep, workload, slos, allow_long_context=True)
    per_node = accelerators_per_node // tp
    given = nodes
    if instances is not None:  # the fleet is given (a plan's): its instances on the whole nodes they take
        nodes, given = max(1, math.ceil(instances / per_node)), max(1, math.ceil(instances / per_node))
    if nodes is None:
        if plan.instances is None:
            raise InfeasibleError(f"no aggregated fleet serves the workload: {plan.reason}",
                                  plan.hint or "lower the rate, relax the SLOs or add --nodes")
        nodes = max(1, math.ceil(plan.instances / per_node))
    fixed = instances

    def at(n: int) -> Fleet:
        instances = fixed if fixed is not None else n * per_node
        point = plan.point if plan.instances == instances else plan.setup["model"].evaluate(instances)
        decodes = workload.lengths.n_points.size > 0  # else every request ends with its first token: no TPOT
        if not (point.prefill_utilization < 1 and (math.isfinite(point.tpot["mean"]) or not decodes)):
            raise InfeasibleError(
                f"{n} node(s) of {per_node} instance(s) cannot keep up with {workload.rate_per_s:.3g} req/s "
                f"(prefill utilisation {point.prefill_utilization:.0%} per instance)",
                "add --nodes, or omit it to size the fleet")
        return Fleet(n, accelerators_per_node, tp, instances, workload.rate_per_s, mean_prefill_s,
                     float(point.prefill_utilization), float(point.batch_mean), float(point.step_s),
                     float(point.tpot["mean"]), float(workload.lengths.decode_context), given is None, plan.instances)

    fleet = at(nodes)
    first = nodes
    while given is None and fits is not None and not fits(fleet) and fleet.nodes < MAX_NODES:
        fleet = at(fleet.nodes + 1)
    if fixed is not None:
        notes = [f"fleet: the given {fixed} instance(s) of tp={tp} on {first} whole node(s) of {per_node} instance(s)",
                 *plan.assumptions]
    else:
        notes = [f"fleet: kvplan plan's aggregated fleet ({plan.instances} instance(s) of tp={tp}"
                 + (f", binding {plan.binding_constraint}" if plan.instances else "") + f") on {first} whole node(s) "
                 f"of {per_node} instance(s)", *plan.assumptions]
    if fleet.nodes > first:
        notes.append(f"fleet grown to {fleet.nodes} nodes so that the p99 decode batch's KV fits HBM "
                     f"({first} would spill it)")
    return fleet, notes

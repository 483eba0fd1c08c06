"""The JSON rows of ``kvplan plan``: the one place the fleet's typed results become flat dicts.

Planners pass :class:`~kvplan.plans.fleet.aggregated.FleetPlan` and
:class:`~kvplan.plans.fleet.plan.FleetAnswer` objects to each other and read their fields; these
functions serialise them for ``--format json`` / csv and the tables (snake_case keys with unit
suffixes, SI units, ``None`` where a figure is undefined or infinite). Nothing in the library reads
a row back.

Rows (what ``--format json`` prints):

- ``kind: plan`` — every key of :func:`plan_row` (``instances``, ``gpus_per_instance``, ``total_gpus``,
  ``batch_per_instance``, ``concurrency``, ``kv_demand_mean_bytes``, ``kv_demand_p99_bytes``,
  ``kv_capacity_bytes``, ``headroom_bytes``, ``ttft_{mean,p50,p90,p95,p99}_s``, ``tpot_…_s``,
  ``binding_constraint``, ``feasible``, …), the nodes (``system``, ``accelerators_per_node``,
  ``nodes``) and, with a replay, ``sim_ttft_…_s``, ``sim_tpot_…_s``, ``sim_requests``, ``sim_batch_mean``.
- ``kind: candidate`` — every other instance shape searched (:data:`CANDIDATE_KEYS`).
- ``kind: scale`` — one row per rate multiplier: instances, GPUs, batch, binding constraint,
  feasibility and the percentile latencies of the re-planned fleet.
- with ``--gpu-cost``, every row adds ``gpu_cost_per_gpu_hour``, ``fleet_cost_per_hour`` and
  ``cost_per_million_output_tokens`` (:func:`kvplan.plans.fleet.cost.cost_fields`).
- the plan and candidate rows end with their shape's :func:`parallel_fields` (``dp``, ``ep``,
  ``expert_parallel``, ``redundant_experts``, ``batch_per_rank``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from kvplan.plans.fleet.binding import binding_detail
from kvplan.plans.fleet.cost import cost_fields
from kvplan.plans.fleet.model import STATS
from kvplan.units import format_seconds

if TYPE_CHECKING:
    from kvplan.plans.fleet.aggregated import FleetPlan
    from kvplan.plans.fleet.plan import FleetAnswer

CANDIDATE_KEYS = ("tp", "pp", "instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "ttft_p99_s",
                  "tpot_p99_s", "binding_constraint", "binding_detail", "feasible", "reason", "sized_by")
SCALE_KEYS = ("rate_per_s", "sized_by", "instances", "gpus_per_instance", "total_gpus", "batch_per_instance",
              "batch_mean", "concurrency", "kv_demand_mean_bytes",
              *(f"{k}_{s}_s" for k in ("ttft", "tpot") for s in ("p50", "p90", "p99")),
              "binding_constraint", "feasible", "reason")


def num(value):
    """A finite float, or None (JSON has no inf / NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def slo_text(slo) -> str | None:
    return None if slo is None else f"{slo.stat}<={format_seconds(slo.limit_s).replace(' ', '')}"


def plan_row(plan: FleetPlan) -> dict:
    """One plan as one flat JSON row (SI units, snake_case keys with unit suffixes)."""
    p, f = plan.point, plan.figures
    row = {
        "model": plan.model, "hardware": plan.hardware, "engine": plan.engine.engine, "tp": plan.shape.tp,
        "pp": plan.shape.pp, "rate_per_s": plan.rate_per_s, "instances": plan.instances,
        "gpus_per_instance": plan.gpus_per_instance, "total_gpus": plan.total_gpus,
        "batch_per_instance": plan.batch_per_instance,
        "batch_kv": f.batch_kv if f else None, "batch_kv_mean": f.batch_kv_mean if f else None,
        "batch_kv_p99": f.batch_kv_p99 if f else None,
        "batch_tpot": p.batch_tpot if p is not None and "tpot" in plan.slos else None,
        "batch_mean": num(p.batch_mean) if p is not None else None,
        "concurrency": num(p.concurrency) if p is not None else None,
        "running_concurrency": num(p.running) if p is not None else None,
    }
    if plan.memory is not None:
        row.update({k: num(v) for k, v in dataclasses.asdict(plan.memory).items()})
    row.update({f"ttft_{s}_s": num(plan.ttft.get(s)) for s in STATS})
    row.update({f"tpot_{s}_s": num(plan.tpot.get(s)) for s in STATS})
    row.update({
        "decode_step_s": num(p.step_s) if p is not None else None,
        "prefill_mean_s": num(p.prefill_mean_s) if p is not None else None,
        "prefill_utilization": num(p.prefill_utilization) if p is not None else None,
        "slot_utilization": num(p.slot_utilization) if p is not None else None,
        "interference_share": num(p.rho_interference) if p is not None else None,
        "ttft_slo": slo_text(plan.slos.get("ttft")), "tpot_slo": slo_text(plan.slos.get("tpot")),
        "binding_constraint": plan.binding_constraint, "feasible": plan.feasible, "reason": plan.reason,
        "binding_detail": binding_detail(plan), "sized_by": plan.sized_by,
        "closed_form_instances": plan.closed_form_instances if plan.closed_form_instances is not None
        else plan.instances,
    })
    return row


def nodes_row(plan: FleetPlan) -> dict:
    """``system``, ``accelerators_per_node`` and ``nodes`` (:attr:`FleetPlan.nodes`)."""
    system = plan.deployment.system if plan.deployment is not None else None
    return {"system": system.name if system is not None else None,
            "accelerators_per_node": system.accelerators if system is not None else None, "nodes": plan.nodes}


def candidate_row(plan: FleetPlan) -> dict:
    row = plan_row(plan)
    out = {"kind": "candidate", **{k: row.get(k) for k in CANDIDATE_KEYS}, "nodes": plan.nodes}
    if plan.sim is not None:
        stats = plan.sim.stats()
        out.update({"sim_ttft_p99_s": stats["sim_ttft_p99_s"], "sim_tpot_p99_s": stats["sim_tpot_p99_s"]})
    return out


def scale_row(multiplier: float, plan: FleetPlan) -> dict:
    row = plan_row(plan)
    return {"kind": "scale", "rate_multiplier": multiplier, **{k: row.get(k) for k in SCALE_KEYS}, "nodes": plan.nodes}


def answer_rows(answer: FleetAnswer) -> list[dict]:
    """The plan row, the runners-up, one row per rate multiplier; the cost fields on each with ``--gpu-cost``."""
    main = answer.plan
    row = {"kind": "plan", **plan_row(main), **nodes_row(main)}
    if main.sim is not None:
        row.update(main.sim.stats())
    others = [p for p in answer.candidates if p is not main]
    pairs = [(row, main)] + [(candidate_row(p), p) for p in others]
    pairs += [(scale_row(s.multiplier, s.plan), s.plan) for s in answer.scale]
    if answer.gpu_cost:
        for r, p in pairs:
            r.update(cost_fields(p.total_gpus if p.feasible else None, main.hardware, p.rate_per_s,
                                 answer.mean_osl, answer.gpu_cost))
    for r, p in pairs[:1 + len(others)]:  # the plan and the runners-up: their shape (keys appended last)
        r.update(parallel_fields(p))
    return [r for r, _ in pairs]


def parallel_fields(plan: FleetPlan) -> dict:
    """``dp``, ``ep``, ``expert_parallel``, ``redundant_experts`` and ``batch_per_rank`` (the max_num_seqs to set)."""
    s = plan.shape
    return {"dp": s.dp, "ep": s.ep, "expert_parallel": s.expert_parallel, "redundant_experts": s.redundant_experts,
            "batch_per_rank": plan.batch_per_rank}

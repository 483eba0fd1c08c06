"""The ``tiers`` metric producer for ``kvplan check``: a plan file's deployment through :func:`tier_plan`.

Workload: ``workload.trace`` (a Mooncake-style trace with hash_ids) or ``workload: {qps, isl, osl}``
(single-turn requests of fixed lengths: no reuse unless the trace says so, so hit rates are 0 and
the metrics that matter are the hot-path ones). Tiers come from the plan's system card (or the
accelerator's usual system). The fleet is the plan's one fleet (``kvplan plan``'s answer,
:mod:`kvplan.plans.check.fleet_metrics`) where the plan has one; else the tier plan sizes its own.
"""

from __future__ import annotations

import math
from pathlib import Path

from kvplan.errors import InfeasibleError
from kvplan.plans.check.context import PlanContext, Produced
from kvplan.plans.tiers.reuse import from_trace, from_workload
from kvplan.plans.tiers.plan import tier_plan
from kvplan.workload.synthetic import workload_from_flags

SAMPLE_REQUESTS = 20_000
KINDS = ("hbm", "host_dram", "cxl", "nvme", "remote")
NAMES = ("tier_hit_rate", "tier_unlimited_hit_rate", "tier_cache_tokens", "tier_ttft_saved_p50_s",
         "tier_ttft_saved_p99_s", "prefill_gpu_s_saved_per_s", "prefill_gpu_share_saved", "tpot_penalty_p50_s",
         "tpot_penalty_p99_s", *(f"tier_hit_rate_{kind}" for kind in KINDS))


def plan_fleet_instances(context: PlanContext) -> int | None:
    """The plan's one fleet (``kvplan plan``'s answer) to place the tiers on: its instances, or None when there is
    none to use (no rate, an infeasible plan, or a trace rescaled to ``qps``, which the tier replay does not do)."""
    from kvplan.plans.check.fleet_metrics import fleet_plan

    workload = context.plan.workload
    rate_matches = (workload.trace is None) == (workload.qps is not None)  # flags with a rate, or a trace as it came
    if not rate_matches or context.plan.engine.pipeline_parallel_size > 1:
        return None
    fleet = fleet_plan(context)
    return fleet.instances if fleet.feasible and fleet.instances is not None else None


def reuse_of(context: PlanContext):
    """The tier planner's workload for the plan (a trace with hash_ids, or the flags sampled), made once."""
    if "reuse" not in context.memo:
        workload = context.plan.workload
        if workload.trace is not None:
            path = Path(workload.trace)
            context.memo["reuse"] = from_trace(path if path.is_absolute() else context.base_dir / path,
                                               trace_format=workload.trace_format)
        else:
            spec = workload_from_flags(rate_per_s=workload.qps or 1.0, isl=str(workload.isl), osl=str(workload.osl))
            context.memo["reuse"] = from_workload(spec, sample_requests=SAMPLE_REQUESTS)
    return context.memo["reuse"]


def tier_plan_result(context: PlanContext, instances: int | None):
    """:func:`tier_plan` for the plan's deployment and workload, on ``instances`` (the plan's fleet) when given;
    made once per plan (the check's metrics and the report's section read the same answer)."""
    key = f"tier_plan:{instances}"
    if key not in context.memo:
        context.memo[key] = _tier_plan(context, instances)
    return context.memo[key]


def _tier_plan(context: PlanContext, instances: int | None):
    plan, engine = context.plan, context.plan.engine
    reuse = reuse_of(context)
    slo = plan.slo
    if instances is not None:
        return tier_plan(context.model_card, reuse=reuse, resolved=context.deployment, instances=instances, pd=False,
                         ttft_slo=slo.ttft if slo else None, tpot_slo=slo.tpot if slo else None, cards=context.cards)
    return tier_plan(
        context.model_card, context.hardware_card, system=context.system_card, reuse=reuse,
        tp=engine.tensor_parallel_size, kv_dtype=engine.kv_cache_dtype, weights_dtype=engine.weights_dtype,
        engine=engine.name, gpu_memory_utilization=engine.gpu_memory_utilization, pd=False, cards=context.cards,
    )


def tier_metrics(context: PlanContext) -> Produced:
    """The tier metrics, on the plan's one fleet when it has one (:func:`plan_fleet_instances`)."""
    workload = context.plan.workload
    try:
        result = tier_plan_result(context, plan_fleet_instances(context)).result
    except InfeasibleError as exc:  # an answer, not a mistake: the hot path has nowhere to go
        values = {name: math.nan for name in NAMES}
        values["active_kv_fits_hbm"] = False
        return Produced(values, [], [f"tier plan infeasible: {exc.message}"])
    tiers, summary = result.rows[:-1], result.rows[-1]
    values: dict[str, float | bool] = {
        "tier_hit_rate": summary["hit_rate"], "tier_unlimited_hit_rate": summary["unlimited_hit_rate"],
        "tier_cache_tokens": summary["capacity_tokens"], "tier_ttft_saved_p50_s": summary["ttft_saved_p50_s"],
        "tier_ttft_saved_p99_s": summary["ttft_saved_p99_s"],
        "prefill_gpu_s_saved_per_s": summary["prefill_gpu_s_saved_per_s"],
        "prefill_gpu_share_saved": summary["prefill_gpu_share_saved"] or 0.0,
        "active_kv_fits_hbm": summary["active_kv_fits_hbm"],
        "tpot_penalty_p50_s": summary["tpot_penalty_p50_s"], "tpot_penalty_p99_s": summary["tpot_penalty_p99_s"],
    }
    for kind in KINDS:
        values[f"tier_hit_rate_{kind}"] = float(sum(r["hit_rate"] for r in tiers if r["kind"] == kind))
    notes = list(result.assumptions)
    if workload.qps is None and workload.trace is None:
        notes.append("workload has no qps: 1 req/s taken for the tier plan's fleet")
    return Produced(values, result.explain, notes, result)

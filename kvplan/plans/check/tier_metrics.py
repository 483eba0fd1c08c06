"""The ``tiers`` metric producer for ``kvplan check``: a plan file's deployment through :func:`tier_plan`.

Workload: ``workload.trace`` (a Mooncake-style trace with hash_ids) or ``workload: {qps, isl, osl}``
(single-turn requests of fixed lengths: no reuse unless the trace says so, so hit rates are 0 and
the metrics that matter are the hot-path ones). Tiers come from the plan's system card.
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


def tier_metrics(context: PlanContext) -> Produced:
    plan, engine = context.plan, context.plan.engine
    workload = plan.workload
    if workload.trace is not None:
        path = Path(workload.trace)
        reuse = from_trace(path if path.is_absolute() else context.base_dir / path, trace_format=workload.trace_format)
    else:
        spec = workload_from_flags(rate_per_s=workload.qps or 1.0, isl=str(workload.isl), osl=str(workload.osl))
        reuse = from_workload(spec, sample_requests=SAMPLE_REQUESTS)
    try:
        result = tier_plan(
            context.model_card, context.hardware_card, system=context.system_card, reuse=reuse,
            tp=engine.tensor_parallel_size, kv_dtype=engine.kv_cache_dtype, weights_dtype=engine.weights_dtype,
            engine=engine.name, gpu_memory_utilization=engine.gpu_memory_utilization, pd=False, cards=context.cards,
        ).result
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

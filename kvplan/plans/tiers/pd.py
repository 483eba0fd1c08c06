"""Feed the tiers' prefill savings back into the PD recommendation (:func:`kvplan.plans.pd.plan.plan_pd`).

The PD planner takes ``cached_prefix_fraction`` F, the share of prompt tokens served from a cache
tier: every prompt of S tokens prefills only its last ``S − ⌊F·S⌋`` tokens. The tier plan measures
F from the same LRU replay that gives the hit rates, token-weighted:

    F = Σ_requests cached tokens / Σ_requests prompt tokens      (cached tokens ≤ S − 1 per request)

and plans xPyD twice, at F = 0 and at the measured F, under the same SLOs: fewer (or smaller)
prefill instances is the tiers' payoff in GPUs. Both runs search the PD planner's TP grid; only
the disaggregated recommendation is compared (no aggregated alternative, no sensitivity rows).
"""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.plans.sizing.latency import Efficiencies

FIELDS = ("xpyd", "prefill_instances", "decode_instances", "prefill_tp", "decode_tp", "prefill_gpus", "total_gpus",
          "feasible", "binding_constraint", "ttft_p99_s")


def pd_feedback(card, hardware, system, trace, fraction: float, *, ttft: str | None, tpot: str | None,
                engine: str, kv_dtype: str, weights_dtype: str, gpu_memory_utilization: float | None,
                efficiencies: Efficiencies, cards, perf_model: str = "operators") -> tuple[dict, list[str], list[str]]:
    """(summary fields ``pd_*``, notes, explain lines); empty fields and a note when PD cannot be planned."""
    try:
        from kvplan.plans.pd.plan import PDSettings, plan_pd
    except ImportError:  # the PD planner is not part of this build
        return {}, ["PD feedback skipped: kvplan.plans.pd.plan is not available"], []
    settings = PDSettings(engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
                          gpu_memory_utilization=gpu_memory_utilization, efficiencies=efficiencies,
                          perf_model=perf_model)
    slos = {k: v for k, v in (("ttft", ttft), ("tpot", tpot)) if v is not None}
    runs = {}
    try:
        for label, f in (("without_cache", 0.0), ("with_cache", min(fraction, 0.999))):
            result = plan_pd(card, hardware, system=system, trace=trace, cached_prefix_fraction=f, settings=settings,
                             aggregated=False, sensitivity=False, allow_long_context=True, cards=cards, **slos)
            runs[label] = result.plan
    except KvplanError as exc:
        return {}, [f"PD feedback skipped: {exc.message}"], []
    out = {"cached_prefix_fraction": fraction,
           "pd_ttft_slo": runs["without_cache"].ttft_slo, "pd_tpot_slo": runs["without_cache"].tpot_slo}
    for label, plan in runs.items():
        for key, value in _fields(plan).items():
            out[f"pd_{key}_{label}"] = value
    explain = [f"PD feedback: plan_pd(cached_prefix_fraction = {fraction:.4f}) vs 0, SLOs "
               f"{out['pd_ttft_slo']}, {out['pd_tpot_slo']}: " + "; ".join(
                   f"{label.replace('_', ' ')}: " + (f"{plan.xpyd} (prefill TP{plan.prefill.tp}, decode "
                                                     f"TP{plan.decode.tp}), {plan.total_gpus} GPUs"
                                                     if plan.feasible else
                                                     f"infeasible ({plan.binding_constraint})")
                   for label, plan in runs.items())]
    return out, [], explain


def _fields(plan) -> dict:
    """The :data:`FIELDS` of one PD plan (:class:`kvplan.plans.pd.result.PdPlan`)."""
    return {"xpyd": plan.xpyd, "prefill_instances": plan.prefill.instances, "decode_instances": plan.decode.instances,
            "prefill_tp": plan.prefill.tp, "decode_tp": plan.decode.tp, "prefill_gpus": plan.prefill.gpus,
            "total_gpus": plan.total_gpus, "feasible": plan.feasible, "binding_constraint": plan.binding_constraint,
            "ttft_p99_s": plan.ttft.get("p99")}


def pd_sentence(summary: dict) -> str | None:
    """One clause for the verdict: what the cache does to the PD recommendation."""
    if "pd_feasible_without_cache" not in summary:
        return None
    before, after = summary["pd_feasible_without_cache"], summary["pd_feasible_with_cache"]
    if after and before:
        saved = summary["pd_prefill_gpus_without_cache"] - summary["pd_prefill_gpus_with_cache"]
        return (f"PD with the cache: {summary['pd_xpyd_with_cache']} ({summary['pd_total_gpus_with_cache']} GPUs) instead "
                f"of {summary['pd_xpyd_without_cache']} ({summary['pd_total_gpus_without_cache']} GPUs), "
                f"{saved} prefill GPU{'s' if abs(saved) != 1 else ''} fewer")
    if after:
        return (f"PD: only the cache makes {summary['pd_ttft_slo']}, {summary['pd_tpot_slo']} attainable: "
                f"{summary['pd_xpyd_with_cache']} ({summary['pd_total_gpus_with_cache']} GPUs)")
    return f"PD cannot meet {summary['pd_ttft_slo']}, {summary['pd_tpot_slo']} with or without the cache"

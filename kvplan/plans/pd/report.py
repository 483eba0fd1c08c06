"""The typed plans, the aggregated alternative, the chain of numbers and the verdict of ``kvplan pd``.

:func:`pd_plan` and :func:`infeasible_plan` make a :class:`~kvplan.plans.pd.result.PdPlan` from the
search's candidate (SI units, ``None`` where a figure does not apply or is not finite);
:func:`aggregated_alternative` makes the aggregated one from ``kvplan plan``'s fleet. The verdict,
the explain lines and the hint read those fields; the rows are :mod:`kvplan.plans.pd.rows`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from kvplan.calc.disagg import rate_matched_xpyd
from kvplan.errors import KvplanError
from kvplan.plans.fleet.aggregated import FleetPlan, FleetWorkload
from kvplan.plans.pd.link import PATH_NAMES
from kvplan.plans.pd.result import PdPlan, PoolFigures
from kvplan.plans.pd.rows import STATS
from kvplan.units import format_bytes, format_seconds

NAMES = {"ttft_slo": "TTFT SLO", "tpot_slo": "TPOT SLO", "decode_kv_capacity": "decode KV capacity",
         "prefill_kv_capacity": "prefill KV capacity", "max_num_seqs": "max_num_seqs", "link": "P→D link",
         "kv_capacity": "KV capacity", "prefill_compute": "prefill compute", "chunk_budget": "chunk budget",
         "max_num_batched_tokens": "max_num_batched_tokens", "memory": "memory",
         "utilization": "utilisation", "prefill_utilization": "prefill utilisation ceiling", "none": "none"}


def pd_columns(setup) -> list[str]:
    wide = [k for k in ("prefill_dp", "decode_dp", "prefill_nodes", "decode_nodes")
            if any(x.dp > 1 for x in (*setup.prefill.shapes, *setup.decode.shapes))]
    return ["scenario", "mode", "xpyd", "prefill_tp", "decode_tp", *wide, "total_gpus", "link_kind", "kv_transfer_s",
            f"ttft_{setup.ttft.stat}_s", f"tpot_{setup.tpot.stat}_s", "goodput_per_gpu", "feasible",
            "binding_constraint"]


def _num(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def slo_text(slo) -> str:
    """'TTFT p99 ≤ 4.000 s'."""
    return f"{slo.kind.upper()} {slo.stat} ≤ {format_seconds(slo.limit_s)}"


def _slo(slo) -> str:
    return f"{slo.stat}<={format_seconds(slo.limit_s).replace(' ', '')}"


def _base(setup, workload, scenario: str, mode: str) -> dict:
    """The fields every plan of one scenario shares (its workload, SLOs, cards)."""
    return {"scenario": scenario, "mode": mode, "model": setup.card.name,
            "prefill_hardware": setup.prefill.side.hardware.name,
            "decode_hardware": setup.decode.side.hardware.name, "qps": workload.rate_per_s,
            "arrival_scv": workload.arrival_scv, "isl_mean": workload.isl_mean, "osl_mean": workload.osl_mean,
            "cached_prefix_fraction": setup.cached_fraction, "ttft_slo": _slo(setup.ttft),
            "tpot_slo": _slo(setup.tpot)}


def _weighted(values, workload) -> float:
    return float((np.asarray(values) * workload.weights).sum())


def binding_of(setup, values: dict, prefill_binding: str | None, decode_binding: str | None) -> str:
    """What sized the plan: the constraint that fails with one prefill or one decode instance fewer
    (both pools at their minimum: ``none``); when both pools bind, the one closer to its limit
    (value / limit over SLOs, memory, sequences, link)."""
    binding = [b for b in (prefill_binding, decode_binding) if b not in (None, "none")]
    if len(binding) < 2:
        return binding[0] if binding else "none"
    ratios = {
        "ttft_slo": values.get(f"ttft_{setup.ttft.stat}_s", 0) / setup.ttft.limit_s,
        "tpot_slo": values.get(f"tpot_{setup.tpot.stat}_s", 0) / setup.tpot.limit_s,
        "decode_kv_capacity": values.get("decode_kv_utilization", 0),
        "max_num_seqs": values.get("decode_seq_utilization", 0),
        "link": values.get("link_utilization", 0),
        "prefill_utilization": values.get("prefill_utilization", 0) / getattr(setup, "max_utilization", 1.0),
    }
    return max(binding, key=lambda k: ratios.get(k, 0.0) if math.isfinite(ratios.get(k, 0.0)) else math.inf)


def pd_plan(setup, workload, cand, scenario: str) -> PdPlan:
    """The disaggregated plan of one candidate."""
    p, pair, link = cand.point, cand.pair, cand.link
    v, t, pm, dm = p.values, pair.t, pair.p, pair.d
    total = cand.total_gpus
    r_p, r_d = pair.prefill_rate_alone(), pair.decode_rate_alone()
    ux, uy, _ = rate_matched_xpyd(r_p, r_d, cand.gpus_p, cand.gpus_d)
    if math.isnan(cand.capacity_per_s):
        cand.capacity_per_s = pair.capacity_per_s(p.x, p.y)
    prefill_binding = (pair.evaluate(p.x - 1, p.y, full=False).failures or ["none"])[0] if p.x > 1 else None
    decode_binding = _decode_binding(pair, p)
    extra = {}
    for s in (setup.ttft.stat, setup.tpot.stat):  # an SLO statistic outside STATS (p95, p99.9)
        for kind in ("ttft", "tpot"):
            if s not in STATS:
                extra.setdefault(f"{kind}_{s}_s", _num(v.get(f"{kind}_{s}_s")))
    return PdPlan(
        **_base(setup, workload, scenario, "disaggregated"),
        xpyd=f"{p.x}P{p.y}D",
        prefill=PoolFigures(p.x, cand.tp_p, cand.shape_p.dp, cand.shape_p.ep, p.x * cand.gpus_p / setup.prefill.node,
                            p.x * cand.gpus_p, prefill_binding, r_p / cand.gpus_p),
        decode=PoolFigures(p.y, cand.tp_d, cand.shape_d.dp, cand.shape_d.ep, p.y * cand.gpus_d / setup.decode.node,
                           p.y * cand.gpus_d, decode_binding, r_d / cand.gpus_d),
        total_gpus=total, link_kind=link.kind, link=link.name, link_bandwidth_bytes_per_s=link.bandwidth_bytes_per_s,
        link_latency_s=link.latency_s, links_per_transfer=t.links,
        kv_transfer_bytes=_weighted(t.bytes, workload), kv_transfer_s=_weighted(t.transfer_s, workload),
        exposed_transfer_s=_weighted(t.exposed_s, workload), link_utilization=_num(v["link_utilization"]),
        link_wait_s=_num(v["link_wait_s"]), prefill_s=pm.mean_s, prefill_dispatch_s=pm.request_dispatch_s,
        prefill_utilization=v["prefill_utilization"],
        first_decode_step_s=v["first_decode_step_s"], decode_batch_mean=_num(v.get("decode_batch_mean")),
        decode_batch_at_slo=_num(v.get(f"decode_batch_{setup.tpot.stat}", v.get("decode_batch_mean"))),
        decode_kv_budget_bytes_per_gpu=dm.kv_budget_bytes_per_gpu,
        decode_kv_used_bytes_per_gpu=_num(v.get("decode_kv_used_bytes_per_gpu")),
        decode_staging_bytes_per_gpu=_num(v.get("decode_staging_bytes_per_gpu")),
        ttft={s: _num(v.get(f"ttft_{s}_s")) for s in STATS}, tpot={s: _num(v.get(f"tpot_{s}_s")) for s in STATS},
        goodput_per_gpu=workload.rate_per_s / total if p.ok else 0.0,
        capacity_per_gpu=cand.capacity_per_s / total, rate_matched_xpyd=f"{ux}P{uy}D" if ux else None,
        feasible=p.ok,
        binding_constraint=binding_of(setup, v, prefill_binding, decode_binding) if p.ok else p.failures[0],
        reason=None if p.ok else f"fails {', '.join(dict.fromkeys(p.failures))} at {p.x}P{p.y}D",
        extra=tuple(extra.items()),
    )


def _decode_binding(pair, p) -> str | None:
    if p.y <= 1:
        return None
    fewer = pair.evaluate(p.x, p.y - 1, full=False)
    decode = [f for f in fewer.failures if f in ("tpot_slo", "decode_kv_capacity", "max_num_seqs")]
    return (decode or fewer.failures or ["none"])[0]


def infeasible_plan(setup, workload, outcome, scenario: str) -> PdPlan:
    """No candidate meets the SLOs: the binding constraint and the best TTFT / TPOT any pair reaches."""
    ttft, tpot = _num(outcome.best_ttft_s), _num(outcome.best_tpot_s)
    extra = {f"{kind}_{slo.stat}_s": value for kind, slo, value in (("ttft", setup.ttft, ttft), ("tpot", setup.tpot, tpot))
             if slo.stat not in STATS}
    return PdPlan(**_base(setup, workload, scenario, "disaggregated"), binding_constraint=outcome.binding,
                  best_achievable_ttft_s=ttft, best_achievable_tpot_s=tpot,
                  ttft={s: ttft if s == setup.ttft.stat else None for s in STATS},
                  tpot={s: tpot if s == setup.tpot.stat else None for s in STATS},
                  reason=infeasible_reason(setup, outcome), extra=tuple(extra.items()))


def infeasible_reason(setup, outcome) -> str:
    b = outcome.binding
    if b == "ttft_slo":
        return (f"{slo_text(setup.ttft)} is unattainable: with no queueing the best TP pair reaches "
                f"{format_seconds(outcome.best_ttft_s)} (prefill + exposed transfer + first decode step)")
    if b == "tpot_slo":
        return (f"{slo_text(setup.tpot)} is unattainable: a decode step at batch 1 already takes "
                f"{format_seconds(outcome.best_tpot_s)} on the fastest decode TP")
    if b == "decode_kv_capacity":
        return "the longest request's KV does not fit one decode instance at any decode TP"
    if b == "prefill_kv_capacity":
        return "the longest prompt's KV does not fit one prefill instance at any prefill TP"
    return f"no configuration meets the constraints ({NAMES.get(b, b)})"


# --------------------------------------------------------------------------- the aggregated alternative


@dataclass(frozen=True)
class Aggregated:
    """The aggregated alternative: ``kvplan plan``'s fleet on the prefill deployments, as a PD plan, and its notes."""

    plan: PdPlan
    notes: list[str] = field(default_factory=list)
    fleet: FleetPlan | None = None


def aggregated_alternative(setup, workload, fleet_workload: FleetWorkload, allow_long_context: bool,
                           gpu_cost: dict | None = None) -> Aggregated:
    """``kvplan plan``'s answer on the prefill side: the same shape search (:func:`search_shapes`), the cheapest plan.

    The shapes are plan's for TP 1, 2, 4, 8 and the prefill pool's TPs (for MoE models also TP × DP with EP,
    :func:`kvplan.plans.fleet.search.candidate_shapes`), on the prefill side's hardware and system;
    the deployments pd already resolved are reused. The workload is ``kvplan plan``'s, at the PD
    plan's ca²; the cheapest feasible plan wins (cost with ``gpu_cost``, else GPUs), as in plan.
    """
    from kvplan.plans.fleet.aggregated import Shape as FleetShape
    from kvplan.plans.fleet.search import DEFAULT_TPS, search_shapes

    fleet_workload = replace(fleet_workload, arrival_scv=workload.arrival_scv)
    s, side = setup.settings, setup.prefill.side
    known = {FleetShape(t.tp, 1, t.dp, t.expert_parallel, t.redundant_experts): dep
             for t, dep in setup.prefill.deployments.items()}
    common = _base(setup, workload, "base", "aggregated")
    tps = sorted({*DEFAULT_TPS, *setup.prefill.tps})
    try:
        found = search_shapes(setup.card, side.hardware, fleet_workload, [setup.ttft, setup.tpot], tps, None, s,
                              system=side.system, gpu_cost=gpu_cost, deployments=known,
                              allow_long_context=allow_long_context)
    except KvplanError as exc:  # the alternative failing to plan must not hide the PD plan
        reason = f"aggregated alternative not planned: {exc.message}"
        return Aggregated(PdPlan(**common, reason=reason), [reason])
    best = found.best
    n, shape, point = best.instances, best.shape, best.point
    label = f"TP{shape.tp}" + (f"×DP{shape.dp}" if shape.dp > 1 else "") + (f" EP{shape.ep}" if shape.expert_parallel
                                                                            else "")
    nodes = n * shape.gpus / setup.prefill.node if n else None
    pool = PoolFigures(instances=n, tp=shape.tp, dp=shape.dp, ep=shape.ep, nodes=nodes)
    common["decode_hardware"] = side.hardware.name
    plan = PdPlan(
        **common, xpyd=f"{n}×{label}" if n else None, prefill=pool, decode=pool, total_gpus=best.total_gpus,
        kv_transfer_bytes=0.0, kv_transfer_s=0.0, exposed_transfer_s=0.0,
        prefill_s=_num(point.prefill_mean_s) if point is not None else None,
        prefill_utilization=_num(point.prefill_utilization) if point is not None else None,
        decode_batch_mean=_num(point.batch_mean) if point is not None else None,
        decode_batch_at_slo=best.batch_per_instance,
        ttft={st: _num(best.ttft.get(st)) for st in STATS}, tpot={st: _num(best.tpot.get(st)) for st in STATS},
        goodput_per_gpu=workload.rate_per_s / best.total_gpus if best.feasible else 0.0,
        feasible=best.feasible, binding_constraint=best.binding_constraint, reason=best.reason,
        interference_share=_num(point.rho_interference) if point is not None else None,
    )
    tried = ", ".join(f"{p.shape.label()} → " + (f"{p.total_gpus:,} GPUs" if p.feasible else "infeasible")
                      for p in found.candidates)
    notes = [f"aggregated alternative: kvplan plan's fleet model (chunked prefill, {best.engine.chunk_tokens:,} tokens a "
             f"step) on {side.name}, TP in {tps}, the same arrival ca² ({workload.arrival_scv:.3g}) as the PD plan; "
             f"shapes searched as kvplan plan does: {tried}" +
             ("; it has no cached-prefix input, so it prefills whole prompts" if setup.cached_fraction else ""),
             *best.assumptions, *found.skipped]
    return Aggregated(plan, notes, best)


def plan_cost(plan: PdPlan, gpu_cost: dict | None) -> float | None:
    """Price per hour of a feasible plan: prefill GPUs × prefill price + decode GPUs × decode price (aggregated:
    its GPUs × the price of its hardware); None without a price for every hardware it uses."""
    if not gpu_cost or not plan.feasible or not plan.total_gpus:
        return None
    if plan.mode == "aggregated":
        price = gpu_cost.get(plan.prefill_hardware)
        return None if price is None else plan.total_gpus * price
    p, d = gpu_cost.get(plan.prefill_hardware), gpu_cost.get(plan.decode_hardware)
    if p is None or d is None or plan.prefill.gpus is None or plan.decode.gpus is None:
        return None
    return plan.prefill.gpus * p + plan.decode.gpus * d


def pricing(setup):
    """What a candidate costs: x·g_p·price_p + y·g_d·price_d per hour with both prices (--gpu-cost), else its GPUs."""
    cost = setup.gpu_cost or {}
    p, d = cost.get(setup.prefill.side.hardware.name), cost.get(setup.decode.side.hardware.name)
    if p is None or d is None:
        return lambda c: c.total_gpus
    return lambda c: c.point.x * c.gpus_p * p + c.point.y * c.gpus_d * d


def price_plans(plans: list[PdPlan], setup) -> tuple[list[PdPlan], list[str]]:
    """Every plan with its ``cost_per_hour`` (:func:`plan_cost`), and a note naming hardware --gpu-cost leaves unpriced."""
    priced = [replace(p, cost_per_hour=plan_cost(p, setup.gpu_cost)) for p in plans]
    missing = sorted({setup.prefill.side.hardware.name, setup.decode.side.hardware.name} - set(setup.gpu_cost or {}))
    notes = [f"--gpu-cost names no price for {', '.join(missing)}: GPU counts compared"] \
        if setup.gpu_cost and missing else []
    return priced, notes


# --------------------------------------------------------------------------- verdict and explain


def verdict(setup, pd: PdPlan, agg: PdPlan | None, outcome, fixed: bool = False) -> tuple[str, bool]:
    """Which mode wins and why; failed when neither meets the SLOs (or a given xPyD does not).

    With ``--gpu-cost`` prices for every hardware involved the winner is the cheaper per hour
    (:func:`plan_cost`), and the text says costs were compared; otherwise GPU counts are compared,
    and between different hardware the text says so (and how to compare cost)."""
    text, failed = _compare(setup, pd, agg)
    if fixed and not pd.feasible:
        return f"the given {pd.xpyd} does not meet {slo_text(setup.ttft)}, {slo_text(setup.tpot)}: " \
               f"{pd.reason}; {text}", True
    return text, failed


def _compare(setup, pd: PdPlan, agg: PdPlan | None) -> tuple[str, bool]:
    slos = f"{slo_text(setup.ttft)}, {slo_text(setup.tpot)}"
    if pd.feasible:
        what = (f"disaggregated {pd.xpyd} (prefill {pd.prefill.label()}, decode {pd.decode.label()}, "
                f"KV over the "
                f"{PATH_NAMES[pd.link_kind]}) needs {pd.total_gpus} GPUs, "
                f"{pd.goodput_per_gpu:.3g} req/s per GPU; binding: {NAMES.get(pd.binding_constraint, pd.binding_constraint)}")
    else:
        what = f"disaggregation cannot meet {slos}: {pd.reason}"
    if agg is None:
        return what, not pd.feasible
    if agg.feasible:
        other = (f"aggregated {agg.xpyd} needs {agg.total_gpus} GPUs, {agg.goodput_per_gpu:.3g} req/s per "
                 f"GPU; binding: {NAMES.get(agg.binding_constraint, agg.binding_constraint)}")
    else:
        other = f"aggregated cannot meet them: {agg.reason or agg.binding_constraint}"
    if pd.feasible and agg.feasible and pd.cost_per_hour is not None and agg.cost_per_hour is not None:
        c_pd, c_agg = pd.cost_per_hour, agg.cost_per_hour
        if abs(c_agg - c_pd) <= 1e-9 * max(c_pd, c_agg):
            win = f"a tie in cost ({c_pd:,.4g} per hour each)"
        else:
            who = "disaggregation" if c_pd < c_agg else "aggregated"
            win = f"{who} wins by {abs(c_agg - c_pd):,.4g} per hour ({c_pd:,.4g} vs {c_agg:,.4g} per hour)"
        gpus = f"{pd.total_gpus} vs {agg.total_gpus} GPUs"
        return (f"{win}: costs compared (--gpu-cost), not GPU counts ({gpus}): {what}; {other}{_why(pd, agg)}",
                False)
    if pd.feasible and agg.feasible:
        diff = agg.total_gpus - pd.total_gpus
        if diff > 0:
            win = f"disaggregation wins by {diff} GPU{'s' if diff > 1 else ''}"
        elif diff < 0:
            win = f"aggregated wins by {-diff} GPU{'s' if diff < -1 else ''}"
        else:
            win = "a tie in GPUs"
        if pd.prefill_hardware != pd.decode_hardware:
            win += (f" (GPU counts compared across {pd.prefill_hardware} and {pd.decode_hardware}; give "
                    "--gpu-cost with both prices to compare cost)")
        return f"{win}: {what}; {other}{_why(pd, agg)}", False
    if pd.feasible:
        return f"disaggregation wins: {what}; {other}", False
    if agg.feasible:
        return f"aggregated wins: {other}; {what}", False
    return f"no plan meets {slos}: {what}; {other}", True


def _why(pd: PdPlan, agg: PdPlan) -> str:
    share = agg.interference_share
    if agg.binding_constraint == "tpot_slo" and share:
        return (f" (aggregated decoders lose {share:.0%} of their steps to prefill chunks, so TPOT caps its batch; "
                "disaggregation keeps prefill off the decode GPUs)")
    ttft_p99 = pd.ttft.get("p99")
    if pd.exposed_transfer_s and ttft_p99 and pd.exposed_transfer_s > 0.1 * ttft_p99:
        return f" (the exposed KV transfer, {format_seconds(pd.exposed_transfer_s)}, eats into PD's TTFT)"
    return ""


def explain_plan(setup, workload, outcome, plan: PdPlan) -> list[str]:
    w = workload
    lines = [
        f"workload: λ = {w.rate_per_s:,.4g} req/s, ca² = {w.arrival_scv:.3g}; ISL mean {w.isl_mean:,.0f}, p50 "
        f"{w.isl_quantile(0.5):,.0f}, p99 {w.isl_quantile(0.99):,.0f}, max {w.isl_max:,.0f} ({w.isl.size} bins); OSL "
        f"mean {w.osl_mean:,.1f}, max {w.osl_max:,.0f}",
    ]
    c = outcome.best
    if c is None:
        return lines + [f"infeasible ({outcome.binding}): {infeasible_reason(setup, outcome)}"]
    p, pair, link, row = c.point, c.pair, c.link, plan
    t, pm, dm, v = pair.t, pair.p, pair.d, p.values
    lines += [
        f"link: {link.name} ({link.kind}): {link.line_rate_bytes_per_s / 1e9:,.4g} GB/s per GPU × η "
        f"{link.efficiency:g} = {link.bandwidth_bytes_per_s / 1e9:,.4g} GB/s; n = min(TP_p {c.tp_p}, TP_d {c.tp_d}) = "
        f"{t.links} links per transfer; latency {_sec(link.latency_s)}",
        f"KV per request = decode-GPU KV of ISL × TP_d = {_bytes(row.kv_transfer_bytes)} (mean); transfer = "
        f"latency + bytes / (n × bw) = {_sec(row.kv_transfer_s)}; prefill E[S] = "
        f"{_sec(pm.mean_s)} (cs² {pm.scv:.3g}); layer-wise over {setup.card.num_layers} layers → exposed "
        f"{_sec(row.exposed_transfer_s)}",
        f"decode: context ISL + OSL/2 = {dm.context:,.0f}; KV per request {_bytes(dm.kv_request_bytes_per_gpu)} "
        f"per GPU, budget {_bytes(dm.kv_budget_bytes_per_gpu)} per GPU, batch cap {dm.batch_cap:,.0f}; T(1) = "
        f"{_sec(dm.step_s[0])}, T(cap) = {_sec(dm.step_s[-1])}",
        f"decode pool y = {p.y}: b̄ = (λ/y)·E[OSL]·T(b̄) = {_g(v.get('decode_batch_mean'), '.4g')}; "
        f"b_{setup.tpot.stat} = {_g(row.decode_batch_at_slo, '.4g')} → TPOT {setup.tpot.stat} = "
        f"{_sec(v.get(f'tpot_{setup.tpot.stat}_s'))} (limit {_sec(setup.tpot.limit_s)})",
        f"staging = (λ/y)·E[transfer × bytes per GPU] = {_bytes(v.get('decode_staging_bytes_per_gpu'))} per GPU; KV "
        f"used = b × KV per request + staging = {_bytes(v.get('decode_kv_used_bytes_per_gpu'))} of "
        f"{_bytes(dm.kv_budget_bytes_per_gpu)}",
        f"prefill pool x = {p.x} ({p.x * pm.dp} servers: one prompt per attention-DP rank): utilisation "
        f"λ·E[S]/(x·dp) = {_g(v.get('prefill_utilization'), '.3g')}; "
        f"TTFT = W(M/G/{p.x * pm.dp}) + S + exposed + first step {_sec(v.get('first_decode_step_s'))} + link wait "
        f"{_sec(v.get('link_wait_s'))} → TTFT {setup.ttft.stat} = {_sec(v.get(f'ttft_{setup.ttft.stat}_s'))} (limit "
        f"{_sec(setup.ttft.limit_s)})",
        f"link utilisation = λ·E[bytes] / (min({p.x}×{c.gpus_p}, {p.y}×{c.gpus_d}) GPUs × bw) = "
        f"{_g(v.get('link_utilization'), '.3g')}",
        f"per GPU alone: prefill {_g(row.prefill.goodput_per_gpu, '.4g')} req/s (TTFT = wait + prefill), decode "
        f"{_g(row.decode.goodput_per_gpu, '.4g')} req/s (TPOT) → rate-matched unit {row.rate_matched_xpyd}",
        f"{p.x}P{p.y}D = {p.x}×{c.gpus_p} + {p.y}×{c.gpus_d} = {c.total_gpus} GPUs ({c.shape_p.label()} prefill, "
        f"{c.shape_d.label()} decode; {row.prefill.nodes:g} + {row.decode.nodes:g} nodes of "
        f"{setup.prefill.node}/{setup.decode.node} GPUs); capacity within the SLOs "
        f"{_g(c.capacity_per_s, ',.4g')} req/s; binding: {row.binding_constraint} (prefill pool at x−1: "
        f"{row.prefill.binding}, decode pool at y−1: {row.decode.binding})",
    ]
    return lines


def _sec(value) -> str:
    return format_seconds(value) if value is not None and math.isfinite(value) else "∞"


def _bytes(value) -> str:
    return format_bytes(value) if value is not None and math.isfinite(value) else "∞"


def _g(value, spec: str) -> str:
    return format(value, spec) if value is not None and math.isfinite(value) else "∞"


def pd_hint(plan: PdPlan) -> str:
    """What to change when no plan meets the SLOs (the CLI's Hint: line), from the base plan."""
    b = plan.binding_constraint
    if plan.prefill.instances is not None and not plan.feasible:
        return ("give more instances of the pool that fails, or drop --prefill-instances/--decode-instances "
                "to let kvplan search")
    if b == "ttft_slo":
        best = plan.best_achievable_ttft_s or plan.ttft_at(plan.ttft_slo.split("<=")[0])
        return (f"relax --ttft to at least {format_seconds(best)}" if best else "relax --ttft") + \
            ", allow larger --prefill-tp, use faster prefill hardware or a faster link (--placement same-node)"
    if b == "tpot_slo":
        best = plan.best_achievable_tpot_s or plan.tpot_at(plan.tpot_slo.split("<=")[0])
        return (f"relax --tpot to at least {format_seconds(best)}" if best else "relax --tpot") + \
            ", allow larger --decode-tp, or use fp8 weights (--weights-dtype fp8)"
    if b in ("decode_kv_capacity", "prefill_kv_capacity"):
        return "allow larger TPs, use --kv-dtype fp8, or shorten the requests"
    if b == "link":
        return "use a faster path (--placement same-node) or more NICs (--link-bandwidth)"
    return "relax the SLOs or lower the rate"

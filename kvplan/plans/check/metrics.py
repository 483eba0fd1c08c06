"""The metrics a plan's assertions may name, and the producers that compute them.

``METRICS`` maps a metric name to ``Metric(description, unit, producer)``. A producer turns a
plan into numbers (one call computes all of its metrics) and says when it cannot:

- ``fit``: the engine's start-up arithmetic (:func:`kvplan.plans.sizing.fit.fit`), always available.
- ``latency``: roofline latency (:mod:`kvplan.plans.sizing.latency`), needs a workload.
- ``fleet``: percentile latencies and pool sizes from the fleet / PD planner; not wired yet.
- ``aggregated``: the aggregated fleet of ``kvplan plan`` (:mod:`kvplan.plans.check.fleet_metrics`, the same
  call ``kvplan plan`` makes): instances, GPUs, nodes, batch, KV demand, percentile TTFT/TPOT and, with
  ``gpu_cost``, its cost; needs ``workload.qps`` (or a trace).

To add metrics, write ``compute(context) -> Produced`` and call :func:`register` once, here::

    register(Producer("pd", compute=pd_metrics, needs_workload=True),
             {"prefill_gpus": ("GPUs in the prefill pool", "GPUs"), ...})

A known metric whose producer cannot run is an error naming why ("needs a workload",
"available once …"), never a silent pass.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.errors import InputError
from kvplan.plans.check.context import PlanContext, Produced  # noqa: F401  (re-exported for producers)

if TYPE_CHECKING:
    from kvplan.plans.check.planfile import Plan


@dataclass(frozen=True)
class Producer:
    name: str
    compute: Callable[[PlanContext], Produced] | None
    needs_workload: bool = False
    module: str | None = None   # importable module the producer relies on
    pending: str | None = None  # why it is not available yet (compute is None)

    def unavailable(self, plan: Plan) -> str | None:
        """None when this producer can run for ``plan``; else the reason, as a phrase."""
        if self.compute is None:
            return self.pending or "is not available in this version of kvplan"
        if self.module and importlib.util.find_spec(self.module) is None:
            return f"is available once {self.module} is installed"
        if self.needs_workload and (plan.workload is None or not plan.workload.has_lengths):
            return "needs a workload (workload: {qps, isl, osl} or workload: {trace: FILE})"
        return None


@dataclass(frozen=True)
class Metric:
    description: str
    unit: str
    producer: Producer


METRICS: dict[str, Metric] = {}


def register(producer: Producer, metrics: dict[str, tuple[str, str]]) -> None:
    """Add ``metrics`` (name → (description, unit)), all computed by ``producer``."""
    for name, (description, unit) in metrics.items():
        METRICS[name] = Metric(description, unit, producer)


def unavailable(name: str, plan: Plan) -> str | None:
    return METRICS[name].producer.unavailable(plan)


def hint_for(name: str) -> str:
    producer = METRICS[name].producer
    if producer.needs_workload and producer.compute is not None:
        return "add a workload section to the plan (qps, isl, osl), or drop the assertion"
    available = [n for n, m in METRICS.items() if m.producer.compute is not None]
    return f"drop the assertion for now; metrics available: {', '.join(available)}"


def suggest(name: str) -> str:
    """' (did you mean …?)' for a misspelt metric name, or ''."""
    import difflib

    close = difflib.get_close_matches(name, list(METRICS), n=2, cutoff=0.75)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def evaluate(context: PlanContext, names: list[str] | None = None) -> dict[str, Produced]:
    """Run the producers of ``names`` (every available producer when None), fit first."""
    if names is None:
        producers = list(dict.fromkeys(m.producer for m in METRICS.values()))
        producers = [p for p in producers if p.unavailable(context.plan) is None]
    else:
        producers = list(dict.fromkeys([FIT, *(METRICS[n].producer for n in names)]))
    return {p.name: context.produce(p) for p in producers}


# --------------------------------------------------------------------------- fit


def _fit_metrics(context: PlanContext) -> Produced:
    from kvplan.plans.sizing.fit import fit
    from kvplan.plans.sizing.size import explain_layout

    engine = context.plan.engine
    card = context.model_card
    seq, batch = context.max_model_len, context.concurrency
    dep = context.deployment
    result = fit([dep], seq=[seq], batch=[batch], allow_long_context=engine.allow_long_context)
    row = result.rows[0]
    values = {
        "kv_cache_memory_bytes": row["kv_cache_memory_bytes"],
        "num_blocks": row["num_blocks"],
        "kv_cache_tokens": row["kv_cache_tokens"],
        "max_concurrency_at_max_len": row["max_concurrency"],
        "max_concurrency": row["max_concurrency"],
        "kv_fits": row["fits"],
        "weights_bytes_per_gpu": row["weights_bytes_per_gpu"],
        "activation_bytes": row["activation_bytes"],
        "kv_bytes_per_token": row["kv_bytes_per_token"],
        "kv_bytes_per_token_per_gpu": row["kv_bytes_per_token_per_gpu"],
        "kv_bytes_per_sequence": row["kv_bytes_per_sequence"],
        "kv_bytes_per_sequence_per_gpu": row["kv_bytes_per_sequence_per_gpu"],
        "kv_bytes_total_per_gpu": row["kv_bytes_total_per_gpu"],
        "max_context_at_batch": row["max_context_at_batch"],
        "max_model_len": seq,
        "concurrency": batch,
        "gpu_memory_bytes": row["gpu_memory_bytes"],
        "gpus_per_instance": engine.tensor_parallel_size * engine.pipeline_parallel_size,
    }
    explain = explain_layout(card, dep.layout, seq) + result.explain
    pool = dep.pool.bytes_per_gpu
    explain.append(
        f"max concurrency at {seq:,} tokens = {dep.pool.blocks_per_gpu:,} blocks × {dep.pool.block_bytes_per_gpu:,.0f} B "
        f"/ {row['kv_bytes_per_sequence_per_gpu']:,} B per request = {row['max_concurrency']:,.4g}; "
        f"max context at concurrency {batch}: {row['max_context_at_batch']:,} tokens (pool {pool:,.0f} B)")
    if result.verdict:
        explain.append(f"verdict: {result.verdict}")
    return Produced(values, explain, result.assumptions, result)


FIT = Producer("fit", compute=_fit_metrics)
register(FIT, {
    "kv_cache_memory_bytes": ("KV-cache budget on one GPU under the engine's rule", "bytes"),
    "num_blocks": ("KV blocks on one GPU", "blocks"),
    "kv_cache_tokens": ("tokens the KV cache holds (num_blocks × block_size)", "tokens"),
    "max_concurrency_at_max_len": ("requests of max_model_len tokens the cache holds at once", "requests"),
    "max_concurrency": ("same as max_concurrency_at_max_len", "requests"),
    "kv_fits": ("the cache holds `concurrency` requests of max_model_len (vLLM's start-up check at 1)", "bool"),
    "weights_bytes_per_gpu": ("weights on one GPU", "bytes"),
    "activation_bytes": ("activation peak reserved on one GPU (estimated)", "bytes"),
    "kv_bytes_per_token": ("KV bytes per token, one copy of every layer", "bytes"),
    "kv_bytes_per_token_per_gpu": ("KV bytes per token on one GPU (with replication)", "bytes"),
    "kv_bytes_per_sequence": ("KV bytes of one max_model_len request, one copy", "bytes"),
    "kv_bytes_per_sequence_per_gpu": ("KV bytes of one max_model_len request on one GPU", "bytes"),
    "kv_bytes_total_per_gpu": ("KV bytes of `concurrency` max_model_len requests on one GPU", "bytes"),
    "max_context_at_batch": ("longest context every one of `concurrency` requests can have", "tokens"),
    "max_model_len": ("tokens per request (engine max_model_len)", "tokens"),
    "concurrency": ("sequences held at once (workload.concurrency, default 1)", "requests"),
    "gpu_memory_bytes": ("GPU memory the runtime sees", "bytes"),
    "gpus_per_instance": ("tensor_parallel_size × pipeline_parallel_size", "GPUs"),
})


# --------------------------------------------------------------------------- latency


def workload_lengths(context: PlanContext) -> tuple[int, int, list[str]]:
    """(isl, osl) of the plan's workload; a trace gives its mean lengths (rounded)."""
    workload = context.plan.workload
    if workload.trace is None:
        if isinstance(workload.isl, int) and isinstance(workload.osl, int):
            return workload.isl, workload.osl, []
        from kvplan.workload.synthetic import parse_length

        isl, osl = (max(1, round(parse_length(str(v)).mean)) for v in (workload.isl, workload.osl))
        return isl, osl, [f"latency at the mean lengths of the workload's distributions: isl {isl:,}, osl {osl:,}"]
    from kvplan.workload.traces import read_trace

    path = Path(workload.trace)
    path = path if path.is_absolute() else context.base_dir / path
    trace = read_trace(path, trace_format=workload.trace_format)
    if trace.requests == 0:
        raise InputError(f"trace '{path}' has no requests", "point workload.trace at a trace with requests")
    isl, osl = max(1, round(float(trace.isl.mean()))), max(1, round(float(trace.osl.mean())))
    return isl, osl, [f"workload from {path.name}: {trace.requests:,} requests, mean isl {isl:,}, mean osl {osl:,}"]


def _latency_metrics(context: PlanContext) -> Produced:
    from kvplan.plans.build import latency_from_names

    engine = context.plan.engine
    isl, osl, notes = workload_lengths(context)
    batch = context.concurrency
    result = latency_from_names(
        context.model_card, context.hardware_card, isl=[isl], osl=[osl], batch=sorted({1, batch}),
        tp=[engine.tensor_parallel_size], kv_dtype=engine.kv_cache_dtype, weights_dtype=engine.weights_dtype,
        engine=engine.name, chunk_size=engine.max_num_batched_tokens, allow_long_context=engine.allow_long_context,
    )
    alone, loaded = result.rows[0], result.rows[-1]
    values = {k: alone[k] for k in ("ttft_s", "prefill_s")}
    values.update({k: loaded[k] for k in ("tpot_s", "decode_step_s", "floor_decode_step_s", "tokens_per_s",
                                          "tokens_per_s_per_gpu", "decode_tokens_per_s")})
    values["e2e_s"] = values["ttft_s"] + (osl - 1) * values["tpot_s"]
    notes.append(f"TTFT of one request arriving alone (no queueing); TPOT and throughput at concurrency {batch} "
                 "(workload.concurrency); percentiles under the arrival rate come with the fleet planner")
    if engine.pipeline_parallel_size > 1:
        notes.append("latency ignores pipeline parallelism (one stage's share of the layers is not modelled)")
    return Produced(values, result.explain, notes + result.assumptions, result)


LATENCY = Producer("latency", compute=_latency_metrics, needs_workload=True, module="kvplan.plans.sizing.latency")
register(LATENCY, {
    "ttft_s": ("time to first token of one request arriving alone: prefill of isl tokens (no queueing)", "s"),
    "tpot_s": ("mean time per output token at the plan's concurrency", "s"),
    "decode_step_s": ("one decode step at the plan's concurrency, context isl", "s"),
    "tokens_per_s": ("output tokens per second of one instance, a static batch of `concurrency` requests", "tokens/s"),
    "floor_decode_step_s": ("physical floor of a decode step: max(bytes / peak BW, FLOPs / peak)", "s"),
    "prefill_s": ("prefill of one isl-token prompt", "s"),
    "e2e_s": ("one request end to end: ttft_s + (osl − 1) × tpot_s", "s"),
    "tokens_per_s_per_gpu": ("tokens_per_s divided by the instance's GPUs", "tokens/s"),
    "decode_tokens_per_s": ("concurrency / TPOT: decode throughput of one instance", "tokens/s"),
})


# --------------------------------------------------------------------------- fleet (not wired yet)

FLEET = Producer("fleet", compute=None, needs_workload=True,
                 pending="is available once the fleet / PD planner lands (kvplan plan, kvplan pd)")
register(FLEET, {
    **{f"{kind}_{stat}_s": (f"{stat} {kind.upper()} under the workload's arrival rate (queueing included)", "s")
       for kind in ("ttft", "tpot") for stat in ("mean", "p50", "p90", "p95", "p99")},
    "prefill_gpus": ("GPUs in the prefill pool", "GPUs"),
    "decode_gpus": ("GPUs in the decode pool", "GPUs"),
    "total_gpus": ("GPUs the deployment needs in all", "GPUs"),
})


# --------------------------------------------------------------------------- tiers (kvplan tier)


def _tier_metrics(context: PlanContext) -> Produced:
    from kvplan.plans.check.tier_metrics import tier_metrics

    return tier_metrics(context)


TIERS = Producer("tiers", compute=_tier_metrics, needs_workload=True, module="kvplan.plans.tiers.plan")
register(TIERS, {
    "tier_hit_rate": ("prompt blocks served from any cache tier (prefix LRU over HBM → DRAM → CXL → NVMe → remote)",
                      "ratio"),
    **{f"tier_hit_rate_{kind}": (f"prompt blocks served from the {label} tier(s)", "ratio") for kind, label in
       (("hbm", "HBM"), ("host_dram", "host DRAM"), ("cxl", "CXL"), ("nvme", "NVMe"), ("remote", "remote pool"))},
    "tier_unlimited_hit_rate": ("prefix hit rate an unbounded cache would reach", "ratio"),
    "tier_cache_tokens": ("prefix/session cache capacity over all tiers", "tokens"),
    "tier_ttft_saved_p50_s": ("TTFT the tiers save on a p50-ISL prompt", "s"),
    "tier_ttft_saved_p99_s": ("TTFT the tiers save on a p99-ISL prompt", "s"),
    "prefill_gpu_s_saved_per_s": ("prefill GPU-seconds the cache hits save per second of traffic", "GPU-s/s"),
    "prefill_gpu_share_saved": ("share of prefill GPU time the cache hits save", "ratio"),
    "active_kv_fits_hbm": ("the Little's-law decode batch's KV fits in HBM (the hot path stays in HBM)", "bool"),
    "tpot_penalty_p50_s": ("TPOT added by decode KV read from slower tiers, p50 of the batch's KV", "s"),
    "tpot_penalty_p99_s": ("TPOT added by decode KV read from slower tiers, p99 of the batch's KV", "s"),
})


# --------------------------------------------------------------------------- pd (kvplan pd)


def _pd_metrics(context: PlanContext) -> Produced:
    """The disaggregated plan :func:`kvplan.plans.pd.plan.plan_pd` recommends for the plan's workload and SLOs."""
    from kvplan.plans.pd.plan import PDSettings, plan_pd

    plan, engine, workload = context.plan, context.plan.engine, context.plan.workload
    if plan.slo is None or plan.slo.ttft is None or plan.slo.tpot is None:
        raise InputError("pd metrics need both SLOs (slo: {ttft: 'p99<=4s', tpot: 'p99<=100ms'})",
                         "add an slo section to the plan")
    if workload.trace is None and workload.qps is None:
        raise InputError("pd metrics need an arrival rate (workload.qps)", "add qps to the workload section")
    trace = None
    if workload.trace is not None:
        trace = Path(workload.trace)
        trace = trace if trace.is_absolute() else context.base_dir / trace
    settings = PDSettings(engine=engine.name, kv_dtype=engine.kv_cache_dtype, weights_dtype=engine.weights_dtype,
                          gpu_memory_utilization=engine.gpu_memory_utilization, max_num_seqs=engine.max_num_seqs)
    system = context.system_card
    result = plan_pd(context.model_card, context.hardware_card, system=system, qps=workload.qps, isl=workload.isl,
                     osl=workload.osl, trace=trace, trace_format=workload.trace_format, ttft=plan.slo.ttft,
                     tpot=plan.slo.tpot, settings=settings, aggregated=False, sensitivity=False,
                     allow_long_context=engine.allow_long_context, cards=context.cards)
    pd = result.plan
    figures = {"prefill_gpus": pd.prefill.gpus, "decode_gpus": pd.decode.gpus, "prefill_instances": pd.prefill.instances,
               "decode_instances": pd.decode.instances, **{key: getattr(pd, key) for key in PD_KEYS[4:]}}
    values = {key: figures[key] for key in PD_KEYS if figures[key] is not None}
    values["pd_total_gpus"] = pd.total_gpus if pd.total_gpus is not None else float("inf")
    values["pd_feasible"] = bool(pd.feasible)
    for kind in ("ttft", "tpot"):
        if getattr(pd, kind).get("p99") is not None:
            values[f"pd_{kind}_p99_s"] = getattr(pd, kind)["p99"]
    values["pd_goodput_per_gpu"] = pd.goodput_per_gpu
    return Produced(values, list(result.explain), result.assumptions, result.result())


PD_KEYS = ("prefill_gpus", "decode_gpus", "prefill_instances", "decode_instances", "kv_transfer_s",
           "exposed_transfer_s", "kv_transfer_bytes", "link_utilization", "decode_staging_bytes_per_gpu")


@dataclass(frozen=True)
class _PDProducer(Producer):
    """Runs only for plans with both SLOs and a rate, and only when an assertion names one of its metrics
    (a report of a plan that does not ask about PD does not run the PD search)."""

    def unavailable(self, plan: Plan) -> str | None:
        reason = super().unavailable(plan)
        if reason:
            return reason
        if plan.slo is None or plan.slo.ttft is None or plan.slo.tpot is None:
            return "needs both SLOs (slo: {ttft: 'p99<=4s', tpot: 'p99<=100ms'}): kvplan pd sizes the pools for them"
        if plan.workload.trace is None and plan.workload.qps is None:
            return "needs an arrival rate (workload.qps)"
        mine = {n for n, m in METRICS.items() if m.producer is self}
        asked = " ".join(str(a) if not isinstance(a, dict) else " ".join(a) for a in plan.assertions)
        if not any(re.search(rf"\b{name}\b", asked) for name in mine):
            return "is computed only when an assertion names a pd metric"
        return None


PD = _PDProducer("pd", compute=_pd_metrics, needs_workload=True, module="kvplan.plans.pd.plan")
register(PD, {
    "prefill_gpus": ("GPUs in the prefill pool of the recommended xPyD (kvplan pd)", "GPUs"),
    "decode_gpus": ("GPUs in the decode pool of the recommended xPyD (kvplan pd)", "GPUs"),
    "pd_total_gpus": ("prefill + decode GPUs of the recommended xPyD", "GPUs"),
    "prefill_instances": ("prefill instances (x of xPyD)", "instances"),
    "decode_instances": ("decode instances (y of xPyD)", "instances"),
    "kv_transfer_s": ("P→D KV transfer of a mean request over the chosen link (latency + bytes / bandwidth)", "s"),
    "exposed_transfer_s": ("the part of the transfer not hidden behind prefill (layer-wise overlap)", "s"),
    "kv_transfer_bytes": ("KV bytes one mean request moves from prefill to decode", "bytes"),
    "link_utilization": ("λ × bytes / the P→D link capacity of the pools", "ratio"),
    "decode_staging_bytes_per_gpu": ("KV of transfers in flight held per decode GPU (Little's law)", "bytes"),
    "pd_ttft_p99_s": ("p99 TTFT of the disaggregated plan (queue + prefill + exposed transfer + first step)", "s"),
    "pd_tpot_p99_s": ("p99 TPOT of the disaggregated plan", "s"),
    "pd_goodput_per_gpu": ("requests/s meeting the SLOs per GPU (qps / total GPUs; 0 when infeasible)", "req/s"),
    "pd_feasible": ("some xPyD meets both SLOs", "bool"),
})


# --------------------------------------------------------------------------- aggregated fleet (kvplan plan)


def _aggregated_metrics(context: PlanContext) -> Produced:
    """``kvplan plan``'s fleet for the plan (:mod:`kvplan.plans.check.fleet_metrics`), read from its typed
    fields; infeasible plans give ∞ counts."""
    import math

    from kvplan.plans.check.fleet_metrics import fleet_answer, fleet_cost

    answer = fleet_answer(context).fleet
    fleet = answer.plan
    values = {f"{kind}_{stat}_s": _finite(getattr(fleet, kind).get(stat), math.inf)
              for kind in ("ttft", "tpot") for stat in ("mean", "p50", "p90", "p95", "p99")}
    memory = fleet.memory
    for key in ("instances", "total_gpus", "batch_per_instance", "nodes"):
        values[key] = _finite(getattr(fleet, key), math.inf)
    for key in ("kv_demand_mean_bytes", "kv_demand_p99_bytes", "kv_capacity_bytes", "headroom_bytes"):
        values[key] = _finite(getattr(memory, key) if memory is not None else None,
                              -math.inf if key == "headroom_bytes" else math.inf)
    values["fleet_concurrency"] = _finite(fleet.point.concurrency if fleet.point is not None else None, math.inf)
    values["fleet_feasible"] = fleet.feasible
    if context.gpu_cost:
        cost = fleet_cost(context)
        for key in COST_METRICS:
            values[key] = _finite(cost[key], math.inf)
    explain = list(answer.explain) + ([f"infeasible: {fleet.reason}"] if not fleet.feasible else [])
    return Produced(values, explain, list(answer.notes), answer.result(with_verdict=False))


def _finite(value, missing: float):
    """A plan's figure as a metric: ``missing`` (±inf) where it is undefined (None, NaN or infinite)."""
    import math

    return value if value is not None and math.isfinite(value) else missing


COST_METRICS = ("fleet_cost_per_hour", "cost_per_million_output_tokens")
AGGREGATED = Producer("aggregated", compute=_aggregated_metrics, needs_workload=True, module="kvplan.plans.fleet.aggregated")
register(AGGREGATED, {
    **{f"{kind}_{stat}_s": (f"{stat} {kind.upper()} of the sized aggregated fleet under the workload's rate "
                            "(queueing included)", "s")
       for kind in ("ttft", "tpot") for stat in ("mean", "p50", "p90", "p95", "p99")},
    "instances": ("aggregated instances (tp × pp GPUs each) the workload needs", "instances"),
    "total_gpus": ("GPUs the aggregated deployment needs in all", "GPUs"),
    "batch_per_instance": ("batch cap per instance (max_num_seqs) that holds KV and the TPOT SLO", "requests"),
    "fleet_concurrency": ("requests in the system, Little's law: rate × mean time in system", "requests"),
    "kv_demand_mean_bytes": ("fleet KV held: running requests × KV at the mean context (ISL + OSL)", "bytes"),
    "kv_demand_p99_bytes": ("fleet KV if every running request were at the p99 context", "bytes"),
    "kv_capacity_bytes": ("KV pool of the whole fleet", "bytes"),
    "headroom_bytes": ("kv_capacity_bytes − kv_demand_p99_bytes", "bytes"),
    "fleet_feasible": ("some fleet of the instance shape meets the SLOs (and the GPU budget)", "bool"),
    "nodes": ("whole nodes of the system the fleet takes", "nodes"),
    "fleet_cost_per_hour": ("GPUs × gpu_cost per GPU-hour (needs gpu_cost)", "per hour"),
    "cost_per_million_output_tokens": ("fleet cost per hour / output tokens per hour × 10⁶ (needs gpu_cost)",
                                       "per 1M tokens"),
})

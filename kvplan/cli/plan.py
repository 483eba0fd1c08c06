"""``kvplan plan MODEL HARDWARE``: from a workload (flags or a trace) to an aggregated fleet with percentile latencies."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli.options import (AllowLongContextOpt, ConcurrencyOpt, GpuCostOpt, ArrivalCVOpt, MaxUtilizationOpt, BlockOpt, CardsOpt, ChartOpt, ChunkSizeOpt,
                                ColumnsOpt, EngineOneOpt, ExpertParallelOpt, EtaFlopsOpt, EtaMemOpt, ExplainOpt, FormatOpt, GpuUtilOpt,
                                HardwareArg, IslOpt, KVDtypeOneOpt, MaxNumSeqsOpt, ModelArg, OslOpt, OutputOpt,
                                RateOpt, RedundantExpertsOpt, SampleOpt, SeedOpt, SharedPrefixOpt, SkipBadRowsOpt, StepOverheadOpt, PrefillOverheadOpt, EnforceEagerOpt,
                                SystemOpt, TPListOpt, ThinkTimeOpt, TimestampUnitOpt, TpotOpt, TraceFormatOpt,
                                TraceOpt, TtftOpt, TurnsOpt, WeightsDtypeOpt, cards_dirs, efficiencies, emit,
                                output_format)
from kvplan.cli.options import DpImbalanceOpt, PerfModelOpt
from kvplan.cli.workload import emit_tables
from kvplan.errors import InfeasibleError
from kvplan.cli.pd import _tps
from kvplan.plans.fleet.aggregated import EngineSettings, parse_slo
from kvplan.plans.fleet.cost import parse_gpu_cost
from kvplan.plans.fleet.answer import answer as fleet_answer
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.report.fleet_tables import presentation
from kvplan.units import parse_list, parse_tokens



def _float_list(text: str) -> list[float]:
    from kvplan.errors import InputError

    def one(item: str) -> float:
        try:
            value = float(item.rstrip("x×"))
        except ValueError:
            raise InputError(f"--scale: cannot read '{item}'", "write multipliers as 2,5,10") from None
        if value > MAX_SCALE:  # 1e308 × the rate overflowed to an infinite --qps
            raise InputError(f"--scale {item} is more than the {MAX_SCALE:,.0f}× kvplan accepts",
                             "rate multipliers for the scale-out table, e.g. --scale 2,5,10")
        return value
    return parse_list(text, one, what="--scale")


MAX_SCALE = 1e6


def _check_dp_imbalance(lam: float, dps: list[int] | None) -> None:
    """``--dp-imbalance`` λ against the smallest dp > 1 the search tries (every dp > 1 shape takes it)."""
    from kvplan.plans.fleet.search import DEFAULT_DPS
    from kvplan.plans.sizing.perfmodel import check_dp_imbalance

    ranks = [d for d in (DEFAULT_DPS if dps is None else dps) if d > 1]
    smallest = min(ranks) if ranks else None
    check_dp_imbalance(lam, smallest, f"dp {smallest}, the smallest attention-DP size searched")


def plan_command(
    model: ModelArg,
    hardware: HardwareArg,
    system: SystemOpt = None,
    trace: TraceOpt = None,
    qps: RateOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    arrival_cv: ArrivalCVOpt = 1.0,
    turns: TurnsOpt = 1,
    think_time: ThinkTimeOpt = "0s",
    shared_prefix: SharedPrefixOpt = "0",
    trace_format: TraceFormatOpt = "auto",
    columns: ColumnsOpt = None,
    timestamp_unit: TimestampUnitOpt = None,
    skip_bad_rows: SkipBadRowsOpt = False,
    rate_basis: Annotated[str, typer.Option("--rate-basis", help="A trace's rate: mean, or peak (busiest minute).")] = "mean",
    ttft: TtftOpt = None,
    tpot: TpotOpt = None,
    tp: TPListOpt = None,
    pp: Annotated[Optional[str], typer.Option("--pp", "-pp", "--pipeline-parallel-size", help="Pipeline stages per instance: one value or a list (default 1, more only where the weights need it).")] = None,
    dp: Annotated[Optional[str], typer.Option("--dp", "-dp", "--data-parallel-size", help="Attention data-parallel ranks per instance (MoE, with expert parallelism): one value pins it, a list is searched (default for MoE: 1,2,4,8,16,32).")] = None,
    enable_expert_parallel: ExpertParallelOpt = False,
    ep_redundant_experts: RedundantExpertsOpt = None,
    engine: EngineOneOpt = "vllm",
    kv_dtype: KVDtypeOneOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    gpu_memory_utilization: GpuUtilOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    chunk_size: ChunkSizeOpt = None,
    block_size: BlockOpt = None,
    eta_mem: EtaMemOpt = None,
    eta_flops: EtaFlopsOpt = None,
    step_overhead: StepOverheadOpt = None,
    prefill_overhead: PrefillOverheadOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    perf_model: PerfModelOpt = "operators",
    dp_imbalance: DpImbalanceOpt = None,
    max_gpus: Annotated[Optional[int], typer.Option("--max-gpus", help="GPU budget: a plan needing more is infeasible.")] = None,
    gpu_cost: GpuCostOpt = None,
    max_utilization: MaxUtilizationOpt = 0.9,
    scale: Annotated[str, typer.Option("--scale", help="Rate multipliers for the scale-out table.")] = "2,5,10",
    concurrency: ConcurrencyOpt = None,
    instances: Annotated[int, typer.Option("--instances", help="Closed loop: instances behind the router.")] = 1,
    warmup_requests: Annotated[Optional[int], typer.Option("--warmup-requests", help="Closed loop: the first N requests left out of TTFT and TPOT (AIPerf --warmup-request-count).")] = None,
    phases: Annotated[Optional[str], typer.Option("--phases", help="Closed loop of fixed lengths: waves (the C requests in lock step) or spread (at every phase of their life); default auto: the engine's (docs/closed-loop.md).")] = None,
    chart: ChartOpt = None,
    simulate: Annotated[Optional[bool], typer.Option("--simulate/--no-simulate", help="Size the fleet by its own discrete-event replay (default: on with --trace).")] = None,
    sim_requests: Annotated[Optional[int], typer.Option("--sim-requests", help="Requests to simulate, at most 100,000 (default: the whole trace up to its first 100,000, or 10000).")] = None,
    sample: SampleOpt = 100_000,
    seed: SeedOpt = 0,
    allow_long_context: AllowLongContextOpt = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Instances, GPUs, batch, KV demand and p50/p90/p99 TTFT/TPOT for a workload; the binding constraint; scale-out."""
    if concurrency is not None and qps is not None:
        from kvplan.errors import InputError

        raise InputError("--qps sets an arrival rate, which a closed loop (--concurrency) does not use",
                         "drop --qps: --concurrency N keeps N requests in flight, each sent when one ends "
                         "(as vllm bench serve --max-concurrency)")
    if concurrency is not None and gpu_cost is not None:
        from kvplan.errors import InputError

        raise InputError("--gpu-cost prices a fleet plan; the closed loop (--concurrency) replays one deployment "
                         "and prices nothing", "drop --gpu-cost, or plan a rate (--qps or --trace) to compare costs")
    for flag, value, what in (("--phases", phases, "sets how a closed loop's requests settle (--concurrency)"),
                              ("--warmup-requests", warmup_requests, "counts a closed loop's warm-up requests")):
        if value is not None and concurrency is None:
            from kvplan.errors import InputError

            raise InputError(f"{flag} {what}", f"add --concurrency N, or drop {flag}")
    if concurrency is not None and trace is None:
        qps = 1.0  # closed loop: the rate is not used, only the lengths
    workload = fleet_workload(
        trace=trace, qps=qps, isl=isl, osl=osl, arrival_cv=arrival_cv, turns=turns,
        think_time=think_time, shared_prefix=shared_prefix,
        trace_format=trace_format, columns=columns, timestamp_unit=timestamp_unit, skip_bad_rows=skip_bad_rows,
        rate_basis=rate_basis, sample_requests=sample, seed=seed)
    slos = [parse_slo(kind, text) for kind, text in (("ttft", ttft), ("tpot", tpot)) if text is not None]
    settings = EngineSettings(
        engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, chunk_tokens=parse_tokens(chunk_size) if chunk_size is not None else None, block_size=block_size,
        efficiencies=efficiencies(eta_mem, eta_flops, step_overhead, prefill_overhead, enforce_eager), perf_model=perf_model,
        dp_imbalance=dp_imbalance)
    tps = _tps(tp, "--tp") if tp is not None else None
    pps = _tps(pp, "--pp") if pp is not None else None
    dps = _tps(dp, "--dp") if dp is not None else None
    if dp_imbalance is not None:
        _check_dp_imbalance(dp_imbalance, dps)
    if chart is not None and (concurrency is None or chart.suffix.lower() != ".png"):
        from kvplan.errors import InputError

        raise InputError(f"--chart {ascii(str(chart))}: the chart is a PNG of a --concurrency sweep",
                         "e.g. --concurrency 1,8,32,128 --chart curve.png")
    if chart is not None:
        from kvplan.outputs import check_target

        check_target(chart, "--chart")
    closed = None if concurrency is None else _tps(concurrency, "--concurrency")
    answer = fleet_answer(model, hardware, workload, slos, settings,
                          concurrency=closed, instances=instances, tps=tps, pps=pps, dps=dps,
                          expert_parallel=enable_expert_parallel or None, redundant_experts=ep_redundant_experts,
                          warmup_requests=warmup_requests or 0, phases=phases,
                          scale=() if closed else _float_list(scale), simulate=simulate, sim_requests=sim_requests,
                          seed=seed, max_gpus=max_gpus, max_utilization=max_utilization,
                          allow_long_context=allow_long_context, system=system,
                          gpu_cost=None if closed else parse_gpu_cost(gpu_cost, cards_dirs(cards)), cards=cards_dirs(cards))
    result = answer.result()
    extra = None
    if chart is not None:  # a closed-loop curve (checked above), written with -o's file or not at all
        import io

        from kvplan.outputs import OutputSet
        from kvplan.report.charts import closed_loop_chart

        png = io.BytesIO()
        closed_loop_chart(png, result.rows, result.title)
        extra = OutputSet()
        extra.add(chart, png.getvalue(), what="--chart")
    fmt = output_format(fmt, output)
    if fmt in ("table", "markdown") and not answer.closed:
        emit_tables(result, presentation(result), fmt, output, explain, extra)
    else:
        emit(result, fmt, output, explain, extra)
    if answer.no is not None:
        raise InfeasibleError(*answer.no)

"""``kvplan plan MODEL HARDWARE``: from a workload (flags or a trace) to an aggregated fleet with percentile latencies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import HardwareArg, ModelArg, WeightsDtypeOpt
from kvplan.cli.options import (CardsOpt, EngineOneOpt, EtaFlopsOpt, EtaMemOpt, ExplainOpt, FormatOpt, OutputOpt,
                                PerfModelOpt, StepOverheadOpt, SystemOpt, cards_dirs, efficiencies, emit,
                                output_format)
from kvplan.cli.options import ArrivalCVOpt, ColumnsOpt, SharedPrefixOpt, SkipBadRowsOpt, ThinkTimeOpt, TimestampUnitOpt, TraceFormatOpt, TurnsOpt
from kvplan.cli.workload import emit_tables
from kvplan.errors import InfeasibleError
from kvplan.cli.pd import _tps
from kvplan.plans.fleet.aggregated import EngineSettings, parse_slo
from kvplan.plans.fleet.cost import parse_gpu_cost
from kvplan.plans.fleet.answer import answer as fleet_answer
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.report.fleet_tables import presentation
from kvplan.units import parse_list, parse_seconds, parse_tokens

LengthOpt = "2k (fixed), 1k:8k (lognormal mean:p99), mean=1k,p99=8k or p50=1k,p90=3k,p99=8k"


def _float_list(text: str) -> list[float]:
    from kvplan.errors import InputError

    def one(item: str) -> float:
        try:
            return float(item.rstrip("x×"))
        except ValueError:
            raise InputError(f"--scale: cannot read '{item}'", "write multipliers as 2,5,10") from None
    return parse_list(text, one, what="--scale")


def plan_command(
    model: ModelArg,
    hardware: HardwareArg,
    system: SystemOpt = None,
    trace: Annotated[Optional[Path], typer.Option("--trace", help="Trace file: Azure CSV, Mooncake JSONL, or a CSV with --columns.")] = None,
    qps: Annotated[Optional[float], typer.Option("--qps", "--rate", help="Arrival rate, requests/s (with --trace: rescale it to this rate).")] = None,
    isl: Annotated[Optional[str], typer.Option("--isl", help=f"Prompt tokens: {LengthOpt}.")] = None,
    osl: Annotated[Optional[str], typer.Option("--osl", help="Output tokens, written like --isl.")] = None,
    arrival_cv: ArrivalCVOpt = 1.0,
    turns: TurnsOpt = 1,
    think_time: ThinkTimeOpt = "0s",
    shared_prefix: SharedPrefixOpt = "0",
    trace_format: TraceFormatOpt = "auto",
    columns: ColumnsOpt = None,
    timestamp_unit: TimestampUnitOpt = None,
    skip_bad_rows: SkipBadRowsOpt = False,
    rate_basis: Annotated[str, typer.Option("--rate-basis", help="A trace's rate: mean, or peak (busiest minute).")] = "mean",
    ttft: Annotated[Optional[str], typer.Option("--ttft", help="TTFT SLO, e.g. 'p99<=2s'.")] = None,
    tpot: Annotated[Optional[str], typer.Option("--tpot", help="TPOT SLO, e.g. 'p90<=50ms'.")] = None,
    tp: Annotated[Optional[str], typer.Option("--tp", "-tp", "--tensor-parallel-size", help="Tensor-parallel GPUs per instance: one value pins it, a list (2,4,8) is searched (default 1,2,4,8).")] = None,
    pp: Annotated[Optional[str], typer.Option("--pp", "-pp", "--pipeline-parallel-size", help="Pipeline stages per instance: one value or a list (default 1, more only where the weights need it).")] = None,
    engine: EngineOneOpt = "vllm",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp8, …")] = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    gpu_memory_utilization: Annotated[Optional[float], typer.Option("--gpu-memory-utilization", help="Engine memory fraction (engine default).")] = None,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", help="The engine's batch cap.")] = 256,
    chunk_size: Annotated[str, typer.Option("--chunk-size", "--max-num-batched-tokens", help="Tokens per step (chunked prefill).")] = "8192",
    block_size: Annotated[Optional[int], typer.Option("--block-size", help="Tokens per KV block (engine default).")] = None,
    eta_mem: EtaMemOpt = None,
    eta_flops: EtaFlopsOpt = None,
    step_overhead: StepOverheadOpt = None,
    perf_model: PerfModelOpt = "operators",
    max_gpus: Annotated[Optional[int], typer.Option("--max-gpus", help="GPU budget: a plan needing more is infeasible.")] = None,
    gpu_cost: Annotated[Optional[str], typer.Option("--gpu-cost", help="Prices per GPU-hour, any currency: h100-sxm=2.4,h20=1.0 (cost per hour and per million output tokens; the search compares cost).")] = None,
    max_utilization: Annotated[float, typer.Option("--max-utilization", help="Queue utilisation ceiling without a TTFT SLO.")] = 0.9,
    scale: Annotated[str, typer.Option("--scale", help="Rate multipliers for the scale-out table.")] = "2,5,10",
    concurrency: Annotated[Optional[str], typer.Option("--concurrency", "--max-concurrency", help="Closed loop: requests in flight, each sent when one ends (vllm bench serve --max-concurrency); a list (1,8,32,128) gives the latency-throughput curve.")] = None,
    instances: Annotated[int, typer.Option("--instances", help="Closed loop: instances behind the router.")] = 1,
    chart: Annotated[Optional[Path], typer.Option("--chart", help="Closed loop: write the latency-throughput curve (PNG).")] = None,
    simulate: Annotated[Optional[bool], typer.Option("--simulate/--no-simulate", help="Size the fleet by its own discrete-event replay (default: on with --trace).")] = None,
    sim_requests: Annotated[Optional[int], typer.Option("--sim-requests", help="Requests to simulate (default: the whole trace, or 10000).")] = None,
    sample: Annotated[int, typer.Option("--sample", help="Requests sampled for a flag workload's length statistics.")] = 100_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed for sampled workloads.")] = 0,
    allow_long_context: Annotated[bool, typer.Option("--allow-long-context", help="Allow contexts beyond the card's max.")] = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Instances, GPUs, batch, KV demand and p50/p90/p99 TTFT/TPOT for a workload; the binding constraint; scale-out."""
    if concurrency is not None and trace is None and qps is None:
        qps = 1.0  # closed loop: the rate is not used, only the lengths
    workload = fleet_workload(
        trace=trace, qps=qps, isl=isl, osl=osl, arrival_cv=arrival_cv, turns=turns,
        think_time_s=parse_seconds(think_time), shared_prefix_tokens=parse_tokens(shared_prefix, allow_zero=True),
        trace_format=trace_format, columns=columns, timestamp_unit=timestamp_unit, skip_bad_rows=skip_bad_rows,
        rate_basis=rate_basis, sample_requests=sample, seed=seed)
    slos = [parse_slo(kind, text) for kind, text in (("ttft", ttft), ("tpot", tpot)) if text is not None]
    settings = EngineSettings(
        engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, chunk_tokens=parse_tokens(chunk_size), block_size=block_size,
        efficiencies=efficiencies(eta_mem, eta_flops, step_overhead), perf_model=perf_model)
    tps = _tps(tp, "--tp") if tp is not None else None
    pps = _tps(pp, "--pp") if pp is not None else None
    if chart is not None and (concurrency is None or chart.suffix.lower() != ".png"):
        from kvplan.errors import InputError

        raise InputError(f"--chart {ascii(str(chart))}: the chart is a PNG of a --concurrency sweep",
                         "e.g. --concurrency 1,8,32,128 --chart curve.png")
    closed = None if concurrency is None else _tps(concurrency, "--concurrency")
    answer = fleet_answer(model, hardware, workload, slos, settings,
                          concurrency=closed, instances=instances, tps=tps, pps=pps,
                          scale=() if closed else _float_list(scale), simulate=simulate, sim_requests=sim_requests,
                          seed=seed, max_gpus=max_gpus, max_utilization=max_utilization,
                          allow_long_context=allow_long_context, system=system,
                          gpu_cost=None if closed else parse_gpu_cost(gpu_cost, cards_dirs(cards)), cards=cards_dirs(cards))
    result = answer.result()
    if chart is not None:  # a closed-loop curve (checked above)
        from kvplan.report.charts import closed_loop_chart

        closed_loop_chart(chart, result.rows, result.title)
        result.assumptions.append(f"chart written to {chart.name}")
    fmt = output_format(fmt, output)
    if fmt in ("table", "markdown") and not answer.closed:
        emit_tables(result, presentation(result), fmt, output, explain)
    else:
        emit(result, fmt, output, explain)
    if answer.no is not None:
        raise InfeasibleError(*answer.no)

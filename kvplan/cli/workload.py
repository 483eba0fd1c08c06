"""``kvplan workload [TRACE]``: summarise a request trace, or a workload given by flags, and its reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import (ArrivalCVOpt, CacheTokensOpt, ColumnsOpt, ExplainOpt, FormatOpt, IslOpt, OslOpt,
                                OutputOpt, RateOpt, SampleOpt, SeedOpt, SharedPrefixOpt, SkipBadRowsOpt, ThinkTimeOpt,
                                TimestampUnitOpt, TraceFormatOpt, TurnsOpt, emit, emit_text, note, output_format)
from kvplan.errors import InputError
from kvplan.plans.fleet.workload import presentation, workload, workload_spec
from kvplan.outputs import OutputSet
from kvplan.report.render import render, terminal_width
from kvplan.result import Result
from kvplan.units import parse_list, parse_seconds, parse_tokens
from kvplan.workload.synthetic import workload_from_flags



def workload_command(
    trace: Annotated[Optional[Path], typer.Argument(
        help="Trace file: Azure CSV, Mooncake JSONL or a CSV with --columns. Omit it to use workload flags.")] = None,
    trace_format: TraceFormatOpt = "auto",
    columns: ColumnsOpt = None,
    timestamp_unit: TimestampUnitOpt = None,
    skip_bad_rows: SkipBadRowsOpt = False,
    cache_tokens: CacheTokensOpt = None,
    bucket: Annotated[str, typer.Option("--bucket", help="Bucket for the rate over time.")] = "60s",
    rate: RateOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    arrival_cv: ArrivalCVOpt = 1.0,
    turns: TurnsOpt = 1,
    think_time: ThinkTimeOpt = "0s",
    shared_prefix: SharedPrefixOpt = "0",
    sample: SampleOpt = 100_000,
    seed: SeedOpt = 0,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
) -> None:
    """Workload summary: rate, burstiness, ISL/OSL percentiles, prefix reuse, LRU hit rate vs cache size."""
    fmt = output_format(fmt, output)
    sizes = parse_list(cache_tokens, lambda t: parse_tokens(t, allow_zero=True), what="--cache-tokens") \
        if cache_tokens is not None else []
    bucket_s = parse_seconds(bucket)
    if bucket_s <= 0:
        raise InputError(f"rate bucket must be > 0 s (got {bucket})", "write e.g. --bucket 60s")
    flags_given = any(v is not None for v in (rate, isl, osl))
    if trace is not None and flags_given:
        raise InputError("give a trace or workload flags (--rate/--isl/--osl), not both")
    if trace is not None:
        result = workload(trace, trace_format=trace_format, columns=columns, timestamp_unit=timestamp_unit,
                          skip_bad_rows=skip_bad_rows, cache_tokens=sizes, bucket_s=bucket_s)
    elif rate is not None and isl is not None and osl is not None:
        spec = workload_from_flags(rate_per_s=rate, isl=isl, osl=osl, arrival_cv=arrival_cv, turns=turns,
                                   think_time=think_time, shared_prefix=shared_prefix)
        result = workload_spec(spec, cache_tokens=sizes, sample_requests=sample, seed=seed, bucket_s=bucket_s)
    else:
        raise InputError("no workload: give a TRACE file, or --rate, --isl and --osl",
                         "e.g. kvplan workload trace.jsonl, or kvplan workload --rate 5 --isl 2k --osl 256")
    if fmt in ("table", "markdown"):
        emit_tables(result, presentation(result), fmt, output, explain)
    else:
        emit(result, fmt, output, explain)


def emit_tables(result: Result, tables: list[Result], fmt: str, output: Path | None, explain: bool,
                extra: OutputSet | None = None) -> None:
    """Print or write several tables as one document; notes (e.g. skipped rows) go to stderr."""
    width = terminal_width() if output is None else None
    emit_text("\n".join(render(table, fmt, explain=explain, width=width) for table in tables), output, extra)
    for text in result.assumptions:
        note(text)

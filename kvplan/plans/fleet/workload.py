"""``kvplan workload``: summarise a request trace (or a flag-defined workload) and its prefix reuse.

Rows (what ``--format json`` prints): the first row (``kind: summary``) describes the workload —
request count, duration, rate, inter-arrival CV, ISL/OSL mean and percentiles, requests per
``rate_bucket_s`` bucket, and for traces with ``hash_ids`` the unlimited prefix hit rate. One row
per requested cache size follows (``kind: lru``): ``cache_tokens``, ``cache_blocks``,
``lru_hit_rate`` (prefix semantics: a block is served from the cache only when every earlier
block of its request is too) and ``lru_block_hit_rate`` (any cached block counts).

``presentation`` turns that Result into the tables people read (a quantity/value table with a
sparkline of the rate over time, and the cache table).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kvplan.errors import InputError
from kvplan.result import Result
from kvplan.units import format_seconds, format_tokens
from kvplan.workload.reuse import capacity_blocks, reuse_profile
from kvplan.workload.summary import sparkline, summarise
from kvplan.workload.synthetic import Workload
from kvplan.workload.traces import Trace, read_trace

SUMMARY_COLUMNS = [
    "requests", "duration_s", "rate_per_s", "interarrival_cv", "isl_mean", "isl_p50", "isl_p90", "isl_p99",
    "osl_mean", "osl_p50", "osl_p90", "osl_p99", "prefix_hit_rate_unlimited",
]
LRU_COLUMNS = ["cache_tokens", "cache_blocks", "lru_hit_rate", "lru_block_hit_rate"]
PREFIX_NOTE = ("LRU over {block_tokens}-token prompt blocks replayed in timestamp order; lru_hit_rate counts a "
               "block only when every earlier block of its request also hits (prefix caching as in vLLM/SGLang); "
               "cache_blocks = floor(cache_tokens / block_tokens), with 1M = 1024² tokens")
SUMMARY_EXPLAIN = [
    "rate_per_s = (n − 1) / duration_s = 1 / mean inter-arrival gap",
    "interarrival_cv = std(gaps) / mean(gaps) (ddof = 0; 1 for Poisson arrivals)",
    "peak_rate_per_s = max requests in one rate_bucket_s bucket / rate_bucket_s",
    "isl_pXX, osl_pXX: linear interpolation between order statistics (numpy default, type 7)",
]
REUSE_EXPLAIN = [
    "prefix_hit_rate_unlimited = blocks seen before, with all earlier blocks of the request seen before / blocks",
    "stack distance D_t = distinct blocks touched since block t's previous access (∞ for a first touch)",
    "lru_block_hit_rate(C) = #{t : D_t < C} / blocks;  lru_hit_rate(C) = #{t : max_{i<=t in request} D_i < C} / blocks",
    "exact for LRU because every block a request touches is refreshed, hit or miss (inclusion property)",
]


def workload(
    trace: str | Path | Trace, *, trace_format: str = "auto", columns: str | dict | None = None,
    timestamp_unit: str | None = None, skip_bad_rows: bool = False,
    cache_tokens: Sequence[int] = (), bucket_s: float = 60.0,
) -> Result:
    """Summary row of a trace file (or ``Trace``), plus one LRU row per entry of ``cache_tokens``."""
    if bucket_s <= 0:
        raise InputError(f"rate bucket must be > 0 s (got {bucket_s:g})", "write e.g. --bucket 60s")
    if not isinstance(trace, Trace):
        trace = read_trace(trace, trace_format=trace_format, columns=columns, timestamp_unit=timestamp_unit,
                           skip_bad_rows=skip_bad_rows)
    summary = {"kind": "summary", **summarise(trace, bucket_s)}
    rows, assumptions = [summary], []
    if trace.skipped_lines:
        assumptions.append(f"skipped {len(trace.skipped_lines)} malformed row"
                           f"{'s' if len(trace.skipped_lines) > 1 else ''} ({_lines(trace.skipped_lines)})")
    explain = list(SUMMARY_EXPLAIN)
    if cache_tokens:
        rows += lru_rows(trace, cache_tokens)
        assumptions.append(PREFIX_NOTE.format(block_tokens=trace.block_tokens))
    if trace.has_blocks:
        explain += REUSE_EXPLAIN
    name = Path(trace.source).name or trace.source
    return Result(title=f"Workload: {name} ({trace.trace_format})", rows=rows, columns=SUMMARY_COLUMNS,
                  explain=explain, assumptions=assumptions)


def lru_rows(trace: Trace, cache_tokens: Sequence[int]) -> list[dict]:
    """One row per cache size: prefix (``lru_hit_rate``) and plain (``lru_block_hit_rate``) LRU hit rates."""
    tokens = [int(c) for c in cache_tokens]
    if any(c < 0 for c in tokens):
        raise InputError(f"cache size must be >= 0 tokens (got {min(tokens)})", "write e.g. --cache-tokens 3M,10M")
    profile = reuse_profile(trace)
    blocks = capacity_blocks(tokens, profile.block_tokens)
    prefix, block = profile.prefix_hit_rate(blocks), profile.block_hit_rate(blocks)
    return [{"kind": "lru", "cache_tokens": c, "cache_blocks": int(b), "lru_hit_rate": float(p),
             "lru_block_hit_rate": float(h)} for c, b, p, h in zip(tokens, blocks, prefix, block)]


def workload_spec(spec: Workload, *, cache_tokens: Sequence[int] = (), sample_requests: int = 100_000,
                  seed: int = 0, bucket_s: float = 60.0) -> Result:
    """A flag-defined workload: closed-form moments, plus percentiles and LRU rows from a seeded sample.

    Single-turn: ISL/OSL percentiles are the distributions' quantiles. Multi-turn: the prompt is a
    sum over turns, so its percentiles come from ``sample_requests`` sampled requests (``seed``).
    """
    if sample_requests < 1:
        raise InputError(f"--sample must be >= 1 (got {sample_requests})")
    prompt_mean, prompt_second = spec.prompt_moments()
    sample = spec.sample(sample_requests, seed)
    sampled = summarise(sample, bucket_s)
    row = {"kind": "summary", "trace": None, "trace_format": "flags", "requests": None, "duration_s": None,
           "rate_per_s": spec.rate_per_s,
           "interarrival_cv": spec.arrival_cv if spec.turns == 1 else sampled["interarrival_cv"],
           "isl_mean": prompt_mean, "isl_cv": math.sqrt(spec.prompt_scv()),
           "isl_second_moment": prompt_second}
    exact = spec.turns == 1 and spec.shared_prefix_tokens == 0
    for p in (50, 90, 99):
        row[f"isl_p{p}"] = spec.isl.quantile(p / 100) if exact else sampled[f"isl_p{p}"]
    row.update({"osl_mean": spec.osl.mean, "osl_cv": math.sqrt(_scv(spec.osl)),
                "osl_second_moment": spec.osl.second_moment})
    for p in (50, 90, 99):
        row[f"osl_p{p}"] = spec.osl.quantile(p / 100)
    row.update({
        "turns": spec.turns, "think_time_s": spec.think_time_s, "shared_prefix_tokens": spec.shared_prefix_tokens,
        "session_rate_per_s": spec.session_rate_per_s, "idle_sessions_mean": spec.idle_sessions_mean(),
        "session_cache_tokens_mean": spec.session_cache_tokens_mean(),
        "reusable_prefix_tokens_mean": spec.reusable_prefix_tokens_mean(),
        "prefix_hit_rate_unlimited": sampled["prefix_hit_rate_unlimited"],
        "sampled_requests": sample_requests, "seed": seed,
    })
    rows = [row] + (lru_rows(sample, cache_tokens) if cache_tokens else [])
    sampled_figures = "hit rates" + ("" if exact else " and ISL percentiles") + \
        ("" if spec.turns == 1 else " and the inter-arrival CV")
    notes = [f"means and length CVs are closed-form; {sampled_figures} come from {sample_requests:,} sampled "
             f"requests (seed {seed})"]
    if cache_tokens:
        notes.append(PREFIX_NOTE.format(block_tokens=spec.block_tokens))
    return Result(title="Workload from flags", rows=rows, columns=SUMMARY_COLUMNS, assumptions=notes,
                  explain=["E[prompt] = S + μN (T+1)/2 + μO (T−1)/2 over turns 1..T",
                           "idle_sessions_mean = session_rate × (T − 1) × think_time (Little's law)",
                           "session_cache_tokens_mean = idle_sessions_mean × T/2 × (μN + μO)"])


def _scv(dist) -> float:
    return max(dist.second_moment / dist.mean**2 - 1.0, 0.0)


def _lines(lines: Sequence[int], shown: int = 5) -> str:
    text = ", ".join(str(n) for n in lines[:shown])
    return f"line{'s' if len(lines) > 1 else ''} {text}" + (", …" if len(lines) > shown else "")


def presentation(result: Result) -> list[Result]:
    """Tables for people: quantities with units and a rate sparkline, then hit rate per cache size."""
    summary, lru = result.rows[0], [r for r in result.rows if r.get("kind") == "lru"]
    items = []
    if summary.get("requests") is not None:
        items.append(("requests", f"{summary['requests']:,}"))
    if summary.get("duration_s") is not None:
        items.append(("duration", format_seconds(summary["duration_s"])))
    items.append(("rate", _per_s(summary.get("rate_per_s"), "req/s")))
    if summary.get("peak_rate_per_s") is not None:
        items.append((f"peak rate ({_bucket(summary['rate_bucket_s'])} bucket)",
                      _per_s(summary["peak_rate_per_s"], "req/s")))
    items.append(("inter-arrival CV", _num(summary.get("interarrival_cv"), ".2f")))
    for side, label in (("isl", "ISL"), ("osl", "OSL")):
        items.append((f"{label} mean / p50 / p90 / p99 (tokens)", " / ".join(
            _num(summary.get(f"{side}_{k}"), ",.0f") for k in ("mean", "p50", "p90", "p99"))))
    for key, label in (("turns", "turns per session"), ("idle_sessions_mean", "sessions between turns (mean)"),
                       ("session_cache_tokens_mean", "tokens held for idle sessions (mean)"),
                       ("blocks", "prompt blocks"), ("unique_blocks", "distinct blocks")):
        if summary.get(key) is not None:
            items.append((label, _num(summary[key], ",.0f")))
    if summary.get("prefix_hit_rate_unlimited") is not None:
        items.append(("prefix hit rate, unlimited cache", _pct(summary["prefix_hit_rate_unlimited"])))
    if summary.get("requests_per_bucket"):
        counts = summary["requests_per_bucket"]
        items.append((f"requests per {_bucket(summary['rate_bucket_s'])}",
                      f"{sparkline(counts)}  ({min(counts):,}–{max(counts):,})"))
    tables = [Result(title=result.title, rows=[{"quantity": k, "value": v} for k, v in items],
                     columns=["quantity", "value"], explain=result.explain, assumptions=result.assumptions)]
    if lru:
        tables.append(Result(
            title="LRU prefix cache: hit rate vs capacity",
            rows=[{"cache_tokens": f"{format_tokens(r['cache_tokens'])} ({r['cache_tokens']:,})",
                   "cache_blocks": f"{r['cache_blocks']:,}", "lru_hit_rate": _pct(r["lru_hit_rate"]),
                   "lru_block_hit_rate": _pct(r["lru_block_hit_rate"])} for r in lru],
            columns=LRU_COLUMNS))
    return tables


def _num(value, spec: str) -> str:
    return "—" if value is None or (isinstance(value, float) and not np.isfinite(value)) else format(value, spec)


def _pct(value) -> str:
    return "—" if value is None else f"{value * 100:.2f} %"


def _per_s(value, unit: str) -> str:
    return "—" if value is None else f"{value:,.3g} {unit}"


def _bucket(bucket_s: float) -> str:
    return "minute" if bucket_s == 60 else format_seconds(bucket_s)

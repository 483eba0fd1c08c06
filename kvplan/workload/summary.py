"""Summaries of a request trace: rate, burstiness, length percentiles, prefix reuse.

Definitions (``t`` = arrival times in seconds, sorted, ``n`` requests, gaps ``g_i = t_{i+1} − t_i``):

- ``duration_s = t_n − t_1``
- ``rate_per_s = (n − 1) / duration_s = 1 / mean(g)``, the rate the inter-arrival gaps imply
  (for a Poisson process its maximum-likelihood estimate); undefined (``None``) when all
  requests arrive at once.
- ``interarrival_cv = std(g) / mean(g)`` with the population standard deviation (ddof = 0):
  1 for Poisson arrivals, above 1 for bursty traffic. Ties (several requests in one timestamp
  tick, e.g. Mooncake's milliseconds) count as zero gaps and raise it.
- Arrival burstiness, the one estimator every command uses (:func:`arrival_scv`):
  ``ca² = Var(g) / E[g]² = interarrival_cv²``. It was picked against kvplan's own replay of the
  three shipped traces at three loads each (closed-form TTFT p99 vs the replay: median |error|
  32%, against 72% for the index of dispersion of 60-s counts and 46% with tied timestamps spread
  over their tick; ``benchmarks/burstiness.py``, docs/closed-form-vs-replay.md). Ties stay zero
  gaps: the replay (and an engine fed the trace) sees tied requests arrive together.
- Rate over time: requests per bucket (``bucket_s``, default 60 s) counted from the first arrival,
  ``bucket k = floor(t / bucket_s)``; ``peak_rate_per_s = max(count) / bucket_s``. The last bucket
  is usually partial, so its count is low.
- Length percentiles ``p50/p90/p99``: linear interpolation between order statistics (numpy's
  default, Hyndman & Fan type 7). ``*_cv`` = std / mean (ddof = 0).
- With ``hash_ids``: ``prefix_hit_rate_unlimited`` = share of blocks already seen earlier in the
  replay whose earlier blocks in the same request were all seen too (an unbounded prefix cache);
  ``block_hit_rate_unlimited`` drops the prefix condition. Both in blocks, not tokens.
"""

from __future__ import annotations

import numpy as np

from kvplan.errors import InputError

from kvplan.workload.reuse import unlimited_hit_rates
from kvplan.workload.traces import Trace

PERCENTILES = (50, 90, 99)
SPARK_LEVELS = "▁▂▃▄▅▆▇█"


MAX_BUCKETS = 10_000_000


def rate_buckets(arrival_s: np.ndarray, bucket_s: float = 60.0) -> np.ndarray:
    """Requests per bucket of ``bucket_s`` seconds from the first arrival (``floor(t / bucket_s)``)."""
    if not bucket_s > 0:
        raise InputError(f"rate bucket must be > 0 s (got {bucket_s:g})", "write e.g. --bucket 60s")
    if arrival_s.size == 0:
        return np.zeros(0, dtype=np.int64)
    span = float(arrival_s[-1] - arrival_s[0])
    if span / bucket_s > MAX_BUCKETS:
        raise InputError(f"{span / bucket_s:,.0f} rate buckets of {bucket_s:g} s over the trace's {span:,.0f} s",
                         f"pass a longer --bucket (at most {MAX_BUCKETS:,} buckets)")
    index = np.floor((arrival_s - arrival_s[0]) / bucket_s).astype(np.int64)
    return np.bincount(index)


def interarrival_stats(arrival_s: np.ndarray) -> tuple[float | None, float | None]:
    """(rate_per_s, interarrival_cv) from the gaps; ``None`` where undefined (< 2 requests, zero span)."""
    if arrival_s.size < 2:
        return None, None
    gaps = np.diff(arrival_s)
    mean_gap = float(gaps.mean())
    if mean_gap <= 0:
        return None, None
    return 1.0 / mean_gap, float(gaps.std()) / mean_gap


def arrival_scv(arrival_s: np.ndarray) -> float:
    """Arrival burstiness ca² = Var(g) / E[g]² of the inter-arrival gaps g (ddof = 0; ties are zero gaps).

    The one estimator of kvplan (plan, pd, tier, check, route, workload): 1 for Poisson arrivals;
    the renewal (G/G/c) input of :mod:`kvplan.calc.queueing`'s Allen–Cunneen factor (ca² + cs²)/2.
    Why gaps and not the index of dispersion: see the module docstring. Needs >= 2 requests over a
    positive span (InputError otherwise).
    """
    arrival_s = np.asarray(arrival_s, dtype=np.float64)
    gaps = np.diff(arrival_s)
    if gaps.size == 0 or not gaps.mean() > 0:
        raise InputError("arrival burstiness needs at least two requests at different times",
                         "use a longer trace, or give --arrival-cv")
    return float(gaps.var() / gaps.mean() ** 2)


def tied_share(arrival_s: np.ndarray) -> float:
    """Share of requests arriving at the same timestamp as the one before (timestamp ticks)."""
    gaps = np.diff(np.asarray(arrival_s, dtype=np.float64))
    return float((gaps == 0).mean()) if gaps.size else 0.0


def length_stats(prefix: str, tokens: np.ndarray) -> dict:
    """``{prefix}_mean``, ``_p50``, ``_p90``, ``_p99``, ``_max``, ``_cv`` of a token-count array."""
    values = tokens.astype(np.float64)
    mean = float(values.mean())
    stats = {f"{prefix}_mean": mean}
    for p, q in zip(PERCENTILES, np.percentile(values, PERCENTILES)):
        stats[f"{prefix}_p{p}"] = float(q)
    stats[f"{prefix}_max"] = int(tokens.max())
    stats[f"{prefix}_cv"] = float(values.std()) / mean if mean > 0 else None
    return stats


def summarise(trace: Trace, bucket_s: float = 60.0) -> dict:
    """One flat dict (JSON-ready: Python numbers, ``None`` where undefined) describing ``trace``."""
    arrival = trace.arrival_s
    duration_s = float(arrival[-1] - arrival[0]) if arrival.size else 0.0
    rate_per_s, cv = interarrival_stats(arrival)
    buckets = rate_buckets(arrival, bucket_s)
    peak = float(buckets.max()) / bucket_s if buckets.size else None
    row = {
        "trace": trace.source, "trace_format": trace.trace_format,
        "requests": trace.requests, "duration_s": duration_s, "rate_per_s": rate_per_s,
        "peak_rate_per_s": peak, "interarrival_cv": cv,
        "input_tokens_per_s": float(trace.isl.sum()) / duration_s if duration_s > 0 else None,
        "output_tokens_per_s": float(trace.osl.sum()) / duration_s if duration_s > 0 else None,
    }
    row.update(length_stats("isl", trace.isl))
    row.update(length_stats("osl", trace.osl))
    if trace.has_blocks:
        prefix, block, unique = unlimited_hit_rates(trace)
        row.update({
            "block_tokens": trace.block_tokens, "blocks": int(trace.block_ids.size), "unique_blocks": unique,
            "unique_block_tokens": unique * trace.block_tokens,
            "prefix_hit_rate_unlimited": prefix, "block_hit_rate_unlimited": block,
        })
    row.update({"skipped_rows": len(trace.skipped_lines), "rate_bucket_s": bucket_s,
                "requests_per_bucket": [int(c) for c in buckets]})
    return row


def sparkline(counts) -> str:
    """Counts as one line of block characters scaled from 0 to the maximum (``▁`` … ``█``)."""
    values = np.asarray(counts, dtype=np.float64)
    if values.size == 0:
        return ""
    top = values.max()
    if top <= 0:
        return SPARK_LEVELS[0] * values.size
    levels = np.minimum((values / top * len(SPARK_LEVELS)).astype(int), len(SPARK_LEVELS) - 1)
    return "".join(SPARK_LEVELS[k] for k in levels)

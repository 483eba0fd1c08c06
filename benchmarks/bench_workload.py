"""Benchmark: trace loading and summarising (rows/s), LRU hit-rate curves (blocks/s).

Run: python benchmarks/bench_workload.py [TRACE_DIR]   (default: examples/traces beside the repo)
Prints wall-clock figures (best of several runs); nothing here is asserted (see tests for correctness).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kvplan.workload.reuse import capacity_blocks, reuse_profile, simulate_lru
from kvplan.workload.summary import summarise
from kvplan.workload.synthetic import Workload, parse_length
from kvplan.workload.traces import read_trace
from timing import best

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv", "conversation_trace.jsonl")
CACHE_TOKENS = [3 * 1024**2, 10 * 1024**2, 50 * 1024**2]



def bench_trace(path: Path) -> None:
    t_load, trace = best(lambda: read_trace(path))
    t_summary, _ = best(lambda: summarise(trace))
    n = trace.requests
    print(f"{path.name}: {n:,} requests; load {t_load * 1e3:.1f} ms ({n / t_load:,.0f} rows/s); "
          f"summarise {t_summary * 1e3:.1f} ms ({n / t_summary:,.0f} rows/s)")
    if trace.has_blocks:
        bench_reuse(trace, path.name)


def bench_reuse(trace, name: str) -> None:
    blocks = int(trace.block_ids.size)
    t_curve, profile = best(lambda: reuse_profile(trace), runs=3)
    print(f"  {name}: stack-distance curve over {blocks:,} block accesses: {t_curve * 1e3:.1f} ms "
          f"({blocks / t_curve:,.0f} blocks/s), all capacities at once")
    for tokens, capacity in zip(CACHE_TOKENS, capacity_blocks(CACHE_TOKENS)):
        t_sim, _ = best(lambda: simulate_lru(trace, int(capacity)), runs=2)
        print(f"  OrderedDict LRU replay at {tokens / 1024**2:.0f}M tokens: {t_sim * 1e3:.0f} ms "
              f"({blocks / t_sim:,.0f} blocks/s) for one capacity; "
              f"hit rate {float(profile.prefix_hit_rate(capacity)):.4f}")


def bench_synthetic(requests: int = 100_000) -> None:
    spec = Workload(rate_per_s=10, isl=parse_length("mean=4k,p99=32k"), osl=parse_length("mean=300,p99=2k"),
                    turns=4, think_time_s=60, shared_prefix_tokens=2048)
    t_sample, trace = best(lambda: spec.sample(requests, np.random.default_rng(0)), runs=2)
    print(f"synthetic sessions: {requests:,} requests sampled in {t_sample * 1e3:.0f} ms "
          f"({requests / t_sample:,.0f} requests/s, {trace.block_ids.size:,} blocks)")
    bench_reuse(trace, "synthetic")


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces"
    for name in TRACES:
        path = directory / name
        if path.exists():
            bench_trace(path)
        else:
            print(f"{path}: absent, skipped")
    bench_synthetic()


if __name__ == "__main__":
    main()

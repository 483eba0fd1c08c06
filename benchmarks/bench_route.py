"""Benchmark: kvplan route over the shipped Mooncake conversation trace (12,031 requests, 288,500 block touches).

Run: python benchmarks/bench_route.py
Prints wall-clock figures (best of 3); nothing is asserted (tests check correctness). The issue's bar:
all five policies at N = 16 in <= 5 s.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.plans.route import POLICIES, route
from kvplan.workload.traces import read_trace
from timing import best

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "examples" / "traces" / "conversation_trace.jsonl"
CACHE_TOKENS = 3 * 1024**2


def main() -> None:
    trace = read_trace(TRACE)
    blocks = int(trace.block_ids.size)
    print(f"{TRACE.name}: {trace.requests:,} requests, {blocks:,} block touches; per-instance cache "
          f"{CACHE_TOKENS:,} tokens, every request in flight 20 s")
    t_all, _ = best(lambda: route(trace, [16], POLICIES, cache_tokens=CACHE_TOKENS, service_time_s=20.0), runs=3)
    print(f"  all {len(POLICIES)} policies at N = 16: {t_all:.3f} s ({len(POLICIES) * blocks / t_all:,.0f} block touches/s)")
    for policy in POLICIES:
        t, _ = best(lambda: route(trace, [16], [policy], cache_tokens=CACHE_TOKENS, service_time_s=20.0), runs=3)
        print(f"    {policy:<16} {t * 1e3:8.1f} ms")
    t_grid, _ = best(lambda: route(trace, [1, 2, 4, 8, 16], POLICIES, cache_tokens=CACHE_TOKENS, service_time_s=20.0),
                     runs=1)
    print(f"  the docs table (5 policies × N in 1,2,4,8,16): {t_grid:.3f} s")


if __name__ == "__main__":
    main()

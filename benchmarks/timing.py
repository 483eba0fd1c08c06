"""Shared timing helper of the benchmark scripts (run them as `python benchmarks/bench_*.py`)."""

from __future__ import annotations

import time


def best(func, runs: int = 5) -> tuple[float, object]:
    """Best wall-clock seconds of ``runs`` calls of ``func``, and the last call's value."""
    times, value = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - t0)
    return min(times), value

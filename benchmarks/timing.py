"""Shared timing helper of the benchmark scripts (run them as `python benchmarks/bench_*.py`)."""

from __future__ import annotations

import os
import subprocess
import time


def best(func, runs: int = 5) -> tuple[float, object]:
    """Best wall-clock seconds of ``runs`` calls of ``func``, and the last call's value."""
    times, value = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - t0)
    return min(times), value


def best_cpu(func, runs: int = 5) -> tuple[float, float, object]:
    """Best wall-clock and best CPU seconds (this process) of ``runs`` calls, and the last value.

    On a shared machine the wall clock includes waiting for a core; the CPU time is what the call costs.
    """
    walls, cpus, value = [], [], None
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        value = func()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), value


def process_seconds(cmd: list[str], env: dict | None = None, cwd=None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process (os.wait4: this child's own usage); exits on failure."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime

"""Benchmark: `kvplan sweep` over a grid of >= 1M points.

Grid: 5 models × 2 GPUs × 100 seq × 100 batch × 2 KV dtypes × 5 tp = 1,000,000 points (some
(model, tp) combinations are skipped by the engines' divisibility rules; the figures count
the points evaluated). Three measurements:

- evaluation: ``kvplan.plans.check.sweep.sweep`` (size + fit + decode-latency columns for every point),
  with and without the latency columns;
- the whole command in a fresh process (``python -m kvplan sweep GRID -o out.csv``): start-up,
  evaluation and writing the CSV;
- peak memory: tracemalloc peak of the evaluation, and the command's max RSS (getrusage).

Run: python benchmarks/bench_sweep.py  (prints figures; nothing is asserted)
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

GRID = """\
models: [llama-3.1-8b, llama-3.1-70b, qwen3-32b, mixtral-8x7b, deepseek-v3]
hardware: [h100-sxm, h200]
seq: {{start: 1k, stop: 32k, num: 100}}
batch: {{start: 1, stop: 100, num: 100}}
kv_dtype: [bf16, fp8]
tp: [1, 2, 4, 8, 16]
latency: {latency}
"""


def evaluate(path: Path, label: str) -> None:
    from kvplan.plans.check.sweep import load_grid, sweep

    grid = load_grid(path)
    sweep(grid)  # warm caches (card files, imports)
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        result = sweep(grid)
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    tracemalloc.start()
    result = sweep(grid)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"evaluation ({label}): {result.rows:,} points of {grid.points:,} "
          f"({result.skipped_points:,} skipped) in {best:.3f} s = {result.rows / best / 1e6:.2f} M points/s; "
          f"tracemalloc peak {peak / 2**20:,.1f} MiB")


def command(path: Path, out: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "kvplan", "sweep", str(path), "-o", str(out)],
                         capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rows = sum(1 for _ in out.open()) - 1
    print(f"whole command (process start-up + evaluation + CSV): {rows:,} rows in {elapsed:.2f} s = "
          f"{rows / elapsed / 1e6:.3f} M points/s; CSV {out.stat().st_size / 2**20:,.0f} MiB; "
          f"max RSS {max(rss, before) / 1024:,.0f} MiB")
    print("  " + run.stderr.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with_latency, without = Path(tmp) / "grid.yaml", Path(tmp) / "grid-nolat.yaml"
        with_latency.write_text(GRID.format(latency="true"))
        without.write_text(GRID.format(latency="false"))
        evaluate(without, "size + fit columns")
        evaluate(with_latency, "size + fit + decode latency columns")
        command(with_latency, Path(tmp) / "out.csv")


if __name__ == "__main__":
    main()

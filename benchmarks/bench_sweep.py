"""Benchmark: `kvplan sweep` end to end on a 4M-point grid, to CSV and to Parquet.

Grid (all points valid): 2 models × 2 GPUs × 1,000 lengths × 100 batches × 2 KV dtypes × 5 TPs
= 4,000,000 points, with the decode-latency columns. Each format runs the whole command in a
fresh process (``python -m kvplan sweep GRID -o out.csv|out.parquet``: start-up, evaluation,
formatting, writing) and prints:

- points per second of wall time, and per second of CPU time (user + system of the process;
  on a shared machine the wall figure includes the time other processes held the cores);
- the process's peak RSS (getrusage of the child), the file size;
- the load average at the start, for context.

Output goes to a RAM-backed directory (/dev/shm) when there is one, so that the figures
measure kvplan rather than the disk; ``--disk`` writes beside the system's temporary directory
instead (then a CSV of ~800 MB is bounded by the disk's write rate).
An in-process figure for the evaluation alone (no writing) comes first. kvplan's bytecode is
written first (as an install does; see bench_size.compile_package), so that start-up measures
kvplan rather than the compiler under ``PYTHONDONTWRITEBYTECODE=1``.

Run: python benchmarks/bench_sweep.py [--disk] [--points-scale 0.1] [--runs 3] [--format csv|parquet|both]
(prints figures; nothing asserted)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID = """\
models: [llama-3.1-8b, llama-3.1-70b]
hardware: [h100-sxm, h200]
seq: {{start: 1k, stop: 32k, num: {lengths}}}
batch: {{start: 1, stop: 100, num: 100}}
kv_dtype: [bf16, fp8]
tp: [1, 2, 4, 8, 16]
"""


def evaluate(path: Path) -> None:
    from kvplan.plans.check.sweep import sweep_stream

    t0, c0 = time.perf_counter(), time.process_time()
    rows = sum(block.rows for block in sweep_stream(path))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"evaluation only (in process, no writing): {rows:,} points in {wall:.2f} s wall / {cpu:.2f} s CPU "
          f"= {rows / wall / 1e6:.2f} M points/s wall, {rows / cpu / 1e6:.2f} M points/s CPU")


def run_once(path: Path, out: Path) -> tuple[int, float, float, float, int]:
    """(rows, wall s, CPU s, peak RSS MiB, file bytes) of one ``kvplan sweep`` process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([sys.executable, "-m", "kvplan", "sweep", str(path), "-o", str(out)],
                                 stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU time and peak RSS
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        err.seek(0)
        stderr = err.read()
    if child.returncode != 0:
        raise SystemExit(stderr)
    last = stderr.strip().splitlines()[-1]
    rows = int(last.split(": ", 1)[1].split(" rows", 1)[0].replace(",", ""))
    size = out.stat().st_size
    out.unlink()
    return rows, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, size


def command(path: Path, out: Path, runs: int = 1) -> None:
    """The best wall and the best CPU time of ``runs`` runs (each its own figure: on a shared machine
    the wall clock also counts the time other processes held the cores)."""
    results = [run_once(path, out) for _ in range(runs)]
    rows = results[0][0]
    wall, cpu = min(r[1] for r in results), min(r[2] for r in results)
    rss, size = max(r[3] for r in results), results[0][4]
    print(f"{out.suffix[1:]:>7}: {rows:,} points in {wall:.2f} s wall / {cpu:.2f} s CPU = "
          f"{rows / wall / 1e6:.2f} M points/s wall, {rows / cpu / 1e6:.2f} M points/s CPU"
          f"{f' (best of {runs})' if runs > 1 else ''}; peak RSS {rss:,.0f} MiB; file {size / 2**20:,.0f} MiB; "
          f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--disk", action="store_true", help="write to the temporary directory, not /dev/shm")
    parser.add_argument("--points-scale", type=float, default=1.0, help="fraction of the 1,000 lengths")
    parser.add_argument("--runs", type=int, default=1, help="runs per format (best wall, best CPU)")
    parser.add_argument("--format", choices=["csv", "parquet", "both"], default="both")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_size import compile_package

    compile_package()
    base = None if args.disk or not Path("/dev/shm").is_dir() else "/dev/shm"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; output in {base or tempfile.gettempdir()}")
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        grid = Path(tmp) / "grid.yaml"
        grid.write_text(GRID.format(lengths=max(1, int(1000 * args.points_scale))))
        evaluate(grid)
        for suffix in ("csv", "parquet") if args.format == "both" else (args.format,):
            command(grid, Path(tmp) / f"out.{suffix}", max(1, args.runs))


if __name__ == "__main__":
    main()

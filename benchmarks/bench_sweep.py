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

``--stages`` adds the CPU seconds of each stage of the Parquet path, each the best of a few runs
(start-up: the imports of a fresh interpreter; then, in process, one block at a time as the command
runs them, each block and table dropped once written: the per-combination setup up to the first
block, the evaluation, the Arrow tables, the Parquet encoder), and the wall-clock floor
they imply on this machine's cores: the start-up and setup run first, alone; evaluation, tables and
encoding overlap (three threads), so they take at least max(encoder, their sum / cores).

Run: python benchmarks/bench_sweep.py [--disk] [--points-scale 0.1] [--runs 3] [--format csv|parquet|both] [--stages]
(prints figures; nothing asserted)
"""

from __future__ import annotations

import argparse
import math
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


# what the command imports before its first block (pyarrow's core Parquet writer, not pyarrow.parquet), with the
# cyclic garbage collector paused as the command's start-up has it (kvplan.cli.main)
STARTUP_IMPORTS = ("import gc; gc.disable(); import kvplan.cli, kvplan.cli.sweep, kvplan.plans.check.sweep, "
                   "kvplan.plans.check.sweep_write, kvplan.plans.sizing.perfmodel, kvplan.plans.sizing.latency_ops, "
                   "pyarrow._parquet")


# the command line runs numpy's OpenBLAS with one thread (kvplan.cli.main); the stages run as it does
CLI_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


def _child_cpu(code: str, runs: int = 5) -> float:
    """Best CPU seconds (user + system) of ``python -c code`` over ``runs`` fresh processes."""
    best = math.inf
    for _ in range(runs):
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=CLI_ENV)
        _, _, usage = os.wait4(child.pid, 0)
        best = min(best, usage.ru_utime + usage.ru_stime)
    return best


def _stage_child(path: Path, out: Path) -> None:
    """One pass of the Parquet path's stages in this (fresh) process, its malloc set as the command sets it;
    prints their CPU seconds as JSON."""
    import json

    from kvplan.cli.sweep import _one_malloc_arena
    from kvplan.plans.check.sweep import sweep_stream
    from kvplan.plans.check.sweep_format import ColumnCache, block_table
    from kvplan.plans.check.sweep_write import parquet_schema, parquet_writer

    c0 = time.process_time()
    stream = sweep_stream(path)
    stream.empty()
    _one_malloc_arena()  # where the command sets it: after the set-up, before the threads
    setup = time.process_time() - c0
    schema = parquet_schema(stream)  # the command's schema (nullable cache columns only where it has them)
    cache = ColumnCache()  # as the command's writer shares repeated columns between blocks
    writer = parquet_writer(str(out), schema, stream.column_names)
    # one block at a time, each dropped once written, as the command holds only the few in flight: holding every
    # block and table first would count the page faults of memory the command reuses (~0.15 s more "tables")
    spent, rows, blocks = {"evaluation": 0.0, "tables": 0.0, "encoder": 0.0}, 0, iter(stream)
    while True:
        c1 = time.process_time()
        block = next(blocks, None)
        c2 = time.process_time()
        spent["evaluation"] += c2 - c1
        if block is None:
            break
        table = block_table(block, schema, cache)
        c3 = time.process_time()
        writer.write_table(table)
        spent["tables"] += c3 - c2
        spent["encoder"] += time.process_time() - c3
        rows += block.rows
        del block, table
    c4 = time.process_time()
    writer.close()
    spent["encoder"] += time.process_time() - c4
    print(json.dumps({"rows": rows, "setup": setup, **spent}))


def stages(path: Path, out: Path, runs: int = 3) -> None:
    """CPU seconds per stage of the Parquet path (each the best of ``runs`` fresh processes) and the floor."""
    import json

    interpreter, startup = _child_cpu("pass"), _child_cpu(STARTUP_IMPORTS)
    best = {"setup": math.inf, "evaluation": math.inf, "tables": math.inf, "encoder": math.inf}
    for _ in range(runs):
        text = subprocess.run([sys.executable, __file__, "--stage-child", str(path), str(out)], check=True,
                              capture_output=True, text=True, env=CLI_ENV).stdout
        figures = json.loads(text.strip().splitlines()[-1])
        rows = figures.pop("rows")
        for key, value in figures.items():
            best[key] = min(best[key], value)
    out.unlink()
    cores = os.cpu_count() or 1
    serial = startup + best["setup"]
    overlapped = best["evaluation"] + best["tables"] + best["encoder"]
    floor = serial + max(best["encoder"], overlapped / cores)
    print(f"stages (CPU s, best of {runs} fresh processes): interpreter alone {interpreter:.2f}; start-up imports "
          f"{startup:.2f} (interpreter included); " + "; ".join(f"{k} {v:.2f}" for k, v in best.items()))
    print(f"floor on {cores} idle cores: {serial:.2f} s alone + max(encoder {best['encoder']:.2f}, "
          f"{overlapped:.2f} / {cores}) = {floor:.2f} s wall = {rows / floor / 1e6:.2f} M points/s; "
          f"5M points/s would need {rows / 5e6:.2f} s")


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
    parser.add_argument("--stages", action="store_true", help="CPU seconds per stage of the Parquet path, and the floor")
    parser.add_argument("--stage-child", nargs=2, metavar=("GRID", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage_child:
        return _stage_child(Path(args.stage_child[0]), Path(args.stage_child[1]))
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
        if args.stages:  # after the commands: a forked child's peak RSS counts this process's pages until exec
            stages(grid, Path(tmp) / "stages.parquet")


if __name__ == "__main__":
    main()

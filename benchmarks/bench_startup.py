"""Benchmark: ``kvplan latency`` start-up as a whole process, per-operator model versus roofline.

Run: python benchmarks/bench_startup.py [--base DIR] [--runs 9] [--bytecode] [--instructions]
Prints wall-clock and CPU-time figures; nothing here is asserted (tests check the answers).

Each run is one process, ``python -m kvplan latency llama-3.1-70b h200 --tp 8 --quiet`` (the default
per-operator model, then ``--perf-model roofline``), with PYTHONPATH set to the checkout timed and
OPENBLAS_NUM_THREADS=1. With ``--base`` (another checkout, e.g. a worktree of an older commit) the two
checkouts alternate run by run, so a machine whose speed drifts slows both alike; the figure is the best of
``--runs``. ``--bytecode`` lets Python write and reuse compiled modules (in a temporary PYTHONPYCACHEPREFIX,
nothing written into the checkouts), as an installed package does; without it the environment decides
(PYTHONDONTWRITEBYTECODE=1 compiles every module at every start). ``--instructions`` also counts each process's
instructions once under valgrind's callgrind (PYTHONHASHSEED=0): slow (~50x), but a machine shared with other
work does not move the count, where it moves the wall clock and CPU time by tens of ms.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import process_seconds

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["latency", "llama-3.1-70b", "h200", "--tp", "8", "--quiet"]
MODELS = {"per-operator": [], "roofline": ["--perf-model", "roofline"]}


def once(tree: Path, extra: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one process."""
    return process_seconds([sys.executable, "-m", "kvplan", *COMMAND, *extra], {**env, "PYTHONPATH": str(tree)},
                           cwd=tree)


def startup(trees: list[Path], runs: int = 9, bytecode: bool = False) -> dict:
    """{(tree, model): (best wall seconds, best CPU seconds) of ``runs``}, the trees and models alternating run by
    run."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as cache:
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        times: dict = {}
        for tree in trees:                           # one untimed run each: the page cache (and bytecode) warm
            for extra in MODELS.values():
                once(tree, extra, env)
        for _ in range(runs):
            for tree in trees:
                for model, extra in MODELS.items():
                    times.setdefault((tree, model), []).append(once(tree, extra, env))
    return {key: (min(w for w, _ in values), min(c for _, c in values)) for key, values in times.items()}


def instructions(trees: list[Path], bytecode: bool = False) -> dict:
    """{(tree, model): instructions executed by one process (callgrind's "Collected")}; {} without valgrind."""
    if shutil.which("valgrind") is None:
        return {}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        if bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        for tree in trees:
            for model, extra in MODELS.items():
                once(tree, extra, env)                   # bytecode written (where asked) before the count
                run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                                      sys.executable, "-m", "kvplan", *COMMAND, *extra],
                                     env={**env, "PYTHONPATH": str(tree)}, cwd=tree, check=True,
                                     capture_output=True, text=True)
                out[(tree, model)] = int(re.search(r"Collected : (\d+)", run.stderr).group(1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="another checkout to time against this one, run for run")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--bytecode", action="store_true", help="compiled modules written and reused (temporary cache)")
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind (slow)")
    args = ap.parse_args()
    trees = [args.base.resolve(), ROOT] if args.base else [ROOT]
    best = startup(trees, args.runs, args.bytecode)
    how = "bytecode cached" if args.bytecode else "environment's bytecode setting"
    print(f"kvplan {' '.join(COMMAND)}: best of {args.runs} whole processes ({how}); wall clock, and CPU time "
          "(user + system: less moved by other work on a shared machine)")
    for tree in trees:
        for i, what in enumerate(("wall", "CPU")):
            op, roof = best[(tree, "per-operator")][i], best[(tree, "roofline")][i]
            print(f"  {tree} {what:>4}: per-operator {op * 1e3:.0f} ms, roofline {roof * 1e3:.0f} ms, "
                  f"gap {(op - roof) * 1e3:+.0f} ms ({op / roof - 1:+.1%})")
    counts = instructions(trees, args.bytecode) if args.instructions else {}
    for tree in trees if counts else []:
        op, roof = counts[(tree, "per-operator")], counts[(tree, "roofline")]
        print(f"  {tree} instructions: per-operator {op / 1e6:,.0f} M, roofline {roof / 1e6:,.0f} M, "
              f"gap {(op - roof) / 1e6:+,.0f} M ({op / roof - 1:+.1%})")


if __name__ == "__main__":
    main()

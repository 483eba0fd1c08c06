"""Benchmark: `kvplan size` start-up and vectorised size/fit evaluation over a million grid points.

Run: python benchmarks/bench_size.py [--startup-only]  (writes kvplan's __pycache__ first, as an install does)
Prints figures, among them the start-up ratio to the bare imports; nothing here is asserted.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import numpy as np

from kvplan.calc.kv import kv_layout
from kvplan.calc.memory import num_blocks
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile
from timing import process_seconds


def compile_package() -> None:
    """Write kvplan's bytecode (``__pycache__``) first, as ``pip install`` does for an installed wheel.

    Under ``PYTHONDONTWRITEBYTECODE=1`` a source checkout is otherwise recompiled on every run
    (about 25 ms for the modules ``kvplan size`` loads), while the libraries it is compared with
    load their installed bytecode: the ratio would measure the compiler, not kvplan.
    """
    import compileall
    from pathlib import Path

    import kvplan

    compileall.compile_dir(str(Path(kvplan.__file__).parent), quiet=1)


def startup(runs: int = 9, model: str = "llama-3.1-70b") -> None:
    """``kvplan size`` (table, the default format) against the bare imports it needs.

    Bare imports: ``import typer, numpy, yaml; from pydantic import BaseModel, Field`` in a fresh
    interpreter, the libraries the command cannot do without (``import pydantic`` alone is lazy and
    loads none of BaseModel's machinery, so it would understate what any pydantic card needs). The ratio uses CPU time (less noisy than wall time on a
    shared machine); both are printed, as medians of ``runs`` alternating runs.

    kvplan's command line runs numpy's OpenBLAS with one thread (``OPENBLAS_NUM_THREADS=1`` unless
    the user set it): that alone makes ``import numpy`` ~55 ms cheaper here. The bare imports are
    therefore timed twice: as a plain script pays them, and with the same setting (the stricter
    baseline: the ratio to it is kvplan's own cost, its modules, typer's command and the answer).
    """
    size = [sys.executable, "-m", "kvplan", "size", model, "--seq", "128k"]
    bare = [sys.executable, "-c", "import typer, numpy, yaml; from pydantic import BaseModel, Field"]
    same = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    samples: dict[str, list[tuple[float, float]]] = {"size": [], "bare": [], "bare1": []}
    for _ in range(runs):
        samples["size"].append(process_seconds(size))
        samples["bare"].append(process_seconds(bare))
        samples["bare1"].append(process_seconds(bare, same))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in samples.items()}
    probe = ("import sys, runpy; sys.argv=['kvplan','size','llama-3.1-70b','--format','json'];"
             "import io, contextlib\n"
             "try:\n  with contextlib.redirect_stdout(io.StringIO()): runpy.run_module('kvplan', run_name='__main__')\n"
             "except SystemExit: pass\n"
             "print('pandas' in sys.modules, 'rich' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.split()
    print(f"kvplan size {model} start-up ({runs} runs, medians): {med['size'][0] * 1e3:.0f} ms wall, "
          f"{med['size'][1] * 1e3:.0f} ms CPU; bare imports (typer, numpy, yaml, pydantic.BaseModel): "
          f"{med['bare'][0] * 1e3:.0f} ms wall, {med['bare'][1] * 1e3:.0f} ms CPU; ratio "
          f"{med['size'][1] / med['bare'][1]:.2f}x CPU ({med['size'][0] / med['bare'][0]:.2f}x wall); "
          f"bare imports with OPENBLAS_NUM_THREADS={same['OPENBLAS_NUM_THREADS']} as kvplan runs them: "
          f"{med['bare1'][1] * 1e3:.0f} ms CPU, ratio {med['size'][1] / med['bare1'][1]:.2f}x CPU "
          f"({med['size'][0] / med['bare1'][0]:.2f}x wall); "
          f"load average {os.getloadavg()[0]:.1f}; pandas imported: {loaded[0]}, rich imported: {loaded[1]}")


def grid(points: int = 1_000_000) -> None:
    side = int(points**0.5)
    seq = np.linspace(1, 131072, side).round()
    batch = np.arange(1, side + 1, dtype=float)
    s, b = (a.ravel() for a in np.meshgrid(seq, batch, indexing="ij"))
    for model, engine in (("llama-3.1-70b", "vllm"), ("gemma-2-9b", "vllm"), ("deepseek-v3", "sglang"),
                          ("qwen3-next-80b-a3b", "vllm")):
        lay = kv_layout(load_model(model), get_profile(engine), "auto", tp=1)
        t0 = time.perf_counter()
        total = lay.sequence_bytes(s, per_gpu=True) * b
        t_size = time.perf_counter() - t0
        budget = np.full_like(s, 60e9)
        block = (lay.block_size or 1) * lay.bytes_per_token_per_gpu
        t0 = time.perf_counter()
        blocks = num_blocks(budget, block)
        conc = blocks * block / lay.sequence_bytes(s, per_gpu=True)
        fits = conc >= b
        max_ctx = lay.max_sequence_len(budget, b, upper=131072)
        t_fit = time.perf_counter() - t0
        n = s.size
        print(f"{model:20s} {engine:7s} {n:,} points: size {n / t_size / 1e6:7.1f} M points/s, "
              f"fit (blocks, concurrency, max context by bisection) {n / t_fit / 1e6:6.2f} M points/s "
              f"[check: {int(fits.sum()):,} fit, total {total.sum():.3e} B, max ctx mean {max_ctx.mean():,.0f}]")


if __name__ == "__main__":
    compile_package()
    startup()
    startup(model="meta-llama/Llama-3.1-70B-Instruct")  # a Hugging Face repo id: found through the card aliases
    if "--startup-only" not in sys.argv:
        grid()

"""Benchmark: `kvplan size` start-up and vectorised size/fit evaluation over a million grid points.

Run: python benchmarks/bench_size.py
Prints wall-clock figures; nothing here is asserted (see tests for correctness).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np

from kvplan.calc.kv import kv_layout
from kvplan.calc.memory import num_blocks
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile


def startup(runs: int = 7) -> None:
    cmd = [sys.executable, "-m", "kvplan", "size", "llama-3.1-70b", "--seq", "128k", "--format", "json"]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    probe = ("import sys, runpy; sys.argv=['kvplan','size','llama-3.1-70b','--format','json'];"
             "import io, contextlib\n"
             "try:\n  with contextlib.redirect_stdout(io.StringIO()): runpy.run_module('kvplan', run_name='__main__')\n"
             "except SystemExit: pass\n"
             "print('pandas' in sys.modules)")
    pandas_loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    print(f"kvplan size start-up (process, {runs} runs): median {statistics.median(times) * 1e3:.0f} ms, "
          f"min {min(times) * 1e3:.0f} ms; pandas imported: {pandas_loaded}")


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
    startup()
    grid()

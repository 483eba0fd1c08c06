"""Benchmark: roofline latency over large grids (points/s).

Run: python benchmarks/bench_latency.py
Prints wall-clock figures (best of several runs); nothing here is asserted (see tests for correctness).

1. Decode step over a (batch, context, TP) grid of 256 × 1,024 × 4 = 1,048,576 points, one
   vectorised call per model (TP varies inside the arrays; KV layouts resolve once per TP value).
2. Whole requests (TTFT = prefill + first decode step, mean TPOT over the output, end to end) over a
   (batch, ISL, OSL, TP) grid of 65,536 points: each point integrates its output over 65 contexts.
3. The ``latency`` plan end to end (cards, rows, explain) for a 3 × 3 × 3 × 2 product.
4. The per-operator model (measured kernel tables for H200, TensorRT-LLM) over the same decode grid, and the
   MoE step with attention DP + expert parallelism over a 1,024 × 1,024 (batch, context) grid.
5. ``kvplan latency`` as a command (process start-up included), per-operator and roofline (best of 9, the two
   alternating; ``benchmarks/bench_startup.py --base <older checkout>`` compares two checkouts run for run).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvplan.calc.roofline import Machine, decode_step, mean_over_output, model_cost, prefill
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile
from kvplan.plans.build import latency_from_names
from timing import best

ROOT = Path(__file__).resolve().parents[1]

H200 = Machine(name="h200", compute_dtype="bf16", bandwidth_bytes_per_s=4.8e12, peak_flops_per_s=989.5e12,
               eta_mem=0.8, eta_flops=0.75, step_overhead_s=723e-6, scale_up_bytes_per_s=450e9,
               scale_up_latency_s=10e-6, scale_up_domain=8)
TPS = np.array([1, 2, 4, 8])



def bench_decode_grid(name: str) -> None:
    cost = model_cost(load_model(name), get_profile("vllm"), tps=TPS)
    batch = np.arange(1, 257, dtype=np.float64)[:, None, None]
    context = np.round(np.geomspace(128, 131_072, 1024))[None, :, None]
    tp = TPS[None, None, :]
    points = batch.size * context.size * tp.size
    seconds, step = best(lambda: decode_step(cost, H200, batch, context, tp=tp))
    bound = step.bound
    print(f"{name}: decode step over {points:,} (batch, context, TP) points: {seconds * 1e3:.0f} ms "
          f"({points / seconds:,.0f} points/s); memory-bound {np.mean(bound == 'memory'):.1%}, "
          f"compute-bound {np.mean(bound == 'compute'):.1%}, communication-bound "
          f"{np.mean(bound == 'communication'):.1%}")


def bench_requests(name: str) -> None:
    cost = model_cost(load_model(name), get_profile("vllm"), tps=TPS)
    batch = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=np.float64)[:, None, None, None]
    isl = np.round(np.geomspace(128, 32_768, 32))[None, :, None, None]
    osl = np.round(np.geomspace(16, 4096, 64))[None, None, :, None]
    tp = TPS[None, None, None, :]
    b, s, o, t = np.broadcast_arrays(batch, isl, osl, tp)
    b, s, o, t = (x.ravel() for x in (b, s, o, t))

    def run():
        ttft = prefill(cost, H200, b, s, tp=t).time_s + decode_step(cost, H200, b, s, tp=t).time_s
        tpot = mean_over_output(lambda c: decode_step(cost, H200, b[:, None], c, tp=t[:, None]).time_s, s, o)
        return ttft + (o - 1) * tpot

    seconds, e2e = best(run, runs=2)
    print(f"{name}: whole requests over {b.size:,} (batch, ISL, OSL, TP) points (65 contexts each): "
          f"{seconds * 1e3:.0f} ms ({b.size / seconds:,.0f} requests/s, {b.size * 65 / seconds:,.0f} steps/s); "
          f"median e2e {np.median(e2e):.2f} s")


def bench_plan() -> None:
    seconds, result = best(lambda: latency_from_names("llama-3.1-70b", "h200", isl=[1024, 4096, 16384], osl=[128,
                                                      512, 2048],
                                                      batch=[1, 16, 128], tp=[4, 8]))
    print(f"latency plan: {len(result.rows)} rows with explain in {seconds * 1e3:.0f} ms")


def bench_operator_grid(name: str) -> None:
    from kvplan.calc.operators import Parallel
    from kvplan.cards.loader import load_hardware
    from kvplan.plans.sizing.latency_ops import load_tables
    from kvplan.plans.sizing.perfmodel import operator_model

    card, hw = load_model(name), load_hardware("h200")
    cost = model_cost(card, get_profile("trtllm"), tps=TPS)
    notes: list[str] = []
    fn, _effs, _clamped = operator_model(card, hw, cost, H200, "trtllm", False, False, Parallel(), notes,
                                         load_tables(), tps=list(TPS))
    batch = np.arange(1, 257, dtype=np.float64)[:, None, None]
    context = np.round(np.geomspace(128, 131_072, 1024))[None, :, None]
    tp = TPS[None, None, :]
    points = batch.size * context.size * tp.size
    seconds, _step = best(lambda: decode_step(cost, H200, batch, context, tp=tp, pass_fn=fn))
    print(f"{name}: per-operator decode step (H200 kernel tables, 4 TP sizes) over {points:,} points: "
          f"{seconds * 1e3:.0f} ms ({points / seconds:,.0f} points/s)")


def bench_operator_grid_ep(name: str, dp: int, weights_dtype: str) -> None:
    """The per-operator MoE step with attention DP + expert parallelism (EP = dp) over a (batch, context) grid."""
    from kvplan.calc.operators import Parallel
    from kvplan.cards.loader import load_hardware
    from kvplan.plans.sizing.latency_ops import load_tables
    from kvplan.plans.sizing.perfmodel import operator_model

    card, hw = load_model(name), load_hardware("h200")
    cost = model_cost(card, get_profile("trtllm"), weights_dtype, "fp8", tps=[1])
    notes: list[str] = []
    par = Parallel(tp=1, dp=dp, expert_parallel=True)
    fn, _effs, _clamped = operator_model(card, hw, cost, H200, "trtllm", False, False, par, notes, load_tables(),
                                         tps=[1])
    batch = (np.arange(1, 1025, dtype=np.float64) * dp)[:, None]
    context = np.round(np.geomspace(128, 131_072, 1024))[None, :]
    points = batch.size * context.size
    seconds, _step = best(lambda: decode_step(cost, H200, batch, context, tp=1, ep=dp, pass_fn=fn))
    print(f"{name}: per-operator decode step, attention DP {dp} + EP {dp} (H200 tables, {weights_dtype}, fp8 KV) over "
          f"{points:,} (batch, context) points: {seconds * 1e3:.0f} ms ({points / seconds:,.0f} points/s)")


def bench_command() -> None:
    """``kvplan latency`` as a command, per-operator and roofline, alternating run by run (bench_startup.py)."""
    from bench_startup import COMMAND, startup

    best = startup([ROOT], runs=9)
    for model in ("per-operator", "roofline"):
        wall, cpu = best[(ROOT, model)]
        print(f"kvplan {' '.join(COMMAND[:-1])} ({model}): {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU, process "
              "start-up included (best of 9)")


def main() -> None:
    for name in ("llama-3.1-70b", "mixtral-8x7b", "deepseek-v3"):
        bench_decode_grid(name)
    for name in ("llama-3.1-70b", "deepseek-v3"):
        bench_operator_grid(name)
    bench_operator_grid_ep("deepseek-v3", 8, "fp8")
    bench_operator_grid_ep("qwen3-235b-a22b", 4, "fp8")
    bench_command()
    for name in ("llama-3.1-70b", "mixtral-8x7b"):
        bench_requests(name)
    bench_plan()


if __name__ == "__main__":
    main()

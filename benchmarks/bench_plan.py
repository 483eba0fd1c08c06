"""Benchmark: trace loading and summarising (rows/s), closed-form planning, and a 10k-request simulation.

Run: python benchmarks/bench_plan.py [TRACE_DIR]   (default: examples/traces beside the repo)
Prints wall-clock figures (best of several runs); nothing here is asserted (see tests for correctness).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kvplan.plans.fleet.aggregated import FleetWorkload, Shape, parse_slo, plan_aggregated
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.sim import simulate_plan
from kvplan.workload.summary import summarise
from kvplan.workload.traces import read_trace
from timing import best, best_cpu

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("AzureLLMInferenceTrace_conv.csv", "AzureLLMInferenceTrace_code.csv", "conversation_trace.jsonl")
SLOS = [parse_slo("ttft", "p99<=2s"), parse_slo("tpot", "p90<=50ms")]



def bench_traces(directory: Path) -> None:
    for name in TRACES:
        path = directory / name
        if not path.exists():
            print(f"{path}: absent, skipped")
            continue
        t_load, trace = best(lambda: read_trace(path))
        t_sum, _ = best(lambda: summarise(trace))
        t_stats, workload = best(lambda: FleetWorkload.from_trace(trace))
        n = trace.requests
        print(f"{name}: {n:,} requests; load {t_load * 1e3:.0f} ms ({n / t_load:,.0f} rows/s); summarise "
              f"{t_sum * 1e3:.1f} ms ({n / t_sum:,.0f} rows/s); plan statistics {t_stats * 1e3:.1f} ms")
        if name.endswith("conv.csv"):
            t_plan, plan = best(lambda: plan_aggregated("llama-3.1-8b", "h100-sxm", workload, SLOS))
            print(f"  closed-form plan (llama-3.1-8b on h100-sxm): {t_plan * 1e3:.0f} ms → {plan.instances} instance(s)")
            t_sim, sim = best(lambda: simulate_plan(plan, workload, None), runs=2)
            print(f"  simulation of the whole trace: {t_sim:.2f} s ({sim.requests / t_sim:,.0f} requests/s, "
                  f"{sim.steps:,} steps, {sim.mixed_steps:,} with prefill)")


def bench_simulation(requests: int = 10_000) -> None:
    for qps, isl, osl, model, tp in ((20, "1k:4k", "200:800", "llama-3.1-8b", 1), (400, "256", "512", "llama-3.1-70b", 8)):
        workload = fleet_workload(qps=qps, isl=isl, osl=osl)
        t_plan, plan = best(lambda: plan_aggregated(model, "h100-sxm", workload, SLOS, Shape(tp=tp)))
        t_sim, c_sim, sim = best_cpu(lambda: simulate_plan(plan, workload, requests, seed=0), runs=2)
        print(f"{model} tp{tp} at {qps} req/s (ISL {isl}, OSL {osl}): plan {t_plan * 1e3:.0f} ms → {plan.instances} "
              f"instance(s); {requests:,}-request simulation {t_sim:.2f} s wall, {c_sim:.2f} s CPU "
              f"({requests / t_sim:,.0f} requests/s, "
              f"{sim.steps:,} steps, {sim.mixed_steps:,} with prefill)")


def bench_search() -> None:
    """A plan with the parallelism search (TP 1, 2, 4, 8): the closed-form search alone, the workload built once.

    The first call of a process also resolves the per-kernel tables (cached per GPU, dtype and shape
    for the later ones): both are printed."""
    from kvplan.cards.loader import load_hardware, load_model
    from kvplan.plans.fleet.search import search_shapes

    card, hw = load_model("llama-3.1-70b"), load_hardware("h100-sxm")
    for qps, sample in ((20, 100_000), (20, 20_000)):
        t_work, workload = best(lambda: fleet_workload(qps=qps, isl="1k:4k", osl="200:800", sample_requests=sample),
                                runs=3)
        t_first, c_first, _ = best_cpu(lambda: search_shapes(card, hw, workload, SLOS), runs=1)
        t_search, c_search, found = best_cpu(lambda: search_shapes(card, hw, workload, SLOS), runs=3)
        print(f"plan with search, llama-3.1-70b on h100-sxm at {qps} req/s ({sample:,}-request length sample): "
              f"search {t_search:.2f} s wall, {c_search:.2f} s CPU (first call {t_first:.2f} s wall, "
              f"{c_first:.2f} s CPU) over {len(found.candidates)} shapes → "
              f"tp={found.best.shape.tp}, {found.best.total_gpus} GPUs; workload sample {t_work:.2f} s")
    # a MoE model: TP, and attention DP × EP up to 32 GPUs (multi-node over the NIC), on the usual system
    from kvplan.cards.loader import load_system

    card, hw, system = load_model("deepseek-v3"), load_hardware("h200"), load_system("hgx-h200-8")
    slos = [parse_slo("ttft", "p99<=3s"), parse_slo("tpot", "p99<=60ms")]
    t_work, workload = best(lambda: fleet_workload(qps=10, isl="8k", osl="1k", sample_requests=100_000), runs=3)
    t_first, c_first, _ = best_cpu(lambda: search_shapes(card, hw, workload, slos, system=system), runs=1)
    t_search, c_search, found = best_cpu(lambda: search_shapes(card, hw, workload, slos, system=system), runs=3)
    print(f"plan with search, deepseek-v3 on h200 (hgx-h200-8) at 10 req/s, 8k/1k: search {t_search:.2f} s wall, "
          f"{c_search:.2f} s CPU (first call {t_first:.2f} s wall, {c_first:.2f} s CPU) over "
          f"{len(found.candidates)} TP/DP/EP shapes → {found.best.shape.label()}, "
          f"{found.best.total_gpus} GPUs; workload sample {t_work:.2f} s")


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces"
    bench_search()
    bench_traces(directory)
    bench_simulation()


if __name__ == "__main__":
    main()

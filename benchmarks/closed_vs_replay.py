"""Closed form vs discrete-event replay on the three shipped real traces at three loads (docs/closed-form-vs-replay.md).

Run: python benchmarks/closed_vs_replay.py [TRACE_DIR]   (default: examples/traces beside the repo)

For each trace and load (the trace's own rate × 1, 2, 4, by rescaling its time axis), Llama-3.1-8B
on one H100 per instance (TP 1, vLLM defaults), SLOs TTFT p99 <= 2 s (10 s on Mooncake's
12k-token prompts) and TPOT p90 <= 50 ms: the closed form's fewest instances N, then the whole
trace replayed through those N instances. Prints one markdown row per (trace, load): TTFT and
TPOT p50 / p90 / p99, closed form / replay, and the N the replay sizes (``kvplan plan`` with a
trace: :mod:`kvplan.plans.fleet.replay`); then, per percentile, the closed form's error
(closed − replay) / replay over the rows as median |error| / median signed error (bias) / p90 of |error|.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from pathlib import Path

from kvplan.plans.fleet.aggregated import Shape, parse_slo, plan_aggregated
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.plans.fleet.replay import replay_until_met
from kvplan.sim import simulate_plan

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv", "conversation_trace.jsonl")
SLOS = {name: [parse_slo("ttft", "p99<=10s" if name.endswith(".jsonl") else "p99<=2s"), parse_slo("tpot", "p90<=50ms")]
        for name in TRACES}  # Mooncake's 12k-token prompts: one alone takes 4.2 s of prefill at p99
LOADS = (1, 2, 4)


def _ms(x) -> str:
    return "—" if x is None else f"{x * 1e3:,.1f}"


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces"
    print("| trace | load | rate (req/s) | N closed form | TTFT p50 | TTFT p90 | TTFT p99 | TPOT p50 | TPOT p90 | "
          "TPOT p99 | N by replay |")
    print("|---|---:|---:|---:|---|---|---|---|---|---|---:|")
    errors: dict[str, list[float]] = {}
    for name in TRACES:
        base = fleet_workload(trace=directory / name)
        for load in LOADS:
            workload = fleet_workload(trace=directory / name, qps=base.rate_per_s * load) if load != 1 else base
            t0 = time.perf_counter()
            plan = plan_aggregated("llama-3.1-8b", "h100-sxm", workload, SLOS[name], Shape(1))
            if plan.instances is None:
                print(f"| {name} | ×{load} | {workload.rate_per_s:.3g} | — | infeasible: {plan.reason} |")
                continue
            sim = simulate_plan(plan, workload, None).stats()
            cells = []
            for kind, closed in (("ttft", plan.ttft), ("tpot", plan.tpot)):
                for s in ("p50", "p90", "p99"):
                    cells.append(f"{_ms(closed.get(s))} / {_ms(sim[f'sim_{kind}_{s}_s'])}")
                    replayed = sim[f"sim_{kind}_{s}_s"]
                    errors.setdefault(f"{kind.upper()} {s}", []).append((closed[s] - replayed) / replayed)
            sized = replay_until_met(plan, workload, None).instances
            print(f"| {name} | ×{load} | {workload.rate_per_s:.3g} | {plan.instances} | " + " | ".join(cells)
                  + f" | {sized if sized is not None else 'none ≤ 16N + 64'} |   <!-- {time.perf_counter() - t0:.1f} s -->")
    print("\n| percentile | median \\|error\\| / bias / p90 of \\|error\\| |\n|---|---|")
    for name, values in errors.items():
        e = np.array(values)
        print(f"| {name} | {np.median(np.abs(e)):.0%} / {np.median(e):.0%} / {np.percentile(np.abs(e), 90):.0%} |")


if __name__ == "__main__":
    main()

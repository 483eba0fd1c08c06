"""One arrival-burstiness estimator, picked by the replay: closed-form TTFT vs kvplan's own simulator.

Run: python benchmarks/burstiness.py   (about a minute; docs/closed-form-vs-replay.md, "Arrival burstiness")

The closed-form fleet model reads a trace's burstiness as one number, the arrival SCV ca²
(:mod:`kvplan.plans.fleet.model`: Allen–Cunneen, (ca² + cs²)/2). Candidate estimators of ca² from
the arrival times t (λ = (n − 1) / (t_n − t_1)):

- ``gaps``: Var(g) / E[g]² of the inter-arrival gaps g (ties, several requests in one timestamp
  tick, count as zero gaps) — :func:`kvplan.workload.summary.arrival_scv`;
- ``gaps, ties spread``: requests sharing a timestamp spread evenly over the tick (the smallest
  positive gap) before taking the gaps; ``ties jittered``: spread uniformly at random (seed 0);
- ``IDC 60 s``: the index of dispersion Var(N)/E[N] of arrival counts in 60-s windows (last,
  partial window dropped);
- ``IDC 1 s``, ``IDC 5 s``: the same at shorter windows (at least two ticks);
- ``IDC 10/30/100 arrivals``: a window of m / λ seconds (at least two ticks), scale-free.

For each shipped trace (examples/traces) and load (its own rate × 1, 2, 4, by compressing the time
axis), Llama-3.1-8B on H100 SXM, TP 1, vLLM defaults, SLOs TTFT p99 <= 2 s (10 s on Mooncake) and
TPOT p90 <= 50 ms: N = the closed form's fewest instances (with ``gaps``); the whole trace replayed
through N instances (:func:`kvplan.sim.simulate_plan`) gives TTFT p50/p90/p99; each estimator's ca²
is put into the same closed form at the same N. Error = (closed − replay) / replay; the summary is
median |error|, median signed error (bias) and p90 of |error| over the nine cases. No estimator has
a parameter fitted to these cases; all nine are scoring cases.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kvplan.plans.fleet.aggregated import Shape, parse_slo, plan_aggregated
from kvplan.plans.fleet.model import FleetModel
from kvplan.plans.fleet.plan import fleet_workload
from kvplan.sim import simulate_plan
from kvplan.workload.summary import arrival_scv

ROOT = Path(__file__).resolve().parent.parent
TRACES = ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv", "conversation_trace.jsonl")
LOADS = (1, 2, 4)
STATS = ("p50", "p90", "p99")


def _tick(a: np.ndarray) -> float:
    """The timestamp tick: the smallest positive gap when >= 5% of gaps are zero, else 0 (no quantisation)."""
    g = np.diff(a)
    return float(g[g > 0].min()) if (g == 0).mean() >= 0.05 else 0.0


def _spread(a: np.ndarray, rng=None) -> np.ndarray:
    tick = _tick(a)
    if not tick:
        return a
    out = a.astype(np.float64).copy()
    _, start, count = np.unique(a, return_index=True, return_counts=True)
    for s, k in zip(start[count > 1], count[count > 1]):
        offsets = np.arange(k) * tick / k if rng is None else np.sort(rng.uniform(0, tick, k))
        out[s:s + k] = a[s] + offsets
    return np.sort(out)


def _idc(a: np.ndarray, window_s: float) -> float:
    counts = np.bincount(((a - a[0]) // max(window_s, 2 * _tick(a))).astype(np.int64))[:-1]
    return float(counts.var() / counts.mean())


def _idc_arrivals(a: np.ndarray, m: float) -> float:
    return _idc(a, m * (a[-1] - a[0]) / (a.size - 1))


ESTIMATORS = {
    "gaps": arrival_scv,
    "gaps, ties spread": lambda a: arrival_scv(_spread(a)),
    "gaps, ties jittered": lambda a: arrival_scv(_spread(a, np.random.default_rng(0))),
    "IDC 60 s": lambda a: _idc(a, 60.0),
    "IDC 1 s": lambda a: _idc(a, 1.0),
    "IDC 5 s": lambda a: _idc(a, 5.0),
    "IDC 10 arrivals": lambda a: _idc_arrivals(a, 10),
    "IDC 30 arrivals": lambda a: _idc_arrivals(a, 30),
    "IDC 100 arrivals": lambda a: _idc_arrivals(a, 100),
}


def cases(directory: Path):
    """(trace, load, N, replay TTFT {stat: s}, {estimator: (ca², closed-form TTFT {stat: s})}) per case."""
    for name in TRACES:
        slos = [parse_slo("ttft", "p99<=10s" if name.endswith(".jsonl") else "p99<=2s"), parse_slo("tpot", "p90<=50ms")]
        base = fleet_workload(trace=directory / name)
        for load in LOADS:
            workload = fleet_workload(trace=directory / name, qps=base.rate_per_s * load) if load != 1 else base
            plan = plan_aggregated("llama-3.1-8b", "h100-sxm", workload, slos, Shape(1))
            sim = simulate_plan(plan, workload, None).stats()
            replay = {s: sim[f"sim_ttft_{s}_s"] for s in STATS}
            closed = {}
            for label, estimate in ESTIMATORS.items():
                ca2 = float(estimate(workload.trace.arrival_s))
                model = FleetModel(plan.figures, workload.lengths, workload.rate_per_s, ca2, plan.slos)
                point = model.evaluate(plan.instances)
                closed[label] = (ca2, {s: float(point.ttft[s]) for s in STATS})
            yield name, load, plan.instances, replay, closed


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if np.isfinite(seconds) else "∞"


def _error(closed: float, replay: float) -> float:
    return (closed - replay) / replay if np.isfinite(closed) else np.inf


def main() -> None:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces"
    found = list(cases(directory))
    shown = ("gaps", "IDC 60 s", "gaps, ties spread")
    print("| trace | load | N | replay TTFT p50 / p90 / p99 | " + " | ".join(f"{k}: ca²; p50 / p90 / p99" for k in shown) + " |")
    print("|---|---:|---:|---|" + "---|" * len(shown))
    for name, load, n, replay, closed in found:
        cells = [f"{closed[k][0]:.3g}; " + " / ".join(_ms(closed[k][1][s]) for s in STATS) for k in shown]
        print(f"| {name} | ×{load} | {n} | " + " / ".join(_ms(replay[s]) for s in STATS) + " | " + " | ".join(cells) + " |")
    print("\nca² of every estimator (at the same load):")
    for name, load, n, replay, closed in found:
        print(f"  {name} ×{load}: " + ", ".join(f"{k} {v[0]:.3g}" for k, v in closed.items()))
    print()
    print("| estimator | " + " | ".join(f"TTFT {s}: median \\|err\\| / bias / p90" for s in STATS) + " |")
    print("|---|" + "---|" * len(STATS))
    for label in ESTIMATORS:
        cells = []
        for s in STATS:
            e = np.array([_error(closed[label][1][s], replay[s]) for *_, replay, closed in found])
            cells.append(f"{np.median(np.abs(e)):.0%} / {np.median(e):+.0%} / {np.percentile(np.abs(e), 90):.0%}")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

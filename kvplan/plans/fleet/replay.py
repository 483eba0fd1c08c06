"""The simulation decides: grow a closed-form fleet plan until its own replay meets every SLO.

The closed form (:mod:`kvplan.plans.fleet_model`) assumes renewal arrivals, a central queue for
the router and lognormal TPOT per output length; a real trace's bursts (many prompts within a
second) and heavy-tailed prompts break those assumptions, and the closed form's p99 can be
several times too low (Azure code trace, Llama-3.1-8B on H100: TPOT p99 11.8 ms closed form,
164.8 ms in the replay). When a trace or ``--simulate`` is given, the plan is therefore judged by
the discrete-event replay of :mod:`kvplan.sim`:

    N₀ = the closed form's fewest instances;
    if the replay at N₀ meets every SLO, N = N₀;
    else double the extra instances (N₀ + 1, N₀ + 2, N₀ + 4, …) until the replay meets them, then
    bisect between the last failing and the first passing count: N = the fewest that passes.

At each N the instance's batch cap and figures are the closed form's at that N (the batch the
TPOT SLO allows grows as each instance's prefill interference falls). The search stops at
``max_instances`` (the ``--max-gpus`` budget, else 16 × N₀ + 64); a plan whose replay still breaks
an SLO there is infeasible, and the reason gives the simulated and the closed-form figures.
The binding constraint is then the SLO the replay breaks at N − 1, with both figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from kvplan.units import format_seconds


@dataclass
class ReplayOutcome:
    """The replay-sized plan: instances, the replay there, and the search's trail."""

    instances: int | None
    closed_form_instances: int
    sim: object                  # SimResult at ``instances`` (or at the largest tried when none passes)
    below_sim: object | None     # SimResult at instances − 1 when it was simulated
    trail: list[tuple[int, str | None]]  # (N, first SLO broken or None) in the order tried
    failure: str | None = None   # the broken SLO at the largest N tried, when none passes


def sim_stat(sim, kind: str, stat: str) -> float:
    """A statistic (mean, p50, p99.9 …) of the replay's TTFT or TPOT samples; NaN when there are none."""
    values = sim.ttft_s if kind == "ttft" else sim.tpot_s
    if values.size == 0:
        return math.nan
    if stat == "mean":
        return float(values.mean())
    return float(np.percentile(values, float(stat[1:])))


def broken_slo(sim, slos: dict) -> str | None:
    """The first SLO (ttft, then tpot) the replay breaks, as "TPOT p99 35.6 ms > 30 ms", or None."""
    for kind in ("ttft", "tpot"):
        slo = slos.get(kind)
        if slo is None:
            continue
        value = sim_stat(sim, kind, slo.stat)
        if math.isfinite(value) and value > slo.limit_s * (1 + 1e-12):
            return f"{kind.upper()} {slo.stat} {format_seconds(value)} > {format_seconds(slo.limit_s)}"
    if sim.rejected:
        return f"{sim.rejected:,} requests never fit an instance's KV pool"
    return None


def at_instances(plan, n: int):
    """The plan re-evaluated by its closed form at ``n`` instances (a copy; the simulator reads it)."""
    point = plan.setup["model"].evaluate(n)
    return replace(plan, instances=n, point=point, ttft=point.ttft or plan.ttft, tpot=point.tpot or plan.tpot)


def replay_until_met(plan, workload, requests: int | None, seed: int = 0,
                     max_instances: int | None = None) -> ReplayOutcome:
    """Fewest instances (>= the closed form's) whose replay meets every SLO; see the module docstring."""
    from kvplan.sim import simulate_plan

    n0 = plan.instances
    limit = max_instances if max_instances is not None else 16 * n0 + 64
    results: dict[int, tuple[object, str | None]] = {}
    trail: list[tuple[int, str | None]] = []

    def run(n: int):
        if n not in results:
            sim = simulate_plan(at_instances(plan, n), workload, requests, seed)
            results[n] = (sim, broken_slo(sim, plan.slos))
            trail.append((n, results[n][1]))
        return results[n]

    if run(n0)[1] is None:
        return ReplayOutcome(n0, n0, results[n0][0], None, trail)
    lo, step, hi = n0, 1, None
    while lo < limit:
        n = min(n0 + step, limit)
        if run(n)[1] is None:
            hi = n
            break
        lo, step = n, step * 2
    if hi is None:
        sim, failure = results[lo]
        return ReplayOutcome(None, n0, sim, None, trail, failure)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if run(mid)[1] is None else (mid, hi)
    below = results.get(hi - 1)
    return ReplayOutcome(hi, n0, results[hi][0], below[0] if below else None, trail)

"""Discrete-event check of the closed-form fleet model (``kvplan plan --simulate``).

``engine``: continuous batching with chunked prefill per instance and a JSQ router;
``steps`` / ``opsteps``: the deployment's step-time model (the roofline's ``forward_pass`` or
the per-operator pass) tabulated for O(1) step times. :func:`simulate_plan`
replays a plan's workload (the trace itself, or a seeded sample of a flag workload) through the
planned fleet.
"""

from __future__ import annotations

import numpy as np

from kvplan.sim.config import SimConfig, SimResult, engine_kv_policy, schedule_conservativeness
from kvplan.sim.engine import simulate
from kvplan.sim.steps import StepModel, build_step_model

__all__ = ["SimConfig", "SimResult", "StepModel", "build_step_model", "engine_kv_policy", "schedule_conservativeness",
           "simulate", "simulate_plan"]


def simulate_plan(plan, workload, requests: int | None = 10_000, seed: int = 0) -> SimResult:
    """Replay ``workload`` through the fleet of a feasible ``FleetPlan`` (:mod:`kvplan.plans.fleet.aggregated`).

    Requests arriving in the first and last two mean residences (at the plan's figures) are
    simulated but not measured, at least 5% and at most 25% at each end: the fleet starts empty
    and drains at the end.
    """
    if plan.instances is None or not plan.batch_per_rank:
        raise ValueError("only a plan with a fleet can be simulated")
    setup = plan.setup
    trace = workload.replay(requests, seed)
    chunk, dp = plan.engine.chunk_tokens, plan.shape.dp  # attention-DP ranks are the simulator's instances
    steps = build_step_model(setup["cost"], setup["machine"], plan.shape.tp, chunk + plan.batch_per_rank,
                             workload.lengths.decode_context, dp=dp, steps=setup.get("steps"))
    context = np.maximum(trace.isl, 1) + np.maximum(trace.osl, 1)
    kv = setup["layout"].sequence_bytes(context, per_gpu=True)
    kv_prompt = setup["layout"].sequence_bytes(np.maximum(trace.isl, 1), per_gpu=True)
    span = float(trace.arrival_s[-1] - trace.arrival_s[0]) if trace.requests > 1 else 0.0
    residence = plan.point.residence_s if plan.point is not None else 0.0
    edge = min(max(2 * residence / span if span > 0 else 0.0, 0.05), 0.25)
    config = SimConfig(instances=plan.instances * dp, max_batch=plan.batch_per_rank, chunk_tokens=chunk,
                       kv_pool_bytes=plan.figures.pool_bytes_per_gpu, warmup_fraction=edge,
                       cooldown_fraction=edge if edge > 0.05 else 0.0, kv_policy=engine_kv_policy(plan.engine.engine),
                       schedule_conservativeness=schedule_conservativeness(plan.engine.engine, dp))
    return simulate(trace.arrival_s, trace.isl, trace.osl, kv, steps, config, prompt_kv_bytes=kv_prompt)


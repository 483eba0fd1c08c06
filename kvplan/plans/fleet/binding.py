"""Which constraint binds a fleet plan, and the numbers at one instance fewer that show it.

The binding constraint is what fails at N − 1 instances, named as a user SLO or an engine
resource, never an internal limit of the model:

- ``ttft_slo`` / ``tpot_slo``: the SLO's statistic at N − 1 exceeds its limit (a saturated prefill
  queue has unbounded TTFT; prefill chunks that leave the decoders no time, unbounded TPOT); the
  TPOT SLO also binds when the batch it allows (the largest b whose TPOT meets it) is too small
  for the load's occupancy;
- ``kv_capacity``: the batch the KV pool holds (``batch_kv``) is too small for the occupancy;
- ``max_num_seqs``: the engine's batch cap;
- ``max_num_batched_tokens``: the token budget per step (half of it caps the decode batch, the
  rest is left to prompt chunks);
- ``memory``: the weights and reserves leave no KV memory on the instance shape;
- ``link``: a transfer link (set by the PD planners);
- ``utilization``: no TTFT SLO was given and a queue would exceed ``--max-utilization``;
- ``instances``: the ``--max-gpus`` budget; ``none``: one instance meets everything.
"""

from __future__ import annotations

import math

from kvplan.units import format_seconds

BINDING = ("kv_capacity", "max_num_seqs", "max_num_batched_tokens", "tpot_slo", "ttft_slo", "memory", "link",
           "utilization")


def binding(below, f, engine, slos: dict) -> str:
    """What fails at one instance fewer, named as a user SLO or an engine resource (module docstring).

    Unstable decode slots are charged to whatever capped the batch (the TPOT SLO, the KV pool,
    max_num_seqs or max_num_batched_tokens); a saturated prefill queue to the TTFT SLO (its TTFT is
    unbounded), else the TPOT SLO when the prefill chunks leave the decoders no time, else the
    utilisation ceiling (no SLO given).
    """
    reason = below.failures[0]
    if reason == "slots":
        caps = {"tpot_slo": below.batch_tpot if below.batch_tpot < f.batch_cap else math.inf,
                "kv_capacity": f.batch_kv, "max_num_seqs": engine.max_num_seqs,
                "max_num_batched_tokens": engine.chunk_tokens // 2}
        return min(caps, key=lambda k: (caps[k], BINDING.index(k)))
    if reason == "prefill_compute":
        if "ttft" in slos:
            return "ttft_slo"
        if "tpot" in slos and below.rho_interference >= 1:
            return "tpot_slo"
        return "utilization"
    return reason


def binding_detail(plan) -> str | None:
    """The N − 1 numbers behind the binding constraint: "at N − 1 = 3 instances: TTFT p99 2.4 s > 2 s"."""
    if plan.binding_note:
        return plan.binding_note
    b, name = plan.below, plan.binding_constraint
    if b is None:
        return None
    head = f"at N − 1 = {b.instances:,} instance{'s' if b.instances != 1 else ''}: "
    dp = plan.shape.dp
    per = "per instance" if dp == 1 else "per DP rank"  # with attention DP the figures are one rank's
    slo = plan.slos.get(name[:4]) if name in ("ttft_slo", "tpot_slo") else None
    values = b.ttft if name == "ttft_slo" else b.tpot
    if slo is not None and slo.stat in values:
        return (head + f"{name[:4].upper()} {slo.stat} {format_seconds(values[slo.stat])} > "
                f"{format_seconds(slo.limit_s)}")
    if slo is not None and b.failures[0] == "prefill_compute":
        return head + (f"prefill saturates the instances (utilisation {b.prefill_utilization:.3g}, prefill "
                       f"interference {b.rho_interference:.3g} of decode time): {name[:4].upper()} unbounded")
    if slo is not None and b.batch_tpot < 1:  # prefill interference alone breaks the TPOT SLO at batch 1
        lam_i = b.rate_per_s / (b.instances * dp)
        model = plan.setup["model"]
        value, rho = model.tpot_stats(1, 0, lam_i, 0, (slo.stat,))
        return head + (f"TPOT {slo.stat} {format_seconds(value[slo.stat])} > {format_seconds(slo.limit_s)} even at "
                       f"batch 1: prompts at {lam_i:.3g} req/s {per} take {rho:.0%} of decode time")
    if slo is not None:  # the TPOT SLO caps the batch below what the load needs
        return head + (f"the TPOT SLO allows a batch of {b.batch_tpot:,} {per}; the load needs a mean of "
                       f"{b.batch_mean:,.3g} (decode slots saturated)")
    f = plan.figures
    cap = {"kv_capacity": ("the KV pool holds", f.batch_kv), "max_num_seqs": ("max_num_seqs is", plan.engine.max_num_seqs),
           "max_num_batched_tokens": ("max_num_batched_tokens / 2 allows", plan.engine.chunk_tokens // 2)}.get(name)
    if cap is not None:
        return head + f"{cap[0]} {cap[1]:,} sequences {per}; the load needs a mean of {b.batch_mean:,.3g}"
    if name == "utilization":
        return head + (f"queue utilisation {max(b.slot_utilization, b.prefill_utilization):.3g} > "
                       f"--max-utilization {plan.setup['model'].max_utilization:g}")
    return head + ", ".join(b.failures)

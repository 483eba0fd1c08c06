"""The efficiencies a deployment's machine takes: η for memory bandwidth and FLOPS, and the per-step overhead.

Each is given (a flag), else the hardware card's figure, else kvplan's documented default
(:func:`kvplan.plans.sizing.latency.resolve_machine` says which it took). Kept apart from the
roofline so that a deployment's settings load without the step-time model (``kvplan size``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import InputError


@dataclass(frozen=True)
class Efficiencies:
    """η for memory bandwidth and FLOPS and the per-step overhead; None = card, then kvplan default."""

    eta_mem: float | None = None
    eta_flops: float | None = None
    step_overhead_s: float | None = None
    prefill_overhead_s: float | None = None    # host dispatch per layer of an eager prefill forward (None: the engine's)
    enforce_eager: bool = False                # no CUDA graphs at all: decode steps dispatch eagerly too (--enforce-eager)


def check_efficiencies(eff: Efficiencies) -> None:
    for name, value in (("--eta-mem", eff.eta_mem), ("--eta-flops", eff.eta_flops)):
        if value is not None and not 0 < value <= 1:
            raise InputError(f"{name} must be in (0, 1] (got {value})", "an efficiency is a share of the peak")
    from kvplan.cards.schema import MAX_LATENCY_S

    step = eff.step_overhead_s
    if step is not None and (step < 0 or not math.isfinite(step) or step > MAX_LATENCY_S):
        raise InputError(f"--step-overhead must be >= 0 and at most 1 h, as a card's (got {step:g} s)",
                         "the host time of one forward pass: write it as 50us or 0.5ms")
    from kvplan.plans.sizing.dispatch import check_prefill_overhead

    check_prefill_overhead(eff.prefill_overhead_s)

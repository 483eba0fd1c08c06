"""One deployment's step-time model: decode steps, prefills and mixed chunk steps, bound once.

Every planner (``plan``, ``pd``, ``tier``, the replay in :mod:`kvplan.sim`) asks the same four
questions of an instance of ``tp × dp`` GPUs (attention data parallel over ``dp`` ranks)::

    decode(b, L)              one decode step of b sequences (all ranks) at context L  (decode_step)
    prefill(b, S, C)          b prompts of S tokens in passes of C tokens     (prefill)
    mixed_chunk(b, L, S, C)   a prompt of S tokens in C-token chunks, each sharing a step with
                              b decoders at context L, per DP rank: (mean step, total) (mixed_chunk_step)
    suffix_prefill(a, S)      positions a+1 … S of a prompt whose first a tokens are cached

:class:`StepTimes` answers them with one pass function resolved once per deployment: the
per-operator model (:mod:`kvplan.calc.operators`, each operator at its measured efficiency,
the engine's CUDA-graph padding and host overhead; the default) or, with ``pass_fn`` None,
the roofline's :func:`kvplan.calc.roofline.forward_pass` (one η pair for every byte and FLOP,
``--perf-model roofline``). Every method broadcasts over numpy arrays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from kvplan.calc import tiering
from kvplan.calc.roofline import Machine, ModelCost, PassCost, decode_step, mixed_chunk_step, prefill

PERF_MODELS = ("operators", "roofline")


@dataclass(frozen=True, eq=False)
class StepTimes:
    """Step times of one instance (``tp`` GPUs per attention rank, ``dp`` ranks) under one pass model."""

    cost: ModelCost
    machine: Machine
    tp: int = 1
    dp: int = 1
    pass_fn: object = None            # None: the roofline (forward_pass); else the per-operator pass
    model: str = "roofline"
    overlap_comm: bool = False
    notes: tuple[str, ...] = ()
    dp_imbalance: float = 1.0         # λ_dp on the kernels of a dp > 1 step (the per-operator pass carries it)
    dp_note: str = ""                 # the note (in ``notes``) that says which λ_dp the steps take

    @property
    def request_dispatch_s(self) -> float:
        """The engine's prefill dispatch, once per request, that every TTFT adds and no step carries
        (:mod:`kvplan.plans.sizing.dispatch`); 0 on the roofline and under ``--enforce-eager``."""
        parts = getattr(self.pass_fn, "parts", None)
        return float(getattr(parts[1], "request_dispatch_s", 0.0)) if parts else 0.0

    def with_machine(self, machine: Machine | None = None, overlap_comm: bool | None = None) -> StepTimes:
        """The same model over another machine (other links: a PD placement) or with overlapped communication."""
        return dataclasses.replace(self, machine=self.machine if machine is None else machine,
                                   overlap_comm=self.overlap_comm if overlap_comm is None else overlap_comm)

    def with_dp_imbalance(self, dp_imbalance: float) -> StepTimes:
        """The same model with another attention-DP lock-step factor λ_dp (1: balanced ranks, a PD pool's steps).

        Only the per-operator pass carries λ_dp; the roofline's steps are returned unchanged.
        """
        if self.pass_fn is None or not hasattr(self.pass_fn, "with_dp_imbalance") \
                or float(dp_imbalance) == self.dp_imbalance:
            return self
        lam = float(dp_imbalance)
        note = f"attention-DP imbalance λ_dp = {lam:g} on these steps"
        notes = tuple(n for n in self.notes if not (self.dp_note and n == self.dp_note)) + (note,)
        return dataclasses.replace(self, pass_fn=self.pass_fn.with_dp_imbalance(lam), dp_imbalance=lam, notes=notes,
                                   dp_note=note)

    def decode(self, batch, context, *, query_tokens: int = 1) -> PassCost:
        return decode_step(self.cost, self.machine, batch, context, tp=self.tp, ep=self.dp, query_tokens=query_tokens,
                           overlap_comm=self.overlap_comm, pass_fn=self.pass_fn)

    def decode_s(self, batch, context):
        return self.decode(batch, context).time_s

    def prefill(self, batch, prompt_tokens, chunk_tokens=None) -> PassCost:
        return prefill(self.cost, self.machine, batch, prompt_tokens, tp=self.tp, ep=self.dp, chunk_tokens=chunk_tokens,
                       overlap_comm=self.overlap_comm, pass_fn=self.pass_fn)

    def mixed_chunk(self, batch, context, prompt_tokens, chunk_tokens):
        """(mean step over the chunks, total prefill time) of a prompt chunked alongside ``batch`` decoders,
        per attention-DP rank (every rank with ``batch`` decoders and one such chunk, in lock step)."""
        return mixed_chunk_step(self.cost, self.machine, batch, context, prompt_tokens, chunk_tokens, tp=self.tp,
                                ep=self.dp, overlap_comm=self.overlap_comm, pass_fn=self.pass_fn, dp=self.dp)

    def suffix_prefill_s(self, cached_tokens, prompt_tokens):
        return tiering.suffix_prefill_s(self.cost, self.machine, cached_tokens, prompt_tokens, tp=self.tp, dp=self.dp,
                                        overlap_comm=self.overlap_comm, pass_fn=self.pass_fn)

    def recompute_s(self, tokens):
        return self.suffix_prefill_s(0.0, tokens)

    def context_recompute_s(self, tokens):
        """What caching a whole context of n tokens saves: ``suffix(0, n) − suffix(n − 1, n)``
        (:func:`kvplan.calc.tiering.context_recompute_s`)."""
        return self.suffix_prefill_s(0.0, tokens) - self.suffix_prefill_s(np.asarray(tokens, dtype=np.float64) - 1,
                                                                           tokens)


__all__ = ["PERF_MODELS", "StepTimes"]

"""Step times for the simulator: :func:`kvplan.calc.roofline.forward_pass`, tabulated once, read in O(1).

``forward_pass`` is a sum of per-operator rooflines (dense GEMMs + LM head, routed experts,
attention) plus communication and a fixed overhead. Only attention depends on the KV bytes and
attention FLOPs, and only linearly; the rest depends on the step's token count n and its LM-head
rows. So one vectorised call over n = 0 … n_max and three probes give every term::

    step(n, rows, kv, F) = max(Md[n], Cd[n] + r·rows) + max(Me[n], Ce[n]) + max(a·kv, f·F) + comm[n] + overhead

with Md/Cd/Me/Ce/comm read off ``PassCost.op_memory_s`` / ``op_compute_s`` / ``comm_s`` at rows = 0,
r the LM-head compute per row, a and f the attention memory time per byte and compute time per
FLOP. The result equals ``forward_pass`` exactly (tests compare them at random points); it only
saves the ~0.2 ms of numpy overhead per call that a step-by-step simulation cannot afford.

A decode step of b sequences holding T tokens in all reads ``kv_read·T`` bytes and does
``attn_flops·T`` attention FLOPs, exact for full attention (per-token figures taken at the
workload's decode context otherwise), so its time is affine in T: ``D[b] + γ·T``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.calc.roofline import Machine, ModelCost, forward_pass


@dataclass(frozen=True, eq=False)
class StepModel:
    dense_memory_s: np.ndarray
    dense_compute_s: np.ndarray
    expert_s: np.ndarray          # max(memory, compute) of the routed experts at n tokens
    comm_s: np.ndarray
    row_compute_s: float
    kv_byte_s: float
    attn_flop_s: float
    overhead_s: float
    overlap_comm: bool
    kv_read_per_token: float      # bytes a decode step reads per held token, per GPU
    kv_write_per_token: float     # bytes a prefill writes per new token, per GPU
    attn_flops_per_token: float   # decode attention FLOPs per held token (instance total)
    cost: ModelCost
    tp: int

    @property
    def max_tokens(self) -> int:
        return self.comm_s.size - 1

    def step_s(self, tokens: int, rows: float, kv_bytes: float, attention_flops: float, batch: int = 0) -> float:
        """One forward pass of ``tokens`` new tokens: the same number ``forward_pass`` returns (``batch`` unused)."""
        dense = max(self.dense_memory_s[tokens], self.dense_compute_s[tokens] + self.row_compute_s * rows)
        attention = max(self.kv_byte_s * kv_bytes, self.attn_flop_s * attention_flops)
        kernels = dense + self.expert_s[tokens] + attention
        comm = self.comm_s[tokens]
        return (max(kernels, comm) if self.overlap_comm else kernels + comm) + self.overhead_s

    def decode_base_s(self, batch: int) -> float:
        """D[b]: a decode step of b sequences without its attention term."""
        return self.step_s(batch, batch, 0.0, 0.0)

    @property
    def decode_per_token_s(self) -> float:
        """γ: attention time per held token in a decode step."""
        return max(self.kv_byte_s * self.kv_read_per_token, self.attn_flop_s * self.attn_flops_per_token)

    def decode_gamma_s(self, batch: int) -> float:
        """γ at a batch of ``batch`` (the roofline's attention η does not depend on it)."""
        return self.decode_per_token_s

    def chunk_step_s(self, tokens: int, rows: float, held_tokens: float, starts: np.ndarray, ends: np.ndarray,
                     prompts, batch: int) -> float:
        """A step of the decoders (``held_tokens`` in all) and prompt chunks [start, end) of ``prompts``."""
        kv, flops = self.prefill_terms(starts, ends)
        return self.step_s(tokens, rows, self.kv_read_per_token * held_tokens + kv,
                           self.attn_flops_per_token * held_tokens + flops)

    def prefill_terms(self, starts: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
        """(KV bytes, attention FLOPs) of prompt chunks [start, end): tokens written plus prefix read, causal attention."""
        kv = (ends - starts) * self.kv_write_per_token + self.kv_read_per_token * starts
        flops = float(self.cost.prefill_attention_flops(starts, ends).sum())
        return float(kv.sum()), flops


def build_step_model(cost: ModelCost, machine: Machine, tp: int, max_tokens: int, decode_context: float,
                     overlap_comm: bool = False, dp: int = 1, steps=None):
    """Tabulate ``forward_pass`` for n = 0 … ``max_tokens`` and probe its linear terms (module docstring).

    ``dp`` > 1: the steps of one attention data-parallel rank in lock step with ``dp − 1`` equally
    loaded others (:func:`kvplan.plans.fleet.model.instance_figures`): the pass carries ``dp`` × the
    rank's tokens, LM-head rows and attention FLOPs with the experts over ``ep = dp``; KV bytes are the rank's.
    ``steps`` (a :class:`kvplan.calc.steptime.StepTimes` with a per-operator pass) tabulates that
    pass instead, for one rank of its ``dp`` (:func:`kvplan.sim.opsteps.build_operator_step_model`).
    """
    if steps is not None and steps.pass_fn is not None:
        from kvplan.sim.opsteps import build_operator_step_model

        return build_operator_step_model(steps, max_tokens, decode_context)
    n = np.arange(max_tokens + 1, dtype=np.float64)
    zero = np.zeros_like(n)
    kw = {"tp": tp, "ep": dp}
    base = forward_pass(cost, machine, tokens=dp * n, kv_bytes=zero, attention_flops=zero, lm_head_rows=zero, **kw)
    row = forward_pass(cost, machine, tokens=0.0, kv_bytes=0.0, attention_flops=0.0, lm_head_rows=float(dp), **kw)
    kv = forward_pass(cost, machine, tokens=0.0, kv_bytes=1e9, attention_flops=0.0, lm_head_rows=0.0, **kw)
    fl = forward_pass(cost, machine, tokens=0.0, kv_bytes=0.0, attention_flops=1e15 * dp, lm_head_rows=0.0, **kw)
    ctx = max(float(decode_context), 1.0)
    return StepModel(
        dense_memory_s=base.op_memory_s[0], dense_compute_s=base.op_compute_s[0],
        expert_s=np.maximum(base.op_memory_s[1], base.op_compute_s[1]), comm_s=np.asarray(base.comm_s, dtype=float),
        row_compute_s=float(row.op_compute_s[0]) - float(base.op_compute_s[0][0]),
        kv_byte_s=float(kv.op_memory_s[2]) / 1e9, attn_flop_s=float(fl.op_compute_s[2]) / 1e15,
        overhead_s=float(machine.step_overhead_s), overlap_comm=overlap_comm,
        kv_read_per_token=float(cost.kv_sequence_bytes(ctx, tp)) / ctx,
        kv_write_per_token=float(cost.kv_token_bytes(tp)),
        attn_flops_per_token=float(cost.decode_attention_flops(ctx)) / ctx, cost=cost, tp=tp,
    )

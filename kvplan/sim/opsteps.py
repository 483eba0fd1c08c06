"""Step times for the simulator from the per-operator model, tabulated once, read in O(1).

The per-operator pass (:func:`kvplan.calc.operators.operator_pass`) is a sum of operators, each
at its own efficiency. Its GEMMs (attention projections, MLPs, routed experts) and the
communication depend only on the step's token count n (padded to a CUDA-graph size where the
engine has one that large); the LM head only on its rows r; attention on the KV bytes and
FLOPs, linearly, at an efficiency that depends on the batch b (and the context, taken at the
workload's decode context L̄, as the fleet model takes it); the host overhead on b. So::

    step(n, r, kv, F, b) = λ_dp (G[n] + L[r] + max(a[b]·kv, f[b]·F)) + comm[n] + overhead[b] + E[n]
                           (max(kernels, comm) + overhead + E[n] with overlapped communication)

(E[n]: the host dispatch of an eager mixed step of n tokens, :func:`kvplan.calc.operators.eager_dispatch_s`;
0 where the engine's CUDA graphs cover n, and on decode-only steps.)

(λ_dp: the pass's attention-DP lock-step factor on its kernels, 1 at dp 1; the operators' terms are
read before it, so the table applies it as the pass does.)

with G, L, comm, a, f and overhead read off one vectorised pass per term. A mixed step (prompt
chunks with the decoders) is the pass in ``phase="mixed"`` (:func:`kvplan.calc.roofline.mixed_chunk_step`):
one attention kernel, ``max(a[b]·kv_dec + Σ_c a_p(S_c)·kv_c, f[b]·F_dec + Σ_c f_p(S_c)·F_c)``, each chunk
at the prefill efficiency of its prompt length S_c (a_p, f_p tabulated on 1,024 log-spaced S and
interpolated in log S);
a decode-only step of b sequences is ``decode_step`` exactly (its GEMMs padded by batch):
``D[b] + γ[b]·T`` for T held tokens, γ[b] = max(a[b]·kv per token, f[b]·FLOPs per token); with no CUDA graphs
(``--enforce-eager``) ``max(D[b] + γ[b]·T, E_d)``, E_d = L × t_layer the eager decode step's host dispatch
(:func:`kvplan.calc.operators.host_bound`; D[b] is then the GPU step, unpadded).
Tests compare both with the pass at random points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.calc.operators import OP_NAMES, eager_decode_s
from kvplan.calc.roofline import ModelCost

GEMMS = [OP_NAMES.index(k) for k in ("attention_gemms", "mlp_gemms", "expert_gemms")]
ATTENTION = OP_NAMES.index("attention")
LM_HEAD = OP_NAMES.index("lm_head")
PROMPT_MAX = 2.0**21        # prompt lengths the prefill attention efficiency is tabulated over (log-spaced)
PROMPT_POINTS = 1024


@dataclass(frozen=True, eq=False)
class OperatorStepModel:
    gemm_s: list            # G[n]
    lm_head_s: list         # L[r]
    comm_s: list            # comm[n]
    kv_byte_s: list         # a[b]
    attn_flop_s: list       # f[b]
    overhead_s: list        # overhead[b]
    decode_s: list          # D[b]: decode step of b sequences, attention excluded
    overlap_comm: bool
    kv_read_per_token: float
    kv_write_per_token: float
    attn_flops_per_token: float
    cost: ModelCost
    tp: int
    log_prompt: np.ndarray = None          # log S on a grid of prompt lengths
    prefill_kv_byte_s: np.ndarray = None   # a_p(S): a prompt chunk's attention time per KV byte
    prefill_flop_s: np.ndarray = None      # f_p(S): … per attention FLOP
    dp_imbalance: float = 1.0              # λ_dp on the kernels (the pass's attention-DP lock step; 1 at dp 1)
    dispatch_s: list = None                # E[n]: an eager mixed step's host dispatch (0 where graphs cover n)
    eager_decode_s: float = 0.0            # E_d: an eager decode step's host dispatch, step = max(GPU, E_d); 0: graphs
    request_dispatch_s: float = 0.0        # d: the engine's prefill dispatch once per request (TTFT, no step)

    @property
    def max_tokens(self) -> int:
        return len(self.comm_s) - 1

    def step_s(self, tokens: int, rows: float, kv_bytes: float, attention_flops: float, batch: int = 1) -> float:
        """A mixed step of ``tokens`` new tokens, ``rows`` LM-head rows and ``batch`` sequences."""
        b = min(int(batch), self.max_tokens)
        kernels = self.dp_imbalance * (self.gemm_s[tokens] + self.lm_head_s[min(int(rows), self.max_tokens)]
                                       + max(self.kv_byte_s[b] * kv_bytes, self.attn_flop_s[b] * attention_flops))
        comm = self.comm_s[tokens]
        return (max(kernels, comm) if self.overlap_comm else kernels + comm) + self.overhead_s[b] + self.eager_s(tokens)

    def eager_s(self, tokens: int) -> float:
        """E[n]: the host dispatch of an eager mixed / prefill step of n tokens (kvplan.calc.operators.eager_dispatch_s)."""
        return self.dispatch_s[min(int(tokens), self.max_tokens)] if self.dispatch_s is not None else 0.0

    def decode_base_s(self, batch: int) -> float:
        return self.decode_s[batch]

    def decode_gamma_s(self, batch: int) -> float:
        return self.dp_imbalance * max(self.kv_byte_s[batch] * self.kv_read_per_token,
                                       self.attn_flop_s[batch] * self.attn_flops_per_token)

    @property
    def decode_per_token_s(self) -> float:
        return self.decode_gamma_s(1)

    def chunk_step_s(self, tokens: int, rows: float, held_tokens: float, starts: np.ndarray, ends: np.ndarray,
                     prompts, batch: int) -> float:
        """A step of the decoders (``held_tokens`` in all) and prompt chunks [start, end) of ``prompts`` (S each):
        one attention kernel, the decoders' part at the decode efficiency of ``batch``, each chunk's at the
        prefill efficiency of its prompt length."""
        b = min(int(batch), self.max_tokens)
        kv = (ends - starts) * self.kv_write_per_token + self.kv_read_per_token * starts
        flops = self.cost.prefill_attention_flops(starts, ends)
        where = np.log(np.maximum(np.asarray(prompts, dtype=np.float64), 1.0))
        a_p = np.interp(where, self.log_prompt, self.prefill_kv_byte_s)
        f_p = np.interp(where, self.log_prompt, self.prefill_flop_s)
        memory = self.kv_byte_s[b] * self.kv_read_per_token * held_tokens + float(np.dot(kv, a_p))
        compute = self.attn_flop_s[b] * self.attn_flops_per_token * held_tokens + float(np.dot(flops, f_p))
        kernels = self.dp_imbalance * (self.gemm_s[tokens] + self.lm_head_s[min(int(rows), self.max_tokens)]
                                       + max(memory, compute))
        comm = self.comm_s[tokens]
        return (max(kernels, comm) if self.overlap_comm else kernels + comm) + self.overhead_s[b] + self.eager_s(tokens)

    def prefill_terms(self, starts: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
        """(KV bytes per GPU, attention FLOPs) of prompt chunks [start, end): written plus prefix read, causal."""
        kv = (ends - starts) * self.kv_write_per_token + self.kv_read_per_token * starts
        flops = float(self.cost.prefill_attention_flops(starts, ends).sum())
        return float(kv.sum()), flops


def build_operator_step_model(steps, max_tokens: int, decode_context: float) -> OperatorStepModel:
    """Tabulate ``steps.pass_fn`` (a per-operator pass) for n, r, b = 0 … ``max_tokens`` (module docstring).

    With ``steps.dp`` > 1 the table is one attention data-parallel rank's, stepping in lock step with
    ``dp − 1`` equally loaded others (as :func:`kvplan.sim.steps.build_step_model`): n, r, b and the
    attention FLOPs are the rank's and the pass carries ``dp`` × them (the experts over ``ep = dp``,
    the EP all-to-all of :mod:`kvplan.calc.alltoall`); KV bytes are the rank's, per GPU.
    """
    cost, machine, tp, dp = steps.cost, steps.machine, steps.tp, steps.dp
    ctx = max(float(decode_context), 1.0)
    n = np.arange(max_tokens + 1, dtype=np.float64)
    zero = np.zeros_like(n)

    def run(phase, tokens, rows, kv, flops, batch, context=None):
        return steps.pass_fn(cost, machine, tp=tp, ep=dp, tokens=dp * tokens, kv_bytes=kv, attention_flops=dp * flops,
                             lm_head_rows=dp * rows, batch=dp * batch,
                             context=ctx + np.zeros_like(tokens) if context is None else context, phase=phase,
                             overlap_comm=steps.overlap_comm)

    def op(p, i):
        return np.maximum(p.op_memory_s[i], p.op_compute_s[i])

    mixed = run("mixed", n, n, zero, zero, np.ones_like(n))
    probe_kv = run("mixed", zero, zero, zero + 1e9, zero, n)
    probe_fl = run("mixed", zero, zero, zero, zero + 1e15, n)
    decode = run("decode", n, n, zero, zero, n)
    prompt = np.unique(np.round(np.geomspace(1.0, PROMPT_MAX, PROMPT_POINTS)))
    one = np.ones_like(prompt)
    pre_kv = run("prefill", one, 0 * one, one * 1e9, 0 * one, one, context=prompt)
    pre_fl = run("prefill", one, 0 * one, 0 * one, one * 1e15, one, context=prompt)
    parts = getattr(steps.pass_fn, "parts", None)
    overlap = bool(steps.overlap_comm or (parts is not None and parts[2].overlap_comm))
    eager_decode = eager_decode_s(parts[1], "decode", cost.layers) if parts is not None else 0.0
    return OperatorStepModel(
        gemm_s=sum(op(mixed, i) for i in GEMMS).tolist(), lm_head_s=op(mixed, LM_HEAD).tolist(),
        comm_s=np.asarray(mixed.comm_s, dtype=float).tolist(),
        kv_byte_s=(np.asarray(probe_kv.op_memory_s[ATTENTION]) / 1e9).tolist(),
        attn_flop_s=(np.asarray(probe_fl.op_compute_s[ATTENTION]) / 1e15).tolist(),
        overhead_s=np.asarray(probe_kv.overhead_s, dtype=float).tolist(),
        decode_s=(np.asarray(decode.time_s, dtype=float) - np.asarray(decode.dispatch_s, dtype=float)).tolist(),
        overlap_comm=overlap,
        kv_read_per_token=float(cost.kv_sequence_bytes(ctx, tp)) / ctx,
        kv_write_per_token=float(cost.kv_token_bytes(tp)),
        attn_flops_per_token=float(cost.decode_attention_flops(ctx)) / ctx, cost=cost, tp=tp,
        log_prompt=np.log(prompt), prefill_kv_byte_s=np.asarray(pre_kv.op_memory_s[ATTENTION]) / 1e9,
        prefill_flop_s=np.asarray(pre_fl.op_compute_s[ATTENTION]) / 1e15,
        dp_imbalance=float(parts[2].dp_imbalance) if parts is not None and dp > 1 else 1.0,
        dispatch_s=np.asarray(mixed.dispatch_s, dtype=float).tolist(), eager_decode_s=float(eager_decode),
        request_dispatch_s=steps.request_dispatch_s,
    )

"""Two-batch overlap: a pass as two micro-batches, one's communication behind the other's compute.

DeepSeek's day-6 overview (deepseek-ai/open-infra-index @3122a25, 202502OpenSourceWeek/
day_6_one_more_thing_deepseekV3R1_inference_system_overview.md, "Computation-Communication Overlapping"):
"we employ a dual-batch overlap strategy ... by splitting a batch of requests into two microbatches. During
the prefilling phase, these two microbatches executed alternately and the communication cost of one
microbatch is hide behind the computation of the other. During the decoding phase ... we subdivide the
attention layer into two steps and use a 5-stage pipeline". Its two figures give the schedule and the SMs:

- **prefill**: computation on 108 SMs, communication (DeepEP's normal kernels) on 24 of the H800's 132;
  per MoE layer ATTN₁ + SHARED₀ run beside COMBINE₀, ATTN₀ beside DISPATCH₁, MLP₁ beside DISPATCH₀,
  MLP₀ + SHARED₁ beside COMBINE₁ ("ATTN: MLA and MoE routing gate").
- **decode**: computation on 132 SMs, communication on 0 (DeepEP's low-latency kernels: "a hook-based
  communication-computation overlapping method that does not occupy any SM resource", DeepEP README
  @ebfe47e); per micro-batch and MoE layer its DISPATCH runs beside the other's SHARED + ATTN-0 (the MLA
  projections), its COMBINE beside the other's ATTN-1 (core attention, output projection, gate), and nothing
  beside MLP (the routed experts).

Each micro-batch is :func:`kvplan.calc.operators.operator_pass` at half the tokens, sequences, KV bytes,
attention FLOPs and LM-head rows: its GEMMs run at half M, so in decode each micro-batch reads the weights
again (the cost the overlap pays). With one micro-batch's totals over the MoE layers — G attention GEMMs,
A core attention, S shared experts, M routed experts (compute terms ÷ 108/132 in prefill), D dispatch,
C combine (:func:`kvplan.calc.alltoall.ep_alltoall`) — the MoE layers take::

    decode    2 [max(S + G, D) + M + max(A, C)]
    prefill   max(G + A + S, C) + max(G + A, D) + max(M, D) + max(M + S, C)

and the dense layers' attention and MLPs, the LM head and any TP all-reduce run on their own, twice; one
host overhead per step. Where there is nothing to hide (no communication) or nothing to split (a decode
batch of fewer than 2 sequences per rank) the pass is one batch. Without a DeepEP all-to-all (TP
all-reduces, another engine's all-to-all) the other micro-batch's kernels hide the communication of the layers that have it:
``max(s K, C) + (1 − s) K + K_lm + overhead`` (K both halves' kernels but the LM head, C their
communication, s = L_moe / L with EP, 1 without). The floor is the whole pass's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kvplan.calc.alltoall import ep_alltoall
from kvplan.calc.operators import OP_NAMES, Parallel, PassTimes, Shapes, eager_decode_s, host_bound, operator_pass
from kvplan.calc.roofline import Machine, ModelCost, PassCost


def _staged(cost, machine, shapes: Shapes, op: dict, comm_half, tokens_half, gpus, phase: str):
    """Both micro-batches through the MoE layers as DeepSeek's day-6 figures schedule them, plus what hides nothing.

    Per micro-batch (totals over the MoE layers): G attention GEMMs, A core attention, S shared experts, M routed
    experts, D dispatch, C combine. Decode (5 stages, "ATTN-0" = MLA projections, "ATTN-1" = core attention):
    dispatch runs beside the other micro-batch's SHARED + ATTN-0, combine beside its ATTN-1, nothing beside MLP:
    2 [max(S + G, D) + M + max(A, C)]. Prefill: COMBINE₀ beside ATTN₁ + SHARED₀, DISPATCH₁ beside ATTN₀,
    DISPATCH₀ beside MLP₁, COMBINE₁ beside MLP₀ + SHARED₁:
    max(G + A + S, C) + max(G + A, D) + max(M, D) + max(M + S, C).
    The dense layers' attention and MLPs, the LM head and any TP all-reduce run on their own, twice.
    """
    fp8 = machine.compute_dtype == "fp8"
    a2a = ep_alltoall(tokens_half / gpus, gpus, machine, hidden=cost.hidden_size, num_experts=cost.num_experts,
                      k=cost.experts_per_token, fp8_dispatch=fp8, phase=phase,
                      max_nodes_per_token=getattr(cost, "max_nodes_per_token", None))
    d, c = cost.moe_layers * a2a.dispatch_s, cost.moe_layers * a2a.combine_s
    other_comm = np.maximum(np.asarray(comm_half) - d - c, 0.0)
    s = cost.moe_layers / cost.layers
    shared = shapes.shared_params / shapes.mlp_params if shapes.mlp_params else 0.0
    g, a = s * op["attention_gemms"], s * op["attention"]
    sh, m = shared * op["mlp_gemms"], op["expert_gemms"]
    alone = (1 - s) * (op["attention_gemms"] + op["attention"]) + (1 - shared) * op["mlp_gemms"] + op["lm_head"]
    if phase != "prefill":          # decode, or a chunk beside the decoders (DeepEP's low-latency kernels)
        moe = 2.0 * (np.maximum(sh + g, d) + m + np.maximum(a, c))
    else:
        moe = (np.maximum(g + a + sh, c) + np.maximum(g + a, d) + np.maximum(m, d) + np.maximum(m + sh, c))
    return moe + 2.0 * (alone + other_comm)


# DeepSeek day-6 overview, "Communication-Computation Overlapping during Prefilling Phase": computation on 108 SMs,
# communication (DeepEP normal kernels) on 24 of the H800's 132 SMs while the other micro-batch computes.
PREFILL_COMPUTE_SM_SHARE = 108.0 / 132.0


def two_batch_pass(cost: ModelCost, machine: Machine, *, par: Parallel, tokens, kv_bytes, attention_flops,
                   lm_head_rows, batch, phase: str = "decode", times_only: bool = False, **kw) -> PassCost | PassTimes:
    """One pass as two micro-batches (module docstring): ``operator_pass``'s arguments, overlap priced.

    Returns the same :class:`PassCost` (operator terms and communication summed over both micro-batches,
    weights read twice) or, with ``times_only``, :class:`PassTimes`.
    """
    one = dataclasses.replace(par, overlap_comm=False)
    half = operator_pass(cost, machine, par=one, tokens=np.asarray(tokens, dtype=np.float64) / 2,
                         kv_bytes=np.asarray(kv_bytes, dtype=np.float64) / 2,
                         attention_flops=np.asarray(attention_flops, dtype=np.float64) / 2,
                         lm_head_rows=np.asarray(lm_head_rows, dtype=np.float64) / 2,
                         batch=np.asarray(batch, dtype=np.float64) / 2, phase=phase,
                         **{k: (np.asarray(v, dtype=np.float64) / 2 if k in ("chunk_kv_bytes", "chunk_attention_flops")
                                else v) for k, v in kw.items()})
    whole = operator_pass(cost, machine, par=one, tokens=tokens, kv_bytes=kv_bytes, attention_flops=attention_flops,
                          lm_head_rows=lm_head_rows, batch=batch, phase=phase,
                          **{k: v for k, v in kw.items() if k != "clamped"})
    ep = par.expert_parallel and cost.is_moe
    share = PREFILL_COMPUTE_SM_SHARE if (ep and par.alltoall == "deepep" and phase == "prefill") else 1.0
    op_memory = 2.0 * half.op_memory_s
    op_compute = 2.0 * half.op_compute_s / share
    lam = np.where(np.asarray(par.dp, dtype=np.float64) > 1, par.dp_imbalance, 1.0) if par.dp_imbalance != 1.0 else 1.0
    ops = np.maximum(op_memory, op_compute) * lam / 2.0          # one micro-batch's operators
    comm = 2.0 * half.comm_s
    b = np.asarray(batch, dtype=np.float64)
    dp = np.asarray(par.dp, dtype=np.float64)
    effs, shapes = kw["effs"], kw["shapes"]
    overhead = effs.overhead_base_s + effs.overhead_per_seq_s * b / dp     # one host step for both micro-batches
    eager = eager_decode_s(effs, phase, cost.layers)   # an eager decode step: max(both halves, dispatch), below
    host = overhead + (whole.dispatch_s if not eager else 0.0)   # one eager prefill dispatch for the forward
    name = {n: ops[i] for i, n in enumerate(OP_NAMES)}
    if ep and par.alltoall == "deepep":
        time_s = _staged(cost, machine, shapes, name, half.comm_s, np.asarray(tokens, dtype=np.float64) / 2,
                         np.asarray(par.tp, dtype=np.float64) * dp, phase) + host
    else:           # TP all-reduces (every layer) or another engine's all-to-all: the other half's kernels hide them
        s = cost.moe_layers / cost.layers if ep else 1.0
        body = 2.0 * (ops.sum(axis=0) - name["lm_head"])
        time_s = np.maximum(s * body, comm) + (1.0 - s) * body + 2.0 * name["lm_head"] + host
    added = whole.dispatch_s
    if eager:
        time_s, added = host_bound(time_s, eager)
    # One batch where there is nothing to overlap or nothing to split: no communication to hide (day 6: the
    # overlap is "to hide communication costs"), or a decode batch of fewer than 2 sequences per rank.
    split = np.asarray(comm, dtype=np.float64) > 0
    if phase != "prefill":
        split = split & (b / np.maximum(dp, 1.0) >= 2.0)
    shape = np.broadcast_shapes(np.shape(time_s), np.shape(whole.time_s), np.shape(split))
    split = np.broadcast_to(split, shape)
    time_s = np.where(split, np.broadcast_to(time_s, shape), np.broadcast_to(whole.time_s, shape))
    if times_only:
        return PassTimes(time_s, np.broadcast_to(whole.floor_s, shape))

    def full(two, one_batch):
        return np.where(split, np.broadcast_to(np.asarray(two, dtype=np.float64), shape),
                        np.broadcast_to(np.asarray(one_batch, dtype=np.float64), shape))

    ops_shape = (len(OP_NAMES), *shape)
    return PassCost(full(2.0 * half.weight_bytes, whole.weight_bytes), full(2.0 * half.kv_bytes, whole.kv_bytes),
                    full(2.0 * half.flops, whole.flops),
                    np.where(split, np.broadcast_to(op_memory, ops_shape), np.broadcast_to(whole.op_memory_s, ops_shape)),
                    np.where(split, np.broadcast_to(op_compute, ops_shape),
                             np.broadcast_to(whole.op_compute_s, ops_shape)),
                    full(comm, whole.comm_s), full(overhead, whole.overhead_s), time_s.copy(),
                    np.broadcast_to(whole.floor_s, shape).copy(), full(half.experts_touched, whole.experts_touched),
                    np.ones(shape), full(added, whole.dispatch_s))


__all__ = ["two_batch_pass", "PREFILL_COMPUTE_SM_SHARE"]

"""Roofline latency: one forward pass, a decode step, a prefill, and the mean step over an output.

One forward pass over ``n`` new tokens on one GPU (SI units: bytes, FLOP, seconds)::

    bytes    = weights read + KV read/written
    FLOPs    = 2 × body_params × n + 2 × lm_head_params × rows + attention FLOPs      (÷ shards)
    per operator class o ∈ {dense GEMMs (+ LM head), routed-expert GEMMs, attention}:
      t_o    = max(bytes_o / (HBM bandwidth × η_mem), FLOPs_o / (peak FLOPS of the compute dtype × η_flops))
    comm     = (2 × layers + 1) × all-reduce(n × hidden × 2 B)        tensor parallel
             + moe_layers × (dispatch + combine)(n/ep tokens per rank)  expert parallel
               (:func:`kvplan.calc.alltoall.ep_alltoall_s`: FP8 dispatch, BF16 combine, DeepEP's
               normal kernels for prefill — once per destination node over the NIC — and
               low-latency kernels for decode)
    time     = Σ_o t_o + comm + step overhead   (comm not overlapped by default;
               ``overlap_comm``: max(Σ_o t_o, comm) + overhead)
    floor    = max(bytes / peak bandwidth, FLOPs / peak FLOPS)        the physical limit

The three operator classes are separate kernels run one after another, so each has its own
roofline (as per-operator rooflines do: LLM-Viewer, GenZ, aiconfigurator's SOL mode). While
everything is memory-bound — small-batch decode — the sum equals DESIGN.md §2.3's whole-step
``max(bytes / (BW η_mem), FLOPs / (peak η_flops))`` exactly; at large batch the GEMMs turn
compute-bound while attention keeps streaming the KV cache, and the whole-step max would assume
an overlap the kernels do not have. The floor keeps the whole-step max at peak: no schedule
beats it.

Weights read. Every pass reads the always-read weights (attention, dense MLPs, shared experts,
routers, norms, the LM head) and, in each MoE layer, the distinct routed experts its tokens
touch: ``E × (1 − (1 − k/E)^n)`` in expectation (:mod:`kvplan.calc.moe`). The input embedding
table is not read in full (only ``n`` rows are gathered), so it is excluded. Always-read
parameters are ``params_total − routed experts − input embedding`` (the card's
``params_active`` is not used: cards disagree on whether it counts the embedding table).
Quantised formats keep the embedding and LM head in the model dtype, and ``mxfp4`` quantises
only the routed experts, as in :func:`kvplan.calc.memory.weight_bytes`.

FLOPs per token. ``2 × body_params``: every weight a token passes through (the always-read
weights without the LM head, plus ``k`` routed experts per MoE layer) costs one multiply-add.
The LM head runs on ``rows`` positions: every token in decode, only the last prompt token of
each sequence in prefill (vLLM and TensorRT-LLM compute logits for the last position only).
Attention per query token per key per layer (``h`` query heads):

- full / sliding: ``2 × h × (head_dim + v_head_dim)`` (QKᵀ and PV; ``4 × h × d`` for d = d_v);
  a sliding layer attends ``min(position, window)`` keys.
- MLA decode, absorbed (vLLM, SGLang, FlashMLA): ``2 × h × ((kv_lora_rank + rope) + kv_lora_rank)``,
  QKᵀ over the 576-wide latent and PV over the 512-wide latent for DeepSeek-V3; FlashMLA's test
  counts ``2 × h × (d + d_v)`` with d = 576, d_v = 512, and aiconfigurator's generation MLA uses
  ``2 × h × 1088`` (deepseek-ai/FlashMLA tests/test_flash_mla.py; ai-dynamo/aiconfigurator
  sdk/perf_database.py query_generation_mla). Decompressed MLA (the ``hf`` profile) and MLA
  prefill use the per-head dims: ``2 × h × (qk_nope + rope + v_head_dim)``.
- linear / SSM layers: no per-key term (their recurrent state is read as part of the KV bytes).

Causal prefill over positions ``a+1 … b`` attends ``Σ min(i, window)`` keys: ``b(b+1)/2 − a(a+1)/2``
for full layers, so the attention term grows as S², and a prefill is compute-bound beyond a
few hundred tokens on current GPUs.

Communication (ring all-reduce, Patarasuk & Yuan 2009; two per layer plus the vocab-parallel
embedding, as aiconfigurator's LLAMA model charges ``ar_1``, ``ar_2`` and ``embedding_ar``):
``2 (tp − 1)/tp × message / link bandwidth + link latency`` per all-reduce. Expert parallelism
is modelled as in DP-attention + EP deployments (SGLang ``--enable-dp-attention``, DeepSeek's
wide EP): attention runs data-parallel over the ``ep`` ranks (tp = 1), each rank holds ``E/ep``
experts, and every MoE layer dispatches and combines its tokens (priced by
:func:`kvplan.calc.alltoall.ep_alltoall_s`, the same function the per-operator model uses).
Load imbalance between ranks is not modelled.

Every function broadcasts over numpy arrays (batch, context, tp, …), so one point and a
million-point sweep are the same code path.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from kvplan.calc.cost import (AttentionGroup, ModelCost, compute_dtype_for, cumulative_keys,  # noqa: F401
                               model_cost, read_profile)
from kvplan.calc.alltoall import ep_alltoall_s
from kvplan.calc.moe import experts_touched

ACTIVATION_BYTES = 2  # bf16/fp16 activations on the wire (TP all-reduce; EP: kvplan.calc.alltoall)


# --------------------------------------------------------------------------- hardware figures


@dataclass(frozen=True)
class Machine:
    """A hardware card resolved for one compute dtype, with the efficiencies in force."""

    name: str
    compute_dtype: str
    bandwidth_bytes_per_s: float
    peak_flops_per_s: float
    eta_mem: float
    eta_flops: float
    step_overhead_s: float
    scale_up_bytes_per_s: float = math.nan  # effective: line rate × link efficiency
    scale_up_latency_s: float = math.nan
    scale_up_domain: float = math.inf
    nic_bytes_per_s: float = math.nan
    nic_latency_s: float = math.nan

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where the peak roofline turns: peak FLOPS / peak bandwidth."""
        return self.peak_flops_per_s / self.bandwidth_bytes_per_s

    def link(self, gpus):
        """(bandwidth, latency) of the link joining ``gpus`` accelerators: scale-up inside its domain, else NICs."""
        g = np.asarray(gpus, dtype=np.float64)
        inside = g <= self.scale_up_domain
        return (np.where(inside, self.scale_up_bytes_per_s, self.nic_bytes_per_s),
                np.where(inside, self.scale_up_latency_s, self.nic_latency_s))


def allreduce_s(message_bytes, ranks, bandwidth_bytes_per_s, latency_s):
    """Ring all-reduce: ``2 (p − 1)/p × message / bandwidth + latency``; zero on one rank."""
    p = np.asarray(ranks, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        t = 2 * (p - 1) / p * np.asarray(message_bytes, dtype=np.float64) / bandwidth_bytes_per_s + latency_s
    return np.where(p > 1, t, 0.0)


def alltoall_s(message_bytes_per_rank, ranks, bandwidth_bytes_per_s, latency_s):
    """All-to-all: each rank sends ``(p − 1)/p`` of its message off-rank: ``… / bandwidth + latency``."""
    p = np.asarray(ranks, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        t = (p - 1) / p * np.asarray(message_bytes_per_rank, dtype=np.float64) / bandwidth_bytes_per_s + latency_s
    return np.where(p > 1, t, 0.0)


# --------------------------------------------------------------------------- passes


BOUNDS = np.array(["memory", "compute", "communication"])
OPERATORS = ("dense", "experts", "attention")


@dataclass(frozen=True)
class PassCost:
    """The terms of one forward pass (or a sum of passes) on one GPU; every field an array.

    ``op_memory_s`` / ``op_compute_s`` hold the memory and compute time of each operator class
    (:data:`OPERATORS`: dense GEMMs incl. the LM head, routed-expert GEMMs, attention) on a
    leading axis of length 3, at the efficiencies in force.
    """

    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    flops: np.ndarray
    op_memory_s: np.ndarray
    op_compute_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    time_s: np.ndarray
    floor_s: np.ndarray
    experts_touched: np.ndarray  # per MoE layer, on one rank (0 for dense models)
    passes: np.ndarray
    dispatch_s: np.ndarray | float = 0.0   # host dispatch of an eager prefill / mixed forward (in time_s; 0 elsewhere)

    @property
    def bytes(self):
        return self.weight_bytes + self.kv_bytes

    @property
    def memory_s(self):
        """All bytes over the effective bandwidth (as if nothing else ran)."""
        return self.op_memory_s.sum(axis=0)

    @property
    def compute_s(self):
        """All FLOPs over the effective peak (as if nothing else ran)."""
        return self.op_compute_s.sum(axis=0)

    @property
    def memory_bound_s(self):
        """Time spent in operators whose memory term exceeds their compute term."""
        return np.where(self.op_memory_s >= self.op_compute_s, self.op_memory_s, 0.0).sum(axis=0)

    @property
    def compute_bound_s(self):
        return np.where(self.op_memory_s >= self.op_compute_s, 0.0, self.op_compute_s).sum(axis=0)

    @property
    def intensity_flop_per_byte(self):
        return self.flops / self.bytes

    @property
    def bound(self):
        """'memory', 'compute' or 'communication': whichever the pass spends most time limited by."""
        terms = np.stack(np.broadcast_arrays(self.memory_bound_s, self.compute_bound_s, self.comm_s))
        return BOUNDS[np.argmax(terms, axis=0)]

    def total(self, axis: int = -1, where=None) -> PassCost:
        """Sum over passes along ``axis`` (``where`` masks the padding of ragged pass counts).

        ``experts_touched`` takes the largest pass's value (the count a single pass reaches).
        """
        def summed(x):
            x = np.asarray(x, dtype=np.float64)
            return (np.where(where, x, 0.0) if where is not None else x).sum(axis=axis)

        values = {f.name: summed(getattr(self, f.name)) for f in dataclasses.fields(self)}
        touched = np.asarray(self.experts_touched, dtype=np.float64)
        values["experts_touched"] = (np.where(where, touched, 0.0) if where is not None else touched).max(axis=axis)
        return PassCost(**values)


def forward_pass(
    cost: ModelCost, machine: Machine, *, tokens, kv_bytes, attention_flops, lm_head_rows,
    tp=1, ep=1, overlap_comm: bool = False, phase: str | None = None, **_ignored,
) -> PassCost:
    """One forward pass of ``tokens`` new tokens over an instance of tp × ep GPUs (per-GPU terms).

    ``kv_bytes`` is already per GPU; ``attention_flops`` is the instance total. With tp > 1 the
    weights and FLOPs split over tp ranks; with ep > 1 (tp = 1) the dense weights are
    replicated, the experts split over ep ranks and the tokens spread evenly over them.

    Each operator class runs as its own kernels, so each gets its own roofline and the pass is
    their sum: dense GEMMs max(W_dense/BW, F_dense/peak), routed-expert GEMMs the same with the
    touched experts, attention max(KV/BW, F_attn/peak), each at η. At small batch all three are
    memory-bound and the sum is (all bytes)/(BW η); at large batch the GEMMs turn compute-bound
    while attention stays memory-bound, and the sum is what the kernels, run one after the
    other, take. The floor is the whole pass at peak with perfect overlap:
    max(all bytes / BW, all FLOPs / peak). ``phase`` ("prefill" / "decode", default decode)
    picks DeepEP's kernel family for the expert all-to-all.
    """
    tp = np.asarray(tp, dtype=np.float64)
    ep = np.asarray(ep, dtype=np.float64)
    n = np.asarray(tokens, dtype=np.float64)
    rows = np.asarray(lm_head_rows, dtype=np.float64)
    shards = tp * ep
    touched = (experts_touched(cost.num_experts, cost.experts_per_token, n, ep) if cost.is_moe
               else np.zeros_like(n))
    dense_bytes = cost.dense_weight_bytes / tp + 0 * n
    expert_bytes = cost.moe_layers * touched * cost.expert_weight_bytes / tp
    kv = np.asarray(kv_bytes, dtype=np.float64)
    dense_flops = (2 * cost.dense_params_per_token * n + 2 * cost.lm_head_params * rows) / shards
    expert_flops = 2 * cost.routed_params_per_token * n / shards
    attn_flops = np.asarray(attention_flops, dtype=np.float64) / shards
    op_bytes = np.stack(np.broadcast_arrays(dense_bytes, expert_bytes, kv))
    op_flops = np.stack(np.broadcast_arrays(dense_flops, expert_flops, attn_flops))
    op_memory = op_bytes / (machine.bandwidth_bytes_per_s * machine.eta_mem)
    op_compute = op_flops / (machine.peak_flops_per_s * machine.eta_flops)
    kernels = np.maximum(op_memory, op_compute).sum(axis=0)
    bw, lat = machine.link(shards)
    message = n * cost.hidden_size * ACTIVATION_BYTES
    comm = (2 * cost.layers + 1) * allreduce_s(message, tp, bw, lat)
    if cost.is_moe:
        comm = comm + cost.moe_layers * ep_alltoall_s(cost, machine, n / ep, ep, phase=phase)
    if overlap_comm:
        time_s = np.maximum(kernels, comm) + machine.step_overhead_s
    else:
        time_s = kernels + comm + machine.step_overhead_s
    total_bytes, total_flops = op_bytes.sum(axis=0), op_flops.sum(axis=0)
    floor_s = np.maximum(total_bytes / machine.bandwidth_bytes_per_s, total_flops / machine.peak_flops_per_s)
    shape = time_s.shape
    full = [np.broadcast_to(np.asarray(x, dtype=np.float64), shape).copy() for x in
            (dense_bytes + expert_bytes, kv, total_flops)]
    return PassCost(*full, np.broadcast_to(op_memory, (3, *shape)).copy(), np.broadcast_to(op_compute, (3, *shape)).copy(),
                    np.broadcast_to(comm, shape).astype(np.float64), np.full(shape, float(machine.step_overhead_s)),
                    time_s, np.broadcast_to(floor_s, shape).copy(), np.broadcast_to(touched, shape).astype(np.float64),
                    np.ones(shape))


def decode_step(
    cost: ModelCost, machine: Machine, batch, context, *, tp=1, ep=1, query_tokens: int = 1,
    overlap_comm: bool = False, pass_fn=None,
) -> PassCost:
    """One decode step of ``batch`` sequences whose newest token sits at position ``context``.

    Each sequence reads its KV at ``context + query_tokens − 1`` tokens once and runs
    ``query_tokens`` queries (1 for plain decode, k + 1 for speculative verification, the
    queries at positions context … context + q − 1). Per GPU: with ep > 1 each rank holds
    batch / ep sequences. ``pass_fn`` replaces :func:`forward_pass` (the per-operator model of
    :mod:`kvplan.calc.operators`, where ``ep`` is the number of attention data-parallel ranks).
    """
    b = np.asarray(batch, dtype=np.float64)
    ctx = np.asarray(context, dtype=np.float64)
    epa = np.asarray(ep, dtype=np.float64)
    attention = sum(cost.decode_attention_flops(ctx + j) for j in range(query_tokens))
    kv = b / epa * cost.kv_sequence_bytes(ctx + (query_tokens - 1), tp)
    return (pass_fn or forward_pass)(cost, machine, tokens=b * query_tokens, kv_bytes=kv,
                                     attention_flops=b * attention, lm_head_rows=b * query_tokens, tp=tp, ep=ep,
                                     overlap_comm=overlap_comm, batch=b, context=ctx, phase="decode")


def prefill(
    cost: ModelCost, machine: Machine, batch, prompt_tokens, *, tp=1, ep=1, chunk_tokens=None,
    overlap_comm: bool = False, pass_fn=None,
) -> PassCost:
    """Prefill of ``batch`` prompts of ``prompt_tokens`` each, in passes of ``chunk_tokens`` tokens.

    Unchunked (``chunk_tokens`` None) is one pass over batch × S tokens. Chunked, the prompts
    form one stream of batch × S tokens cut into passes of C tokens (a token budget per step,
    as vLLM's ``max_num_batched_tokens``): pass p covers stream tokens [pC, min((p+1)C, N)).
    Per pass, with A(t) = ⌊t/S⌋ × a(S) + a(t mod S) the causal attention FLOPs of the first t
    stream tokens: attention = A(t1) − A(t0); LM-head rows = prompts that end in the pass;
    KV = the pass's tokens written + the prefix of the prompt it continues, read once. Every
    pass re-reads the weights and pays the step overhead: that is what chunking costs.
    Returns the sum over passes (``passes`` counts them).
    """
    b = np.asarray(batch, dtype=np.float64)
    s = np.asarray(prompt_tokens, dtype=np.float64)
    n_total = b * s
    c = n_total if chunk_tokens is None else np.minimum(np.asarray(chunk_tokens, dtype=np.float64), n_total)
    n_total, s, c, tpa, epa = np.broadcast_arrays(n_total, s, c, np.asarray(tp), np.asarray(ep))
    n_passes = np.ceil(n_total / c)
    width = int(n_passes.max()) if n_passes.size else 1
    p = np.arange(width, dtype=np.float64)
    t0 = c[..., None] * p
    n_b, s_b = n_total[..., None], s[..., None]
    valid = t0 < n_b
    t1 = np.minimum(t0 + c[..., None], n_b)
    t0 = np.where(valid, t0, n_b)
    t1 = np.where(valid, t1, n_b)

    def stream_attention(t):
        whole, rest = np.floor(t / s_b), np.mod(t, s_b)
        return whole * cost.prefill_attention_flops(0, s_b) + cost.prefill_attention_flops(0, rest)

    tokens = t1 - t0
    attention = stream_attention(t1) - stream_attention(t0)
    rows = np.floor(t1 / s_b) - np.floor(t0 / s_b)
    tp_b, ep_b = tpa[..., None], epa[..., None]
    prefix = np.where(valid, np.mod(t0, s_b), 0.0)
    kv = (tokens * cost.kv_token_bytes(tp_b) + cost.kv_sequence_bytes(prefix, tp_b) * (prefix > 0)) / ep_b
    passes = (pass_fn or forward_pass)(cost, machine, tokens=tokens, kv_bytes=kv, attention_flops=attention,
                                       lm_head_rows=rows, tp=tp_b, ep=ep_b, overlap_comm=overlap_comm,
                                       batch=tokens / s_b, context=s_b, phase="prefill")
    return passes.total(axis=-1, where=valid)


def mixed_chunk_step(cost: ModelCost, machine: Machine, batch, context, prompt_tokens, chunk_tokens, *,
                     tp=1, ep=1, overlap_comm=False, pass_fn=None, dp=1):
    """Steps that fuse ``batch`` decode tokens at ``context`` with one C-token chunk of a new prompt.

    Chunked prefill (Sarathi-Serve; vLLM ``--enable-chunked-prefill``) splits an arriving prompt
    of S tokens into ⌈S/C⌉ chunks, each sharing a step with the running batch's decode tokens.
    Returns (mean step time over the chunks, total time to prefill the prompt that way).
    ``pass_fn`` (the per-operator model) sees ``phase="mixed"``: the decoders' attention at the
    decode efficiency of ``batch + 1`` sequences, the chunk's (``chunk_kv_bytes``,
    ``chunk_attention_flops``) at the prefill efficiency of an S-token prompt, CUDA-graph padding
    of the step's token count (vLLM pads a mixed batch to its captured sizes only up to the
    largest one).

    ``dp`` > 1: one attention data-parallel rank of an instance of ``dp`` ranks stepping in lock
    step with the others equally loaded (``batch`` decoders and one such chunk on every rank, as
    pd's prefill pools are timed): the pass carries ``dp`` × the rank's tokens, attention FLOPs and
    LM-head rows with the MoE layers over ``ep = dp``; KV bytes are the rank's (``ep`` is then ``dp``).
    With ``dp`` = 1, ``ep`` > 1 is the instance-level view (``batch`` over all ranks, KV ÷ ``ep``).
    """
    b, ctx, s, c, tpa, epa = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in
                                                   (batch, context, prompt_tokens, chunk_tokens, tp, ep)))
    chunks = np.ceil(s / c)
    width = int(chunks.max())
    j = np.arange(width, dtype=np.float64)
    start = c[..., None] * j
    valid = start < s[..., None]
    end = np.minimum(start + c[..., None], s[..., None])
    start, end = np.where(valid, start, 0.0), np.where(valid, end, 0.0)
    tp_b, ep_b, b_b, ctx_b = tpa[..., None], epa[..., None], b[..., None], ctx[..., None]
    kv_div = ep_b if dp == 1 else 1.0
    chunk_kv = ((end - start) * cost.kv_token_bytes(tp_b) + cost.kv_sequence_bytes(start, tp_b) * (start > 0)) / kv_div
    kv = b_b * cost.kv_sequence_bytes(ctx_b, tp_b) / kv_div + chunk_kv
    chunk_flops = dp * cost.prefill_attention_flops(start, end)
    attention = dp * b_b * cost.decode_attention_flops(ctx_b) + chunk_flops
    rows = dp * (b_b + (end >= s[..., None]))
    step = (pass_fn or forward_pass)(cost, machine, tokens=dp * (b_b + end - start), kv_bytes=kv,
                                     attention_flops=attention, lm_head_rows=rows, tp=tp_b,
                                     ep=ep_b if dp == 1 else dp, overlap_comm=overlap_comm,
                                     batch=dp * (b_b + 1), context=ctx_b, phase="mixed", chunk_kv_bytes=chunk_kv,
                                     chunk_attention_flops=chunk_flops, chunk_context=s[..., None]).time_s
    total = np.where(valid, step, 0.0).sum(axis=-1)
    return total / chunks, total


def speculative_tokens_per_step(draft_tokens, acceptance):
    """Expected tokens one verification step yields: ``(1 − α^(k+1)) / (1 − α)`` (k + 1 at α = 1).

    Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding",
    ICML 2023, eq. (1), with per-token acceptance α i.i.d. and k drafted tokens.
    """
    k = np.asarray(draft_tokens, dtype=np.float64)
    a = np.asarray(acceptance, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (1 - a ** (k + 1)) / (1 - a)
    return np.where(a >= 1, k + 1, value)


def mean_over_output(step_fn, prompt_tokens, output_tokens, *, samples: int = 65):
    """Mean of ``step_fn(context)`` over the later decode steps of one output: contexts S+1 … S+O−1.

    The first token comes with the first step after the prefill (counted in TTFT); step j
    (j = 1 … O−1) attends S + j tokens and emits token j + 1, so the mean TPOT averages these
    O − 1 steps at their own context — not every step at the final length. With O − 1 ≤
    ``samples`` steps every step is evaluated (exact). Beyond that the mean is the trapezoidal
    average over ``samples`` evenly spaced contexts, which is exact
    when step time is affine in the context over the range (memory-bound or compute-bound
    throughout, no window edge inside) and otherwise errs only around the one or two kinks
    (memory → compute crossover, a sliding window filling up): below 0.1 % in the tests.
    With O = 1 there is no decode step; the step at context S + 1 is returned as the TPOT.
    """
    s = np.asarray(prompt_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    s, o = np.broadcast_arrays(s, o)
    steps = np.maximum(o - 1, 1)
    j = np.arange(samples, dtype=np.float64)
    exact = (steps <= samples)[..., None]
    first, last = (s + 1)[..., None], (s + steps)[..., None]
    u = j / (samples - 1)
    ctx = np.where(exact, np.minimum(first + j, last), first + u * (last - first))
    trapezoid = np.where((j == 0) | (j == samples - 1), 0.5, 1.0) / (samples - 1)
    weights = np.where(exact, (j < steps[..., None]) / steps[..., None], trapezoid)
    values = step_fn(ctx)
    return (np.asarray(values) * weights).sum(axis=-1)

"""Per-operator step model: a forward pass is a sum of operators, each at its own roofline and efficiency.

One forward pass over ``n`` new tokens on an instance of ``tp × dp`` GPUs (vLLM semantics:
``--tensor-parallel-size tp --data-parallel-size dp``; attention runs data-parallel over dp
ranks of tp GPUs each; MoE layers run expert-parallel over ``ep = tp × dp`` GPUs with
``--enable-expert-parallel``, else tensor-parallel over all tp × dp GPUs). Per GPU, with
``n_a = n / dp`` tokens per attention rank and SOL = max(bytes / BW, FLOPs / peak)::

    attention GEMMs (QKV, O)     W_attn / tp bytes,  2 P_attn n_a / tp FLOPs        η_gemm(M = n_a)
    dense MLP GEMMs (+ shared)   W_mlp / tp,         2 P_mlp n_a / tp               η_gemm(M = n_a)
    routed experts (grouped)     EP: touched local experts × W_e,  2 P_e λ n k / ep
                                 TP: touched experts × W_e / (tp dp), 2 P_e n k / (tp dp)
                                                                                    η_moe(tokens n entering the layer)
    attention core               KV bytes of the rank's B/dp sequences; FLOPs / (tp dp) at the
                                 attention dtype's peak (bf16 unless the KV cache is fp8)
                                 decode η_attn(batch per rank, context); prefill η_attn(prompt)
    LM head                      W_lm / tp, 2 V h rows_a / tp                       η_gemm(M = rows_a)
    t_op = SOL_op / η_op(size)   (table curve), or max(bytes/(BW η_mem), FLOPs/(peak η_flops)) (card)
    η_gemm of a group: its GEMMs (QKV, O; gate_up, down, shared experts: kvplan.calc.shapes) each at its own
                 per-GPU (N, K), combined 1 / Σ f_g / η_g(M) by SOL share (kvplan.calc.gemm_grid)
    comm = (2L + 1) all-reduce(n_a h 2 B) over tp                       when tp > 1
         + L_moe (dispatch + combine)(n / (tp dp) tokens per rank) over ep   EP (kvplan.calc.alltoall:
           FP8 dispatch, BF16 combine, DeepEP normal kernels in prefill, low-latency in decode)
         + 2 L_moe all-gather/reduce-scatter(n h 2 B) over tp dp         MoE without EP, dp > 1
    time = λ_dp Σ_op t_op + comm + overhead(B) + dispatch,  overhead(B) = base + per_seq × B / dp
    dispatch = L × t_layer for a prefill / mixed forward under --enforce-eager (no CUDA graphs: one Python
               dispatch per layer, once per forward), else 0 (:func:`eager_dispatch_s`; t_layer from the engine
               profile, kvplan.engines.PREFILL_DISPATCH); with CUDA graphs the engine's dispatch is a per-request
               TTFT term instead (``request_dispatch_s``, kvplan.plans.sizing.dispatch), not in any step
    eager decode (--enforce-eager, no CUDA graphs): time = max(the above, L × t_layer) (:func:`host_bound`):
               launches are asynchronous, so the step waits on the host only where dispatch exceeds the GPU work

``par.overlap_comm`` here is the bound of any overlap, ``max(Σ t_op, comm) + overhead``. The planners
price overlap (``--two-batch-overlap``, ``--overlap-comm``) as two micro-batches of half the pass, each
priced by this function, scheduled as DeepSeek's day-6 figures show: :func:`kvplan.calc.overlap.two_batch_pass`.

``λ`` (expert load imbalance) is the hottest rank's routed tokens over the mean: the step
waits for the slowest rank. ``λ_dp`` (attention-DP imbalance, dp > 1) is the same for the
attention-DP ranks' whole step: in-flight batching hands some ranks a context chunk while others
only decode, and the iteration time is the busiest rank's (TensorRT-LLM tech blog 10,
:func:`kvplan.plans.sizing.perfmodel.attention_dp_imbalance`). Redundant experts (EPLB) put ``(E + R) / ep`` experts on each
rank, so EP sizes that do not divide E work when ``ep`` divides ``E + R``.

The EP all-to-all is :func:`kvplan.calc.alltoall.ep_alltoall_s` (one function for this model
and the roofline): inside one scale-up domain the copies go over the scale-up link; across
domains prefill sends each token once per destination node over the NIC and forwards it over
NVLink, decode sends every (token, expert) copy over RDMA. :func:`alltoall_hierarchical_s` (a
generic all-to-all split between the links) is kept for callers pricing other all-to-alls.
A measured collective table, where one is given, replaces the TP / gather formulas for that op
and rank count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvplan.calc.alltoall import ep_alltoall_s
from kvplan.calc.efficiency import Curve, Flat, Grid, LatencyCurve, distinct_values
from kvplan.calc.moe import experts_touched
from kvplan.calc.roofline import ACTIVATION_BYTES, Machine, ModelCost, PassCost, allreduce_s
from kvplan.calc.shapes import ROUTER_BYTES, Linear, Shapes, model_shapes

OP_NAMES = ("attention_gemms", "mlp_gemms", "expert_gemms", "attention", "lm_head")
OP_LABELS = {"attention_gemms": "attention GEMMs (QKV, O)", "mlp_gemms": "dense MLP GEMMs",
             "expert_gemms": "routed-expert GEMMs", "attention": "attention core", "lm_head": "LM head"}


@dataclass(frozen=True)
class Parallel:
    """How an instance splits the model (vLLM flags). ``tp`` and ``dp`` may be arrays."""

    tp: object = 1
    dp: object = 1
    expert_parallel: bool = False
    redundant_experts: int = 0
    imbalance: float = 1.0          # hottest EP rank's routed tokens / the mean
    dp_imbalance: float = 1.0       # hottest attention-DP rank's step work / the mean (the lock step waits for it)
    overlap_comm: bool = False      # overlap: here the bound max(kernels, comm); planners: calc.overlap (two halves)
    # the EP all-to-all's kernels: "deepep" (vLLM / SGLang wide EP: kvplan.calc.alltoall) or "generic" (an
    # engine with its own kernels, TensorRT-LLM: k bf16 copies per token split over the links)
    alltoall: str = "deepep"
    # TP all-reduce on the engine's custom kernel where a table holds one (vLLM, SGLang, TensorRT-LLM), else NCCL's
    # measured rows (vLLM --disable-custom-all-reduce; programs that call torch.distributed, e.g. gpt-fast)
    custom_all_reduce: bool = True

    def gpus(self):
        return np.asarray(self.tp, dtype=np.float64) * np.asarray(self.dp, dtype=np.float64)


@dataclass(frozen=True)
class OperatorEfficiencies:
    """Each operator's efficiency (a measured curve or the card's flat η) and the host overhead."""

    attention_gemms: object            # Flat | Curve over M
    mlp_gemms: object
    lm_head: object
    expert_gemms: object               # Flat | Curve over tokens entering the MoE layer
    attention_decode: object           # Flat | Grid over (batch per rank, context)
    attention_prefill: object          # Flat | Curve over prompt tokens
    overhead_base_s: float
    overhead_per_seq_s: float = 0.0
    collectives: dict = field(default_factory=dict)   # (op, ranks) -> LatencyCurve
    notes: tuple[str, ...] = ()
    attention_peak_flops_per_s: float | None = None   # attention's tensor-core peak (its KV/activation dtype)
    dispatch_per_layer_s: float = 0.0   # host dispatch per layer of an eager prefill / mixed forward (--enforce-eager)
    decode_dispatch_per_layer_s: float = 0.0   # host dispatch per layer of an eager decode step (0: CUDA graphs)
    request_dispatch_s: float = 0.0     # the engine's prefill dispatch once per request, added to its TTFT, never to a step
    router_gemms: object = None         # the MoE routers' bf16 GEMM (None: the MLP group's efficiency)
    expert_gemms_prefill: object = None  # the routed experts in a prefill pass where that differs (wide EP, DeepEP
    #                                      normal vs low-latency: kvplan.calc.perf_moe.wideep_curve); None: expert_gemms


def eager_dispatch_s(effs: OperatorEfficiencies, phase: str, tokens_per_rank, layers: float):
    """Host dispatch of one eager forward (``--enforce-eager``): ``layers × dispatch_per_layer_s`` on a prefill or
    mixed forward of any tokens, once per forward whatever the number of requests in it; decode steps pay
    :func:`eager_decode_s` instead. 0 with CUDA graphs (``dispatch_per_layer_s`` 0: the engine's prefill dispatch is
    then a per-request TTFT term, :mod:`kvplan.plans.sizing.dispatch`)."""
    n = np.asarray(tokens_per_rank, dtype=np.float64)
    if phase not in ("prefill", "mixed") or effs.dispatch_per_layer_s <= 0:
        return np.zeros_like(n)
    return np.where(n > 0, float(layers) * effs.dispatch_per_layer_s, 0.0)


def eager_decode_s(effs: OperatorEfficiencies, phase: str, layers: float) -> float:
    """Host dispatch of one eager decode step (``--enforce-eager``), ``layers × decode_dispatch_per_layer_s``; 0 where
    decode replays a CUDA graph, and for prefill / mixed forwards (:func:`eager_dispatch_s`)."""
    return float(layers) * effs.decode_dispatch_per_layer_s if phase == "decode" else 0.0


def host_bound(gpu_s, dispatch_s):
    """(step, what the host adds) of an eager decode step: launches are asynchronous, so the GPU runs each kernel
    as soon as the host has queued it and the step is ``max(GPU time, dispatch)``; the host adds
    ``max(dispatch − GPU time, 0)``. ``dispatch_s`` 0 (a CUDA-graph replay): the GPU time, nothing added."""
    gpu = np.asarray(gpu_s, dtype=np.float64)
    step = np.maximum(gpu, np.asarray(dispatch_s, dtype=np.float64))
    return step, step - gpu


def padded_batch(batch, sizes: tuple[int, ...]):
    """The CUDA-graph size a decode batch runs at: the smallest captured size ≥ batch, else the batch."""
    b = np.asarray(batch, dtype=np.float64)
    if not sizes:
        return b
    s = np.asarray(sizes, dtype=np.float64)
    i = np.searchsorted(s, np.ceil(b - 1e-9), side="left")
    return np.where(i < s.size, s[np.minimum(i, s.size - 1)], b)


@dataclass(frozen=True)
class ByTP:
    """One efficiency per tensor-parallel size (each TP shards the GEMMs to its own shapes)."""

    by_tp: dict

    @property
    def source(self) -> str:
        return "; ".join(f"tp {t}: {getattr(e, 'source', e)}" for t, e in self.by_tp.items())


def _op_time(eff, memory_s, compute_s, size, tp=None):
    """Memory and compute terms at the efficiency in force (their max is the operator's time)."""
    if isinstance(eff, ByTP):
        tps = np.asarray(tp if tp is not None else next(iter(eff.by_tp)))
        m_out = c_out = None
        for t, e in eff.by_tp.items():
            m, c = _op_time(e, memory_s, compute_s, size)
            if m_out is None:
                m_out, c_out = m, c
            else:
                sel = tps == t
                m_out, c_out = np.where(sel, m, m_out), np.where(sel, c, c_out)
        return m_out, c_out
    if isinstance(eff, Flat):
        return np.asarray(memory_s) / eff.eta_mem, np.asarray(compute_s) / eff.eta_flops
    eta = eff(size) if not isinstance(eff, Grid) else eff(*size)
    return np.asarray(memory_s) / eta, np.asarray(compute_s) / eta


def _outside(eff, size):
    if isinstance(eff, ByTP):
        return np.any([np.any(_outside(e, size)) for e in eff.by_tp.values()])
    if isinstance(eff, Flat):
        return np.zeros(np.shape(size[0] if isinstance(size, tuple) else size), dtype=bool)
    return eff.outside(*size) if isinstance(eff, Grid) else eff.outside(size)


def _collective(effs: OperatorEfficiencies, op: str, message, ranks, formula):
    """A measured latency curve for (op, ranks) where the table has one, else the formula's time."""
    ranks = np.asarray(ranks, dtype=np.float64)
    t = np.asarray(formula, dtype=np.float64)
    if not effs.collectives:
        return t
    out = np.array(np.broadcast_to(t, np.broadcast_shapes(t.shape, ranks.shape, np.shape(message))), dtype=np.float64)
    msg = np.broadcast_to(np.asarray(message, dtype=np.float64), out.shape)
    rk = np.broadcast_to(ranks, out.shape)
    for p in distinct_values(ranks):  # the rank counts themselves, not their broadcast to the grid
        curve: LatencyCurve | None = effs.collectives.get((op, int(p)))
        if curve is not None and p > 1:
            mask = rk == p
            out[mask] = curve(msg[mask])
    return out


def alltoall_hierarchical_s(message_bytes, ranks, machine: Machine):
    """All-to-all over ``ranks`` GPUs in domains of ``g``: in-domain share on the scale-up link,
    off-domain share on the NIC, concurrently; zero on one rank."""
    p = np.asarray(ranks, dtype=np.float64)
    msg = np.asarray(message_bytes, dtype=np.float64)
    g = np.minimum(p, machine.scale_up_domain if machine.scale_up_domain > 0 else 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = np.where(g > 1, (g - 1) / p * msg / machine.scale_up_bytes_per_s, 0.0)
        outside = np.where(p > g, (p - g) / p * msg / machine.nic_bytes_per_s, 0.0)
        alpha = np.where(p > g, machine.nic_latency_s, machine.scale_up_latency_s)
        t = np.maximum(inside, outside) + alpha
    return np.where(p > 1, t, 0.0)


def operator_pass(cost: ModelCost, machine: Machine, *, shapes: Shapes, effs: OperatorEfficiencies,
                  par: Parallel, tokens, kv_bytes, attention_flops, lm_head_rows, batch, context,
                  phase: str = "decode", clamped: set | None = None, graph_sizes: tuple[int, ...] = (),
                  chunk_kv_bytes=0.0, chunk_attention_flops=0.0, chunk_context=None, times_only: bool = False,
                  **_ignored) -> PassCost | PassTimes:
    """One forward pass of ``tokens`` new tokens (instance total) on one GPU of a tp × dp instance.

    ``kv_bytes`` is per GPU (the rank's B/dp sequences); ``attention_flops`` and ``lm_head_rows``
    are instance totals; ``batch`` sequences in the pass (instance), ``context`` their KV length
    (decode) or prompt length (prefill), for the attention efficiency and the host overhead.
    ``clamped`` collects the names of operators whose size fell outside their measured table.
    ``graph_sizes``: a decode batch's GEMMs run at the CUDA-graph size it is padded up to
    (per attention rank); attention reads only the real sequences. ``phase``: ``decode``,
    ``prefill`` or ``mixed`` (a prefill chunk sharing a step with the decoders: decode attention
    efficiency, the step's token count padded to a graph size where one is that large). In a mixed
    pass, ``chunk_kv_bytes`` / ``chunk_attention_flops`` (parts of the totals) are the prompt
    chunk's, run at the prefill attention efficiency of a ``chunk_context``-token prompt; the
    attention operator is one kernel: max(Σ bytes/(BW η), Σ FLOPs/(peak η)).
    ``times_only``: return only the step time and its floor (:class:`PassTimes`, the same
    values), without the per-operator terms at full size (what a grid of points needs).
    """
    tp = np.asarray(par.tp, dtype=np.float64)
    dp = np.asarray(par.dp, dtype=np.float64)
    gpus = tp * dp
    n = np.asarray(tokens, dtype=np.float64)
    rows = np.asarray(lm_head_rows, dtype=np.float64)
    n_a, rows_a = n / dp, rows / dp
    if graph_sizes and phase == "mixed":          # a chunk with the decoders: the step's tokens are padded
        n_a = padded_batch(n_a, graph_sizes)
    elif graph_sizes:
        q = n / np.maximum(np.asarray(batch, dtype=np.float64), 1e-300)       # query tokens per sequence
        padded = padded_batch(np.asarray(batch, dtype=np.float64) / dp, graph_sizes)
        n_a, rows_a = padded * q, padded * q * (rows_a / np.maximum(n_a, 1e-300))
    bw, peak = machine.bandwidth_bytes_per_s, machine.peak_flops_per_s
    b_dense = cost.other_weight_bytes / cost.dense_params_per_token if cost.dense_params_per_token else 0.0

    def gemm(params, m, weight_bytes=None):
        wb = params * b_dense if weight_bytes is None else weight_bytes
        return wb / tp / bw + 0 * m, 2 * params * m / tp / peak

    routers = shapes.replicated_params      # whole on every rank, in bf16 (kvplan.calc.shapes.ROUTER_SOURCE)
    terms = {
        "attention_gemms": (*gemm(shapes.attention_params, n_a), n_a),
        "mlp_gemms": (*gemm(shapes.mlp_params - routers, n_a), n_a),
        "lm_head": (*gemm(cost.lm_head_params, rows_a, cost.lm_head_weight_bytes), rows_a),
    }
    router = (routers * ROUTER_BYTES / bw + 0 * n_a, 2 * routers * n_a / peak)
    weight_bytes = (cost.other_weight_bytes - routers * b_dense + cost.lm_head_weight_bytes) / tp \
        + routers * ROUTER_BYTES + 0 * n
    touched = np.zeros_like(n)
    expert_flops = np.zeros_like(n)
    if cost.is_moe:
        e, k = cost.num_experts, cost.experts_per_token
        if par.expert_parallel:
            local = (e + par.redundant_experts) / gpus
            pairs = par.imbalance * n * k / gpus              # routed token-expert pairs on the hottest rank
            touched = local * (1.0 - (1.0 - k / e) ** n)
            expert_bytes = cost.moe_layers * touched * cost.expert_weight_bytes
            share = 1.0
        else:
            touched = experts_touched(e, k, n)
            pairs = n * k
            expert_bytes = cost.moe_layers * touched * cost.expert_weight_bytes / gpus
            share = gpus
        params_e = cost.routed_params_per_token / (cost.moe_layers * k)
        expert_flops = 2 * params_e * cost.moe_layers * pairs / share
        terms["expert_gemms"] = (expert_bytes / bw, expert_flops / peak, n)   # η over tokens entering the layer
        weight_bytes = weight_bytes + expert_bytes
    else:
        terms["expert_gemms"] = (0 * n, 0 * n, 0 * n + 1)
    kv = np.asarray(kv_bytes, dtype=np.float64)
    attn_flops = np.asarray(attention_flops, dtype=np.float64) / gpus
    b = np.asarray(batch, dtype=np.float64)
    ctx = np.asarray(context, dtype=np.float64)
    if phase != "prefill":          # decode, or mixed (a prompt chunk with the decoders: decode efficiency)
        attn_eff, attn_size = effs.attention_decode, (b / dp, ctx)
    else:
        attn_eff, attn_size = effs.attention_prefill, ctx
    attn_peak = effs.attention_peak_flops_per_s or peak
    chunk = None
    if phase == "mixed" and chunk_context is not None:   # one varlen attention kernel: decoders + a prompt chunk
        ckv = np.asarray(chunk_kv_bytes, dtype=np.float64)
        cfl = np.asarray(chunk_attention_flops, dtype=np.float64) / gpus
        chunk = (ckv / bw, cfl / attn_peak, np.asarray(chunk_context, dtype=np.float64))
        kv_dec, fl_dec = kv - ckv, attn_flops - cfl
    else:
        kv_dec, fl_dec = kv, attn_flops
    terms["attention"] = (kv_dec / bw, fl_dec / attn_peak, attn_size)
    experts_eff = effs.expert_gemms_prefill if phase == "prefill" and effs.expert_gemms_prefill is not None \
        else effs.expert_gemms
    eff_of = {"attention_gemms": effs.attention_gemms, "mlp_gemms": effs.mlp_gemms, "lm_head": effs.lm_head,
              "expert_gemms": experts_eff, "attention": attn_eff}
    mem_list, comp_list = [], []
    for name in OP_NAMES:
        mem, comp, size = terms[name]
        eff = eff_of[name]
        if name == "expert_gemms" and not cost.is_moe:
            eff = Flat(1.0, 1.0)
        m_s, c_s = _op_time(eff, mem, comp, size, tp)
        if name == "mlp_gemms" and routers:         # the routers at their own (bf16) GEMM's efficiency
            m_r, c_r = _op_time(effs.router_gemms or eff, router[0], router[1], size, tp)
            m_s, c_s = m_s + m_r, c_s + c_r
        if name == "attention" and chunk is not None:      # the prompt chunk's share at the prefill efficiency
            m_c, c_c = _op_time(effs.attention_prefill, chunk[0], chunk[1], chunk[2], tp)
            m_s, c_s = m_s + m_c, c_s + c_c
            if clamped is not None and not isinstance(effs.attention_prefill, Flat) and np.any(
                    _outside(effs.attention_prefill, chunk[2])):
                clamped.add(name)
        mem_list.append(m_s)
        comp_list.append(c_s)
        if clamped is not None and not isinstance(eff, Flat) and np.any(_outside(eff, size)):
            clamped.add(name)
    shape = np.broadcast_shapes(*(np.shape(x) for x in mem_list + comp_list), tp.shape, dp.shape)
    if times_only:  # Σ_op max(memory, compute) in the operators' order, as the stacked sum adds them
        kernels = None
        for m_s, c_s in zip(mem_list, comp_list):
            t = np.maximum(m_s, c_s)
            kernels = t if kernels is None else kernels + t
        kernels = np.broadcast_to(kernels, shape)
    else:
        op_memory = np.stack([np.broadcast_to(x, shape) for x in mem_list])
        op_compute = np.stack([np.broadcast_to(x, shape) for x in comp_list])
        kernels = np.maximum(op_memory, op_compute).sum(axis=0)
    if par.dp_imbalance != 1.0:
        kernels = kernels * np.where(dp > 1, par.dp_imbalance, 1.0)

    up_bw, up_lat = machine.link(tp)
    message = n_a * cost.hidden_size * ACTIVATION_BYTES
    comm = (2 * cost.layers + 1) * _collective(effs, "all_reduce", message, tp,
                                                allreduce_s(message, tp, up_bw, up_lat))
    if cost.is_moe:
        if par.expert_parallel and par.alltoall == "deepep":
            comm = comm + cost.moe_layers * ep_alltoall_s(cost, machine, n / gpus, gpus, phase=phase)
        elif par.expert_parallel:
            msg = n / gpus * cost.experts_per_token * cost.hidden_size * ACTIVATION_BYTES
            a2a = _collective(effs, "all_to_all", msg, gpus, alltoall_hierarchical_s(msg, gpus, machine))
            comm = comm + 2 * cost.moe_layers * a2a
        else:  # TP experts: attention-DP ranks gather their tokens for the MoE and scatter them back; on one rank
            # the experts' partial sums are in the all-reduce above and nothing is gathered (no measured curve either)
            msg = n * cost.hidden_size * ACTIVATION_BYTES
            g_bw, g_lat = machine.link(gpus)
            with np.errstate(invalid="ignore", divide="ignore"):
                gather = _collective(effs, "all_gather", msg, gpus, (gpus - 1) / gpus * msg / g_bw + g_lat)
            comm = comm + 2 * cost.moe_layers * np.where(dp > 1, gather, 0.0)
    overhead = effs.overhead_base_s + effs.overhead_per_seq_s * b / dp
    dispatch = eager_dispatch_s(effs, phase, n / dp, cost.layers)     # an eager prefill forward's host dispatch
    if par.overlap_comm:        # the bound of any overlap; the planners price it as two micro-batches (calc/overlap)
        time_s = np.maximum(kernels, comm) + overhead + dispatch
    else:
        time_s = kernels + comm + overhead + dispatch
    if phase == "decode" and effs.decode_dispatch_per_layer_s > 0:     # an eager decode step: host-bound below L × t
        time_s, dispatch = host_bound(time_s, eager_decode_s(effs, phase, cost.layers))
    total_flops = (2 * (shapes.attention_params + shapes.mlp_params - routers) * n_a
                   + 2 * cost.lm_head_params * rows_a) / tp + 2 * routers * n_a + expert_flops + attn_flops
    total_bytes = weight_bytes + kv
    floor_s = np.maximum(total_bytes / bw, (total_flops - attn_flops) / peak + attn_flops / attn_peak)
    shape = np.broadcast_shapes(shape, np.shape(time_s))
    if times_only:
        return PassTimes(np.broadcast_to(np.asarray(time_s, dtype=np.float64), shape),
                         np.broadcast_to(np.asarray(floor_s, dtype=np.float64), shape))

    def full(x):
        return np.broadcast_to(np.asarray(x, dtype=np.float64), shape).copy()

    return PassCost(full(weight_bytes), full(kv), full(total_flops), np.broadcast_to(op_memory, (len(OP_NAMES), *shape)).copy(),
                    np.broadcast_to(op_compute, (len(OP_NAMES), *shape)).copy(), full(comm), full(overhead),
                    full(time_s), full(floor_s), full(touched), np.ones(shape), full(dispatch))


@dataclass(frozen=True)
class PassTimes:
    """A pass's step time and its floor only (``operator_pass(..., times_only=True)``), read-only arrays."""

    time_s: np.ndarray
    floor_s: np.ndarray


def op_times(passcost: PassCost) -> dict[str, np.ndarray]:
    """Each operator's time (the max of its two terms) by name."""
    t = np.maximum(passcost.op_memory_s, passcost.op_compute_s)
    return {name: t[i] for i, name in enumerate(OP_NAMES)}


__all__ = ["OP_NAMES", "OP_LABELS", "Parallel", "Linear", "Shapes", "model_shapes", "OperatorEfficiencies", "operator_pass",
           "PassTimes", "eager_dispatch_s", "eager_decode_s", "host_bound",
           "alltoall_hierarchical_s", "op_times", "padded_batch", "ByTP", "Curve", "Flat", "Grid"]

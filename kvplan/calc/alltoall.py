"""Expert-parallel all-to-all: the dispatch and combine of one MoE layer, as DeepEP runs them.

One function, :func:`ep_alltoall_s`, prices both for the roofline
(:func:`kvplan.calc.roofline.forward_pass`) and the per-operator model
(:func:`kvplan.calc.operators.operator_pass`); ``kvplan latency`` and ``kvplan pd`` both go through it.
(``kvplan latency --engine trtllm`` keeps a generic all-to-all of k bf16 copies: TensorRT-LLM runs
its own MoE communication kernels, not DeepEP's.)

Bytes per token copy (SI, per MoE layer, hidden size h)::

    dispatch  h × 1 B + ⌈h / 128⌉ × 4 B     FP8 (e4m3) with one fp32 scale per 128 channels,
                                            when the experts run FP8 GEMMs (compute dtype fp8)
              h × 2 B                       otherwise (bf16 / fp16 activations)
    combine   h × 2 B                       BF16 always

Sources: DeepSeek-V3 technical report (arXiv:2412.19437) §3.3.4 "we quantize the activation
before MoE up-projections into FP8 and then apply dispatch components … For both the forward and
backward combine components, we retain them in BF16", with 1 × 128 activation tiles (§3.3.2);
DeepEP README (deepseek-ai/DeepEP) "FP8 dispatching and BF16 combining"; DeepEP's
``tests/test_internode.py`` counts dispatch bytes as ``hidden × 2 × (1 + 4/128) / 2`` per copy.

Two kernel families (DeepEP README; SGLang ``--deepep-mode auto`` takes normal kernels for
prefill and low-latency kernels for decode), per rank with ``t`` tokens and top-k experts, over
``p`` EP ranks in scale-up domains (nodes) of ``g`` GPUs (``g = min(p, domain)``, ``n = ⌈p / g⌉``)::

    normal (prefill): a token goes once to each rank that holds any of its experts
        p ≤ g (one domain):   T = t × D(E, k, p) (p − 1)/p × bytes / BW_up + α_up
        p > g:                once per destination node over the NIC, then forwarded over NVLink:
                              RDMA = t × D(E, k, n, M) × bytes,  NVLink = t × D(E, k, p, M g) (g − 1)/g × bytes
                              T = max(RDMA / BW_nic, NVLink / BW_up) + α_nic
    low-latency (decode): every (token, expert) pair is its own message
        p ≤ g:                T = t × k (p − 1)/p × bytes / BW_up + α_up
        p > g:                T = t × k × bytes / BW_nic + α_nic   ("pure RDMA")

Scale-up legs count the copies that leave the GPU. NIC legs count bytes as DeepEP's benchmarks do,
the sender's own node included, because the NIC efficiency is DeepEP's printed bandwidth over
that count (see below): the formula then gives DeepEP's measured time.

``D(E, k, u, L)`` is the expected number of distinct units (nodes, or ranks) a token's k experts
sit on, the sender's own unit included — as DeepEP's tests count the bytes behind their printed
bandwidths (``num_rdma_token_sent``: (token, node) pairs after de-duplication; ``recv_x`` rows:
(token, rank) pairs; the low-latency test: every selection). E experts spread evenly over u
units, the k chosen without replacement among the experts of the m = min(L, u) units the
routing allows::

    D = m × (1 − C(E_m − E/u, k) / C(E_m, k)),   E_m = m × E / u

With node-limited routing (DeepSeek-V3 §2.1.2: "each token will be sent to at most M nodes",
M = 4, §4.2) a token's experts lie on M of the n nodes (M g of the ranks); without it L = u.

Inside one domain, where kvplan ships measured DeepEP latencies for the GPU (aiconfigurator's
``moe_a2a`` table in kvplan/data/perf: SGLang's DeepEP low-latency and normal kernels, EP8 in one
node, H100/H200/B200), the link is the one those rows give: a least-squares fit of
``latency = α + bytes / BW`` over the rows of each (kernel, phase) at DeepEP's default 20 SMs
(``Buffer.num_sms``), bytes counted as above (:func:`measured_in_domain`). These rows are the
fitting set for the in-domain case; elsewhere the card's link is used. Across domains the
fitted α (the kernel's fixed cost: layout, notify, launch) is kept as a floor under the NIC's.

Bandwidths are the links' effective figures (line rate × the card's efficiency): for the H800
node the NIC efficiency is DeepEP's measured internode EP32 bandwidth (44 GB/s of 50), which
DeepEP's test computes over exactly these logical bytes (distinct nodes incl. the sender's,
FP8 dispatch), so the formula reproduces the measured time by construction of the metric; the
low-latency table (39–46 GB/s, 128 tokens, EP8–EP256) is a separate check
(``tests/unit/test_alltoall.py``). α is the link's latency per message (one per all-to-all).
Load imbalance between ranks is charged in the expert GEMMs, not here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

FP8_SCALE_BLOCK = 128      # channels per fp32 scale (DeepSeek-V3 §3.3.2 1×128 activation tiles)
FP8_SCALE_BYTES = 4        # one float32 per block (DeepEP test_internode: (1 + 4/128) / 2 of bf16)
BF16_BYTES = 2


def dispatch_bytes_per_copy(hidden: int, fp8: bool) -> float:
    """Bytes of one token copy sent by the dispatch: FP8 + per-128 fp32 scales, or bf16."""
    if fp8:
        return float(hidden + math.ceil(hidden / FP8_SCALE_BLOCK) * FP8_SCALE_BYTES)
    return float(hidden * BF16_BYTES)


def combine_bytes_per_copy(hidden: int) -> float:
    """Bytes of one token copy returned by the combine: BF16."""
    return float(hidden * BF16_BYTES)


_LGAMMA = np.vectorize(lambda a: math.lgamma(a + 1.0) if a >= 0 else math.inf, otypes=[float])


def _log_comb(n, k: int):
    """log C(n, k) for real n ≥ k (through lgamma)."""
    n = np.asarray(n, dtype=np.float64)
    return _LGAMMA(n) - math.lgamma(k + 1.0) - _LGAMMA(n - k)


def expected_nodes(num_experts: int, k: int, nodes, max_nodes=None):
    """Expected distinct units (nodes or ranks) a token's k experts land on: ``m (1 − C(E_m − E/n, k) / C(E_m, k))``.

    E experts evenly over ``nodes`` (n) units, k distinct experts chosen uniformly among the
    E_m = m E / n experts of the m = min(M, n) units the routing allows (m = n without a limit).
    One unit: 1. Continuous n (E/n fractional) is allowed; C is taken through lgamma.
    """
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    m = n if max_nodes is None else np.minimum(n, np.asarray(max_nodes, dtype=np.float64))
    per_node = num_experts / n
    pool = m * per_node
    rest = pool - per_node
    with np.errstate(invalid="ignore", over="ignore"):
        miss = np.where(rest >= k, np.exp(_log_comb(rest, k) - _log_comb(pool, k)), 0.0)
    return np.where(n > 1, m * (1.0 - miss), 1.0)


DEEPEP_DEFAULT_SMS = "20"   # deepseek-ai/DeepEP buffer.py: Buffer.num_sms = 20 (normal kernels)
_LIBRARIES = {"deepep_ll": "low_latency", "deepep_normal": "normal"}


def _copies_one_domain(kernel: str, tokens, k, num_experts, ranks):
    """Copies leaving a rank inside one domain (the formulas above, p ≤ g)."""
    p = np.asarray(ranks, dtype=np.float64)
    per_token = expected_nodes(num_experts, k, p) if kernel == "normal" else np.asarray(k, dtype=np.float64)
    return np.asarray(tokens, dtype=np.float64) * per_token * (p - 1) / p


@lru_cache(maxsize=32)
def measured_in_domain(card_name: str) -> dict:
    """{(kernel, phase): (bytes_per_s, alpha_s, rows)} fitted on the shipped DeepEP rows of one GPU ({} if none).

    ``latency = α + bytes / BW`` by least squares on relative error (each row weighted by 1 / latency),
    bytes = copies leaving the rank (EP8, one node) × FP8-dispatch / BF16-combine bytes per copy.
    """
    from kvplan.calc.perfdb import load_default

    tables = load_default()
    gpu = tables.gpu_name(card_name) if tables is not None else None
    t = tables.table("moe_a2a", gpu) if gpu else None
    if t is None:
        return {}
    out = {}
    for library, kernel in _LIBRARIES.items():
        for phase in ("dispatch", "combine"):
            sel = (t["library"] == library) & (t["phase"] == phase) & (t["ep_size"] == "8")
            if kernel == "normal":
                sel &= t["sms"] == DEEPEP_DEFAULT_SMS
            if sel.sum() < 2:
                continue
            hidden, k, experts = t["hidden_size"][sel], t["topk"][sel], t["num_experts"][sel]
            copies = np.array([_copies_one_domain(kernel, n, int(kk), int(e), 8)
                               for n, kk, e in zip(t["num_tokens"][sel], k, experts)], dtype=np.float64)
            per_copy = np.array([dispatch_bytes_per_copy(int(h), True) if phase == "dispatch"
                                 else combine_bytes_per_copy(int(h)) for h in hidden])
            y = t["latency_s"][sel]
            a = np.stack([np.ones_like(y), copies * per_copy], axis=1) / y[:, None]
            (alpha, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
            if inv_bw > 0 and alpha >= 0:
                out[(kernel, phase)] = (1.0 / inv_bw, float(alpha), int(sel.sum()))
    return out


@dataclass(frozen=True)
class AllToAll:
    """One MoE layer's dispatch and combine on one rank (arrays): seconds and bytes per link."""

    dispatch_s: np.ndarray
    combine_s: np.ndarray
    nic_bytes: np.ndarray          # dispatch + combine, per rank, over the NIC (logical, DeepEP's count)
    scale_up_bytes: np.ndarray     # dispatch + combine, per rank, over the scale-up link
    kernel: str                    # "normal" or "low_latency"

    @property
    def time_s(self):
        return self.dispatch_s + self.combine_s


def kernel_for(phase: str | None) -> str:
    """DeepEP's kernel family for a phase: normal for prefill, low-latency for decode."""
    return "normal" if phase == "prefill" else "low_latency"


def ep_alltoall(tokens_per_rank, ranks, machine, *, hidden: int, num_experts: int, k: int,
                fp8_dispatch: bool, phase: str | None = "decode", max_nodes_per_token=None) -> AllToAll:
    """Dispatch + combine of one MoE layer for ``tokens_per_rank`` tokens on each of ``ranks`` EP ranks.

    ``machine`` gives the effective links (``scale_up_bytes_per_s``, ``nic_bytes_per_s``), their
    latencies and ``scale_up_domain``. Zero on one rank. See the module docstring for the formulas.
    """
    t = np.asarray(tokens_per_rank, dtype=np.float64)
    p = np.asarray(ranks, dtype=np.float64)
    domain = machine.scale_up_domain if machine.scale_up_domain and machine.scale_up_domain > 0 else 1.0
    g = np.minimum(p, domain)
    nodes = np.ceil(p / np.maximum(g, 1.0) - 1e-9)
    b_d = dispatch_bytes_per_copy(hidden, fp8_dispatch)
    b_c = combine_bytes_per_copy(hidden)
    kernel = kernel_for(phase)
    inside = p <= g
    with np.errstate(invalid="ignore", divide="ignore"):
        if kernel == "normal":
            rank_limit = None if max_nodes_per_token is None else max_nodes_per_token * g
            ranks_hit = t * expected_nodes(num_experts, k, p, rank_limit)
            up_copies = ranks_hit * np.where(inside, (p - 1) / p, (g - 1) / g)
            nic_copies = np.where(inside, 0.0, t * expected_nodes(num_experts, k, nodes, max_nodes_per_token))
        else:
            up_copies = np.where(inside, t * k * (p - 1) / p, 0.0)
            nic_copies = np.where(inside, 0.0, t * k)
        nic_bw = machine.nic_bytes_per_s
        measured = measured_in_domain(machine.name) if np.any(p > 1) else {}

        def one(bytes_per_copy, phase_name):
            fit = measured.get((kernel, phase_name))
            up_bw, up_lat = fit[:2] if fit else (machine.scale_up_bytes_per_s, machine.scale_up_latency_s)
            up_bw = np.where(inside, up_bw, machine.scale_up_bytes_per_s)
            up = np.where(up_copies > 0, up_copies * bytes_per_copy / up_bw, 0.0)
            out = np.where(nic_copies > 0, nic_copies * bytes_per_copy / nic_bw, 0.0)
            # the kernel's measured fixed cost does not vanish across nodes: α_nic ≥ the fitted α
            nic_lat = max(machine.nic_latency_s, fit[1]) if fit else machine.nic_latency_s
            alpha = np.where(inside, up_lat, nic_lat)
            return np.where(p > 1, np.maximum(up, out) + alpha, 0.0)

        dispatch, combine = one(b_d, "dispatch"), one(b_c, "combine")
    on = p > 1
    return AllToAll(dispatch, combine, np.where(on, nic_copies * (b_d + b_c), 0.0),
                    np.where(on, up_copies * (b_d + b_c), 0.0), kernel)


def ep_alltoall_s(cost, machine, tokens_per_rank, ranks, *, phase: str | None = "decode",
                  fp8_dispatch: bool | None = None) -> np.ndarray:
    """Seconds of one MoE layer's dispatch + combine for a :class:`~kvplan.calc.cost.ModelCost`.

    FP8 dispatch when the GEMMs run in fp8 (``machine.compute_dtype``), unless ``fp8_dispatch`` says.
    """
    fp8 = (machine.compute_dtype == "fp8") if fp8_dispatch is None else fp8_dispatch
    return ep_alltoall(tokens_per_rank, ranks, machine, hidden=cost.hidden_size, num_experts=cost.num_experts,
                       k=cost.experts_per_token, fp8_dispatch=fp8, phase=phase,
                       max_nodes_per_token=getattr(cost, "max_nodes_per_token", None)).time_s


__all__ = ["AllToAll", "measured_in_domain", "ep_alltoall", "ep_alltoall_s", "expected_nodes", "dispatch_bytes_per_copy",
           "combine_bytes_per_copy", "kernel_for"]

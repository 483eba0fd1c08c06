"""Per-kernel efficiency of the routed experts (kvplan/data/perf ``moe.csv``, and DeepGEMM's H800 figures under
DeepEP dispatch). :mod:`kvplan.calc.perfdb` re-exports these names and imports this module on the first MoE layer
priced, so that a dense model's command does not load it.

- MoE (``moe.csv``): bytes = touched local experts ``(E/ep)(1 − (1 − k/E)^T) × 3 h i/tp × w``;
  FLOPs ``6 T k h i / (tp ep)``; curve over tokens T for the nearest measured model shape,
  (tp, ep) and the power-law routing the collector synthesises (``power_law_1.01``).
"""

from __future__ import annotations

import math

import numpy as np

from kvplan.calc.efficiency import Curve
from kvplan.calc.perftables import BYTES, PerfTables, _curve, _memo, _nearest_rows

@_memo
def moe_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, hidden: float, inter: float, topk: float,
              experts: float, moe_tp: float, moe_ep: float, bw: float, peak: float, dispatch: str = "table",
              redundant: float = 0.0, phase: str = "decode") -> Curve | None:
    """η of the routed experts' grouped GEMMs versus tokens entering the MoE layer (the instance's tokens).

    ``dispatch="deepep"`` with EP beyond one 8-GPU node reads SGLang's measured DeepEP MoE layer where it was
    measured (:func:`wideep_curve`, ``phase`` "decode" or "prefill"), else DeepGEMM's H800 figures where they apply
    (:func:`deepgemm_curve`): the table's EP rows time one rank fed every token of the instance (see there).
    Where neither does (another GPU, expert shape or dtype), such a rank reads the table's EP 1 rows
    (:data:`DEEPEP_WITHOUT_DEEPGEMM`).
    """
    deepep = deepep_beyond_node(dispatch, moe_tp, moe_ep)
    if deepep:
        wide = wideep_curve(tables, gpu, dtype, hidden, inter, topk, experts, moe_ep, phase, bw, peak)
        if wide is not None:
            return wide
        wide = deepgemm_curve(gpu, dtype, hidden, inter, topk, experts + redundant, bw, peak)
        if wide is not None:
            return wide
        moe_ep = 1.0                  # DEEPEP_WITHOUT_DEEPGEMM: every expert local, at DeepEP's tokens per expert
    backend, rows = tables.backend("moe", gpu, engine, dtype=dtype)
    if rows is None:
        return None
    skew = rows["distribution"] == "power_law_1.01"
    if skew.any():
        rows = {k: v[skew] for k, v in rows.items()}
    rows = _nearest_rows(rows, ("hidden_size", "inter_size", "topk", "num_experts"), (hidden, inter, topk, experts))
    bracket = _ep_bracket(rows, moe_tp, moe_ep)
    if bracket is not None:
        return _ep_interpolated(rows, bracket, moe_ep, dtype, bw, peak, backend)
    rows = _nearest_rows(rows, ("moe_tp", "moe_ep"), (moe_tp, moe_ep))
    curve = _moe_rows_curve(rows, dtype, bw, peak, backend)
    if deepep and curve is not None:
        curve = Curve(curve.sizes, curve.eta, f"{curve.source}, read for a DeepEP rank beyond one node "
                                              "(kvplan.calc.perf_moe.DEEPEP_WITHOUT_DEEPGEMM)")
    return curve


# Expert-parallel sizes the MoE table's rows stand for as measured: EP inside one 8-GPU node, where vLLM
# (default --all2all-backend allgather_reducescatter) and SGLang (default --moe-a2a-backend none) hand every
# rank all the instance's tokens and an expert map, as aiconfigurator's collector does (collector/vllm/
# collect_moe.py: one rank, num_tokens hidden states routed over all experts, E / moe_ep of them local).
# Beyond a node the engines dispatch with DeepEP (vllm --all2all-backend deepep_*, sglang --moe-a2a-backend
# deepep), each rank receives only its own (token, expert) pairs, and the experts run DeepGEMM.
IN_NODE_EP = 8


def deepep_beyond_node(dispatch: str, moe_tp: float, moe_ep: float) -> bool:
    """Whether the routed experts are dispatched by DeepEP across nodes (pure EP beyond one 8-GPU node): the only
    case whose expert efficiency depends on the phase (:func:`wideep_curve`: low-latency decode, normal prefill)."""
    return dispatch == "deepep" and moe_tp == 1 and moe_ep > IN_NODE_EP
# A DeepEP rank beyond one node on a GPU, expert shape or dtype DeepGEMM's figures do not cover reads the MoE table's
# EP 1 rows (every expert local, moe_ep 1) at the instance's tokens, not its EP rows. Under DeepEP with EPLB each of
# the E experts receives T k / E of the T tokens entering the layer, as in an EP 1 row at T tokens, and a rank runs
# E / ep of them: kvplan's SOL of the rank (touched local experts' bytes, 6 T k h i / ep FLOPs) is the EP 1 row's
# SOL / ep, so with the row's η the rank takes the EP 1 row's time / ep. The table's EP rows instead time one rank
# handed all T tokens (above): at EP 16 on B200 (SGLang and vLLM tables, DeepSeek-V3 shape, T = 16,384) they read
# η 0.04, the EP 1 rows 0.20. Against SGLang 0.5.10's measured DeepEP MoE layer (moe_wideep.csv, which kvplan reads
# first where it applies; benchmarks/wide_ep_moe_check.py) this reading is optimistic: on B200 median −35 % (decode, 40
# rows at EP 16-256) and −42 % (prefill, 49 rows), where the EP rows were +71 % and +273 %; the measured layer carries
# DeepEP's own per-layer work (a ~0.37 ms floor in normal mode) that no kernel row holds. So it serves only shapes
# and GPUs neither the measured layer nor DeepGEMM's figures cover.
DEEPEP_WITHOUT_DEEPGEMM = ("the MoE table's EP 1 rows at the instance's tokens, each expert at T k / E tokens as "
                           "DeepEP with EPLB gives it, the rank's time their time / ep (no DeepGEMM figure for "
                           "this GPU, expert shape or dtype)")
# DeepGEMM's FP8 (128-block scaled) grouped GEMMs for MoE, DeepSeek-V3/R1 shapes without TP, measured on
# H800 SXM5 with NVCC 12.8: deepseek-ai/DeepGEMM README at commit 55ab91f72f76e8a6db0e86282c3169a88d93df1b
# (2025-03-25, "Update performance"; the last README with the per-shape tables), "Grouped GEMMs for MoE
# models (masked layout)" (decode, DeepEP low-latency) and "(contiguous layout)" (prefill, DeepEP normal).
# The rows live in kvplan/data/deepseek_h800_kernels.csv (kvplan.calc.deepseek_kernels.grouped_rows): (groups,
# m per group, N, K, FLOP/s); N x K = 4096 x 7168 is an expert's gate+up projection (2 x 2048 by hidden 7168),
# 7168 x 2048 its down projection.
DEEPGEMM_SOURCE = ("DeepGEMM FP8 grouped GEMMs on H800 SXM5 (deepseek-ai/DeepGEMM README @55ab91f: masked layout "
                   "m 256-1024 per expert, contiguous 4096-8192)")
# Tables whose GPU is the H800's die and HBM (H100 SXM: 3.35 TB/s HBM3, same tensor cores; H800 SXM runs them
# through STAND_INS): DeepGEMM's H800 times hold for them in both the memory- and the compute-bound rows.
DEEPGEMM_GPUS = frozenset({"h100_sxm", "h800_sxm"})   # h800_sxm: the DeepSeek H800 profile (no table)
# H200 SXM: the same GH100 tensor cores (989 / 1,979 dense TFLOPS BF16 / FP8) with 4.8 TB/s HBM3e instead of
# 3.35 TB/s HBM3 (NVIDIA H200 datasheet; kvplan's h200 card). Nobody publishes DeepGEMM's grouped GEMMs on it; the
# table's EP rows time one rank fed every token of the instance (above), which DeepEP dispatch does not do. So its
# η is DeepGEMM's H800 η taken against the H800's own SOL (3.35 TB/s, 1,978 TFLOPS FP8: the h800-sxm card) and
# applied to the H200's: compute-bound rows keep their time, memory-bound rows reach the same share of the faster
# HBM (an assumption, said in the source; the kvplan-wide reading of a flat η on any card).
TRANSFER_GPUS = {"h200_sxm": "H200"}
H800_BW, H800_FP8 = 3.35e12, 1978e12


WIDEEP_SOURCE = ("SGLang's DeepEP MoE layer measured on one rank of an EP world (aiconfigurator collector/wideep/"
                 "sglang/collect_deepep_moe.py, wide-EP tables @095f58a, uniform routing)")


@_memo
def wideep_curve(tables: PerfTables, gpu: str, dtype: str, hidden: float, inter: float, topk: float, experts: float,
                 ep: float, phase: str, bw: float, peak: float) -> Curve | None:
    """η of one DeepEP rank's routed experts from SGLang's measured wide-EP MoE layer (``moe_wideep.csv``).

    The rows (decode: DeepEP low-latency; prefill: DeepEP normal) time the MoE layer of one rank of an EP world of
    ``moe_ep`` ranks fed the dispatch output it receives, ``num_tokens`` T the tokens entering the instance, uniform
    routing (EPLB-balanced). Each row gives ``η = SOL / latency`` with kvplan's SOL of that rank, max((E / ep)(1 −
    (1 − k / E)^T) × 3 h i × B / BW, 6 T k h i / ep / peak), so at a measured (T, ep) the rank's time is the row's.
    An EP size between two measured ones takes η geometric in log(ep) between them at each T (as
    :func:`_ep_interpolated`); beyond the measured EP sizes, the nearest. None where no row has this GPU, dtype,
    phase and expert shape (hidden, inter, top-k, experts) exactly, or no EP beyond one node was measured."""
    rows = tables.select("moe_wideep", gpu=gpu, backend="sglang")
    if rows is None:
        return None
    sel = (rows["dtype"] == dtype) & (rows["phase"] == phase) & (rows["moe_ep"] > IN_NODE_EP)
    for col, value in (("hidden_size", hidden), ("inter_size", inter), ("topk", topk), ("num_experts", experts)):
        sel &= rows[col] == value
    if not sel.any():
        return None
    rows = {k: v[sel] for k, v in rows.items()}
    by_ep = {}
    for e in np.unique(rows["moe_ep"]):
        m = rows["moe_ep"] == e
        t, lat = rows["num_tokens"][m], rows["latency_s"][m]
        order = np.argsort(t)
        t, lat = t[order], lat[order]
        touched = experts / e * (1 - (1 - topk / experts) ** t)
        sol = np.maximum(touched * 3 * hidden * inter * BYTES.get(dtype, 2.0) / bw, 6 * t * topk * hidden * inter / e / peak)
        by_ep[float(e)] = Curve(tuple(map(float, t)), tuple(map(float, np.minimum(sol / lat, 1.0))), "")
    eps = sorted(by_ep)
    version = rows["backend_version"][0]
    label = (f"{WIDEEP_SOURCE}: SGLang {version}, {dtype}, {phase}, h={hidden:g}, inter={inter:g}, top-{topk:g} of "
             f"{experts:g}")
    if ep <= eps[0] or ep >= eps[-1] or ep in by_ep:
        near = min(eps, key=lambda e: abs(math.log(e / ep)))
        c = by_ep[near]
        return Curve(c.sizes, c.eta, f"{label}, EP {near:g}" + ("" if near == ep else f" (nearest measured to {ep:g})"))
    lo, hi = max(e for e in eps if e < ep), min(e for e in eps if e > ep)
    w = math.log(ep / lo) / math.log(hi / lo)
    sizes = sorted(set(by_ep[lo].sizes) | set(by_ep[hi].sizes))
    eta = [float(by_ep[lo](s)) ** (1 - w) * float(by_ep[hi](s)) ** w for s in sizes]
    return Curve(tuple(sizes), tuple(eta), f"{label}, EP {ep:g} between the measured EP {lo:g} and {hi:g}")


def deepgemm_curve(gpu: str, dtype: str, hidden: float, inter: float, topk: float, slots: float, bw: float,
                   peak: float) -> Curve | None:
    """η of one EP rank's grouped expert GEMMs under DeepEP dispatch, from DeepGEMM's H800 measurements.

    With DeepEP a rank receives only its own (token, expert) pairs: ``λ n k / ep`` over its ``slots / ep``
    local experts (``slots`` = E + redundant), i.e. ``m = n k / slots`` tokens per local expert (λ = 1:
    EPLB-balanced ranks, DeepGEMM's groups are of equal m). For each measured (groups G, m) the expert's
    two GEMMs take ``t = Σ 2 G m N K / TFLOPS`` and ``η = max(G × 3 h i × B / BW, 2 G m × 3 h i / peak) / t``,
    kvplan's own SOL of the expert GEMMs (weights only, B bytes a weight), so ``t_op = SOL / η`` returns
    DeepGEMM's time at its shapes. The curve's sizes are the tokens entering the layer, ``n = m × slots / k``.
    Outside m 256-8192 η is held at the end value: below 256 the kernel is memory-bound and reads the same
    weights in no more time, above 8192 it is compute-bound at DeepGEMM's plateau. None where DeepGEMM's rows
    do not apply: another GPU, weights other than 128-block FP8, an expert shape other than 7168 x 2048. On H200
    (:data:`TRANSFER_GPUS`) the η is taken against the H800's SOL and applied to the H200's.
    """
    if (gpu not in DEEPGEMM_GPUS and gpu not in TRANSFER_GPUS) or dtype != "fp8_block" or hidden != 7168 \
            or abs(inter - 2048) > 0.5:
        return None
    transfer = TRANSFER_GPUS.get(gpu)
    if transfer:                     # η against the H800's own SOL, applied to this GPU's (see TRANSFER_GPUS)
        bw, peak = H800_BW, H800_FP8
    from kvplan.calc.deepseek_kernels import grouped_rows

    by_m: dict[float, list] = {}
    for groups, m, n, k, flops_per_s in grouped_rows("masked") + grouped_rows("contiguous"):
        by_m.setdefault(float(m), [groups, 0.0])[1] += 2.0 * groups * m * n * k / flops_per_s
    sizes, eta = [], []
    for m, (groups, t) in sorted(by_m.items()):
        expert_params = 3.0 * hidden * inter
        sol = max(groups * expert_params * BYTES[dtype] / bw, 2.0 * groups * m * expert_params / peak)
        sizes.append(m * slots / topk)
        eta.append(min(sol / t, 1.0))
    moved = (f"; η transferred to {transfer} (same tensor cores, HBM3e: memory-bound rows at the same share of its "
             "bandwidth; not measured on it)") if transfer else ""
    return Curve(tuple(sizes), tuple(eta), f"{DEEPGEMM_SOURCE}; tokens per local expert n k / {slots:g} "
                                           f"under DeepEP dispatch, EPLB-balanced ranks{moved}")


def _moe_rows_curve(rows: dict, dtype: str, bw: float, peak: float, backend: str) -> Curve | None:
    t, h, i, kk, e = (rows[c] for c in ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts"))
    tp_, ep_ = rows["moe_tp"], rows["moe_ep"]
    touched = e / ep_ * (1 - (1 - kk / e) ** t)
    sol = np.maximum(touched * 3 * h * i / tp_ * BYTES.get(dtype, 2.0) / bw, 6 * t * kk * h * i / (tp_ * ep_) / peak)
    shape = f"h={h[0]:g}, inter={i[0]:g}, top-{kk[0]:g} of {e[0]:g}, moe_tp {tp_[0]:g}, moe_ep {ep_[0]:g}"
    return _curve(t, sol, rows["latency_s"], f"{backend} {rows['backend_version'][0]} {dtype} MoE {shape}")


def _ep_bracket(rows: dict, moe_tp: float, moe_ep: float) -> tuple[float, float] | None:
    """The measured expert-parallel sizes just below and above ``moe_ep`` (pure EP, moe_tp 1), if it lies between."""
    if moe_tp != 1:
        return None
    eps = np.unique(rows["moe_ep"][rows["moe_tp"] == 1])
    if moe_ep in eps or not (eps.size >= 2 and eps[0] < moe_ep < eps[-1]):
        return None
    return float(eps[eps < moe_ep].max()), float(eps[eps > moe_ep].min())


def _ep_interpolated(rows: dict, bracket: tuple[float, float], moe_ep: float, dtype: str, bw: float, peak: float,
                     backend: str) -> Curve | None:
    """η at an unmeasured EP size, geometric in log(ep) between the two measured sizes around it.

    The power-law rows time the most-loaded EP rank, whose excess over the mean grows with the number
    of EP groups (aiconfigurator's collector swaps the heaviest expert group onto the measured rank):
    EP16 sits between EP8 and EP32 (the kept sizes: benchmarks/compact_perf_data.py MOE_PAR), so its η is
    ``η_lo^(1−w) η_hi^w`` with ``w = ln(ep/ep_lo) / ln(ep_hi/ep_lo)`` at every measured token count.
    """
    lo_ep, hi_ep = bracket
    curves = []
    for ep in bracket:
        sel = (rows["moe_tp"] == 1) & (rows["moe_ep"] == ep)
        curves.append(_moe_rows_curve({k: v[sel] for k, v in rows.items()}, dtype, bw, peak, backend))
    if curves[0] is None or curves[1] is None:
        return curves[0] or curves[1]
    w = math.log(moe_ep / lo_ep) / math.log(hi_ep / lo_ep)
    sizes = np.unique(np.concatenate([np.asarray(c.sizes) for c in curves]))
    eta = np.exp((1 - w) * np.log(curves[0](sizes)) + w * np.log(curves[1](sizes)))
    source = (curves[1].source.replace(f"moe_ep {hi_ep:g}", f"moe_ep {moe_ep:g} (geometric between measured "
                                                           f"moe_ep {lo_ep:g} and {hi_ep:g})"))
    return Curve(tuple(float(x) for x in sizes), tuple(float(x) for x in eta), source)


__all__ = ["IN_NODE_EP", "deepep_beyond_node", "DEEPEP_WITHOUT_DEEPGEMM", "WIDEEP_SOURCE", "deepgemm_curve", "moe_curve", "wideep_curve"]

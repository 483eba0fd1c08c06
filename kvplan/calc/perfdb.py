"""Per-kernel efficiency tables: η curves from measured kernel latencies (kvplan/data/perf).

The tables are NVIDIA aiconfigurator's measured single-kernel latencies (Apache-2.0; see
kvplan/data/perf/README.md for origin, conversions and what was kept) and, for MI300X (gfx942, 304 CUs),
AMD's ROCm/aiter tuned-kernel timings (MIT; kvplan/data/perf/aiter/README.md: block-FP8 and int8 W8A8 GEMMs
and fused MoE, backend ``aiter``, read for every engine; int8 W8A8 stands in for per-tensor FP8, ``DTYPE_STAND_INS``). Each measured row gives

    η = SOL / latency,   SOL = max(bytes / HBM bandwidth, FLOPs / peak of the kernel's dtype)

with the same byte and FLOP counts the step model charges for that operator, so at a measured
shape the model reproduces the measured latency exactly; between measured sizes η is linear in
log(size) (:class:`kvplan.calc.efficiency.Curve`), outside it is clamped and the command says so.

- GEMM (``gemm.csv``): bytes = weights ``n k w``; FLOPs ``2 m n k``; curve over m at the operator's
  per-GPU (n, k), bilinear in (log n, log k) between the measured pairs around it (:mod:`kvplan.calc.gemm_grid`;
  the nearest measured pair where none bracket it); a layer group's GEMMs combine harmonically by their SOL.
- MoE (``moe.csv``): bytes = touched local experts ``(E/ep)(1 − (1 − k/E)^T) × 3 h i/tp × w``;
  FLOPs ``6 T k h i / (tp ep)``; curve over tokens T for the nearest measured model shape,
  (tp, ep) and the power-law routing the collector synthesises (``power_law_1.01``).
- decode attention (``attention_decode.csv``, ``mla_decode.csv``): bytes = ``batch × context ×``
  KV bytes per token per layer; FLOPs ``2 × heads × (d + d_v)`` per key (MLA: 1088 per head);
  grid over (batch, context) for the nearest measured head geometry.
- prefill attention (``attention_prefill.csv``, ``mla_prefill.csv``): causal FLOPs
  ``2 × heads × (d + d_v) × isl(isl+1)/2``; curve over isl at batch 1.
- collectives (``comm.csv``): the measured latency itself, versus message bytes, per rank count (MI300X: RCCL
  all-reduce on 8 GPUs in HIP-graph mode, ``rccl/``).

Only numpy and the csv module; tables are read on first use and cached.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvplan.calc import gemm_grid
from kvplan.calc.perfcsv import line_span, read_columns
from kvplan.calc.efficiency import Curve, Flat, Grid, LatencyCurve, curve_from_rows, distinct_values, nearest_index

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"
# Further directories of the same schema, read after DATA (their rows appended): AMD's aiter cut for MI300X, and
# rccl-tests all-reduce on 8 MI300X from AMD's ROCm blog (kvplan/data/perf/rccl/README.md).
EXTRA = ("aiter", "rccl")
# Who measured a backend's rows, for the curves' sources and the notes (default: NVIDIA aiconfigurator).
ORIGIN = {"aiter": "AMD", "rccl": "AMD ROCm blog (rccl-tests on 8 MI300X, ROCm/rocm-blogs @c263176)"}
BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "w4a16_mxfp4": 0.5,
         "w4a8_mxfp4_mxfp8": 0.5, "int8_wo": 1.0, "int4_wo": 0.5, "sq": 1.0}
PEAK_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4",
              "w4a16_mxfp4": "bf16", "w4a8_mxfp4_mxfp8": "fp8", "int8_wo": "bf16", "int4_wo": "bf16", "sq": "int8"}
def _read(path: Path, gpu: str | None = None, backend: str | None = None, data: bytes | None = None,
          dtype: str | None = None) -> dict:
    """Columns of a table; with ``gpu`` (, ``backend``, ``dtype``), only those rows (:func:`perfcsv.read_columns`)."""
    prefix = None if gpu is None else f"{gpu}," + (f"{backend}," if backend else "")
    return read_columns(path, prefix, data, dtype if backend and gpu else None)


# Cards without tables of their own that run on a measured GPU's tables (same die and HBM): the
# resolver names the stand-in in its notes.
STAND_INS = {
    "gb200": ("b200", "GB200's GPU is the B200's Blackwell die with the same 8 TB/s HBM3e (GB200 NVL72 "
                      "datasheet: 576 TB/s for 72 GPUs); it runs at a higher power limit (1,200 W vs 1,000 W), "
                      "so its compute-bound kernels may beat the B200 measurements"),
}


@dataclass
class PerfTables:
    """The shipped tables, read lazily; ``root`` is a directory of the CSVs (kvplan/data/perf)."""

    root: Path
    extra: tuple[Path, ...] = ()
    _cache: dict = field(default_factory=dict)

    def raw(self, name: str) -> list[tuple[Path, bytes]]:
        """Each directory's ``name.csv`` as bytes (read once): a command reads its GPU's rows out of them."""
        if ("raw", name) not in self._cache:
            self._cache[("raw", name)] = [(d / f"{name}.csv", (d / f"{name}.csv").read_bytes())
                                          for d in (self.root, *self.extra) if (d / f"{name}.csv").exists()]
        return self._cache[("raw", name)]

    def backends(self, name: str, gpu: str) -> set[str]:
        """The backends that have rows of ``gpu`` in table ``name`` (a byte search, nothing parsed; once per
        table and GPU: a sweep asks for every combination, ~4 ms a search of the GEMM table)."""
        if ("backends", name, gpu) not in self._cache:
            found = set()
            key = f"\n{gpu},".encode()
            for _, data in self.raw(name):
                span = line_span(data, f"{gpu},")                 # the GPU's block: its first to its last line
                block = data[span[0] - 1:span[1]] if span else b""
                found |= {b for b in ("trtllm", "vllm", "sglang", "aiter") if key + f"{b},".encode() in block}
            self._cache[("backends", name, gpu)] = frozenset(found)
        return set(self._cache[("backends", name, gpu)])

    def table(self, name: str, gpu: str | None = None, backend: str | None = None,
              dtype: str | None = None) -> dict[str, np.ndarray] | None:
        """One table's columns: ``root``'s file, then each ``extra`` directory's rows (same header) appended;
        with ``gpu`` (, ``backend``; ``dtype`` in the GEMM table), only those rows."""
        dtype = dtype if name == "gemm" and backend and gpu else None
        key = (name, gpu) if backend is None or gpu is None else (name, gpu, backend, dtype)
        if key not in self._cache:
            parts = [_read(path, gpu, backend, data, dtype) for path, data in self.raw(name)]
            parts = [p for p in parts if len(next(iter(p.values()), []))]
            out = None
            if parts:
                out = {c: np.concatenate([p[c] for p in parts]) for c in parts[0] if all(c in p for p in parts)}
            self._cache[key] = out
            if out is not None and not len(out.get("latency_s", [0])):
                self._cache[key] = None
        return self._cache[key]

    def gpu_name(self, card_name: str) -> str | None:
        gpus = self.table("gpus")
        if gpus is None:
            return None
        hit = np.flatnonzero(gpus["card"] == card_name)
        if not hit.size and card_name in STAND_INS:
            hit = np.flatnonzero(gpus["card"] == STAND_INS[card_name][0])
        return str(gpus["gpu"][hit[0]]) if hit.size else None

    def select(self, name: str, **equal) -> dict[str, np.ndarray] | None:
        t = self.table(name, equal.get("gpu"), equal.get("backend"), equal.get("dtype"))
        if t is None:
            return None
        mask = np.ones(len(t["latency_s"]), dtype=bool)
        for key, value in equal.items():
            mask &= t[key] == value
        if not mask.any():
            return None
        return {k: v[mask] for k, v in t.items()}

    def backend(self, name: str, gpu: str, engine: str, **equal) -> tuple[str, dict] | tuple[None, None]:
        """The engine's own rows where measured, else TensorRT-LLM's, else any backend's (read one by one)."""
        for b in dict.fromkeys([engine, "trtllm", "vllm", "sglang", "aiter"]):
            rows = self.select(name, gpu=gpu, backend=b, **equal)
            if rows is not None:
                return b, rows
        return None, None


def _memo(fn):
    """Resolve a frozen curve once per tables and arguments: a parallelism search asks for the same
    (GPU, dtype, shape) at every candidate that shares it, and the scale-out rows ask again."""
    @functools.wraps(fn)
    def cached(tables: PerfTables, *args, **kwargs):
        key = (fn.__name__, args, tuple(sorted(kwargs.items())))
        if key not in tables._cache:
            tables._cache[key] = fn(tables, *args, **kwargs)
        return tables._cache[key]
    return cached


def _nearest_rows(rows: dict, keys: tuple[str, ...], target: tuple[float, ...]) -> dict:
    """The rows whose ``keys`` equal the combination nearest ``target`` in log space."""
    stacked = np.stack([rows[k] for k in keys], axis=1)
    # the distinct rows in lexicographic order, as np.unique(stacked, axis=0) (which imports numpy.ma)
    combos = np.array(sorted(set(map(tuple, stacked.tolist()))), dtype=stacked.dtype).reshape(-1, len(keys))
    best = combos[nearest_index(combos, np.asarray(target, dtype=np.float64))]
    mask = np.ones(len(rows["latency_s"]), dtype=bool)
    for k, v in zip(keys, best):
        mask &= rows[k] == v
    return {k: v[mask] for k, v in rows.items()}


# GEMM dtypes a GPU's tables do not hold, read from the rows of a measured dtype with the same operand width and
# the same dense peak on that GPU: (gpu, dtype) -> (stand-in dtype, why). MI300X per-tensor FP8 (vLLM's ROCm FP8
# linears: hipBLASLt torch._scaled_mm / wvSplitKQ, no public MI300X timing at these shapes) reads AMD's int8 W8A8
# CK rowwise GEMMs tuned on MI300X for Llama-3.1-70B/405B (ROCm/aiter PR #1092, kvplan/data/perf/aiter README).
DTYPE_STAND_INS = {
    ("mi300x", "fp8"): ("sq", "int8 W8A8 CK rowwise GEMMs measured on MI300X (ROCm/aiter PR #1092) stand in for "
                              "per-tensor FP8: 1-byte operands both, MI300X dense peak 2,614.9 TOPS int8 = TFLOPS "
                              "fp8 (data sheet); vLLM's own FP8 kernels (hipBLASLt, wvSplitKQ) are not measured"),
}


@_memo   # curves are frozen: one per shape and GPU
def gemm_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, n: float, k: float, bw: float,
               peak: float) -> Curve | None:
    """η(m) of one GEMM at its per-GPU (n, k) (:func:`kvplan.calc.gemm_grid.measured_curve`)."""
    backend, rows = tables.backend("gemm", gpu, engine, dtype=dtype)
    read_as, why = dtype, ""
    if rows is None and (gpu, dtype) in DTYPE_STAND_INS:
        read_as, why = DTYPE_STAND_INS[(gpu, dtype)]
        backend, rows = tables.backend("gemm", gpu, engine, dtype=read_as)
    if rows is None:
        return None
    label = read_as if read_as == dtype else f"{read_as} (for {dtype}: {why})"
    head = f"{ORIGIN.get(backend, 'aiconfigurator')} {backend} {rows['backend_version'][0]} {label} GEMM"
    # the query's bytes per weight and peak: a stand-in dtype has the same width and peak (DTYPE_STAND_INS)
    return gemm_grid.measured_curve(rows, n, k, BYTES.get(dtype, 2.0), bw, peak, head)


@_memo
def group_gemm_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, gemms: tuple, bw: float,
                     peak: float) -> Curve | None:
    """η(m) of a layer group's GEMMs run at one m, ``gemms`` its (label, n, k, weight) per GPU
    (:meth:`kvplan.calc.shapes.Shapes.gemm_list`): each GEMM's :func:`gemm_curve`, combined as
    ``1 / Σ f_g / η_g(m)`` (:func:`kvplan.calc.gemm_grid.group_curve`); None where any has no rows."""
    curves = [gemm_curve(tables, gpu, engine, dtype, float(n), float(k), bw, peak) for _, n, k, _ in gemms]
    if any(c is None for c in curves) or len(curves) == 1:
        return curves[0] if len(curves) == 1 else None
    return gemm_grid.group_curve([(g[3], c) for g, c in zip(gemms, curves)], gemm_grid.group_source(gemms, curves))


def _curve(sizes, sol, latency, source) -> Curve | None:
    return curve_from_rows(sizes, sol, latency, f"{ORIGIN.get(source.split()[0], 'aiconfigurator')} {source}")


@_memo
def moe_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, hidden: float, inter: float, topk: float,
              experts: float, moe_tp: float, moe_ep: float, bw: float, peak: float, dispatch: str = "table",
              redundant: float = 0.0) -> Curve | None:
    """η of the routed experts' grouped GEMMs versus tokens entering the MoE layer (the instance's tokens).

    ``dispatch="deepep"`` with EP beyond one 8-GPU node reads DeepGEMM's H800 figures where they apply
    (:func:`deepgemm_curve`): the table's EP rows time one rank fed every token of the instance (see there).
    """
    if dispatch == "deepep" and moe_tp == 1 and moe_ep > IN_NODE_EP:
        wide = deepgemm_curve(gpu, dtype, hidden, inter, topk, experts + redundant, bw, peak)
        if wide is not None:
            return wide
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
    return _moe_rows_curve(rows, dtype, bw, peak, backend)


# Expert-parallel sizes the MoE table's rows stand for as measured: EP inside one 8-GPU node, where vLLM
# (default --all2all-backend allgather_reducescatter) and SGLang (default --moe-a2a-backend none) hand every
# rank all the instance's tokens and an expert map, as aiconfigurator's collector does (collector/vllm/
# collect_moe.py: one rank, num_tokens hidden states routed over all experts, E / moe_ep of them local).
# Beyond a node the engines dispatch with DeepEP (vllm --all2all-backend deepep_*, sglang --moe-a2a-backend
# deepep), each rank receives only its own (token, expert) pairs, and the experts run DeepGEMM.
IN_NODE_EP = 8
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
    EP4 sits between EP1 (every expert local: no rank imbalance) and EP8, so its η is
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


@_memo
def decode_attention_grid(tables: PerfTables, gpu: str, engine: str, kv_dtype: str, mla: bool, heads: float,
                          kv_heads: float, head_dim: float, bw: float, peak: float) -> Grid | None:
    name = "mla_decode" if mla else "attention_decode"
    backend, rows = tables.backend(name, gpu, engine, kv_dtype=kv_dtype)
    if rows is None:
        return None
    kvb = BYTES.get(kv_dtype, 2.0)
    if mla:
        rows = _nearest_rows(rows, ("num_heads",), (heads,))
        per_token_bytes = 576 * kvb
        flops_per_key = 2 * rows["num_heads"] * 1088
        geometry = f"MLA {rows['num_heads'][0]:g} heads"
    else:
        rows = _nearest_rows(rows, ("num_heads", "num_kv_heads", "head_dim"), (heads, kv_heads, head_dim))
        per_token_bytes = 2 * rows["num_kv_heads"] * rows["head_dim"] * kvb
        flops_per_key = 4 * rows["num_heads"] * rows["head_dim"]
        geometry = f"{rows['num_heads'][0]:g}/{rows['num_kv_heads'][0]:g} heads of {rows['head_dim'][0]:g}"
    b, c = rows["batch"], rows["context_tokens"]
    sol = np.maximum(b * c * per_token_bytes / bw, b * c * flops_per_key / peak)
    eta = np.minimum(sol / rows["latency_s"], 1.0)
    bs, cs = distinct_values(b), distinct_values(c)
    table = np.full((bs.size, cs.size), np.nan)
    for bi, ci, e in zip(np.searchsorted(bs, b), np.searchsorted(cs, c), eta):
        table[bi, ci] = e if np.isnan(table[bi, ci]) else (table[bi, ci] + e) / 2
    for bi in range(bs.size):                       # unmeasured corners: the nearest measured context
        row = table[bi]
        have = np.flatnonzero(~np.isnan(row))
        if not have.size:
            row[:] = np.nanmean(table) if np.isfinite(np.nanmean(table)) else 0.5
            continue
        for ci in np.flatnonzero(np.isnan(row)):
            row[ci] = row[have[np.argmin(np.abs(have - ci))]]
    return Grid(tuple(bs.tolist()), tuple(cs.tolist()), tuple(map(tuple, table.tolist())),
                f"aiconfigurator {backend} {rows['backend_version'][0]} decode attention, {geometry}, KV {kv_dtype}")


@_memo
def prefill_attention_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, mla: bool, heads: float,
                            kv_heads: float, head_dim: float, bw: float, peak: float) -> Curve | None:
    """η of prefill attention versus prompt tokens; ``dtype`` is the KV cache's (``bf16`` or ``fp8``).

    Rows are selected by their ``kv_dtype``: GQA rows have equal attention and KV dtypes, while every MLA
    prefill row computes in BF16 (``dtype`` bf16) over a bf16 or fp8 cache, so an FP8-KV MLA prefill is
    the ``kv_dtype`` fp8 rows (the attention's own dtype is not fp8 in any of them).
    """
    name = "mla_prefill" if mla else "attention_prefill"
    backend, rows = tables.backend(name, gpu, engine, kv_dtype=dtype)
    if rows is None:
        return None
    rows = {k: v[rows["batch"] == 1] for k, v in rows.items()} if (rows["batch"] == 1).any() else rows
    if mla:
        rows = _nearest_rows(rows, ("num_heads",), (heads,))
        per_key = 2 * rows["num_heads"] * (192 + 128)
    else:
        rows = _nearest_rows(rows, ("num_heads", "num_kv_heads", "head_dim"), (heads, kv_heads, head_dim))
        per_key = 4 * rows["num_heads"] * rows["head_dim"]
    s = rows["isl_tokens"]
    sol = rows["batch"] * per_key * s * (s + 1) / 2 / peak
    return _curve(s, sol, rows["latency_s"],
                  f"{backend} {rows['backend_version'][0]} prefill attention {rows['dtype'][0]}, KV {dtype}")


def collective_curves(tables: PerfTables, gpu: str, engine: str) -> dict:
    """(op, ranks) → LatencyCurve: the engine's custom all-reduce where measured, NCCL otherwise."""
    key = ("collective_curves", gpu, engine)  # the curves are frozen; each caller gets its own dict
    if key not in tables._cache:
        tables._cache[key] = _collective_curves(tables, gpu, engine)
    return dict(tables._cache[key])


def _collective_curves(tables: PerfTables, gpu: str, engine: str) -> dict:
    t = tables.table("comm", gpu)
    if t is None:
        return {}
    out = {}
    ops = {"all_reduce": "all_reduce", "all_gather": "all_gather", "alltoall": "all_to_all"}
    for op, key in ops.items():
        for p in (2, 4, 8):
            mask = (t["gpu"] == gpu) & (t["op"] == op) & (t["num_gpus"] == p) & (t["dtype"] != "int8")
            if not mask.any():
                continue
            libs = t["library"][mask]
            custom = [lib for lib in dict.fromkeys(libs) if engine.lower() in str(lib).lower()]
            lib = custom[0] if custom and op == "all_reduce" else "nccl"
            sel = mask & (t["library"] == lib)
            if not sel.any():
                sel = mask
            x, y = t["message_bytes"][sel], t["latency_s"][sel]
            who = ORIGIN.get(str(t["backend"][sel][0]), "aiconfigurator")
            order = np.argsort(x)
            x, y = x[order], y[order]
            ux = distinct_values(x)
            uy = np.array([y[x == u].mean() for u in ux])
            lib = str(t["library"][sel][0])
            out[(key, p)] = LatencyCurve(tuple(ux.tolist()), tuple(uy.tolist()), f"{who} {lib} {op} on {p} GPUs")
    return out


# Where the rows of a GPU come from, for the notes: (label, what the engines run, named once per command).
AITER_NOTE = (
    "MI300X rows: AMD's ROCm/aiter tuned-kernel CSVs @e404860 (aiter/configs/model_configs/*_tuned_*.csv, cu_num "
    "304 = gfx942: MI300X and MI325X share it and the tuner records no product name), the measured time of the best "
    "kernel per shape (aiter/utility/mp_tuner.py -> aiter/test_common.py run_perftest: profiler device time, inputs "
    "rotated beyond L2): block-FP8 GEMMs and fused MoE, tuned in 2026, and int8 W8A8 GEMMs at Llama-3.1-70B/405B shapes "
    "(ROCm/aiter PR #1092 @035725098d, 2025-09), which stand in for per-tensor FP8. SGLang's ROCm image sets "
    "SGLANG_USE_AITER=1 (sgl-project/sglang docker/rocm.Dockerfile) and runs block-FP8 linears through aiter's "
    "gemm_a8w8_blockscale and MoE through aiter's fused_moe; vLLM calls aiter only with VLLM_ROCM_USE_AITER=1 "
    "(vllm/envs.py, off by default), and its per-tensor FP8 linears run hipBLASLt / wvSplitKQ, not aiter: the int8 "
    "CK rowwise rows are the nearest measured operator (same GPU, shapes, operand width and peak), not vLLM's kernel. "
    "aiter's first release is v0.1.1 (2025-04-26): engine builds before it did not run these kernels. No public "
    "MI300X attention table was found: attention keeps the card's η. The TP all-reduce on 8 MI300X reads rccl-tests' "
    "HIP-graph all_reduce_perf from AMD's ROCm blog 'Understanding RCCL Bandwidth and xGMI Performance on AMD "
    "Instinct MI300X' (2025-03-02; kvplan/data/perf/rccl): RCCL's time, not the engines' own custom all-reduce")
ORIGIN_NOTES = {"aiter": ("AMD ROCm/aiter tuned-kernel timings, kvplan/data/perf/aiter", AITER_NOTE)}


def origin(tables: PerfTables, gpu: str) -> tuple[str, str | None]:
    """(label, note) of whoever measured ``gpu``'s GEMM rows: aiconfigurator's by default."""
    backends = tables.backends("gemm", gpu)
    for backend, found in ORIGIN_NOTES.items():
        if backends == {backend}:
            return found
    return "NVIDIA aiconfigurator, kvplan/data/perf", None


def coverage(tables: PerfTables | None, card_name: str) -> str:
    """What a GPU's tables do hold, for the note of a deployment they do not cover (MI300X: aiter's dtypes)."""
    gpu = tables.gpu_name(card_name) if tables is not None else None
    if gpu is None or origin(tables, gpu)[1] is None:
        return ""
    def held(name: str) -> str:
        t = tables.table(name, gpu)
        return ", ".join(sorted(set(t["dtype"].tolist()))) if t is not None else "none"

    return (f" ({card_name}'s tables, {origin(tables, gpu)[0]}, hold GEMM rows of {held('gemm')} and MoE rows of "
            f"{held('moe')} only; "
            "no bf16 GEMM measured on this GPU; per-tensor FP8 reads the int8 W8A8 rows, and vLLM's per-tensor FP8 "
            "linears on ROCm run hipBLASLt / wvSplitKQ, not aiter)")


@lru_cache(maxsize=1)
def load_default() -> PerfTables | None:
    """The tables that ship with kvplan, or None where none do."""
    return PerfTables(DATA, tuple(DATA / d for d in EXTRA)) if (DATA / "gemm.csv").exists() else None


__all__ = ["PerfTables", "load_default", "origin", "coverage", "gemm_curve", "group_gemm_curve", "moe_curve", "deepgemm_curve", "IN_NODE_EP",
           "decode_attention_grid", "prefill_attention_curve", "collective_curves", "BYTES", "PEAK_DTYPE", "Flat",
           "STAND_INS", "DTYPE_STAND_INS"]

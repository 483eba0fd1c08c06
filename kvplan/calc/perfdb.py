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

Only numpy (and the csv module for cells it must unquote); tables are read on first use and cached
(:mod:`kvplan.calc.perftables`), the MoE curves live in :mod:`kvplan.calc.perf_moe`.
"""

from __future__ import annotations

import numpy as np

from kvplan.calc import gemm_grid
from kvplan.calc.efficiency import Curve, Flat, Grid, LatencyCurve, distinct_values
from kvplan.calc.perftables import (BYTES, DATA, EXTRA, ORIGIN, PEAK_DTYPE, STAND_INS, PerfTables,  # noqa: F401
                                    _curve, _memo, _nearest_rows, load_default)

# GEMM dtypes a GPU's tables do not hold, read from the rows of a measured dtype with the same operand width and
# the same dense peak on that GPU: (gpu, dtype) -> (stand-in dtype, why). MI300X per-tensor FP8 (vLLM's ROCm FP8
# linears: hipBLASLt torch._scaled_mm / wvSplitKQ, no public MI300X timing at these shapes) reads AMD's int8 W8A8
# CK rowwise GEMMs tuned on MI300X for Llama-3.1-70B/405B (ROCm/aiter PR #1092, kvplan/data/perf/aiter README).
DTYPE_STAND_INS = {
    ("mi300x", "fp8"): ("sq", "int8 W8A8 CK rowwise GEMMs measured on MI300X (ROCm/aiter PR #1092) stand in for "
                              "per-tensor FP8: 1-byte operands both, MI300X dense peak 2,614.9 TOPS int8 = TFLOPS "
                              "fp8 (data sheet); vLLM's own FP8 kernels (hipBLASLt, wvSplitKQ) are not measured"),
}

# GEMM rows an engine's own collector did not time as the engine runs them, read from another backend's rows of the
# same kernel: (engine, dtype) -> (backend read, why). benchmarks/compact_perf_data.py EXCLUDE_DTYPES drops the rows.
ENGINE_STAND_INS = {
    ("vllm", "fp8_block"): ("sglang", "vLLM's own fp8_block rows were timed without a CUDA graph (aiconfigurator "
                                      "collector/vllm/collect_gemm.py @095f58a: use_cuda_graph=gemm_type != 'fp8_block'), "
                                      "host launch gaps included, and are not shipped; SGLang's graph-timed DeepGEMM "
                                      "rows stand in, the kernel that collector forces (VLLM_USE_DEEP_GEMM=1)"),
}


# TensorRT-LLM per-tensor FP8 GEMMs of a checkpoint with static input scales, read from the dynamic-FP8 rows less the
# activation-quantisation kernels that checkpoint does not run: table dtype -> the quantize ops subtracted.
# aiconfigurator's TensorRT-LLM GEMM collector builds its FP8 Linear without an input_scale, so every fp8 row runs the
# dynamic path (collector/trtllm/collect_gemm.py @095f58a: "the collected fp8 GEMM includes the compute-scale
# overhead"); its collect_computescale.py times that path's two parts (compute_scale = dynamic − static per-tensor
# quantisation, scale_matrix = the static quantise), kvplan/data/perf/quantize.csv. aiconfigurator prices such a
# checkpoint (its fp8_static mode: per-tensor FP8 without a dynamic-activation marker, as ModelOpt's FP8 exports
# are: sdk/models/helpers.py _infer_quant_modes_from_raw_config) as the fp8 row minus compute_scale, and minus
# scale_matrix too for a GEMM whose input arrives in FP8 from the kernel before it (the attention output into O,
# the gated activation into down: sdk/models/llama.py low_precision_input; rust operators/gemm.rs GemmOp::query),
# floored at the GEMM's roofline.
STATIC_FP8 = {
    "fp8_static": ("compute_scale",),                    # static input scale: no amax reduction
    "fp8_static_in": ("compute_scale", "scale_matrix"),  # static input scale, input already FP8: no quantise either
}
STATIC_FP8_INPUT = ("O", "down")   # the GEMMs whose input the kernel before them writes in FP8 (llama.py)
STATIC_FP8_NOTE = ("TensorRT-LLM per-tensor FP8 (a ModelOpt checkpoint: static activation scales): each GEMM is "
                   "aiconfigurator's dynamic-FP8 row less its measured compute_scale kernel, O and down also less "
                   "the quantise (their input arrives in FP8), floored at the roofline, as aiconfigurator's "
                   "fp8_static mode prices it (kvplan.calc.perfdb.STATIC_FP8)")


def _static_fp8_rows(tables: PerfTables, gpu: str, backend: str, version: str, rows: dict, ops: tuple,
                     bw: float, peak: float) -> dict | None:
    """The fp8 GEMM rows with each row's quantisation kernels at its own (m, k) taken off, floored at the GEMM's
    roofline; None where the quantize table has no rows of this GPU and version."""
    q = tables.select("quantize", gpu=gpu, backend=backend)
    if q is None:
        return None
    q = {c: v[q["backend_version"] == version] for c, v in q.items()}
    delta = np.zeros(len(rows["latency_s"]))
    for op in ops:
        sel = q["op"] == op
        if not sel.any():
            return None
        table = {(m, k): lat for m, k, lat in zip(q["m"][sel].tolist(), q["k"][sel].tolist(),
                                                   q["latency_s"][sel].tolist())}
        ks = distinct_values(q["k"][sel])
        for i, (m, k) in enumerate(zip(rows["m"].tolist(), rows["k"].tolist())):
            if (m, k) in table:
                delta[i] += table[(m, k)]
            else:                                   # k between measured ones: linear in log k, held at the ends
                kq = min(max(k, ks[0]), ks[-1])
                lo, hi, w = gemm_grid._bracket(ks, float(kq))
                a, b = table.get((m, lo)), table.get((m, hi))
                if a is None or b is None:
                    return None
                delta[i] += (1 - w) * a + w * b
    m, n, k = rows["m"], rows["n"], rows["k"]
    sol = np.maximum(n * k * BYTES["fp8"] / bw, 2 * m * n * k / peak)
    out = dict(rows)
    out["latency_s"] = np.maximum(rows["latency_s"] - delta, sol)
    return out


@_memo   # curves are frozen: one per shape and GPU
def gemm_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, n: float, k: float, bw: float,
               peak: float) -> Curve | None:
    """η(m) of one GEMM at its per-GPU (n, k) (:func:`kvplan.calc.gemm_grid.measured_curve`)."""
    static = STATIC_FP8.get(dtype)
    query = "fp8" if static else dtype                  # a static-scale GEMM starts from the dynamic-FP8 rows
    read_by, by_why = ENGINE_STAND_INS.get((engine, query), (engine, ""))
    backend, rows = tables.backend("gemm", gpu, read_by, dtype=query)
    read_as, why = query, ""
    if rows is None and (gpu, query) in DTYPE_STAND_INS:
        read_as, why = DTYPE_STAND_INS[(gpu, query)]
        backend, rows = tables.backend("gemm", gpu, engine, dtype=read_as)
    if rows is None:
        return None
    label = read_as if read_as == query else f"{read_as} (for {query}: {why})"
    if by_why and backend == read_by:
        label = f"{label} (for {engine}, whose own rows were timed without CUDA graphs: kvplan.calc.perfdb.ENGINE_STAND_INS)"
    # the query's bytes per weight and peak: a stand-in dtype has the same width and peak (DTYPE_STAND_INS)
    key = ("gemm pairs", gpu, backend, read_as)        # the rows' measured grid, once for every shape priced on it
    if key not in tables._cache:
        tables._cache[key] = gemm_grid.measured_pairs(rows)
    if static:
        rows_key = ("static fp8 rows", gpu, backend, dtype, bw, peak)   # once for every shape priced on them
        if rows_key not in tables._cache:
            tables._cache[rows_key] = _static_fp8_rows(tables, gpu, backend, str(rows["backend_version"][0]), rows,
                                                       static, bw, peak)
        if tables._cache[rows_key] is None:  # no quantize rows for this GPU: the dynamic rows, said so in the source
            curve = gemm_curve(tables, gpu, engine, "fp8", n, k, bw, peak)
            return None if curve is None else Curve(curve.sizes, curve.eta, f"{curve.source} (dynamic-FP8 rows: "
                                                    f"no quantize rows for {dtype} on {gpu})")
        rows, label = tables._cache[rows_key], "fp8 static-scale"
    head = f"{ORIGIN.get(backend, 'aiconfigurator')} {backend} {rows['backend_version'][0]} {label} GEMM"
    return gemm_grid.measured_curve(rows, n, k, BYTES.get(query, 2.0), bw, peak, head, tables._cache[key])


@_memo
def group_gemm_curve(tables: PerfTables, gpu: str, engine: str, dtype: str, gemms: tuple, bw: float,
                     peak: float) -> Curve | None:
    """η(m) of a layer group's GEMMs run at one m, ``gemms`` its (label, n, k, weight) per GPU
    (:meth:`kvplan.calc.shapes.Shapes.gemm_list`): each GEMM's :func:`gemm_curve`, combined as
    ``1 / Σ f_g / η_g(m)`` (:func:`kvplan.calc.gemm_grid.group_curve`); None where any has no rows."""
    curves = [gemm_curve(tables, gpu, engine, "fp8_static_in" if dtype == "fp8_static" and label in STATIC_FP8_INPUT
                         else dtype, float(n), float(k), bw, peak) for label, n, k, _ in gemms]
    if any(c is None for c in curves) or len(curves) == 1:
        return curves[0] if len(curves) == 1 else None
    return gemm_grid.group_curve([(g[3], c) for g, c in zip(gemms, curves)], gemm_grid.group_source(gemms, curves))


# The MoE curves (kvplan.calc.perf_moe), imported on first use: a dense model's command does not load them.
_MOE = ("moe_curve", "deepgemm_curve", "wideep_curve", "deepep_beyond_node", "IN_NODE_EP", "DEEPGEMM_SOURCE",
        "DEEPGEMM_GPUS", "TRANSFER_GPUS")


def __getattr__(name: str):
    if name in _MOE:
        from kvplan.calc import perf_moe

        return getattr(perf_moe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
            first, past = np.searchsorted(x, ux), np.searchsorted(x, ux, side="right")   # each size's rows
            uy = y[first]                                                  # a size measured once: its latency
            for i in np.flatnonzero(past - first > 1):                     # measured more than once: the mean
                uy[i] = y[first[i]:past[i]].mean()
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


__all__ = ["DATA", "EXTRA", "PerfTables", "load_default", "origin", "coverage", "gemm_curve", "group_gemm_curve", "moe_curve", "deepgemm_curve", "IN_NODE_EP",
           "decode_attention_grid", "prefill_attention_curve", "collective_curves", "BYTES", "PEAK_DTYPE", "Flat",
           "STAND_INS", "DTYPE_STAND_INS", "ENGINE_STAND_INS"]

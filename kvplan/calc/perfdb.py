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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvplan.calc import gemm_grid
from kvplan.calc.perfcsv import columns, indexed_lines, indexed_runs, line_span, read_columns
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
KNOWN_BACKENDS = ("trtllm", "vllm", "sglang", "aiter")


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

    def paths(self, name: str) -> list[Path]:
        return [d / f"{name}.csv" for d in (self.root, *self.extra) if (d / f"{name}.csv").exists()]

    def raw(self, name: str) -> list[tuple[Path, bytes]]:
        """Each directory's ``name.csv`` as bytes (read once, where its index does not serve a read)."""
        if ("raw", name) not in self._cache:
            self._cache[("raw", name)] = [(path, path.read_bytes()) for path in self.paths(name)]
        return self._cache[("raw", name)]

    def backends(self, name: str, gpu: str) -> set[str]:
        """The backends that have rows of ``gpu`` in table ``name``: the index's runs, else a byte search of the
        file (nothing parsed; once per table and GPU: a sweep asks for every combination)."""
        if ("backends", name, gpu) not in self._cache:
            found, key = set(), f"\n{gpu},".encode()
            for path in self.paths(name):
                runs = indexed_runs(path, gpu)
                if runs is None:
                    data = dict(self.raw(name))[path]
                    span = line_span(data, f"{gpu},")             # the GPU's block: its first to its last line
                    block = data[span[0] - 1:span[1]] if span else b""
                    runs = [((gpu, b), 0, 0) for b in KNOWN_BACKENDS if key + f"{b},".encode() in block]
                found |= {r[0][1] for r in runs} & set(KNOWN_BACKENDS)
            self._cache[("backends", name, gpu)] = frozenset(found)
        return set(self._cache[("backends", name, gpu)])

    def table(self, name: str, gpu: str | None = None, backend: str | None = None,
              dtype: str | None = None) -> dict[str, np.ndarray] | None:
        """One table's columns: ``root``'s file, then each ``extra`` directory's rows (same header) appended;
        with ``gpu`` (, ``backend``; ``dtype`` in the GEMM table), only those rows."""
        dtype = dtype if name == "gemm" and backend and gpu else None
        key = (name, gpu) if backend is None or gpu is None else (name, gpu, backend, dtype)
        if key not in self._cache:
            parts = [self._part(name, path, gpu, backend, dtype) for path in self.paths(name)]
            parts = [p for p in parts if len(next(iter(p.values()), []))]
            out = None
            if parts:
                out = {c: np.concatenate([p[c] for p in parts]) for c in parts[0] if all(c in p for p in parts)}
            self._cache[key] = out
            if out is not None and not len(out.get("latency_s", [0])):
                self._cache[key] = None
        return self._cache[key]

    def _part(self, name: str, path: Path, gpu: str | None, backend: str | None, dtype: str | None) -> dict:
        """One file's rows: read at the byte ranges of its directory's index where that describes the file
        (:func:`perfcsv.indexed_lines`), else found in the file's bytes (:func:`_read`)."""
        found = indexed_lines(path, gpu, backend or None, dtype if backend else None) if gpu is not None else None
        return columns(*found) if found is not None else _read(path, gpu, backend, dict(self.raw(name))[path], dtype)

    def gpu_name(self, card_name: str) -> str | None:
        gpus = self.table("gpus")
        if gpus is None:
            return None
        hit = np.flatnonzero(gpus["card"] == card_name)
        if not hit.size and card_name in STAND_INS:
            hit = np.flatnonzero(gpus["card"] == STAND_INS[card_name][0])
        return str(gpus["gpu"][hit[0]]) if hit.size else None

    def select(self, name: str, **equal) -> dict[str, np.ndarray] | None:
        gpu, backend = equal.get("gpu"), equal.get("backend")
        t = self.table(name, gpu, backend, equal.get("dtype"))
        if t is None:
            return None
        read_by = set()                    # the cells table() read the rows by (each row's line starts with them)
        if gpu is not None:
            read_by = {"gpu", "backend", "dtype"} if backend and name == "gemm" else {"gpu", "backend"} if backend \
                else {"gpu"}
        mask = np.ones(len(t["latency_s"]), dtype=bool)
        for key, value in equal.items():
            if key not in read_by:
                mask &= t[key] == value
        if not mask.any():
            return None
        return dict(t) if mask.all() else {k: v[mask] for k, v in t.items()}   # the arrays are read, never written

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
    key = ("gemm pairs", gpu, backend, read_as)        # the rows' measured grid, once for every shape priced on it
    if key not in tables._cache:
        tables._cache[key] = gemm_grid.measured_pairs(rows)
    return gemm_grid.measured_curve(rows, n, k, BYTES.get(dtype, 2.0), bw, peak, head, tables._cache[key])


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


# The MoE curves (kvplan.calc.perf_moe), imported on first use: a dense model's command does not load them.
_MOE = ("moe_curve", "deepgemm_curve", "IN_NODE_EP", "DEEPGEMM_SOURCE", "DEEPGEMM_GPUS", "TRANSFER_GPUS")


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


@lru_cache(maxsize=1)
def load_default() -> PerfTables | None:
    """The tables that ship with kvplan, or None where none do."""
    return PerfTables(DATA, tuple(DATA / d for d in EXTRA)) if (DATA / "gemm.csv").exists() else None


__all__ = ["PerfTables", "load_default", "origin", "coverage", "gemm_curve", "group_gemm_curve", "moe_curve", "deepgemm_curve", "IN_NODE_EP",
           "decode_attention_grid", "prefill_attention_curve", "collective_curves", "BYTES", "PEAK_DTYPE", "Flat",
           "STAND_INS", "DTYPE_STAND_INS"]

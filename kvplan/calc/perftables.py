"""The per-kernel tables (kvplan/data/perf and its aiter/, rccl/ directories) read lazily, and what the curve
modules share: :mod:`kvplan.calc.perfdb` (GEMM, attention, collectives, which re-exports these names) and
:mod:`kvplan.calc.perf_moe` (the routed experts).

A command reads a table's rows of one GPU (, backend, dtype) at the byte ranges the directory's index names
(:func:`kvplan.calc.perfcsv.indexed_lines`), else out of the file's bytes; tables are read on first use and cached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvplan.calc.efficiency import Curve, curve_from_rows, nearest_index
from kvplan.calc.perfcsv import columns, indexed_lines, indexed_runs, line_span, read_columns

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"
# Further directories of the same schema, read after DATA (their rows appended): AMD's aiter cut for MI300X, and
# rccl-tests all-reduce on 8 MI300X from AMD's ROCm blog (kvplan/data/perf/rccl/README.md).
EXTRA = ("aiter", "rccl")
# Who measured a backend's rows, for the curves' sources and the notes (default: NVIDIA aiconfigurator).
ORIGIN = {"aiter": "AMD", "rccl": "AMD ROCm blog (rccl-tests on 8 MI300X, ROCm/rocm-blogs @c263176)"}
BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_static": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "w4a16_mxfp4": 0.5,
         "w4a8_mxfp4_mxfp8": 0.5, "int8_wo": 1.0, "int4_wo": 0.5, "sq": 1.0}
PEAK_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp8_static": "fp8", "fp8_block": "fp8", "nvfp4": "fp4",
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
        found = None
        if gpu is not None:
            runs = indexed_runs(path, gpu, backend or None, dtype if backend else None)
            if runs == []:
                return {}                  # the index says the file holds none of these rows: nothing to read
            found = indexed_lines(path, runs) if runs is not None else None
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


def _curve(sizes, sol, latency, source) -> Curve | None:
    return curve_from_rows(sizes, sol, latency, f"{ORIGIN.get(source.split()[0], 'aiconfigurator')} {source}")


@lru_cache(maxsize=1)
def load_default() -> PerfTables | None:
    """The tables that ship with kvplan, or None where none do."""
    return PerfTables(DATA, tuple(DATA / d for d in EXTRA)) if (DATA / "gemm.csv").exists() else None


__all__ = ["DATA", "EXTRA", "ORIGIN", "BYTES", "PEAK_DTYPE", "KNOWN_BACKENDS", "STAND_INS", "PerfTables", "load_default"]

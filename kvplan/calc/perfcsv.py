"""Reading the per-kernel CSV tables (kvplan/data/perf): only the rows of one GPU (and backend), parsed to columns.

The tables are written GPU by GPU and, within a GPU, backend by backend (benchmarks/compact_perf_data.py), so
one GPU's rows lie between the first and the last line that starts with its prefix. The reader finds those two
lines in the file's bytes (a C-level search), decodes only that slice and keeps the lines that carry the
prefix (a table written in another order reads the same rows, only slower). The GEMM table holds every
backend's measured (n, k) grid around the shipped cards' shapes; a command reads one GPU's rows of the
backends it asks for, not the whole file.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

NUMERIC = {"m", "n", "k", "batch", "context_tokens", "isl_tokens", "num_heads", "num_kv_heads", "head_dim",
           "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp", "moe_ep", "num_gpus",
           "message_bytes", "latency_s", "tp_size"}


def line_span(data: bytes, prefix: str, lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """(start, end) bytes of the lines from the first to the last that start with ``prefix`` within data[lo:hi]."""
    hi = len(data) if hi is None else hi
    key = ("\n" + prefix).encode("utf-8")
    first = data.find(key, lo, hi)
    if first < 0:
        return None
    last = data.rfind(key, first, hi)
    end = data.find(b"\n", last + 1, hi)
    return first + 1, end if end >= 0 else hi


def prefix_lines(data: bytes, prefix: str | None, span: tuple[int, int] | None = None) -> tuple[str, list[str]]:
    """(header, body lines) of a CSV's bytes; with ``prefix``, only the lines that start with it (searched within
    ``span``, the bytes of a wider prefix's lines, where given)."""
    head_end = data.find(b"\n")
    header = data[:head_end if head_end >= 0 else len(data)].decode("utf-8").rstrip("\r")
    if prefix is None:
        return header, data[head_end + 1:].decode("utf-8").splitlines() if head_end >= 0 else []
    lo, hi = (span[0] - 1, span[1]) if span is not None else (0, None)
    found = line_span(data, prefix, max(lo, 0), hi)
    if found is None:
        return header, []
    body = data[found[0]:found[1]].decode("utf-8").splitlines()
    return header, [line for line in body if line.startswith(prefix)]


def narrowed(data: bytes, prefix: str, value: str) -> tuple[str, tuple[int, int] | None]:
    """``prefix`` (GPU and backend) extended by the backend's one version and ``value`` in the fourth column (the
    dtype), read off the first and last lines of the block, with the block's bytes (where the narrower prefix's
    lines lie); ``prefix`` itself where the block holds two versions."""
    span = line_span(data, prefix)
    if span is None:
        return prefix, None
    first, end = span
    last = data.rfind(b"\n", first, end) + 1 or first      # the last line's start (the first's when one line)
    key = prefix.encode("utf-8")
    version = data[first + len(key):data.find(b",", first + len(key))]
    if data[last + len(key):last + len(key) + len(version) + 1] != version + b",":
        return prefix, span
    return f"{prefix}{version.decode('utf-8')},{value},", span


def read_columns(path: Path, prefix: str | None = None, data: bytes | None = None,
                 dtype: str | None = None) -> dict[str, np.ndarray]:
    """Columns of a table (numeric ones as float64, empty cells NaN); with ``prefix``, only the lines starting
    with it (a GPU's ``"h200_sxm,"``, or a GPU and backend ``"h200_sxm,vllm,"``); with ``dtype`` too (a table
    whose columns start gpu, backend, backend_version, dtype), only that dtype's lines."""
    data = path.read_bytes() if data is None else data
    span = None
    if prefix is not None and dtype is not None:
        prefix, span = narrowed(data, prefix, dtype)
    header_line, body = prefix_lines(data, prefix, span)
    if dtype is not None:
        body = [line for line in body if line.split(",", 4)[3] == dtype]
    reader = csv.reader([header_line, *body])
    header = next(reader)
    rows = list(reader)
    cols = list(zip(*rows)) if rows else [[] for _ in header]
    out = {}
    for name, values in zip(header, cols):
        if name in NUMERIC:
            try:
                out[name] = np.array(values, dtype=np.float64)       # C-level parse; empty cells below
            except ValueError:
                out[name] = np.array([float(v) if v else math.nan for v in values], dtype=np.float64)
        else:
            out[name] = np.array(values, dtype=object)
    return out


__all__ = ["NUMERIC", "line_span", "narrowed", "prefix_lines", "read_columns"]

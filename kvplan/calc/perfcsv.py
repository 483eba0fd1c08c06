"""Reading the per-kernel CSV tables (kvplan/data/perf): only the rows of one GPU (and backend), parsed to columns.

The tables are written GPU by GPU and, within a GPU, backend by backend (benchmarks/compact_perf_data.py), so
one GPU's rows lie between the first and the last line that starts with its prefix. The reader finds those two
lines in the file's bytes (a C-level search), decodes only that slice and keeps the lines that carry the
prefix (a table written in another order reads the same rows, only slower). The GEMM table holds every
backend's measured (n, k) grid around the shipped cards' shapes; a command reads one GPU's rows of the
backends it asks for, not the whole file.

Each directory of tables ships ``index.csv`` (:mod:`kvplan.calc.perfindex` writes it, run as
``benchmarks/index_perf_data.py``; a test checks it against the tables): for each table, its size in bytes and every run of consecutive lines that share their
first four cells (gpu, backend, backend_version and the fourth column: the GEMM table's dtype), with the run's
byte range. A command then reads only the byte ranges of its GPU, backend and dtype (:func:`indexed_lines`)
instead of the whole file, and finds a GPU's backends without reading a table. Where the index does not match
the file (its size differs, or a range does not start and end on the run's lines), the reader searches the
whole file as above.
"""

from __future__ import annotations

import math
from functools import lru_cache
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
    return columns(header_line, body)


def plain(text: str) -> bool:
    """Whether ``text`` is plain cells: ASCII, no quote, no NUL, no line break but "\n" (none that str.splitlines
    would split at; non-ASCII text is read by the csv module)."""
    return text.isascii() and not any(c in text for c in '"\x00\r\x0b\x0c\x1c\x1d\x1e')


def _floats(values) -> np.ndarray:
    """float64 of a column's cells: a column of few distinct cells (a grid's sizes) parses each distinct cell once
    (float(), correctly rounded as numpy's own parse), any other in numpy's C loop."""
    distinct = set(values)
    if 4 * len(distinct) < len(values):
        parsed = {v: float(v) for v in distinct}
        return np.array([parsed[v] for v in values], dtype=np.float64)
    return np.array(values, dtype=np.float64)


def columns(header_line: str, body: list[str] | str) -> dict[str, np.ndarray]:
    """A table's columns from its header line and body (its lines, or their text, each line ended by "\n"): plain
    cells (:func:`plain`, one line a row, as in the shipped tables) are split with str.split, anything else by the
    csv module; the same strings either way."""
    if isinstance(body, str):
        text, lines = (body[:-1] if body.endswith("\n") else body), None
    else:
        text, lines = "\n".join(body), body
    width = header_line.count(",") + 1
    cells = text.replace("\n", ",").split(",")
    if text and plain(text) and plain(header_line) and len(cells) == (text.count("\n") + 1) * width:
        header = header_line.split(",")
        cols = [cells[i::width] for i in range(width)]
    elif not text and not lines and plain(header_line):                # no rows
        header = header_line.split(",")
        cols = [[] for _ in header]
    else:
        import csv

        reader = csv.reader([header_line, *(text.splitlines() if lines is None else lines)])
        header = next(reader)
        rows = list(reader)
        cols = list(zip(*rows)) if rows else [[] for _ in header]
    out = {}
    for name, values in zip(header, cols):
        if name in NUMERIC:
            try:
                out[name] = _floats(values)                          # empty cells below
            except ValueError:
                out[name] = np.array([float(v) if v else math.nan for v in values], dtype=np.float64)
        else:
            out[name] = np.array(values, dtype=object)
    return out


INDEX = "index.csv"
INDEX_HEADER = "table,table_bytes,gpu,backend,backend_version,fourth,start,end"
# The tables kvplan reads by GPU (the index covers them; gpus.csv, kernels.csv and sources.csv are read whole).
INDEXED = ("gemm", "moe", "moe_a2a", "moe_wideep", "attention_decode", "attention_prefill", "mla_decode", "mla_prefill",
           "comm")


@lru_cache(maxsize=None)
def load_index(directory: Path) -> dict[str, tuple[int, list[tuple[tuple[str, ...], int, int]]]]:
    """table -> (its bytes, its runs) from the directory's ``index.csv``; {} where there is none."""
    path = directory / INDEX
    if not path.exists():
        return {}
    out: dict = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != INDEX_HEADER:
        return {}
    for line in lines[1:]:
        name, size, gpu, backend, version, fourth, start, end = line.split(",")
        out.setdefault(name, (int(size), []))[1].append(((gpu, backend, version, fourth), int(start), int(end)))
    return out


def indexed_runs(path: Path, gpu: str, backend: str | None = None, fourth: str | None = None) -> list | None:
    """The index's runs of ``gpu`` (, ``backend``, ``fourth`` cell) in table ``path``, in file order; None where
    the index has no entry for the table or its size is not the file's (written before the file changed)."""
    found = load_index(path.parent).get(path.stem)
    if found is None or not path.exists() or path.stat().st_size != found[0]:
        return None
    return [r for r in found[1] if r[0][0] == gpu and (backend is None or r[0][1] == backend)
            and (fourth is None or r[0][3] == fourth)]


def indexed_lines(path: Path, found: list) -> tuple[str, str] | None:
    """(header line, text of the lines) of the runs ``found`` (:func:`indexed_runs`) read at their byte ranges; None
    where a range does not hold its run's lines (the index does not describe the file)."""
    parts = []
    with open(path, "rb") as fh:
        header = fh.readline()
        for key, start, end in found:
            fh.seek(start - 1)
            chunk = fh.read(end - start + 1)
            prefix = ("\n" + ",".join(key) + ",").encode("utf-8")
            if not chunk.startswith(prefix) or not chunk.endswith(b"\n") or len(chunk) != end - start + 1:
                return None
            parts.append(chunk[1:])
    text = b"".join(parts).decode("utf-8")
    return (header.decode("utf-8").rstrip("\r\n"), text) if plain(text) else None


__all__ = ["NUMERIC", "INDEX", "INDEX_HEADER", "INDEXED", "columns", "plain", "indexed_lines", "indexed_runs",
           "line_span", "load_index", "narrowed", "prefix_lines", "read_columns"]

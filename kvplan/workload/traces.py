"""Request traces: read Azure, Mooncake and generic CSV traces into one ``Trace`` of numpy arrays.

Formats (``trace_format``):

- ``azure``: the Azure LLM inference trace CSV, header ``TIMESTAMP,ContextTokens,GeneratedTokens``,
  timestamps as ``2023-11-16 18:17:03.9799600`` (wall clock, 100 ns resolution).
- ``mooncake``: the Mooncake JSONL trace, one object a line with ``timestamp`` (ms since the first
  request), ``input_length``, ``output_length`` and ``hash_ids`` (ids of the request's 512-token
  prompt blocks; equal ids = identical prefix up to and including that block).
- ``csv``: any CSV with a header, mapped with ``columns={"timestamp": COL, "isl": COL, "osl": COL}``
  and ``timestamp_unit`` one of s, ms, us, ns (numbers) or ``datetime`` (ISO 8601 strings).

``auto`` picks ``mooncake`` for ``.jsonl``/``.json`` files or a first character ``{``, ``csv`` when
``columns`` are given, and ``azure`` for a CSV whose header has the Azure columns.

Every reader checks every row. A malformed row (missing field, not a whole number, a negative
length, a timestamp that does not parse) is reported by its 1-based line number in the file
(the CSV header is line 1). By default the first bad rows raise ``InputError``; with
``skip_bad_rows=True`` they are dropped and their line numbers kept in ``Trace.skipped_lines``.

A ``Trace`` is replayed in timestamp order: readers sort requests by arrival (stable, so ties keep
file order) and shift times so the first request arrives at 0 s.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np

from kvplan.errors import InputError
from kvplan.textsafe import one_line
from kvplan.units import MAX_TOKENS, split_items

FORMATS = ("auto", "azure", "mooncake", "csv")
MAX_SPAN_S = 10 * 366 * 86400.0  # ten years of arrivals: far beyond any published trace
TIMESTAMP_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "datetime": None}
MOONCAKE_BLOCK_TOKENS = 512
AZURE_COLUMNS = {"timestamp": "TIMESTAMP", "isl": "ContextTokens", "osl": "GeneratedTokens"}
MAX_LISTED_BAD_LINES = 3


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests in arrival order: seconds since the first arrival, prompt and output token counts.

    Prompt blocks, when the trace has them, are a CSR pair: request ``i`` touches the blocks
    ``block_ids[block_offsets[i]:block_offsets[i + 1]]`` (each ``block_tokens`` tokens, in prompt order).
    """

    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    block_offsets: np.ndarray | None = None
    block_ids: np.ndarray | None = None
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    source: str = ""
    trace_format: str = ""
    skipped_lines: tuple[int, ...] = field(default=())

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def has_blocks(self) -> bool:
        return self.block_ids is not None

    def blocks(self, i: int) -> np.ndarray:
        """Block ids of request ``i``."""
        if self.block_offsets is None or self.block_ids is None:
            raise InputError(f"trace '{self.source}' has no hash_ids")
        return self.block_ids[self.block_offsets[i]:self.block_offsets[i + 1]]


def make_trace(arrival_s, isl, osl, block_lists=None, *, block_ids=None, block_offsets=None, **meta) -> Trace:
    """Build a ``Trace`` sorted by arrival (stable) with the first arrival at 0 s.

    Blocks, optional: ``block_lists`` (one list of ids per request; ``block_ids`` may pass them
    already flattened), or the CSR pair ``block_offsets`` + ``block_ids``.
    """
    arrival = np.asarray(arrival_s, dtype=np.float64)
    isl_arr, osl_arr = np.asarray(isl, dtype=np.int64), np.asarray(osl, dtype=np.int64)
    if not arrival.size == isl_arr.size == osl_arr.size:
        raise ValueError("arrival_s, isl and osl differ in length")
    order = np.argsort(arrival, kind="stable")
    offsets = ids = None
    if block_lists is not None:
        lengths = np.fromiter((len(b) for b in block_lists), dtype=np.int64, count=len(block_lists))
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        ids = (np.asarray(block_ids, dtype=np.int64) if block_ids is not None else
               np.fromiter(chain.from_iterable(block_lists), dtype=np.int64, count=int(offsets[-1])))
    elif block_offsets is not None:
        offsets, ids = np.asarray(block_offsets, dtype=np.int64), np.asarray(block_ids, dtype=np.int64)
    if offsets is not None:
        offsets, ids = _reorder_csr(offsets, ids, order)
    start = arrival[order[0]] if arrival.size else 0.0
    span = float(arrival[order[-1]] - start) if arrival.size else 0.0
    source = meta.get("source", "the trace")
    if not math.isfinite(span) or span > MAX_SPAN_S:
        years = span / 86400 / 365.25
        shown = f"{years:,.0f}" if years < 1e6 else f"{years:.3g}"  # --qps 1e-300 printed a 300-digit figure
        hint = ("raise the rate (--qps/--rate): the sampled requests at this rate span more than 10 years"
                if source == "synthetic" else
                "check the timestamps and --timestamp-unit (kvplan reads traces of up to 10 years)")
        raise InputError(f"trace '{one_line(source)}' spans {shown} years of arrivals", hint)
    for name, values in (("input length", isl_arr), ("output length", osl_arr)):
        if values.size and int(values.max()) > MAX_TOKENS:
            raise InputError(f"trace '{one_line(source)}': an {name} of {int(values.max()):,} tokens is more than the "
                             f"{MAX_TOKENS:,} kvplan accepts", "check the length columns of the trace")
    return Trace(arrival[order] - start, isl_arr[order], osl_arr[order], offsets, ids, **meta)


def _reorder_csr(offsets: np.ndarray, ids: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Permute the rows of a CSR pair: row k of the result is row ``order[k]`` of the input."""
    if np.array_equal(order, np.arange(order.size)):
        return offsets, ids
    lengths = np.diff(offsets)[order]
    new_offsets = np.concatenate(([0], np.cumsum(lengths)))
    gather = np.repeat(offsets[:-1][order] - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    return new_offsets, ids[gather]


class _BadRows:
    """Collects (line, reason) for malformed rows and raises or records them at the end."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: dict[int, str] = {}

    def add(self, line: int, reason: str) -> None:
        self.items.setdefault(line, reason)

    def settle(self, skip: bool) -> tuple[int, ...]:
        if self.items and not skip:
            lines = sorted(self.items)
            first = "; ".join(f"line {n}: {self.items[n]}" for n in lines[:MAX_LISTED_BAD_LINES])
            more = f" (and {len(lines) - MAX_LISTED_BAD_LINES} more)" if len(lines) > MAX_LISTED_BAD_LINES else ""
            raise InputError(
                f"{self.source}: {len(lines)} malformed row{'s' if len(lines) > 1 else ''}: {first}{more}",
                "fix those lines, or pass --skip-bad-rows to skip them",
            )
        return tuple(sorted(self.items))


def parse_columns(text: str | dict | None) -> dict[str, str] | None:
    """``'timestamp=ts,isl=prompt_tokens,osl=output_tokens'`` → ``{'timestamp': 'ts', ...}``."""
    if text is None or isinstance(text, dict):
        return text
    mapping = {}
    for item in split_items(text, what="--columns"):
        key, sep, column = item.partition("=")
        if not sep or key.strip() not in AZURE_COLUMNS or not column.strip():
            raise InputError(f"cannot read column mapping '{item}'",
                             "write --columns timestamp=COL,isl=COL,osl=COL")
        mapping[key.strip()] = column.strip()
    missing = [k for k in AZURE_COLUMNS if k not in mapping]
    if missing:
        raise InputError(f"--columns lacks {', '.join(missing)}", "write --columns timestamp=COL,isl=COL,osl=COL")
    return mapping


def detect_format(path: Path, columns: dict | None = None) -> str:
    """Guess the trace format from the extension, then the first bytes, then the CSV header."""
    if columns:
        return "csv"
    if path.suffix.lower() in (".jsonl", ".json"):
        return "mooncake"
    with _open(path) as handle:
        head = handle.read(4096).lstrip()
    if head.startswith("{"):
        return "mooncake"
    header = next(csv.reader([head.splitlines()[0] if head else ""]), [])
    if set(AZURE_COLUMNS.values()) <= {h.strip() for h in header}:
        return "azure"
    raise InputError(f"cannot tell the format of trace '{path}' (header: {', '.join(header) or 'none'})",
                     "pass --trace-format azure|mooncake|csv, and for a generic CSV "
                     "--columns timestamp=COL,isl=COL,osl=COL")


def read_trace(path: str | Path, *, trace_format: str = "auto", columns: str | dict | None = None,
               timestamp_unit: str | None = None, skip_bad_rows: bool = False) -> Trace:
    """Read a trace file; see the module docstring for formats and bad-row handling."""
    path = Path(path)
    if trace_format not in FORMATS:
        raise InputError(f"unknown trace format '{trace_format}'", f"choose one of: {', '.join(FORMATS)}")
    if timestamp_unit is not None and timestamp_unit not in TIMESTAMP_UNITS:
        raise InputError(f"unknown timestamp unit '{timestamp_unit}'",
                         f"choose one of: {', '.join(TIMESTAMP_UNITS)}")
    mapping = parse_columns(columns)
    try:
        trace = _read(path, trace_format, mapping, timestamp_unit, skip_bad_rows)
    except UnicodeDecodeError as exc:
        raise InputError(f"trace '{path}' is not UTF-8 text (byte {exc.start})",
                         "pass an uncompressed CSV or JSONL file") from None
    except csv.Error as exc:
        raise InputError(f"trace '{path}': {exc}", "check the file is a plain CSV") from None
    if trace.requests == 0:
        raise InputError(f"trace '{path}' has no requests"
                         + (f" ({len(trace.skipped_lines)} malformed rows skipped)" if trace.skipped_lines else ""),
                         "check the file: it needs at least one well-formed request row")
    return trace


def _read(path: Path, trace_format: str, mapping: dict | None, timestamp_unit: str | None,
          skip_bad_rows: bool) -> Trace:
    fmt = detect_format(path, mapping) if trace_format == "auto" else trace_format
    if fmt == "mooncake":
        trace = read_mooncake(path, skip_bad_rows=skip_bad_rows)
    elif fmt == "azure":
        trace = read_csv(path, mapping or AZURE_COLUMNS, timestamp_unit or "datetime",
                         skip_bad_rows=skip_bad_rows, trace_format="azure")
    else:
        if mapping is None:
            raise InputError(f"trace '{path}': a generic CSV needs a column mapping",
                             "pass --columns timestamp=COL,isl=COL,osl=COL (and --timestamp-unit)")
        trace = read_csv(path, mapping, timestamp_unit or "s", skip_bad_rows=skip_bad_rows)
    return trace


def _open(path: Path):
    from kvplan.inputs import TRACE_MAX_BYTES, check_file

    check_file(path, "trace", TRACE_MAX_BYTES, missing="trace '{path}' not found")  # a regular file (not /dev/zero or a FIFO), at most the cap
    try:
        return open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise InputError(f"trace '{path}' not found", "check the path") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise InputError(f"cannot read trace '{path}': {exc.strerror}", "pass a readable file") from None


def read_mooncake(path: str | Path, *, skip_bad_rows: bool = False) -> Trace:
    """Mooncake JSONL: ``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids`` (optional).

    The whole file is decoded as one JSON array (fast); a line that breaks it sends the reader
    back to line-by-line decoding, which names the bad lines.
    """
    path = Path(path)
    bad = _BadRows(str(path))
    with _open(path) as handle:
        numbered = [(n, line) for n, line in enumerate(handle.read().split("\n"), start=1) if line.strip()]
    objects = _decode_all([line for _, line in numbered])
    times, isl, osl, blocks, lines = [], [], [], [], []
    for (line_no, line), obj in zip(numbered, objects or [None] * len(numbered)):
        record, reason = _mooncake_record(obj if objects is not None else _decode(line))
        if reason:
            bad.add(line_no, reason)
            continue
        times.append(record[0])
        isl.append(record[1])
        osl.append(record[2])
        blocks.append(record[3])
        lines.append(line_no)
    with_blocks = any(b is not None for b in blocks)
    if with_blocks:  # once some rows carry hash_ids, a row without them cannot be replayed
        for line_no, b in zip(lines, blocks):
            if b is None:
                bad.add(line_no, "missing hash_ids (other rows have them)")
    flat, keep = _check_hash_ids(blocks, lines, bad) if with_blocks else (None, None)
    skipped = bad.settle(skip_bad_rows)
    if keep is not None and not all(keep):
        times, isl, osl, blocks = ([v for v, k in zip(col, keep) if k] for col in (times, isl, osl, blocks))
        flat = None
    return make_trace(np.asarray(times, dtype=np.float64) * 1e-3, isl, osl, blocks if with_blocks else None,
                      block_ids=flat, source=str(path), trace_format="mooncake", skipped_lines=skipped)


def _decode_all(lines: list[str]) -> list | None:
    try:
        objects = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        return None
    return objects if len(objects) == len(lines) else None


def _decode(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


def _check_hash_ids(blocks: list[list], lines: list[int], bad: _BadRows) -> tuple[np.ndarray | None, list[bool]]:
    """All ids whole and >= 0: one vectorised check, then per row only when it fails."""
    if all(b is not None for b in blocks):
        try:
            flat = np.array(list(chain.from_iterable(blocks)))
        except (ValueError, OverflowError):
            flat = np.array([None])
        if flat.size == 0 or (flat.dtype.kind == "i" and flat.min() >= 0):
            return flat.astype(np.int64), [True] * len(blocks)
    keep = []
    for row, line_no in zip(blocks, lines):
        ok = row is not None and all(type(h) is int and 0 <= h < 2**63 for h in row)
        if not ok and row is not None:
            bad.add(line_no, "hash_ids is not a list of non-negative integers")
        keep.append(ok)
    return None, keep


def _mooncake_record(obj) -> tuple[tuple | None, str | None]:
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
    if missing:
        return None, f"missing {', '.join(missing)}"
    ts = obj["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return None, f"timestamp {ts!r} is not a number"
    for key in ("input_length", "output_length"):
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"{key} {value!r} is not a whole number"
        if value < 0:
            return None, f"{key} {value} is negative"
        if value > MAX_TOKENS:
            return None, f"{key} {value} is too large (more than {MAX_TOKENS:,} tokens)"
    hash_ids = obj.get("hash_ids")
    if hash_ids is not None and not isinstance(hash_ids, list):
        return None, "hash_ids is not a list of non-negative integers"
    return (ts, obj["input_length"], obj["output_length"], hash_ids), None


def read_csv(path: str | Path, columns: dict[str, str], timestamp_unit: str = "s", *,
             skip_bad_rows: bool = False, trace_format: str = "csv") -> Trace:
    """A CSV trace with a header; ``columns`` maps timestamp/isl/osl to header names."""
    path = Path(path)
    bad = _BadRows(str(path))
    with _open(path) as handle:
        reader = csv.reader(handle)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in columns.values() if c not in header]
        if missing:
            shown = ", ".join(header) or "none"
            raise InputError(f"trace '{path}' has no column {', '.join(repr(c) for c in missing)} "
                             f"(header: {shown if len(shown) <= 80 else shown[:77] + '...'})",
                             "check --columns (or --trace-format) against the file")
        index = [header.index(columns[k]) for k in ("timestamp", "isl", "osl")]
        width = len(header)
        lines, fields = [], []
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != width:
                bad.add(reader.line_num, f"{len(row)} fields, expected {width}")
                continue
            lines.append(reader.line_num)
            fields.append([row[i] for i in index])
    cols = list(zip(*fields)) if fields else [(), (), ()]
    line_arr = np.asarray(lines, dtype=np.int64)
    arrival, ok_t = _timestamps(cols[0], timestamp_unit, columns["timestamp"], line_arr, bad)
    isl, ok_i = _counts(cols[1], columns["isl"], line_arr, bad)
    osl, ok_o = _counts(cols[2], columns["osl"], line_arr, bad)
    skipped = bad.settle(skip_bad_rows)
    keep = ok_t & ok_i & ok_o
    return make_trace(arrival[keep], isl[keep], osl[keep], source=str(path), trace_format=trace_format,
                      skipped_lines=skipped)


def _counts(values, name: str, lines: np.ndarray, bad: _BadRows) -> tuple[np.ndarray, np.ndarray]:
    """Whole, non-negative token counts; the vectorised cast is tried first, the per-row check on failure."""
    try:
        out = np.asarray(values, dtype=str).astype(np.int64) if values else np.zeros(0, np.int64)
    except (ValueError, OverflowError):
        out = np.zeros(len(values), dtype=np.int64)
        for k, text in enumerate(values):
            try:
                out[k] = int(text)
            except (ValueError, OverflowError):
                out[k] = -1
                bad.add(int(lines[k]), f"{name} {text.strip()!r} is not a whole number")
    negative = out < 0
    for k in np.flatnonzero(negative):
        bad.add(int(lines[k]), f"{name} {values[k].strip()} is negative")
    return out, ~negative


def _timestamps(values, unit: str, name: str, lines: np.ndarray, bad: _BadRows) -> tuple[np.ndarray, np.ndarray]:
    """Seconds (float64, absolute) from numbers in ``unit`` or from ISO 8601 datetimes."""
    ok = np.ones(len(values), dtype=bool)
    if not values:
        return np.zeros(0), ok
    if TIMESTAMP_UNITS[unit] is not None:
        try:
            seconds = np.asarray(values, dtype=str).astype(np.float64) * TIMESTAMP_UNITS[unit]
        except ValueError:
            seconds = np.array([_float_or_nan(v) for v in values]) * TIMESTAMP_UNITS[unit]
        for k in np.flatnonzero(~np.isfinite(seconds)):
            ok[k] = False
            bad.add(int(lines[k]), f"{name} {values[k].strip()!r} is not a number")
        return np.where(ok, seconds, 0.0), ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns on time-zone offsets, then applies them
        try:
            stamps = np.asarray(values, dtype=str).astype("datetime64[us]")  # years 1..9999 fit (ns does not)
        except (ValueError, OverflowError):
            stamps = np.array([_datetime_or_nat(v) for v in values], dtype="datetime64[us]")
    for k in np.flatnonzero(np.isnat(stamps)):
        ok[k] = False
        bad.add(int(lines[k]), f"{name} {values[k].strip()!r} is not a date-time")
    microseconds = stamps.astype(np.int64)
    base = microseconds[ok].min() if ok.any() else 0
    return np.where(ok, (microseconds - base) * 1e-6, 0.0), ok


def _float_or_nan(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _datetime_or_nat(text: str):
    try:
        return np.datetime64(text.strip(), "us") if text.strip() else np.datetime64("NaT")
    except (ValueError, OverflowError):
        return np.datetime64("NaT")

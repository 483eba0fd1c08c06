"""Sweep blocks as CSV text or Arrow tables, one block at a time (memory stays bounded).

Column types are the same in every block and both formats:

- integers (int64): ``seq_len``, ``batch``, ``tp``, ``pp``, block and token counts, and the KV
  byte counts (whole by construction: layers × heads × head_dim × bytes per element, × tokens);
- floats: ``weights_bytes_per_gpu`` (int4 group scales make it fractional), the KV budget
  ``kv_cache_memory_bytes`` (a fraction of the GPU's memory), ``max_concurrency``, latency;
- booleans: ``fits`` (``true``/``false`` in CSV); strings: model, hardware, kv_dtype, engine.

Empty cells (null in Parquet), never a negative or meaningless figure:

- the cache columns (``CACHE_COLUMNS``) of a combination whose budget is ≤ 0 (weights and
  reserves leave no KV memory: the engine would refuse to start);
- the latency columns of a point that does not fit, and where the roofline does not apply.

Parquet: the same types; a column that can be empty is an optional (nullable) field — the
latency columns always, the cache columns when some combination has no KV memory — and every
other column a required one (no definition levels to write or read).

CSV text: integers in decimal, booleans ``true``/``false``, floats in a shortest round-trip
form (Python's ``repr`` for per-sequence figures; Arrow's for the per-point latency columns,
which may use an exponent: ``1e-7``), whole floats in the per-sequence columns as integers.
With pyarrow installed the per-point columns are formatted and joined by Arrow's C++ kernels;
without it, by Python (same values, slower).
"""

from __future__ import annotations

import numpy as np

INT_COLUMNS = frozenset({
    "seq_len", "batch", "tp", "pp", "num_blocks", "kv_cache_tokens", "max_context_at_batch",
    "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_per_sequence_per_gpu",
    "kv_bytes_total", "kv_bytes_total_per_gpu",
})
STR_COLUMNS = frozenset({"model", "hardware", "kv_dtype", "engine"})
BOOL_COLUMNS = frozenset({"fits"})
# constant over one (model, hardware, kv_dtype, tp, pp, engine) combination
SCALAR_COLUMNS = frozenset({"model", "hardware", "kv_dtype", "tp", "pp", "engine", "kv_bytes_per_token",
                            "kv_bytes_per_token_per_gpu", "weights_bytes_per_gpu", "kv_cache_memory_bytes",
                            "num_blocks", "kv_cache_tokens"})
CACHE_COLUMNS = ("kv_cache_memory_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency", "max_context_at_batch")
LATENCY_COLUMNS = ("decode_step_s", "floor_decode_step_s", "decode_tokens_per_s")


def column_kind(name: str) -> str:
    if name in STR_COLUMNS:
        return "str"
    if name in INT_COLUMNS:
        return "int"
    return "bool" if name in BOOL_COLUMNS else "float"


def _axis(block, name: str) -> str:
    if name in block.scalars:
        return "scalar"
    if name in block.grid_arrays:
        return "grid"
    return "batch" if name in block.batch_arrays else "seq"


def _null_mask(block, name: str, unfit: np.ndarray | None = None) -> np.ndarray | bool:
    """True where the cell is empty: no KV memory (cache columns), or not fitting (latency; ``unfit``: the block's
    ``~fits``, when the caller already has it)."""
    if name in CACHE_COLUMNS and block.no_cache:
        return True
    if name in LATENCY_COLUMNS:
        unfit = ~block.grid_arrays["fits"] if unfit is None else unfit
        return unfit | ~np.isfinite(block.grid_arrays[name])
    return False


def _as_int(name: str, values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f":
        if not (np.isfinite(values).all() and (values == np.floor(values)).all()):
            raise ValueError(f"sweep column {name} is declared whole but holds fractions")
        return values.astype(np.int64)
    return values.astype(np.int64, copy=False)


def _text(value) -> str:
    """One cell as CSV text (the Python rules of the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value != value:
            return ""
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return str(int(value)) if isinstance(value, np.integer) else str(value)


# --------------------------------------------------------------------------- CSV, Python


def _cells(block, name: str, length: int) -> list[str]:
    """The column's cells along its own axis (scalar → one cell repeated)."""
    kind, axis = column_kind(name), _axis(block, name)
    null = _null_mask(block, name)
    if axis == "scalar":
        return [""] * length if null is True else [_text(block.scalars[name])] * length
    source = {"seq": block.seq_arrays, "batch": block.batch_arrays}.get(axis, block.grid_arrays)[name].ravel()
    if null is True:
        return [""] * source.size
    if kind == "int":
        cells = [str(v) for v in _as_int(name, source).tolist()]
    elif kind == "bool":
        cells = ["true" if v else "false" for v in source.tolist()]
    else:
        cells = [_text(v) for v in source.tolist()]
    if isinstance(null, np.ndarray):
        for i in np.flatnonzero(null.ravel()).tolist():
            cells[i] = ""
    return cells


def block_csv(block) -> str:
    """One block's CSV rows (no header) by Python string joins, built from its factored form.

    Runs of columns constant along the batch axis are joined once per seq value, batch columns
    once per batch value; only the seq × batch columns are formatted per point.
    """
    n_seq, n_batch = block.shape
    streams: list[list[str]] = []
    for kind, run in _runs(block):
        if kind == "grid":
            streams.extend(_cells(block, name, n_seq * n_batch) for name in run)
            continue
        length = n_batch if kind == "batch" else n_seq
        joined = [",".join(cells) for cells in zip(*(_cells(block, name, length) for name in run))]
        streams.append([s for s in joined for _ in range(n_batch)] if kind == "seq" else joined * n_seq)
    return "".join(",".join(cells) + "\n" for cells in zip(*streams))


def _runs(block) -> list[tuple[str, list[str]]]:
    """Consecutive columns grouped by axis; scalars join the seq runs (both constant along batch)."""
    runs: list[tuple[str, list[str]]] = []
    for name in block.column_names:
        axis = _axis(block, name)
        axis = "seq" if axis == "scalar" else axis
        if runs and runs[-1][0] == axis and axis != "grid":
            runs[-1][1].append(name)
        else:
            runs.append((axis, [name]))
    return runs


# --------------------------------------------------------------------------- CSV, Arrow


def _arrow(values: np.ndarray, mask: np.ndarray | None = None, type_=None):
    """A numpy array as an Arrow array over the same memory, ``mask`` True = null.

    Built from buffers: ``pa.array(ndarray)`` would import pandas (about 1 s here) to sniff the input.
    """
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
        type_ = pa.bool_()
    else:
        data = pa.py_buffer(values)
        type_ = type_ or pa.from_numpy_dtype(values.dtype)
    validity = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
    return pa.Array.from_buffers(type_, len(values), [validity, data])


def _arrow_strings(texts: list[str]):
    """Python strings as an Arrow string array, from buffers (see _arrow)."""
    import pyarrow as pa

    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int32, count=len(encoded)), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets),
                                                             pa.py_buffer(b"".join(encoded))])


def block_csv_bytes(block) -> bytes | memoryview:
    """One block's CSV rows, formatted and joined by Arrow's kernels (same cells as block_csv)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n_seq, n_batch = block.shape
    seq_index = _arrow(np.repeat(np.arange(n_seq, dtype=np.int32), n_batch))
    batch_index = _arrow(np.tile(np.arange(n_batch, dtype=np.int32), n_seq))
    pieces = []
    for kind, run in _runs(block):
        if kind == "grid":
            pieces.extend(_arrow_cells(block, name) for name in run)
            continue
        length = n_batch if kind == "batch" else n_seq
        joined = _arrow_strings([",".join(cells) for cells in zip(*(_seq_cells(block, name, length) for name in run))])
        pieces.append(joined.take(seq_index if kind == "seq" else batch_index))
    comma, newline, nothing = _arrow_strings([",", "\n", ""])  # scalars not made by pa.scalar (see _arrow)
    # the newline joins the last column only (one short pass), not every whole row again
    pieces[-1] = pc.binary_join_element_wise(pieces[-1], newline, nothing, null_handling="replace",
                                             null_replacement="")
    rows = pc.binary_join_element_wise(*pieces, comma, null_handling="replace", null_replacement="")
    _, offsets, data = rows.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(rows) + 1, offset=rows.offset * 4)
    return memoryview(data)[int(bounds[0]):int(bounds[-1])]


def _seq_cells(block, name: str, length: int) -> list[str]:
    """Cells along the seq or batch axis: integers through Arrow's cast, the rest by Python."""
    if column_kind(name) == "int" and _axis(block, name) in ("seq", "batch"):
        import pyarrow as pa
        import pyarrow.compute as pc

        source = block.seq_arrays.get(name, block.batch_arrays.get(name))
        if _null_mask(block, name) is True:
            return [""] * length
        return pc.cast(_arrow(_as_int(name, source)), pa.string()).to_pylist()
    return _cells(block, name, length)


def _arrow_cells(block, name: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    values = block.grid_arrays[name].ravel()
    null = _null_mask(block, name)
    if null is True:
        return pa.nulls(values.size, pa.string())
    kind = column_kind(name)
    if kind == "int":
        values = _as_int(name, values)
    mask = null.ravel() if isinstance(null, np.ndarray) else None
    return pc.cast(_arrow(values, mask), pa.string())


# --------------------------------------------------------------------------- Arrow table (Parquet)


NULLABLE_COLUMNS = frozenset(CACHE_COLUMNS + LATENCY_COLUMNS)


def arrow_schema(names: list[str], nullable: frozenset[str] = NULLABLE_COLUMNS):
    """Typed columns; only the columns that can be empty (``nullable``: cache, latency) are nullable.

    The others are required (non-null) fields: same types and cells, and Parquet writes no
    definition levels for them (about a third of the encoding time of such a column).
    """
    import pyarrow as pa

    types = {"str": pa.dictionary(pa.int32(), pa.string()), "int": pa.int64(), "bool": pa.bool_(),
             "float": pa.float64()}
    return pa.schema([pa.field(name, types[column_kind(name)], nullable=name in nullable) for name in names])


class ColumnCache:
    """Arrow columns one sweep's blocks share, held up to ``budget_bytes`` (oldest dropped first).

    A column repeated from a seq or batch axis, or a constant, equal to one an earlier block built
    is that array again (read-only; Arrow holds a reference) instead of a new fill of 8 bytes a row
    and its page faults. Across one sweep's blocks many of them repeat (``seq_len``, ``batch``,
    ``tp``, ``pp``) and many do not (a combination's own concurrency, block count, budget): a column
    is held from the second block that asks for it, so that the ones asked for once neither take
    the budget nor push out the ones that repeat (the 4M-point grid of benchmarks/bench_sweep.py:
    191 distinct columns, 134 of them asked for once). The budget keeps memory bounded whatever
    the grid; ``seen`` holds hashes only.
    """

    def __init__(self, budget_bytes: int = 64 << 20):
        import threading

        self.budget_bytes, self.held_bytes, self.arrays, self.lock = budget_bytes, 0, {}, threading.Lock()
        self.seen: set[int] = set()

    def get(self, key, build):
        """``build()``'s array for ``key``, built once while held (two formatting threads racing build it twice)."""
        found = self.arrays.get(key)
        if found is None:
            found = build()
            size = found.nbytes
            with self.lock:
                if hash(key) not in self.seen:  # the first ask: built, not held
                    self.seen.add(hash(key))
                elif size <= self.budget_bytes and key not in self.arrays:
                    while self.arrays and self.held_bytes + size > self.budget_bytes:
                        self.held_bytes -= self.arrays.pop(next(iter(self.arrays))).nbytes
                    self.arrays[key] = found
                    self.held_bytes += size
        return found


def block_table(block, schema, cache: ColumnCache | None = None):
    """One block as an Arrow table of ``schema`` (typed columns, nulls as in the module docstring).

    ``cache``: one :class:`ColumnCache` for the blocks of one file (a column equal to an earlier
    block's is that array again); without one every column is built.
    """
    import pyarrow as pa

    n_seq, n_batch = block.shape
    n = n_seq * n_batch
    cache = ColumnCache(0) if cache is None else cache
    arrays = []
    first = None  # the dictionary indices of a string column: one value, index 0 everywhere (shared)
    fits = None  # the block's fits, flat: shared by the latency columns' validity
    for field in schema:
        name, axis, kind = field.name, _axis(block, field.name), column_kind(field.name)
        if name in LATENCY_COLUMNS:  # valid where the point fits and the figure is finite (as _null_mask)
            fits = block.grid_arrays["fits"].ravel() if fits is None else fits
            values = np.ascontiguousarray(block.grid_arrays[name].ravel(), dtype=np.float64)
            valid = np.isfinite(values)
            valid &= fits
            # no bitmap where every cell is there (the usual block): the same column, without packing one
            validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
            arrays.append(pa.Array.from_buffers(field.type, n, [validity, pa.py_buffer(values)]))
            continue
        null = _null_mask(block, name)
        if null is True:
            arrays.append(pa.nulls(n, field.type))
            continue
        if kind == "str":
            first = first if first is not None else cache.get(("zeros", n), lambda: _arrow(np.zeros(n, np.int32)))
            # index 0 of a one-value dictionary is in range by construction: not checked row by row (safe=True
            # scans every index: ~0.3 ms a 100k-row column, ~50 ms of CPU over the 4M-point grid's 4 columns)
            dictionary = _arrow_strings([str(block.scalars[name])])
            arrays.append(pa.DictionaryArray.from_arrays(first, dictionary, safe=False))
            continue
        if axis == "grid":
            values = block.grid_arrays[name].ravel()
            if kind == "int":
                values = _as_int(name, values)
            elif kind == "float":
                values = values.astype(np.float64, copy=False)
            mask = null.ravel() if isinstance(null, np.ndarray) else None
            arrays.append(_arrow(values, mask, field.type))
            continue
        if axis == "scalar":
            value = block.scalars[name]
            value = _as_int(name, np.asarray([value]))[0] if kind == "int" else np.float64(value)
            key = ("scalar", n, value.dtype.str, value.item())
            arrays.append(cache.get(key, lambda: _arrow(np.full(n, value), None, field.type)))
            continue
        # typed on its own axis first (a seq or batch column is checked once per value, not per row)
        source = {"seq": block.seq_arrays, "batch": block.batch_arrays}[axis][name]
        if kind == "int":
            source = _as_int(name, source)
        elif kind == "float":
            source = source.astype(np.float64, copy=False)
        key = (axis, n_seq, n_batch, source.dtype.str, source.tobytes())
        arrays.append(cache.get(key, lambda: _arrow(
            np.repeat(source, n_batch) if axis == "seq" else np.tile(source, n_seq), None, field.type)))
    return pa.Table.from_arrays(arrays, schema=schema)

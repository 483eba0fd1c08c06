"""The sweep's writer thread: order kept, errors on either side raised in the caller, nothing left behind."""

from __future__ import annotations

import threading

import pytest

from kvplan.plans.check.sweep import Grid, sweep
from kvplan.plans.check.sweep_write import _written, write_sweep


def test_chunks_are_written_in_order_and_counted():
    seen, progress = [], []
    done = _written(((n, f"chunk{n}") for n in range(1, 8)), seen.append, lambda d, t: progress.append((d, t)),
                    lambda d: 28)
    assert seen == [f"chunk{n}" for n in range(1, 8)]
    assert done == 28 and progress[-1] == (28, 28) and [d for d, _ in progress] == [1, 3, 6, 10, 15, 21, 28]


def test_a_failing_write_stops_the_producer_and_is_raised():
    produced = []

    def chunks():
        for n in range(1000):
            produced.append(n)
            yield 1, n

    def write(data):
        if data == 3:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _written(chunks(), write, None, lambda d: d)
    assert len(produced) < 1000  # the producer stopped soon after the failure, not at the end
    assert not any(t.name == "kvplan-sweep-writer" for t in threading.enumerate())


def test_a_failing_producer_is_raised_after_the_writer_stops():
    written = []

    def chunks():
        yield 1, "a"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _written(chunks(), written.append, None, lambda d: d)
    assert written == ["a"]
    assert not any(t.name == "kvplan-sweep-writer" for t in threading.enumerate())


def test_parquet_byte_totals_are_delta_encoded_and_latency_floats_uncompressed(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "sweep.parquet"
    write_sweep(sweep(Grid(models=["llama-3.1-8b"], hardware=["h100-sxm"], seq=[1024, 2048], batch=[1, 2])), out)
    meta = pq.ParquetFile(out).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "DELTA_BINARY_PACKED" in encodings["kv_bytes_total"] and "DELTA_BINARY_PACKED" in encodings["kv_bytes_total_per_gpu"]
    assert "DELTA_BINARY_PACKED" not in encodings["seq_len"] and "DELTA_BINARY_PACKED" not in encodings["decode_step_s"]
    codecs = {meta.column(i).path_in_schema: meta.column(i).compression for i in range(meta.num_columns)}
    assert {codecs[c] for c in ("decode_step_s", "floor_decode_step_s", "decode_tokens_per_s")} == {"UNCOMPRESSED"}
    assert {codecs[c] for c in codecs if not c.startswith(("decode_", "floor_"))} == {"LZ4"}
    assert str(pq.read_table(out).schema.field("seq_len").type) == "int64"


def test_parquet_fits_is_plain_encoded_and_reads_back_as_the_csv_booleans(tmp_path):
    """fits is written PLAIN (bit-packed, cheaper to encode than pyarrow's RLE for booleans): still a bool column,
    cell for cell the CSV's true/false (70B on one L40S has no KV memory: its points do not fit)."""
    pq = pytest.importorskip("pyarrow.parquet")
    grid = Grid(models=["llama-3.1-8b", "llama-3.1-70b"], hardware=["l40s"], seq=[1024, 131072], batch=[1, 64])
    out, csv = tmp_path / "sweep.parquet", tmp_path / "sweep.csv"
    write_sweep(sweep(grid), out)
    write_sweep(sweep(grid), csv)
    meta = pq.ParquetFile(out).metadata.row_group(0)
    fits_column = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "fits")
    assert "PLAIN" in fits_column.encodings
    table = pq.read_table(out)
    assert str(table.schema.field("fits").type) == "bool"
    lines = csv.read_text().splitlines()
    at = lines[0].split(",").index("fits")
    expected = [line.split(",")[at] == "true" for line in lines[1:]]
    assert table.column("fits").to_pylist() == expected and True in expected and False in expected


def test_parquet_blocks_sharing_columns_read_back_as_the_csv(tmp_path):
    """Many small blocks (chunks of 4 points) reuse each other's seq, batch and constant columns in the
    Parquet path (ColumnCache); the file must still hold each block's own values, cell for cell the CSV's."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow.parquet")
    from kvplan.plans.check.sweep import sweep_stream

    grid = Grid(models=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm", "h200"], seq=[1, 1000, 4096, 32768],
                batch=[1, 3, 16], kv_dtype=["bf16", "fp8"], tp=[1, 2])
    csv, parquet = tmp_path / "s.csv", tmp_path / "s.parquet"
    write_sweep(sweep(grid), csv)
    write_sweep(sweep_stream(grid, chunk_points=4), parquet)
    theirs = pd.read_parquet(parquet)
    ours = pd.read_csv(csv)
    for name in ("model", "hardware", "kv_dtype", "engine"):
        theirs[name] = theirs[name].astype(str)
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    assert len(theirs) == 2 * 2 * 4 * 3 * 2 * 2


def test_column_cache_holds_at_most_its_budget_and_returns_what_it_built():
    pa = pytest.importorskip("pyarrow")
    import numpy as np

    from kvplan.plans.check.sweep_format import ColumnCache

    cache = ColumnCache(budget_bytes=3 * 800)  # three arrays of 100 int64
    built = []

    def build(value):
        built.append(value)
        return pa.array(np.full(100, value, dtype=np.int64))

    once = cache.get(("a", 1), lambda: build(1))
    assert once.to_pylist() == [1] * 100 and ("a", 1) not in cache.arrays and cache.held_bytes == 0  # asked once
    first = cache.get(("a", 1), lambda: build(1))                  # asked again: built and held from now on
    assert first is not once and built == [1, 1] and ("a", 1) in cache.arrays
    assert cache.get(("a", 1), lambda: build(99)) is first and built == [1, 1]  # held: not built again
    for value in range(2, 10):
        for _ in range(2):
            array = cache.get(("a", value), lambda: build(value))
            assert array.to_pylist() == [value] * 100
            assert cache.held_bytes <= 3 * 800 and len(cache.arrays) <= 3
    assert ("a", 1) not in cache.arrays and ("a", 9) in cache.arrays  # the oldest went first
    assert cache.get(("a", 1), lambda: build(1)).to_pylist() == [1] * 100 and built[-1] == 1
    for _ in range(2):  # over the budget: never held
        big = cache.get(("big",), lambda: pa.array(np.zeros(1000, dtype=np.int64)))
    assert len(big) == 1000 and ("big",) not in cache.arrays

"""The sweep's fast paths give the same numbers as the general ones: step times without the
per-operator terms, exact int64 byte totals, memoised kernel-table curves, the Parquet layout."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.calc import perfdb
from kvplan.calc.operators import Parallel, PassTimes
from kvplan.calc.roofline import decode_step
from kvplan.plans.check.sweep import Grid, _deployment, _product, sweep, sweep_stream
from kvplan.plans.check.sweep_format import (CACHE_COLUMNS, LATENCY_COLUMNS, NULLABLE_COLUMNS, SCALAR_COLUMNS,
                                             arrow_schema)
from kvplan.plans.check.sweep_write import parquet_options, parquet_schema, parquet_writer, write_sweep
from kvplan.plans.sizing.latency_ops import load_tables
from kvplan.plans.sizing.perfmodel import operator_model


@pytest.mark.parametrize("model, tp", [("llama-3.1-70b", 4), ("deepseek-v3", 8), ("qwen3-next-80b-a3b", 2)])
def test_times_only_pass_equals_the_full_pass(model, tp):
    from kvplan.cards.loader import load_hardware, load_model

    grid = Grid(models=[model], hardware=["h200"], tp=[tp])
    dep = _deployment(load_model(model), load_hardware("h200"), grid, "auto", tp, 1, "vllm")
    pass_fn, _, _ = operator_model(dep.model, dep.hardware, dep.cost, dep.machine, "vllm", False, False,
                                   Parallel(tp=tp), [], load_tables())
    seqs = np.array([1.0, 100.0, 4096.0, 32768.0, 131072.0])[:, None]
    batches = np.array([1.0, 2.0, 7.0, 64.0, 256.0, 1000.0])[None, :]
    full = decode_step(dep.cost, dep.machine, batches, seqs, tp=tp, pass_fn=pass_fn)
    fast = decode_step(dep.cost, dep.machine, batches, seqs, tp=tp,
                       pass_fn=lambda *a, **kw: pass_fn(*a, times_only=True, **kw))
    assert isinstance(fast, PassTimes) and fast.time_s.shape == full.time_s.shape == (5, 6)
    # bit for bit: Σ_op max(memory, compute) added in the same order as the stacked sum
    assert np.array_equal(fast.time_s, full.time_s) and np.array_equal(fast.floor_s, full.floor_s)
    assert full.time_s[-1, -1] > 2 * full.time_s[0, -1] > 0  # 128k of context costs more than 1 token: not flat


def test_byte_totals_are_exact_int64_below_two_to_the_53():
    per_seq = np.array([0.0, 131072.0, 327680.0 * 131072])         # 70B bf16: 327,680 B per token
    batches = np.array([1.0, 3.0, 1000.0])
    out = _product(per_seq, batches)
    assert out.dtype == np.int64
    assert out.tolist() == [[0, 0, 0], [131072, 393216, 131072000],
                            [42949672960, 128849018880, 42949672960000]]
    huge = _product(np.array([2.0**50]), np.array([16.0]))            # 2⁵⁴: kept as the float product
    assert huge.dtype == np.float64 and huge[0, 0] == 2.0**54


def test_kernel_curves_are_read_once_per_shape():
    tables = load_tables()
    if tables is None:
        pytest.skip("no kernel tables ship with this install")
    one = perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "bf16", 8192.0, 8192.0, 3.35e12, 989e12)
    assert one is not None
    assert perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "bf16", 8192.0, 8192.0, 3.35e12, 989e12) is one
    first = perfdb.collective_curves(tables, "h100_sxm", "vllm")
    assert first and ("all_reduce", 8) in first
    first.clear()                                                      # a caller's dict is its own
    assert perfdb.collective_curves(tables, "h100_sxm", "vllm")


def test_gemm_backends_are_searched_once_per_gpu():
    tables = load_tables()
    if tables is None:
        pytest.skip("no kernel tables ship with this install")
    first = tables.backends("gemm", "h100_sxm")
    assert "trtllm" in first and "aiter" not in first
    searched = []
    real = tables.raw
    tables.raw = lambda name: searched.append(name) or real(name)
    try:
        again = tables.backends("gemm", "h100_sxm")
    finally:
        del tables.raw
    assert again == first and again is not first and searched == []   # the cached answer, a caller's own copy
    again.clear()
    assert tables.backends("gemm", "h100_sxm") == first


def test_scalar_columns_are_the_combination_scalars():
    [block] = sweep(Grid(models=["llama-3.1-8b"], hardware=["h100-sxm"], seq=[1024, 2048], batch=[1, 2])).blocks
    assert set(block.scalars) == SCALAR_COLUMNS


def test_parquet_layout_required_plain_and_delta(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "sweep.parquet"
    grid = Grid(models=["llama-3.1-8b", "llama-3.1-70b"], hardware=["l40s"], seq=[1024, 131072], batch=[1, 2])
    write_sweep(sweep(grid), out)   # 70B on one L40S: no KV memory, its cache cells are null
    meta = pq.ParquetFile(out)
    parquet_schema = meta.schema
    for i, name in enumerate(parquet_schema.names):
        column = parquet_schema.column(i)
        assert column.max_definition_level == (1 if name in NULLABLE_COLUMNS else 0), name
    group = meta.metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    assert "DELTA_BINARY_PACKED" in encodings["kv_bytes_total"] and "DELTA_BINARY_PACKED" not in encodings["tp"]
    assert "DELTA_BINARY_PACKED" not in encodings["batch"] and "DELTA_BINARY_PACKED" not in encodings["num_blocks"]
    stats = {group.column(i).path_in_schema: group.column(i).is_stats_set for i in range(group.num_columns)}
    assert stats["seq_len"] and stats["batch"] and stats["tp"] and stats["pp"] and stats["fits"]
    assert not stats["model"] and not stats["hardware"] and not stats["decode_step_s"]  # strings: a one-value dictionary
    tp = group.column(parquet_schema.names.index("tp")).statistics
    assert tp.min == tp.max == 1  # a row group is one combination
    seq = group.column(parquet_schema.names.index("seq_len")).statistics
    assert (seq.min, seq.max) == (1024, 131072)
    # every data page is a DataPageV2: its Thrift page header opens with field 1 (type, i32: 0x15) = zigzag(3)
    # = 0x06 (DATA_PAGE_V2; a v1 page reads 0x00); dictionary pages (type 2) precede the string columns' data
    raw = out.read_bytes()
    offsets = [group.column(i).data_page_offset for i in range(group.num_columns)]
    assert all(raw[o:o + 2] == b"\x15\x06" for o in offsets), [raw[o:o + 2] for o in offsets]
    table = pq.read_table(out)
    assert table.schema.remove_metadata().equals(arrow_schema(table.column_names))
    frame = table.to_pandas()
    assert frame["kv_cache_memory_bytes"].isna().any() and frame["seq_len"].notna().all()


def test_cache_columns_are_required_when_every_combination_has_kv_memory(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    grid = Grid(models=["llama-3.1-8b"], hardware=["h100-sxm"], seq=[1024, 131072], batch=[1, 4096])
    for name, result in (("stream", sweep_stream(grid)), ("whole", sweep(grid))):
        out = tmp_path / f"{name}.parquet"
        write_sweep(result, out)
        schema = pq.ParquetFile(out).schema
        levels = {schema.column(i).name: schema.column(i).max_definition_level for i in range(len(schema.names))}
        assert all(levels[c] == 0 for c in CACHE_COLUMNS), levels        # every combination has a KV pool
        assert all(levels[c] == 1 for c in LATENCY_COLUMNS), levels      # batch 4096 at 128k does not fit
        frame = pq.read_table(out).to_pandas()
        assert frame["decode_step_s"].isna().any() and frame["num_blocks"].notna().all()
        assert str(pq.read_table(out).schema.field("num_blocks").type) == "int64"


@pytest.mark.parametrize("models, hardware, gaps", [(["llama-3.1-8b"], "h100-sxm", False),
                                                    (["llama-3.1-8b", "llama-3.1-70b"], "l40s", True)])
def test_parquet_schema_is_the_written_files(tmp_path, models, hardware, gaps):
    """What benchmarks build their tables with is the file's own schema (cache columns nullable only with gaps)."""
    pq = pytest.importorskip("pyarrow.parquet")
    grid = Grid(models=models, hardware=[hardware], seq=[1024, 131072], batch=[1, 4096])
    schema = parquet_schema(sweep_stream(grid))
    assert {schema.field(c).nullable for c in CACHE_COLUMNS} == {gaps}
    assert all(schema.field(c).nullable for c in LATENCY_COLUMNS) and not schema.field("seq_len").nullable
    out = tmp_path / "sweep.parquet"
    write_sweep(sweep_stream(grid), out)
    assert pq.read_schema(out).remove_metadata().equals(schema)
    assert parquet_schema(sweep(grid)).equals(schema)


def test_parquet_writer_writes_pyarrow_parquets_file_byte_for_byte(tmp_path):
    """The core writer the sweep uses, with the wrapper's own arguments, writes what pyarrow.parquet's
    ParquetWriter writes with the same options: the same bytes."""
    pq = pytest.importorskip("pyarrow.parquet")
    from kvplan.plans.check.sweep_format import ColumnCache, block_table

    grid = Grid(models=["llama-3.1-8b", "llama-3.1-70b"], hardware=["l40s"], seq=[1024, 2048, 131072], batch=[1, 3])
    result = sweep(grid)
    schema = parquet_schema(result)
    tables = [block_table(block, schema, ColumnCache()) for block in result.blocks]
    core, wrapped = tmp_path / "core.parquet", tmp_path / "wrapped.parquet"
    writer = parquet_writer(str(core), schema, result.column_names)
    for table in tables:
        writer.write_table(table)
    writer.close()
    with pq.ParquetWriter(wrapped, schema, **parquet_options(result.column_names)) as reference:
        for table in tables:
            reference.write_table(table)
    assert core.read_bytes() == wrapped.read_bytes()
    out = tmp_path / "command.parquet"
    write_sweep(sweep(grid), out)
    assert out.read_bytes() == wrapped.read_bytes()
    assert pq.ParquetFile(core).metadata.num_row_groups == len(tables) == 2


def test_parquet_writer_falls_back_to_the_wrapper_when_the_core_class_changes(tmp_path, monkeypatch):
    """pyarrow._parquet is private: a release whose core class does not take the wrapper's arguments (here one it
    does not know) gets the public wrapper, which writes the same file."""
    pq = pytest.importorskip("pyarrow.parquet")
    from kvplan.plans.check import sweep_write

    grid = Grid(models=["llama-3.1-8b"], hardware=["l40s"], seq=[1024, 2048], batch=[1, 3])
    reference = tmp_path / "reference.parquet"
    write_sweep(sweep(grid), reference)
    monkeypatch.setattr(sweep_write, "WRITER_DEFAULTS", {**sweep_write.WRITER_DEFAULTS, "an_argument_it_lacks": 1})
    out = tmp_path / "fallback.parquet"
    write_sweep(sweep(grid), out)
    assert out.read_bytes() == reference.read_bytes()
    assert pq.ParquetFile(out).metadata.num_rows == 4

"""Sweeps: grid parsing, row counts, exact agreement with fit and latency, skipping, output files."""

from __future__ import annotations

import csv
import importlib.util
import io
import itertools
import math
import random

import numpy as np
import pytest

from kvplan.errors import InputError, KvplanError
from kvplan.plans.check.sweep import Grid, load_grid, sweep, sweep_stream
from kvplan.plans.check.sweep_write import block_frame, write_sweep
from kvplan.plans.check.sweep_format import CACHE_COLUMNS, INT_COLUMNS, LATENCY_COLUMNS, block_csv, block_csv_bytes
from kvplan.plans.build import fit_from_names, size_from_names


FIT_KEYS = ["kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence",
            "kv_bytes_per_sequence_per_gpu", "kv_bytes_total", "kv_bytes_total_per_gpu", "weights_bytes_per_gpu",
            "kv_cache_memory_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency", "max_context_at_batch",
            "fits"]

GRID = Grid(
    models=["llama-3.1-70b", "deepseek-v3", "gemma-2-9b", "qwen3-next-80b-a3b"],
    hardware=["h100-sxm", "h200"],
    seq=[1, 1000, 4096, 32768, 131072],
    batch=[1, 3, 16, 256],
    kv_dtype=["auto", "fp8"],
    tp=[1, 2, 3, 8],
    engine=["vllm", "sglang"],
)


@pytest.fixture(scope="module")
def result():
    return sweep(GRID)


def rows_of(result) -> list[dict]:
    out = []
    for block in result.blocks:
        cols = block.columns()
        n = block.rows
        for i in range(n):
            out.append({k: (v[i] if isinstance(v, np.ndarray) else v) for k, v in cols.items()})
    return out


def test_row_count_is_the_product_minus_skipped(result):
    assert GRID.points == 4 * 2 * 5 * 4 * 2 * 4 * 1 * 2
    assert result.rows + result.skipped_points == GRID.points
    assert result.skipped_points > 0
    reasons = dict(result.skipped)
    # tp=3 fits none of these models: hw × dtype × engine × 5 seqs × 4 batches
    assert reasons["llama-3.1-70b: tp=3 does not fit 8 KV heads (tp must divide the KV heads, or be a "
                   "multiple of them)"] == 2 * 2 * 2 * 5 * 4
    # gemma-2-9b's 8k context drops 32k and 128k in every combination (each point counted once)
    long = [r for r in reasons if r.startswith("seq beyond gemma-2-9b's max context")]
    assert long and reasons[long[0]] == 2 * 2 * 4 * 2 * 2 * 4
    gemma_tp3 = [n for r, n in reasons.items() if r.startswith("gemma-2-9b") and "tp=3" in r]
    assert gemma_tp3 == [2 * 2 * 2 * 3 * 4]


def test_rows_are_seq_major_batch_minor(result):
    block = result.blocks[0]
    cols = block.columns()
    assert list(cols["seq_len"][:8]) == [1, 1, 1, 1, 1000, 1000, 1000, 1000]
    assert list(cols["batch"][:8]) == [1, 3, 16, 256] * 2


def test_sampled_points_agree_exactly_with_fit(result):
    rows = rows_of(result)
    rng = random.Random(7)
    sample = rng.sample(rows, 40) + [r for r in rows if not r["fits"]][:5] + [r for r in rows if r["fits"]][-5:]
    for row in sample:
        lib = fit_from_names(row["model"], row["hardware"], seq=[int(row["seq_len"])], batch=[int(row["batch"])],
                             kv_dtype=[row["kv_dtype"]], tp=[int(row["tp"])], pp=int(row["pp"]), engine=[row["engine"]],
                             allow_long_context=True).rows[0]
        for key in FIT_KEYS:
            assert row[key] == lib[key], (key, row, lib[key])


def test_every_point_of_one_combination_agrees_with_fit():
    grid = Grid(models=["gemma-2-9b"], hardware=["h100-sxm"], seq=[100, 4096, 4097, 8192], batch=[1, 7, 64, 500],
                kv_dtype=["fp8"], tp=[2])
    [block] = sweep(grid).blocks
    lib = fit_from_names("gemma-2-9b", "h100-sxm", seq=grid.seq, batch=grid.batch, kv_dtype=["fp8"], tp=[2]).rows
    cols = block.columns()
    for i, row in enumerate(lib):
        for key in FIT_KEYS + ["seq_len", "batch"]:
            value = cols[key][i] if isinstance(cols[key], np.ndarray) else cols[key]
            assert value == row[key], key


def test_size_columns_agree_with_size(result):
    rows = [r for r in rows_of(result) if r["model"] == "deepseek-v3" and r["engine"] == "sglang"][:20]
    for row in rows:
        lib = size_from_names("deepseek-v3", seq=[int(row["seq_len"])], batch=[int(row["batch"])],
                              kv_dtype=[row["kv_dtype"]],
                              tp=[int(row["tp"])], engine=["sglang"]).rows[0]
        for key in ("kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence", "kv_bytes_total_per_gpu"):
            assert row[key] == lib[key]


def test_latency_columns_agree_with_latency_library(result):
    from kvplan.plans.build import latency_from_names

    rows = [r for r in rows_of(result) if r["engine"] == "vllm" and r["seq_len"] > 1]
    for row in random.Random(3).sample(rows, 8):
        lib = latency_from_names(row["model"], row["hardware"], isl=[1], osl=[1], batch=[int(row["batch"])],
                                 tp=[int(row["tp"])],
                                 context=[int(row["seq_len"])], kv_dtype=row["kv_dtype"], engine="vllm").rows[0]
        assert row["decode_step_s"] == lib["decode_step_s"]
        assert row["floor_decode_step_s"] == lib["floor_decode_step_s"]


def test_strict_fails_on_the_first_invalid_combination():
    with pytest.raises(InputError) as err:
        sweep(GRID.model_copy(update={"models": ["llama-3.1-70b"]}), strict=True)
    assert "tp=3 does not fit 8 KV heads" in err.value.message


def test_allow_long_context_keeps_every_seq():
    grid = Grid(models=["gemma-2-9b"], hardware=["h100-sxm"], seq=[4096, 131072], allow_long_context=True)
    assert sweep(grid).rows == 2


def test_pp_and_missing_flops_leave_latency_empty():
    grid = Grid(models=["llama-3.1-8b"], hardware=["a100-80gb"], seq=[4096], pp=[1, 2], kv_dtype=["fp8"],
                weights_dtype="fp8")
    result = sweep(grid)
    assert result.rows == 2
    for block in result.blocks:
        assert np.isnan(block.grid_arrays["decode_step_s"]).all()
    assert any("pp > 1" in n for n in result.notes)
    assert any("a100-80gb" in n and "fp8" in n for n in result.notes)


def test_grid_file_forms(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("models: llama-3.1-8b\nhardware: [h100-sxm]\nseq: {start: 1k, stop: 128k, num: 5}\n"
                    "batch: {start: 1, stop: 256, num: 9, log: true}\ntp: 2\n")
    grid = load_grid(path)
    assert grid.models == ["llama-3.1-8b"] and grid.tp == [2]
    assert grid.seq == [1024, 33536, 66048, 98560, 131072]
    assert grid.batch == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert grid.points == 45 and sweep(grid).rows == 45


@pytest.mark.parametrize(("text", "message"), [
    ("models: [x]\n", "hardware: Field required"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nmodel: [x]\n", "unknown key model"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nkv_dtype: [fp7]\n", "unknown KV dtype fp7"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nengine: [tgi]\n", "unknown engine tgi"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: [12x]\n", "cannot read a token count '12x'"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntp: [0]\n", "greater than or equal to 1"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: {start: 1k, stop: 2k}\n", "a range is"),
])
def test_bad_grids(tmp_path, text, message):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_grid(path)
    assert message in err.value.message


def test_unknown_model_in_grid():
    with pytest.raises(KvplanError) as err:
        sweep(Grid(models=["llama-3.1-7b"], hardware=["h100-sxm"]))
    assert "unknown model 'llama-3.1-7b'" in err.value.message


@pytest.mark.parametrize("index", [0, 5, -1])
def test_csv_text_equals_pandas_reading_of_the_columns(result, index):
    import pandas as pd

    block = result.blocks[index]
    header = ",".join(block.column_names) + "\n"
    python = pd.read_csv(io.StringIO(header + block_csv(block)))
    theirs = pd.read_csv(io.StringIO(block_frame(block).to_csv(index=False)))
    pd.testing.assert_frame_equal(python, theirs, check_exact=True, check_dtype=False)  # 2.0 vs 2
    if importlib.util.find_spec("pyarrow") is not None:
        arrow = pd.read_csv(io.StringIO(header + bytes(block_csv_bytes(block)).decode()))
        pd.testing.assert_frame_equal(arrow, python, check_exact=True)


def test_write_csv_whole_and_rereadable(result, tmp_path):
    out = tmp_path / "sweep.csv"
    write_sweep(result, out)
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == result.rows
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.csv"]
    lib = rows_of(result)
    assert {r["fits"] for r in rows} == {"true", "false"}
    no_cache = 0
    for row, want in zip(rows, lib):
        if want["kv_cache_memory_bytes"] <= 0:  # weights leave no KV memory: the cache cells are empty
            no_cache += 1
            assert all(row[c] == "" for c in CACHE_COLUMNS) and row["fits"] == "false"
        else:
            assert float(row["kv_cache_memory_bytes"]) == want["kv_cache_memory_bytes"]
            assert int(row["num_blocks"]) == want["num_blocks"]
    assert 0 < no_cache < len(rows)


def test_csv_has_no_negative_figures_and_typed_cells(result, tmp_path):
    out = tmp_path / "sweep.csv"
    write_sweep(result, out)
    rows = list(csv.DictReader(out.open()))
    not_fitting = [r for r in rows if r["fits"] == "false"]
    assert not_fitting and len(not_fitting) < len(rows)
    for row in rows:
        for key, cell in row.items():
            assert not cell.startswith("-"), (key, row)
            if key in INT_COLUMNS and cell:
                assert cell.isdigit(), (key, cell)  # integers as integers: no 1024.0
        if row["fits"] == "false":
            assert all(row[c] == "" for c in LATENCY_COLUMNS), row
    fitting = [r for r in rows if r["fits"] == "true" and r["pp"] == "1"]
    assert all(float(r["decode_step_s"]) > 0 for r in fitting)


def test_parquet_types_and_nulls(result, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "sweep.parquet"
    write_sweep(result, out)
    table = pq.read_table(out)
    assert table.num_rows == result.rows
    for name in INT_COLUMNS:
        assert str(table.schema.field(name).type) == "int64", name
    assert str(table.schema.field("fits").type) == "bool"
    frame = table.to_pandas()
    bad = frame[~frame["fits"]]
    assert bad[list(LATENCY_COLUMNS)].isna().all().all()
    no_cache = frame["kv_cache_memory_bytes"].isna()
    assert no_cache.any() and (~frame.loc[no_cache, "fits"]).all()
    assert (frame.select_dtypes("number").fillna(0) >= 0).all().all()


def test_stream_in_chunks_equals_the_whole(tmp_path):
    grid = Grid(models=["llama-3.1-8b", "llama-3.1-70b"], hardware=["h100-sxm"], seq=[1, 1000, 4096, 32768, 131072],
                batch=[1, 3, 16], kv_dtype=["bf16", "fp8"], tp=[1, 2])
    whole, chunked = tmp_path / "whole.csv", tmp_path / "chunked.csv"
    write_sweep(sweep(grid), whole)
    stream = sweep_stream(grid, chunk_points=4)  # one or two seq values per chunk
    write_sweep(stream, chunked)
    assert chunked.read_text() == whole.read_text()
    assert stream.rows == 2 * 5 * 3 * 2 * 2


def test_parquet_needs_pyarrow(result, tmp_path):
    out = tmp_path / "sweep.parquet"
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(InputError) as err:
            write_sweep(result, out)
        assert "needs pyarrow" in err.value.message and "kvplan[parquet]" in err.value.hint
        assert not out.exists()
    else:
        import pandas as pd

        write_sweep(result, out)
        assert len(pd.read_parquet(out)) == result.rows


def test_output_errors_leave_nothing(result, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    for target, message in ((blocker / "out.csv", "no directory"), (tmp_path / "out.xlsx", "cannot tell the format")):
        with pytest.raises(InputError) as err:
            write_sweep(result, target)
        assert message in err.value.message
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_factored_block_matches_meshgrid():
    grid = Grid(models=["llama-3.1-8b"], hardware=["h200"], seq=[10, 20, 30], batch=[1, 2])
    [block] = sweep(grid).blocks
    cols = block.columns()
    expected = list(itertools.product([10, 20, 30], [1, 2]))
    assert list(zip(cols["seq_len"].tolist(), cols["batch"].tolist())) == expected
    assert all(math.isfinite(v) for v in cols["kv_bytes_total"].tolist())

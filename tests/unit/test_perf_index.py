"""The tables' byte-range index (kvplan/data/perf/index.csv and its aiter/, rccl/ twins) and the fast reader.

The index is checked against the tables' bytes with the csv module, independently of the code that writes it:
every run it lists covers consecutive whole lines that all start with its four cells, neighbouring lines do not,
and the runs tile each table's body. The reader is checked against the csv module's parse of the same lines
(stdlib csv + float()), for every GPU, backend and dtype block the commands read, and against a stale index.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from kvplan.calc import perfcsv, perfdb, perfindex

DIRS = [perfdb.DATA, *(perfdb.DATA / d for d in perfdb.EXTRA)]


def index_rows(directory: Path) -> list[dict]:
    with open(directory / perfcsv.INDEX, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name)
def test_index_tiles_every_indexed_table_by_runs_of_its_first_four_cells(directory):
    index = index_rows(directory)
    tables = sorted({r["table"] for r in index})
    assert tables == sorted(n for n in perfcsv.INDEXED if (directory / f"{n}.csv").exists())
    for name in tables:
        data = (directory / f"{name}.csv").read_bytes()
        runs = [r for r in index if r["table"] == name]
        assert {int(r["table_bytes"]) for r in runs} == {len(data)}
        assert int(runs[0]["start"]) == data.index(b"\n") + 1 and int(runs[-1]["end"]) == len(data)
        for before, after in zip(runs, runs[1:]):
            assert int(before["end"]) == int(after["start"])                      # no gap, no overlap
        for r in runs:
            cells = [r["gpu"], r["backend"], r["backend_version"], r["fourth"]]
            text = data[int(r["start"]):int(r["end"])].decode("utf-8")
            assert text.endswith("\n") and data[int(r["start"]) - 1:int(r["start"])] == b"\n"
            lines = list(csv.reader(io.StringIO(text)))
            assert lines and all(line[:4] == cells for line in lines)
        for before, after in zip(runs, runs[1:]):                                 # runs are maximal
            assert [before[c] for c in ("gpu", "backend", "backend_version", "fourth")] != \
                [after[c] for c in ("gpu", "backend", "backend_version", "fourth")]


@pytest.mark.parametrize("directory", DIRS, ids=lambda d: d.name)
def test_index_is_what_the_script_writes(directory):
    """benchmarks/index_perf_data.py rewrites it from the tables: a table edited without rerunning it fails here."""
    assert (directory / perfcsv.INDEX).read_text(encoding="utf-8") == perfindex.index_text(directory)


@lru_cache(maxsize=4)
def csv_rows(path: Path) -> tuple[list, dict, dict]:
    """(header, rows by (gpu, backend, fourth cell), rows by gpu) of a table, in file order, by the csv module."""
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header, by_block, by_gpu = next(reader), {}, {}
        for r in reader:
            by_block.setdefault((r[0], r[1], r[3]), []).append(r)
            by_gpu.setdefault(r[0], []).append(r)
    return header, by_block, by_gpu


def reference(header: list, rows: list) -> dict:
    """The columns of ``rows`` as the csv module reads them, numeric cells by float() (empty cells NaN)."""
    out = {}
    for i, name in enumerate(header):
        values = [r[i] for r in rows]
        out[name] = [float(v) if v else math.nan for v in values] if name in perfcsv.NUMERIC else values
    return out


def same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name, values in want.items():
        if name in perfcsv.NUMERIC:
            assert got[name].dtype == np.float64
            np.testing.assert_array_equal(got[name], np.array(values, dtype=np.float64))   # bit for bit
            assert got[name].tobytes() == np.array(values, dtype=np.float64).tobytes()
        else:
            assert got[name].dtype == object and got[name].tolist() == values


def blocks():
    for directory in DIRS:
        for r in index_rows(directory):
            yield directory / f"{r['table']}.csv", r["gpu"], r["backend"], r["fourth"]


BLOCKS = sorted(set(blocks()), key=lambda b: (str(b[0]), b[1:]))


@pytest.mark.parametrize("path, gpu, backend, fourth", BLOCKS,
                         ids=[f"{p.parent.name}/{p.stem}-{g}-{b}-{f}" for p, g, b, f in BLOCKS])
def test_indexed_read_matches_the_csv_module(path, gpu, backend, fourth):
    """A GPU and backend's rows (the GEMM table: of one dtype too) as the csv module reads them, bit for bit."""
    header, by_block, by_gpu = csv_rows(path)
    tables = perfdb.PerfTables(path.parent)
    want = by_block[(gpu, backend, fourth)] if path.stem == "gemm" else [r for r in by_gpu[gpu] if r[1] == backend]
    same(tables._part(path.stem, path, gpu, backend, fourth if path.stem == "gemm" else None), reference(header, want))


GPU_BLOCKS = sorted({(p, g) for p, g, _, _ in BLOCKS}, key=str)


@pytest.mark.parametrize("path, gpu", GPU_BLOCKS,
                         ids=[f"{p.parent.name}/{p.stem}-{g}" for p, g in GPU_BLOCKS])
def test_indexed_read_of_a_gpu_matches_the_csv_module(path, gpu):
    header, _, by_gpu = csv_rows(path)
    same(perfdb.PerfTables(path.parent)._part(path.stem, path, gpu, None, None), reference(header, by_gpu[gpu]))


def test_stale_index_falls_back_to_searching_the_file(tmp_path):
    """A table rewritten without its index (another size) reads the same rows as with none: the reader checks."""
    for name in ("gemm.csv", "gpus.csv", perfcsv.INDEX):
        shutil.copy(perfdb.DATA / name, tmp_path / name)
    gemm = tmp_path / "gemm.csv"
    text = gemm.read_text(encoding="utf-8")
    first = text[text.index("h200_sxm,vllm,0.24.0,bf16,"):].split("\n", 1)[0]
    kernel = first.split(",")[4]              # the run's kernel id, which the edit prefixes with a 1
    gemm.write_text(text.replace("h200_sxm,vllm,0.24.0,bf16,", "h200_sxm,vllm,0.24.0,bf16,1", 1), encoding="utf-8")
    assert perfcsv.indexed_runs(gemm, "h200_sxm", "vllm", "bf16") is None
    rows = perfdb.PerfTables(tmp_path).select("gemm", gpu="h200_sxm", backend="vllm", dtype="bf16")
    csv_rows.cache_clear()
    header, by_block, _ = csv_rows(gemm)
    want = reference(header, by_block[("h200_sxm", "vllm", "bf16")])
    assert rows["kernel_id"][0] == "1" + kernel
    same(rows, want)


def test_a_range_that_does_not_hold_its_run_is_not_read(tmp_path):
    """An index whose ranges no longer fall on its runs' lines (the table edited, its size kept) reads nothing."""
    for name in ("gemm.csv", perfcsv.INDEX):
        shutil.copy(perfdb.DATA / name, tmp_path / name)
    gemm = tmp_path / "gemm.csv"
    runs = perfcsv.indexed_runs(gemm, "h200_sxm", "vllm", "bf16")
    assert perfcsv.indexed_lines(gemm, runs) is not None
    key, start, end = runs[0]
    assert perfcsv.indexed_lines(gemm, [(key, start + 1, end)]) is None
    assert perfcsv.indexed_lines(gemm, [(key, start, end - 1)]) is None


def test_columns_reads_quoted_and_empty_cells_as_the_csv_module():
    header = "gpu,backend,backend_version,dtype,m,latency_s"
    lines = ['h200_sxm,vllm,"0,24",bf16,1,2.5e-06', "h200_sxm,vllm,0.24,bf16,,3e-06"]
    got = perfcsv.columns(header, lines)
    assert got["backend_version"].tolist() == ["0,24", "0.24"]
    assert got["m"][0] == 1.0 and math.isnan(got["m"][1]) and got["latency_s"].tolist() == [2.5e-06, 3e-06]
    plain = perfcsv.columns(header, "h200_sxm,vllm,0.24,bf16,1,2.5e-06\nh200_sxm,vllm,0.24,bf16,2,3e-06\n")
    assert plain["m"].tolist() == [1.0, 2.0] and plain["dtype"].tolist() == ["bf16", "bf16"]

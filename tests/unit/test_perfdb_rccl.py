"""MI300X all-reduce rows from AMD's ROCm blog's rccl-tests run (kvplan/data/perf/rccl).

Spot values are copied by hand from github.com/ROCm/rocm-blogs @ c263176657bb16a54a709b3fe75144f603433a1a,
blogs/software-tools-optimization/mi300x-rccl-xgmi/README.md, the ``all_reduce_perf ... -G 1`` table
(out-of-place ``time``, µs; "row" = 0-based data row, 8 B is row 0):

- row 11: ``16384  4096  float  sum  -1  8.71  1.88  3.29 ...``
- row 31: ``17179869184  4294967296  float  sum  -1  94182  182.41  319.22 ...``

The mi300x card's scale-up figure (AMD MI300X data sheet): 7 Infinity Fabric links x 64 GB/s = 448 GB/s per
direction per GPU.
"""

from __future__ import annotations

import csv
from importlib.resources import files

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc import perfdb
from kvplan.cards.loader import load_hardware
from kvplan.plans.build import latency_from_names

RCCL = files("kvplan") / "data" / "perf" / "rccl"
LINK = 448e9


def read(name: str) -> list[dict[str, str]]:
    with (RCCL / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_rows_are_rccl_on_8_mi300x_with_their_source():
    (src,) = read("sources.csv")
    assert (src["repo"], src["commit"], src["path"]) == (
        "ROCm/rocm-blogs", "c263176657bb16a54a709b3fe75144f603433a1a",
        "blogs/software-tools-optimization/mi300x-rccl-xgmi/README.md")
    assert {r["gpu"]: r["card"] for r in read("gpus.csv")} == {"mi300x": "mi300x"}
    rows = read("comm.csv")
    assert len(rows) == 25
    for r in rows:
        assert (r["gpu"], r["backend"], r["library"], r["op"], r["dtype"], r["num_gpus"]) == (
            "mi300x", "rccl", "rccl_graph", "all_reduce", "fp32", "8")
        assert r["backend_version"] == src["backend_version"] == "2.22.3-develop:f5b15f2"
        assert int(r["message_bytes"]) == 4 * int(r["message_elements"]) >= 1024
    sizes = [int(r["message_bytes"]) for r in rows]
    assert sizes == [2 ** i for i in range(10, 35)]
    assert "ROCm/rocm-blogs" in (RCCL / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("size,us,row", [(16384, 8.71, 11), (17179869184, 94182.0, 31)])
def test_spot_rows_match_the_blog(size, us, row):
    hit = [r for r in read("comm.csv") if int(r["message_bytes"]) == size]
    assert len(hit) == 1 and int(hit[0]["src_row"]) == row
    assert float(hit[0]["latency_s"]) == pytest.approx(us * 1e-6, rel=1e-9)


def test_the_largest_row_by_hand_against_the_card_link():
    """16 GiB on 8 ranks: the ring moves 2 (n − 1) / n × bytes = 1.75 × 17,179,869,184 B per GPU; at the card's
    448 GB/s that takes 67.109 ms, the measured 94.182 ms is η = 0.71255 of the link (bus bandwidth 319.22 GB/s,
    as the blog prints). kvplan's 8-GPU all-reduce at that size returns the measured time."""
    card = load_hardware("mi300x")
    assert card.scale_up.bandwidth_bytes_per_s == LINK
    curve = perfdb.collective_curves(perfdb.load_default(), "mi300x", "vllm")[("all_reduce", 8)]
    assert_allclose(curve(17179869184), 94.182e-3, rtol=1e-9)
    ideal = 1.75 * 17179869184 / LINK
    assert_allclose(ideal, 67.109e-3, rtol=1e-4)
    assert_allclose(ideal / curve(17179869184), 0.71255, rtol=1e-4)
    assert_allclose(1.75 * 17179869184 / 94.182e-3 / 1e9, 319.22, rtol=1e-4)
    assert "AMD ROCm blog" in curve.source and "rccl_graph" in curve.source


def test_decode_sized_messages_read_the_graph_run_and_small_ones_hold_its_alpha():
    """One Llama-3.1-70B decode token (8,192 bf16 = 16 KiB) takes the 16 KiB row, 8.71 µs; DeepSeek-V3's 7,168 × 2 B
    = 14 KiB lies between the 8 KiB (7.64 µs) and 16 KiB rows, log-log: exp(ln 7.64 + (ln 14336 − ln 8192) /
    (ln 16384 − ln 8192) × (ln 8.71 − ln 7.64)) = 8.4928 µs; below 1 KiB the 1 KiB row's 7.47 µs."""
    curve = perfdb.collective_curves(perfdb.load_default(), "mi300x", "sglang")[("all_reduce", 8)]
    assert_allclose(curve(16384), 8.71e-6, rtol=1e-9)
    w = np.log(14336 / 8192) / np.log(2)
    assert_allclose(curve(14336), np.exp(np.log(7.64) + w * np.log(8.71 / 7.64)) * 1e-6, rtol=1e-9)
    assert_allclose(curve(14336), 8.4928e-6, rtol=1e-4)
    assert_allclose(curve(64), 7.47e-6, rtol=1e-9)
    # no 2- or 4-GPU rows: TP2 / TP4 keep the link formula
    assert ("all_reduce", 4) not in perfdb.collective_curves(perfdb.load_default(), "mi300x", "vllm")


@given(a=st.floats(1.0, 6.4e10), b=st.floats(1.0, 6.4e10))
@settings(max_examples=200, deadline=None)
def test_more_bytes_never_faster(a, b):
    """A larger all-reduce never takes less time, to the table's print resolution (0.01 µs: the 1 KiB and 2 KiB
    rows read 7.47 and 7.46 µs), at any size, beyond the largest row included."""
    curve = perfdb.collective_curves(perfdb.load_default(), "mi300x", "vllm")[("all_reduce", 8)]
    small, big = sorted((a, b))
    assert float(curve(big)) >= float(curve(small)) - 0.01e-6


def test_latency_on_mi300x_tp8_names_the_rccl_rows():
    hit = latency_from_names("llama-3.1-70b", "mi300x", isl=128, osl=64, batch=1, tp=[8], engine="vllm",
                             weights_dtype="fp8")
    said = " ".join(hit.assumptions)
    assert "collectives on ≤ 8 GPUs of one node: measured latency vs message size (mi300x: AMD ROCm blog" in said
    assert "ROCm/rocm-blogs @c263176) rccl_graph all_reduce)" in said

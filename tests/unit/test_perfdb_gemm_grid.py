"""GEMM efficiency at any (n, k): bilinear in (log n, log k) between measured pairs of gemm.csv, held at the grid's
edge, the nearest pair where no grid brackets the shape; a layer group's GEMMs combined harmonically by their SOL.
Every expected value is worked by hand below from rows typed in from kvplan/data/perf/gemm.csv."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc import gemm_grid, perfdb
from kvplan.calc.efficiency import Curve

H100_BW, H100_BF16 = 3.35e12, 989.5e12          # h100-sxm card: NVIDIA datasheet

# gemm.csv, h100_sxm, vllm 0.24.0, bf16, m = 1 (latency_s): the four measured pairs around (4672, 4544)
LAT_4096_4096, LAT_5120_4096 = 1.50453e-05, 1.69022e-05
LAT_4096_5120, LAT_5120_5120 = 1.7832e-05, 2.032e-05
# ... and around Qwen3-235B-A22B's TP8 attention GEMMs (QKV 1280 x 4096, O 4096 x 1024)
LAT_1024_4096, LAT_1536_4096, LAT_4096_1024 = 7.51911e-06, 8.83111e-06, 5.96444e-06


def eta_m1(n, k, latency):
    """m = 1 is memory-bound: η = n k × 2 B / BW / t."""
    return n * k * 2 / H100_BW / latency


def test_bilinear_between_four_measured_pairs_by_hand():
    """Falcon-7B's TP1 QKV, n = (71 + 2) × 64 = 4672, k = 4544: both off the grid, between 4096 and 5120.

    Corner η at m = 1 (n k 2 B / 3.35e12 / t): (4096, 4096) 1.001625e-5 / 1.50453e-5 = 0.66574;
    (5120, 4096) 1.252031e-5 / 1.69022e-5 = 0.74075; (4096, 5120) 1.252031e-5 / 1.7832e-5 = 0.70213;
    (5120, 5120) 1.565039e-5 / 2.032e-5 = 0.77020.
    t = ln(4672/4096) / ln(5120/4096) = 0.131577 / 0.223144 = 0.58966; u = ln(4544/4096) / ln 1.25 = 0.46516.
    η = 0.41034 × 0.53484 × 0.66574 + 0.58966 × 0.53484 × 0.74075 + 0.41034 × 0.46516 × 0.70213
        + 0.58966 × 0.46516 × 0.77020 = 0.14611 + 0.23361 + 0.13402 + 0.21126 = 0.72500.
    """
    curve = perfdb.gemm_curve(perfdb.load_default(), "h100_sxm", "vllm", "bf16", 4672, 4544, H100_BW, H100_BF16)
    assert_allclose(curve(1), 0.72500, rtol=2e-4)
    t = math.log(4672 / 4096) / math.log(1.25)
    u = math.log(4544 / 4096) / math.log(1.25)
    by_formula = ((1 - t) * (1 - u) * eta_m1(4096, 4096, LAT_4096_4096) + t * (1 - u) * eta_m1(5120, 4096, LAT_5120_4096)
                  + (1 - t) * u * eta_m1(4096, 5120, LAT_4096_5120) + t * u * eta_m1(5120, 5120, LAT_5120_5120))
    assert_allclose(curve(1), by_formula, rtol=1e-9)
    assert "n=4672, k=4544" in curve.source and "interpolated between measured n 4096–5120, k 4096–5120" in curve.source


def test_a_measured_pair_reads_its_own_rows_and_one_axis_interpolates_alone():
    """(4096, 1024) is measured: η(1) = 2.504062e-6 / 5.96444e-6 = 0.41983, source names that pair only.
    (1280, 4096): k measured, n between 1024 and 1536, t = ln 1.25 / ln 1.5 = 0.55034:
    η(1) = 0.44966 × 2.504062e-6 / 7.51911e-6 + 0.55034 × 3.756093e-6 / 8.83111e-6 = 0.14975 + 0.23408 = 0.38383."""
    tables = perfdb.load_default()
    o = perfdb.gemm_curve(tables, "h100_sxm", "vllm", "bf16", 4096, 1024, H100_BW, H100_BF16)
    assert_allclose(o(1), 0.41983, rtol=2e-4)
    assert o.source.endswith("GEMM n=4096, k=1024")
    qkv = perfdb.gemm_curve(tables, "h100_sxm", "vllm", "bf16", 1280, 4096, H100_BW, H100_BF16)
    assert_allclose(qkv(1), 0.38383, rtol=2e-4)
    assert "interpolated between measured n 1024–1536, k 4096" in qkv.source


def test_group_curve_is_the_harmonic_mean_by_sol_share_by_hand():
    """Qwen3-235B-A22B TP8 attention on H100 vLLM bf16 at m = 1: QKV 1280 × 4096 (η 0.38383, above) and
    O 4096 × 1024 (η 0.41983) in every layer, shares f = n k / Σ n k = 5/9 and 4/9:
    η = 1 / (0.55556 / 0.38383 + 0.44444 / 0.41983) = 1 / (1.44741 + 1.05862) = 0.39904, so the group's time
    SOL / η is the sum of the two GEMMs' SOL / η."""
    tables = perfdb.load_default()
    gemms = (("QKV", 1280.0, 4096.0, 94 * 1280 * 4096.0), ("O", 4096.0, 1024.0, 94 * 4096 * 1024.0))
    group = perfdb.group_gemm_curve(tables, "h100_sxm", "vllm", "bf16", gemms, H100_BW, H100_BF16)
    assert_allclose(group(1), 0.39904, rtol=3e-4)
    sol_qkv, sol_o = 1280 * 4096 * 2 / H100_BW, 4096 * 1024 * 2 / H100_BW
    t_qkv = sol_qkv / (0.44966 * eta_m1(1024, 4096, LAT_1024_4096) + 0.55034 * eta_m1(1536, 4096, LAT_1536_4096))
    t_o = sol_o / eta_m1(4096, 1024, LAT_4096_1024)
    assert_allclose((sol_qkv + sol_o) / group(1), t_qkv + t_o, rtol=1e-4)
    assert group.source.startswith("aiconfigurator vllm 0.24.0 bf16 GEMMs QKV n=1280,k=4096; O n=4096,k=1024")
    assert "interpolated between measured n, k" in group.source
    assert perfdb.group_gemm_curve(tables, "h100_sxm", "vllm", "bf16", gemms, H100_BW, H100_BF16) is group  # memoised


def test_shapes_beyond_the_grid_are_held_at_its_edge_and_say_so():
    """An LM head of 128,256 outputs at TP1 (n > 65,536, the largest measured n) reads the n = 65536 rows."""
    tables = perfdb.load_default()
    lm = perfdb.gemm_curve(tables, "h100_sxm", "vllm", "bf16", 128256, 4096, H100_BW, H100_BF16)
    edge = perfdb.gemm_curve(tables, "h100_sxm", "vllm", "bf16", 65536, 4096, H100_BW, H100_BF16)
    assert_allclose(lm(np.array([1.0, 64.0, 8192.0])), edge(np.array([1.0, 64.0, 8192.0])), rtol=1e-12)
    assert "n=128256 beyond the measured n 32–65536: held at 65536" in lm.source


def _rows(pairs, eta_of):
    """Synthetic rows at m = 1 and 64 whose η (with bw = peak = 1 B/s, width 1) is ``eta_of(n, k)``."""
    m, n, k, lat = [], [], [], []
    for a, b in pairs:
        for mm in (1.0, 64.0):
            sol = max(a * b, 2 * mm * a * b)
            m.append(mm), n.append(a), k.append(b), lat.append(sol / eta_of(a, b))
    return {"m": np.array(m), "n": np.array(n, float), "k": np.array(k, float), "latency_s": np.array(lat)}


def test_a_missing_corner_falls_back_to_the_nearest_measured_pair():
    """(1900, 1100) lies in the cell 1024–2048 × 1024–2048 whose corner (2048, 2048) is not kept: the nearest pair in
    log space is (2048, 1024) (ln(2048/1900)² + ln(1100/1024)² = 0.0056 + 0.0051; (1024, 1024): 0.38 + 0.005)."""
    rows = _rows([(1024, 1024), (2048, 1024), (1024, 2048)], lambda a, b: 0.25 if a == 2048 else 0.5)
    assert gemm_grid.bilinear_corners(rows, 1900, 1100) is None
    curve = gemm_grid.measured_curve(rows, 1900, 1100, 1.0, 1.0, 1.0, "t GEMM")
    assert "n=2048, k=1024 (nearest measured pair to n=1900, k=1100)" in curve.source
    assert_allclose(curve(1), 0.25)


@settings(max_examples=60, deadline=None)
@given(n=st.floats(300, 5000), k=st.floats(300, 5000), e=st.lists(st.floats(0.05, 1.0), min_size=4, max_size=4))
def test_bilinear_stays_between_its_corners_and_is_exact_on_them(n, k, e):
    grid = [512.0, 1024.0, 4096.0]
    table = {(a, b): e[(i + 2 * j) % 4] for i, a in enumerate(grid) for j, b in enumerate(grid)}
    rows = _rows(table, lambda a, b: table[(a, b)])
    curve = gemm_grid.measured_curve(rows, n, k, 1.0, 1.0, 1.0, "t GEMM")
    corners = [table[(w_n, w_k)] for _, w_n, w_k in gemm_grid.bilinear_corners(rows, n, k)[0]]
    assert min(corners) - 1e-12 <= float(curve(1)) <= max(corners) + 1e-12
    exact = gemm_grid.measured_curve(rows, 1024.0, 4096.0, 1.0, 1.0, 1.0, "t GEMM")
    assert_allclose(exact(1), table[(1024.0, 4096.0)], rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(e=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=5), w=st.lists(st.floats(0.1, 10.0), min_size=5,
                                                                              max_size=5))
def test_group_time_is_the_sum_of_its_gemms_times(e, w):
    curves = [(w[i], Curve((1.0, 8.0), (eta, min(1.0, eta * 1.5)), "c")) for i, eta in enumerate(e)]
    group = gemm_grid.group_curve(curves, "g")
    for m in (1.0, 8.0):           # at the measured m (between them the group's η is interpolated in log m)
        assert_allclose(sum(w_ for w_, _ in curves) / group(m), sum(w_ / c(m) for w_, c in curves), rtol=1e-9)
    for m in (1.0, 3.0, 8.0):
        assert min(c(m) for _, c in curves) - 1e-12 <= group(m) <= max(c(m) for _, c in curves) + 1e-12


@pytest.mark.parametrize("gpu,backend", [("h100_sxm", "vllm"), ("h200_sxm", "trtllm"), ("b200_sxm", "sglang")])
def test_every_shipped_card_gemm_is_bracketed_by_kept_rows(gpu, backend):
    """The compacted table keeps, per backend, the grid points around every shipped card's GEMMs at TP 1-8:
    no card GEMM falls back to the nearest pair."""
    from pathlib import Path

    from kvplan.calc.cost import model_cost
    from kvplan.calc.shapes import model_shapes
    from kvplan.cards.loader import parse_card
    from kvplan.cards.schema import ModelCard
    from kvplan.engines import get_profile

    rows = perfdb.load_default().select("gemm", gpu=gpu, backend=backend, dtype="bf16")
    cards = sorted((Path(perfdb.__file__).resolve().parents[2] / "model_cards").glob("*.yaml"))
    assert len(cards) > 20
    for path in cards:
        card = parse_card(path, ModelCard)
        shapes = model_shapes(card, model_cost(card, get_profile("vllm")))
        for tp in (1, 2, 4, 8):
            for kind in ("attention", "mlp"):
                for label, n, k, _ in shapes.gemm_list(kind, tp):
                    assert gemm_grid.bilinear_corners(rows, n, k) is not None, (card.name, tp, label, n, k)

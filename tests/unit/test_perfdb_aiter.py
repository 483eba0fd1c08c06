"""MI300X per-kernel rows from AMD's ROCm/aiter tuned-kernel CSVs (kvplan/data/perf/aiter).

Spot values are copied by hand from github.com/ROCm/aiter @ e4048607a535ace3a2b51ded31b1c8c2d45c0879,
aiter/configs/model_configs/ (``us`` column, microseconds; "row" = 0-based data row, kept in src_row):

- a8w8_blockscale_tuned_gemm_ds_v3.csv row 0: ``gfx942,304,1,3072,1536,ck,8,0,6.6154,...`` (M 1, N 3072, K 1536)
- a8w8_blockscale_tuned_gemm_ds_v3.csv row 7330: M 8192, N 3072, K 1536, 106.0011 µs
- a8w8_blockscale_tuned_fmoe_ds_v3.csv row 380: ``304,1,7168,2048,33,9,...,us 99.21`` (token 1, model_dim 7168,
  inter_dim 2048, 33 experts, top-9, per_1x128 FP8)

- ROCm/aiter PR #1092 head 035725098db2d65f8d5757d6c8488c6176b00b93, aiter/configs/a8w8_tuned_gemm.csv (int8 W8A8
  CK rowwise, tuned on MI300X for Llama-3.1-70B/405B): row 481 ``304,1,1280,8192,34,0,15.7779,a8w8_rowwise_...``,
  row 615 ``304,16384,7168,8192,1,0,1875.8183,...``

η × SOL is worked here from the mi300x card's figures (AMD MI300X data sheet): HBM 5.3 TB/s, FP8 2,614.9 TFLOPS
(INT8 2,614.9 TOPS).
"""

from __future__ import annotations

import csv
import re
from importlib.resources import files

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc import perfdb
from kvplan.cards.loader import load_hardware
from kvplan.plans.build import latency_from_names

AITER = files("kvplan") / "data" / "perf" / "aiter"
BW, FP8 = 5.3e12, 2614.9e12
COMMIT = "e4048607a535ace3a2b51ded31b1c8c2d45c0879"
PR1092 = "035725098db2d65f8d5757d6c8488c6176b00b93"


def read(name: str) -> list[dict[str, str]]:
    with (AITER / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_rows_are_mi300x_aiter_with_sources_kernels_and_licence():
    sources = {r["source_table"]: r for r in read("sources.csv")}
    kernels = {r["kernel_id"]: r for r in read("kernels.csv")}
    assert {r["gpu"]: r["card"] for r in read("gpus.csv")} == {"mi300x": "mi300x"}
    assert load_hardware("mi300x").hbm_bandwidth_bytes_per_s == BW
    pinned = sources.pop("a8w8_tuned_gemm")
    assert (pinned["repo"], pinned["commit"], pinned["path"], pinned["backend_version"]) == (
        "ROCm/aiter", PR1092, "aiter/configs/a8w8_tuned_gemm.csv", "pr1092@035725098d")
    for s in sources.values():
        assert s["repo"] == "ROCm/aiter" and s["commit"] == COMMIT
        assert s["path"] == f"aiter/configs/model_configs/{s['source_table']}.csv"
    sources["a8w8_tuned_gemm"] = pinned
    for name, table in (("gemm.csv", "gemm"), ("moe.csv", "moe")):
        rows = read(name)
        assert len(rows) > 50
        keys = set()
        for r in rows:
            assert (r["gpu"], r["backend"]) == ("mi300x", "aiter") and r["dtype"] in ("fp8_block", "bf16", "sq")
            # the int8 W8A8 rows, and only they, come from PR #1092's head (labelled with it)
            assert (r["dtype"] == "sq") == (r["backend_version"] == "pr1092@035725098d")
            assert 0 < float(r["latency_s"]) < 1.0 and int(r["src_row"]) >= 0
            k = kernels[r["kernel_id"]]
            assert (k["table"], k["dtype"]) == (table, r["dtype"]) and k["source_table"] in sources
            key = tuple(v for c, v in r.items() if c not in ("latency_s", "src_row", "kernel_id"))
            assert key not in keys
            keys.add(key)
    licence = (AITER / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in licence and "Advanced Micro Devices" in licence
    assert "ROCm/aiter" in (AITER / "README.md").read_text(encoding="utf-8")


def test_no_memory_bound_row_beats_the_mi300x_hbm_peak():
    """A GEMM reads at least its weights (n k bytes in FP8): at 5.3 TB/s no row may take less time."""
    for r in read("gemm.csv"):
        assert int(r["n"]) * int(r["k"]) / float(r["latency_s"]) < BW, r


@pytest.mark.parametrize("match,us,row", [
    (dict(m="1", n="3072", k="1536"), 6.6154, 0),
    (dict(m="8192", n="3072", k="1536"), 106.0011, 7330),
])
def test_gemm_spot_rows_match_the_source(match, us, row):
    hit = [r for r in read("gemm.csv") if all(r[c] == v for c, v in match.items())]
    assert len(hit) == 1 and int(hit[0]["src_row"]) == row
    assert float(hit[0]["latency_s"]) == pytest.approx(us * 1e-6, rel=5e-6)
    assert read("kernels.csv")[0]["source_table"] == "a8w8_blockscale_tuned_gemm_ds_v3"


def test_gemm_lookup_reproduces_the_measured_time():
    """N 3072, K 1536 block-FP8 on MI300X. M 1: memory-bound, SOL = 3072 × 1536 × 1 B / 5.3e12 = 0.89033 µs,
    η = 0.89033 / 6.6154 = 0.13458; M 8192: compute-bound, SOL = 2 × 8192 × 3072 × 1536 / 2614.9e12 = 29.566 µs,
    η = 29.566 / 106.0011 = 0.27892. SOL / η gives back the measured times."""
    tables = perfdb.load_default()
    curve = perfdb.gemm_curve(tables, "mi300x", "sglang", "fp8_block", 3072, 1536, BW, FP8)
    assert_allclose(curve(1), 0.13458, rtol=2e-4)
    assert_allclose(curve(8192), 0.27892, rtol=2e-4)
    assert_allclose(3072 * 1536 / BW / curve(1), 6.6154e-6, rtol=1e-9)
    assert_allclose(2 * 8192 * 3072 * 1536 / FP8 / curve(8192), 106.0011e-6, rtol=1e-5)
    assert "AMD aiter" in curve.source and "n=3072, k=1536" in curve.source
    # vLLM reads the same rows (no engine of its own on this GPU)
    assert perfdb.gemm_curve(tables, "mi300x", "vllm", "fp8_block", 3072, 1536, BW, FP8)(1) == curve(1)


def test_gemm_outside_the_table_clamps_and_takes_the_nearest_shape():
    """As on the NVIDIA tables: M beyond the last measured size holds the end η; an unmeasured (n, k) takes the
    measured pair nearest in log space; a dtype without rows (bf16) has no curve, and per-tensor fp8 reads the int8
    W8A8 rows (``perfdb.DTYPE_STAND_INS``)."""
    tables = perfdb.load_default()
    curve = perfdb.gemm_curve(tables, "mi300x", "sglang", "fp8_block", 3072, 1536, BW, FP8)
    assert bool(curve.outside(65536)) and not bool(curve.outside(64))
    assert curve(65536) == curve(curve.hi)
    near = perfdb.gemm_curve(tables, "mi300x", "sglang", "fp8_block", 3000, 1500, BW, FP8)
    assert "n=3072, k=1536" in near.source
    fp8 = perfdb.gemm_curve(tables, "mi300x", "vllm", "fp8", 1280, 8192, BW, FP8)
    assert "sq (for fp8: int8 W8A8" in fp8.source and "n=1280, k=8192" in fp8.source
    assert perfdb.gemm_curve(tables, "h100_sxm", "vllm", "fp8", 1280, 8192, 3.35e12, 1979e12) is not None
    assert "sq (for" not in perfdb.gemm_curve(tables, "h100_sxm", "vllm", "fp8", 1280, 8192, 3.35e12, 1979e12).source
    assert perfdb.gemm_curve(tables, "mi300x", "vllm", "bf16", 1280, 8192, BW, FP8 / 2) is None


def test_moe_lookup_reproduces_the_measured_time():
    """token 1, 7168 × 2048 experts, 33 experts top-9 (aiter's EP8 DeepSeek-V3 layout, shared expert fused):
    9 experts touched, bytes = 9 × 3 × 7168 × 2048 × 1 B = 396.4 MB, SOL = 74.785 µs (FLOPs 0.79 GF: 0.30 µs),
    η = 74.785 / 99.21 = 0.75380."""
    tables = perfdb.load_default()
    curve = perfdb.moe_curve(tables, "mi300x", "sglang", "fp8_block", 7168, 2048, 9, 33, 1, 1, BW, FP8)
    sol = 9 * 3 * 7168 * 2048 / BW
    assert_allclose(sol, 74.785e-6, rtol=1e-4)
    assert_allclose(curve(1), 0.75380, rtol=2e-4)
    assert_allclose(sol / curve(1), 99.21e-6, rtol=1e-9)
    assert "AMD aiter" in curve.source and "top-9 of 33" in curve.source
    assert bool(curve.outside(32768)) and curve(32768) == curve(curve.hi)


def test_latency_on_mi300x_names_aiter_and_gpus_without_rows_fall_back():
    hit = latency_from_names("deepseek-v3", "mi300x", isl=610, osl=64, batch=1, tp=[8], engine="sglang")
    said = " ".join(hit.assumptions)
    assert "per-kernel tables (AMD ROCm/aiter tuned-kernel timings, kvplan/data/perf/aiter) for mi300x" in said
    assert "AMD aiter" in said and "fp8_block MoE" in said and "SGLANG_USE_AITER=1" in said
    # the bf16 LM head and routers (kvplan.calc.shapes.ROUTER_SOURCE) have no MI300X bf16 row at these shapes
    assert "no per-kernel table row for LM head, router GEMMs, decode attention, prefill attention on mi300x" in said
    # per-tensor FP8 Llama on vLLM: its linears read the int8 W8A8 rows (stand-in, said), the LM head (bf16) and
    # attention keep the card's η and say so
    llama = latency_from_names("llama-3.1-70b", "mi300x", isl=1024, osl=64, batch=8, tp=[8], engine="vllm",
                               weights_dtype="fp8")
    said = " ".join(llama.assumptions)
    assert "per-kernel tables (AMD ROCm/aiter tuned-kernel timings, kvplan/data/perf/aiter) for mi300x" in said
    assert "attention GEMMs: AMD aiter pr1092@035725098d sq (for fp8: int8 W8A8 CK rowwise" in said
    assert "mlp GEMMs: AMD aiter pr1092@035725098d sq (for fp8" in said and "not vLLM's kernel" in said
    assert "no per-kernel table row for LM head, decode attention, prefill attention on mi300x" in said
    assert "no per-kernel table for mi300x fp8" not in said


def test_aiter_rows_slow_the_deepseek_step_against_the_flat_card():
    """The block-FP8 GEMMs at one token move their weights at 10–29 % of HBM peak (9 shapes), below the flat η 0.8, so
    the step with the tables is slower than with --eta-mem 0.8 --eta-flops 0.75 (the card's η forced)."""
    from kvplan.plans.sizing.latency import Efficiencies

    kw = dict(isl=610, osl=64, batch=1, tp=[8], engine="sglang")
    table = latency_from_names("deepseek-v3", "mi300x", **kw)
    flat = latency_from_names("deepseek-v3", "mi300x", efficiencies=Efficiencies(eta_mem=0.8, eta_flops=0.75), **kw)
    t, f = (np.asarray(x.rows[0]["decode_step_s"]) for x in (table, flat))
    assert t > 1.2 * f


PAIRS = sorted({(int(r["n"]), int(r["k"])) for r in read("gemm.csv") if r["dtype"] == "fp8_block"})


@given(n=st.floats(64, 65536), k=st.floats(64, 65536), m=st.floats(1, 1e6))
@example(n=3832.0, k=4580.0, m=1.0)   # nearest pair 4096 × 5120 beside a measured 4096 × 512: read by its exact pair
@settings(max_examples=60, deadline=None)
def test_any_shape_reads_the_nearest_measured_pair_within_its_measured_range(n, k, m):
    """The curve is the measured (n, k) pair nearest in log space (worked here from the CSV), and η at any M lies
    between that pair's lowest and highest measured η (interpolated inside, clamped outside: never extrapolated)."""
    curve = perfdb.gemm_curve(perfdb.load_default(), "mi300x", "sglang", "fp8_block", n, k, BW, FP8)
    dist = [(np.log(pn / n) ** 2 + np.log(pk / k) ** 2, pn, pk) for pn, pk in PAIRS]
    best = min(dist)
    pn, pk = (int(v) for v in re.search(r"GEMM n=(\d+), k=(\d+)", curve.source).groups())
    if sum(1 for d in dist if abs(d[0] - best[0]) < 1e-12) == 1:      # a tie may pick either pair
        assert (pn, pk) == (best[1], best[2])
    rows = [r for r in read("gemm.csv") if r["dtype"] == "fp8_block" and (int(r["n"]), int(r["k"])) == (pn, pk)]
    measured = [max(pn * pk / BW, 2 * int(r["m"]) * pn * pk / FP8) / float(r["latency_s"]) for r in rows]
    assert min(measured) * (1 - 1e-9) <= float(curve(m)) <= max(measured) * (1 + 1e-9)


def test_pr1092_rows_reproduce_by_hand_from_the_card_peaks():
    """Llama-3.1-70B TP8 QKV (N 1,280, K 8,192) at M 1: SOL = 1280 × 8192 × 1 B / 5.3e12 = 1.978445 µs (weights),
    η = 1.978445 / 15.7779 = 0.125393. 70B TP8 gate+up (N 7,168, K 8,192) at M 16,384: compute-bound,
    SOL = 2 × 16384 × 7168 × 8192 / 2614.9e12 = 735.839 µs, η = 735.839 / 1875.8183 = 0.392276. Per-tensor FP8
    reads these int8 rows: the same 1-byte weights and the same dense peak on MI300X."""
    hit = {(r["m"], r["n"], r["k"]): r for r in read("gemm.csv") if r["dtype"] == "sq"}
    assert (int(hit["1", "1280", "8192"]["src_row"]), int(hit["16384", "7168", "8192"]["src_row"])) == (481, 615)
    assert float(hit["1", "1280", "8192"]["latency_s"]) == pytest.approx(15.7779e-6, rel=5e-6)
    assert float(hit["16384", "7168", "8192"]["latency_s"]) == pytest.approx(1875.8183e-6, rel=5e-6)
    card = load_hardware("mi300x")
    assert card.peak_flops_per_s["int8"] == card.peak_flops_per_s["fp8"] == FP8
    tables = perfdb.load_default()
    qkv = perfdb.gemm_curve(tables, "mi300x", "vllm", "fp8", 1280, 8192, BW, FP8)
    assert_allclose(qkv(1), 0.125393, rtol=2e-5)
    assert_allclose(1.978445e-6 / qkv(1), 15.7779e-6, rtol=1e-6)
    gate_up = perfdb.gemm_curve(tables, "mi300x", "vllm", "fp8", 7168, 8192, BW, FP8)
    assert_allclose(gate_up(16384), 0.392276, rtol=2e-5)
    assert_allclose(735.839e-6 / gate_up(16384), 1875.8183e-6, rtol=1e-5)


@given(batch=st.integers(1, 128))
@settings(max_examples=8, deadline=None)
def test_more_weight_bytes_per_gpu_never_decode_faster_on_mi300x(batch):
    """Llama-3.1-405B FP8 at TP8 moves 3.7× the weight bytes of 70B per GPU per step (and more KV per token, more
    layers); with the int8 W8A8 rows read for both, its decode step is never the faster one, at any batch."""
    kw = dict(isl=128, osl=64, batch=batch, tp=[8], engine="vllm", weights_dtype="fp8")
    small = latency_from_names("llama-3.1-70b", "mi300x", **kw).rows[0]["decode_step_s"]
    big = latency_from_names("llama-3.1-405b", "mi300x", **kw).rows[0]["decode_step_s"]
    assert float(np.max(big)) > float(np.max(small))

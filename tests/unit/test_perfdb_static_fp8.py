"""TensorRT-LLM per-tensor FP8 GEMMs of a static-scale checkpoint: aiconfigurator's dynamic-FP8 GEMM rows less its
measured activation-quantisation kernels (kvplan/data/perf/quantize.csv; kvplan.calc.perfdb.STATIC_FP8).

Every expected value is worked by hand below from rows typed in from kvplan/data/perf/gemm.csv and quantize.csv; the
quantize rows are checked against the source parquet values (aiconfigurator @095f58a, aic-core/src/
aiconfigurator_core/systems/data/<gpu>/quantize/trtllm/1.3.0rc20/computescale_perf.parquet, 0-based row in src_row).
"""

from __future__ import annotations

import csv
from importlib.resources import files

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc import perfdb
from kvplan.plans.sizing.perfmodel import table_dtype

H200_BW, H200_FP8 = 4.8e12, 1979.0e12          # h200 card: NVIDIA H200 product page (fp8 dense = sparse / 2)
M = 4
# gemm.csv, h200_sxm, trtllm 1.3.0rc20, fp8, m = 4 (latency_s): Llama-3.1-8B's TP4 GEMMs, all four measured pairs
FP8_ROWS = {("QKV", 1536, 4096): 1.67531e-05, ("O", 4096, 1024): 1.29739e-05,
            ("gate_up", 7168, 4096): 1.99609e-05, ("down", 4096, 3584): 1.61856e-05}
# quantize.csv, h200_sxm, trtllm 1.3.0rc20, m = 4: compute_scale and scale_matrix at k = 4096, 1024, 3584
COMPUTE_SCALE = {4096: 7.35467e-06, 1024: 7.20427e-06, 3584: 7.1616e-06}
SCALE_MATRIX = {4096: 1.38027e-06, 1024: 1.28747e-06, 3584: 1.33973e-06}
# By hand: QKV and gate_up less compute_scale; O and down (input already FP8) less compute_scale and scale_matrix.
#   QKV     16.7531 − 7.35467            =  9.39843 µs
#   O       12.9739 − 7.20427 − 1.28747  =  4.48216 µs
#   gate_up 19.9609 − 7.35467            = 12.60623 µs
#   down    16.1856 − 7.1616 − 1.33973   =  7.68427 µs
STATIC_BY_HAND = {"QKV": 9.39843e-06, "O": 4.48216e-06, "gate_up": 12.60623e-06, "down": 7.68427e-06}


def seconds(curve, n, k, m=M):
    """A GEMM's time from its η curve: memory-bound at m = 4, SOL = n k × 1 B / BW."""
    sol = max(n * k / H200_BW, 2 * m * n * k / H200_FP8)
    return sol / float(curve(m))


def test_quantize_rows_are_the_source_values():
    """Spot checks typed from the parquet files: b200 compute_scale m = 1, k = 1024 is 0.008545 ms (row 1620) and
    m = 4, k = 8192 is 0.008281 ms (row 1544), both before the 6-significant-digit cut."""
    rows = {(r["gpu"], r["op"], r["m"], r["k"]): r for r in
            csv.DictReader((files("kvplan") / "data" / "perf" / "quantize.csv").open(newline=""))}
    a, b = rows[("b200_sxm", "compute_scale", "1", "1024")], rows[("b200_sxm", "compute_scale", "4", "8192")]
    assert (a["src_row"], b["src_row"]) == ("1620", "1544")
    assert_allclose([float(a["latency_s"]), float(b["latency_s"])], [8.545e-06, 8.281e-06], rtol=1e-4)
    assert {r["backend"] for r in rows.values()} == {"trtllm"} and {r["op"] for r in rows.values()} == {
        "compute_scale", "scale_matrix"}
    for gpu in ("h100_sxm", "h200_sxm", "b200_sxm"):            # every Hopper/Blackwell GPU with FP8 GEMM rows
        assert (gpu, "compute_scale", "4", "8192") in rows and (gpu, "scale_matrix", "4", "8192") in rows


@pytest.mark.parametrize("label,n,k", list(FP8_ROWS))
def test_each_gemm_is_its_dynamic_row_less_the_kernels_it_does_not_run(label, n, k):
    tables = perfdb.load_default()
    dtype = "fp8_static_in" if label in perfdb.STATIC_FP8_INPUT else "fp8_static"
    static = perfdb.gemm_curve(tables, "h200_sxm", "trtllm", dtype, n, k, H200_BW, H200_FP8)
    dynamic = perfdb.gemm_curve(tables, "h200_sxm", "trtllm", "fp8", n, k, H200_BW, H200_FP8)
    assert_allclose(seconds(dynamic, n, k), FP8_ROWS[(label, n, k)], rtol=1e-9)
    assert_allclose(seconds(static, n, k), STATIC_BY_HAND[label], rtol=1e-5)
    taken = COMPUTE_SCALE[k] + (SCALE_MATRIX[k] if label in ("O", "down") else 0.0)
    assert_allclose(seconds(dynamic, n, k) - seconds(static, n, k), taken, rtol=1e-5)
    assert "fp8 static-scale GEMM" in static.source


def test_a_layer_group_sums_its_static_gemms():
    """Attention (QKV + O) and the MLP (gate_up + down) as the step model prices them, per layer at m = 4:
    9.39843 + 4.48216 = 13.88059 µs and 12.60623 + 7.68427 = 20.29050 µs; against the dynamic rows the layer saves
    7.35467 + 8.49174 + 7.35467 + 8.50133 = 31.70241 µs, 1.01448 ms over Llama-3.1-8B's 32 layers."""
    tables = perfdb.load_default()
    saved = 0.0
    for group, expected in ((("QKV", "O"), 13.88059e-06), (("gate_up", "down"), 20.29050e-06)):
        gemms = tuple((lab, float(n), float(k), float(n * k)) for (lab, n, k) in FP8_ROWS if lab in group)
        sol = sum(n * k / H200_BW for _, n, k, _ in gemms)
        static = perfdb.group_gemm_curve(tables, "h200_sxm", "trtllm", "fp8_static", gemms, H200_BW, H200_FP8)
        dynamic = perfdb.group_gemm_curve(tables, "h200_sxm", "trtllm", "fp8", gemms, H200_BW, H200_FP8)
        assert_allclose(sol / float(static(M)), expected, rtol=1e-5)
        saved += sol / float(dynamic(M)) - sol / float(static(M))
    assert_allclose(32 * saved, 1.01448e-03, rtol=1e-5)


def test_never_faster_than_the_roofline():
    """A row whose quantisation kernels are longer than what is left of it keeps its roofline: 1 ns measured at
    n = k = 4096, m = 4 (SOL 3.4953 µs at 4.8 TB/s) stays 3.4953 µs."""
    rows = {"m": np.array([4.0]), "n": np.array([4096.0]), "k": np.array([4096.0]), "latency_s": np.array([1e-9])}
    out = perfdb._static_fp8_rows(perfdb.load_default(), "h200_sxm", "trtllm", "1.3.0rc20", rows,
                                  ("compute_scale",), H200_BW, H200_FP8)
    assert_allclose(out["latency_s"], [4096 * 4096 / H200_BW], rtol=1e-12)


def test_only_tensorrt_llm_dense_per_tensor_fp8_reads_static():
    assert table_dtype("fp8", "fp8", None, engine="trtllm") == "fp8_static"
    assert table_dtype("fp8", "fp8", None, engine="vllm") == "fp8"          # vLLM's own FP8 rows, as measured
    assert table_dtype("fp8", "fp8", None, engine="sglang") == "fp8"
    assert table_dtype("fp8", "fp8", "fp8", engine="trtllm") == "fp8_block"  # a native FP8 checkpoint: 128-blocks
    assert table_dtype("fp8", "fp8", None, moe=True, engine="trtllm") == "fp8"  # the MoE table's own FP8 rows


def test_a_gpu_without_quantize_rows_reads_the_dynamic_rows_and_says_so():
    """MI300X's FP8 GEMMs are AMD's int8 rows (perfdb.DTYPE_STAND_INS), with no quantize table beside them: the
    same curve as the plain fp8 reading, named as such; A100 has no FP8 GEMM rows, so neither reading has one."""
    tables = perfdb.load_default()
    static = perfdb.gemm_curve(tables, "mi300x", "trtllm", "fp8_static", 8192, 8192, 5.3e12, 2614.9e12)
    dynamic = perfdb.gemm_curve(tables, "mi300x", "trtllm", "fp8", 8192, 8192, 5.3e12, 2614.9e12)
    assert static.eta == dynamic.eta
    assert static.source.endswith("(dynamic-FP8 rows: no quantize rows for fp8_static on mi300x)")
    assert perfdb.gemm_curve(tables, "a100_sxm", "trtllm", "fp8_static", 4096, 4096, 2.039e12, 312e12) is None


@pytest.mark.parametrize("engine,stated", [("trtllm", True), ("vllm", False)])
def test_latency_explains_the_static_reading_on_tensorrt_llm_only(engine, stated):
    from tests.hostile.harness import run_inprocess

    out = run_inprocess(["latency", "llama-3.1-70b", "h200", "--tp", "2", "--weights-dtype", "fp8", "--engine",
                         engine, "--isl", "1024", "--osl", "128", "--batch", "8", "--explain"])
    assert out.exit_code == 0, out.stderr
    text = " ".join((out.stdout + out.stderr).split())   # the notes go to stderr
    assert ("ModelOpt checkpoint: static activation scales" in text) is stated
    assert ("fp8 static-scale GEMMs" in text) is stated


@pytest.mark.parametrize("gpu,bw,peak", [("h100_sxm", 3.35e12, 1979e12), ("h200_sxm", 4.8e12, 1979e12),
                                         ("b200_sxm", 8e12, 4500e12)])
def test_every_static_row_lies_between_its_roofline_and_its_dynamic_row(gpu, bw, peak):
    """Invariant over every fp8 GEMM row of the GPU: the kernels taken off are non-negative and the floor holds."""
    tables = perfdb.load_default()
    backend, rows = tables.backend("gemm", gpu, "trtllm", dtype="fp8")
    version = str(rows["backend_version"][0])
    for ops in (("compute_scale",), ("compute_scale", "scale_matrix")):
        out = perfdb._static_fp8_rows(tables, gpu, backend, version, rows, ops, bw, peak)
        sol = np.maximum(rows["n"] * rows["k"] / bw, 2 * rows["m"] * rows["n"] * rows["k"] / peak)
        assert np.all(out["latency_s"] <= rows["latency_s"]) and np.all(out["latency_s"] >= sol * (1 - 1e-12))
        assert np.mean(out["latency_s"] < rows["latency_s"]) > 0.99      # and the kernels are taken off nearly everywhere

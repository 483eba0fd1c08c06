"""Engine start-up arithmetic reproduced from public logs (ENGINES.md §8) and budget rules."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from kvplan.calc.memory import kv_budget, weight_bytes
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile, sglang_mem_fraction_static
from kvplan.plans.sizing.fit import Overrides
from kvplan.plans.build import fit_from_names


GiB = 2**30
MiB = 2**20


def test_vllm_issue_12330_a100_40gb_llama3_8b():
    """vLLM #12330: 39.50 GiB × 0.90 − 14.96 − 0.10 − 9.37 = 11.12 GiB → 5691 blocks → 11.12x at 8192."""
    ov = Overrides(gpu_memory_bytes=39.50 * GiB, weights_bytes=14.96 * GiB, non_torch_bytes=0.10 * GiB,
                   activation_bytes=9.37 * GiB)
    row = fit_from_names("llama-3.1-8b", "a100-40gb", seq=8192, gpu_memory_utilization=0.90, overrides=ov).rows[0]
    assert_allclose(row["kv_cache_memory_bytes"] / GiB, 11.12, atol=0.005)
    # a block is 16 tokens × 32 layers × 2 × 8 heads × 128 × 2 B = 2 MiB
    assert row["block_bytes_per_gpu"] == 16 * 32 * 2 * 8 * 128 * 2 == 2 * MiB
    assert abs(row["num_blocks"] - 5691) <= 5  # the log rounds its GiB inputs to 0.01
    assert_allclose(row["max_concurrency"], 11.12, atol=0.01)
    assert row["fits"]


def test_vllm_issue_10517_rtx3090_concurrency_and_refusal():
    """vLLM #10517 (V0, weights folded into the torch peak): 1952 blocks → 1.56x at 20000; at 29000 it refuses."""
    ok = fit_from_names("llama-3.1-8b", "a100-40gb", seq=20000, gpu_memory_utilization=0.90, overrides=Overrides(
        gpu_memory_bytes=23.58 * GiB, weights_bytes=0, activation_bytes=17.06 * GiB, non_torch_bytes=0.35 * GiB))
    row = ok.rows[0]
    assert abs(row["num_blocks"] - 1952) <= 5
    assert_allclose(row["max_concurrency"], 1952 * 16 / 20000, atol=0.01)
    bad = fit_from_names("llama-3.1-8b", "a100-40gb", seq=29000, gpu_memory_utilization=0.90, overrides=Overrides(
        gpu_memory_bytes=23.58 * GiB, weights_bytes=0, activation_bytes=17.98 * GiB, non_torch_bytes=0.35 * GiB))
    row = bad.rows[0]
    assert abs(row["num_blocks"] - 1478) <= 5
    assert abs(row["kv_cache_tokens"] - 23_648) <= 5 * 16
    assert not row["fits"] and bad.failed
    assert row["max_concurrency"] == pytest.approx(0.82, abs=0.01)
    assert "does not fit" in bad.verdict


@pytest.mark.parametrize(("tp", "expected"), [(1, 0.835), (8, 0.818)])
def test_sglang_default_mem_fraction_static_h100(tp, expected):
    """server_args.py reserve formula on an 81,559 MiB H100: 0.835 at TP1, 0.818 at TP8 (ENGINES.md §2)."""
    assert sglang_mem_fraction_static(81_559 * MiB, tp=tp) == pytest.approx(expected, abs=0.0015)


def test_budget_rules_differ_by_engine():
    total, weights, act = 80 * GiB, 16 * GiB, 2 * GiB
    vllm = kv_budget(get_profile("vllm"), total, 0.9, weights, act).kv_cache_bytes
    trt = kv_budget(get_profile("trtllm"), total, 0.9, weights, act).kv_cache_bytes
    sgl = kv_budget(get_profile("sglang"), total, 0.85, weights, act).kv_cache_bytes
    assert vllm == 80 * 0.9 * GiB - 18 * GiB          # fraction of total
    assert trt == pytest.approx(0.9 * (80 - 18) * GiB)  # fraction of free after load and profiling
    assert sgl == pytest.approx((0.85 * 80 - 16) * GiB)  # activations live in 1 − fraction


def test_kv_cache_memory_override_ignores_utilization():
    res = fit_from_names("llama-3.1-8b", "h100-sxm", seq=8192, overrides=Overrides(kv_cache_memory_bytes=10 * GiB))
    assert res.rows[0]["num_blocks"] == 10 * GiB // (2 * MiB) == 5120
    assert res.rows[0]["kv_cache_tokens"] == 5120 * 16


def test_weight_bytes_by_dtype():
    card = load_model("llama-3.1-70b")
    assert weight_bytes(card, "bf16") == card.params_total * 2
    assert weight_bytes(card, "fp8") == pytest.approx(
        (card.params_total - 2 * 128_256 * 8_192) + 2 * 128_256 * 8_192 * 2)
    int4 = weight_bytes(card, "int4")
    assert int4 == pytest.approx((card.params_total - 2 * 128_256 * 8_192) * 4.15625 / 8 + 2 * 128_256 * 8_192 * 2)


def test_one_sequence_that_does_not_fit_gets_a_verdict():
    res = fit_from_names("llama-3.1-405b", "h100-sxm", seq=8192, tp=1)
    assert res.failed and not res.rows[0]["fits"]
    assert "no KV memory" in res.verdict

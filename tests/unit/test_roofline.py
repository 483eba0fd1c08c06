"""Roofline latency against closed forms worked by hand, and its invariants (hypothesis).

The figures come from the public configs and datasheets the cards cite; each expected value is
written out here from those figures, not copied from kvplan's output.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc.kv import kv_layout
from kvplan.calc.memory import routed_expert_params, weight_bytes
from kvplan.calc.moe import experts_touched
from kvplan.calc.roofline import (Machine, cumulative_keys, decode_step, mean_over_output, model_cost, prefill,
                                  speculative_tokens_per_step)
from kvplan.cards.loader import load_hardware, load_model
from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.engines import get_profile
from kvplan.errors import InputError, MissingFigureError
from kvplan.plans.sizing.latency import Efficiencies, Speculation
from kvplan.plans.build import latency_from_names

VLLM = get_profile("vllm")

# Llama-3.1-70B config.json: hidden 8192, 80 layers, 64 heads, 8 KV heads of 128, vocab 128256.
L70_PARAMS = 70_553_706_496
L70_VH = 128_256 * 8_192
L70_KV_PER_TOKEN = 80 * 2 * 8 * 128 * 2          # bf16 K and V, all layers: 327,680 B
# Llama-2-70B config.json: same shape, vocab 32000, 68,976,648,192 parameters.
L2_PARAMS = 68_976_648_192
L2_VH = 32_000 * 8_192
H200_BW = 4.8e12           # NVIDIA H200 SXM product page, 4.8 TB/s
H100_BF16 = 989.5e12       # NVIDIA H100 SXM datasheet, 1,979 TFLOPS with sparsity, halved


def machine(**kw) -> Machine:
    base = dict(name="test", compute_dtype="bf16", bandwidth_bytes_per_s=H200_BW, peak_flops_per_s=H100_BF16,
                eta_mem=0.8, eta_flops=0.75, step_overhead_s=100e-6, scale_up_bytes_per_s=450e9,
                scale_up_latency_s=10e-6, scale_up_domain=8)
    base.update(kw)
    return Machine(**base)


# --------------------------------------------------------------------------- the worked cases


def test_memory_bound_worked_case_llama_3_1_70b_h200_tp1_batch1():
    """Floor = bytes / bandwidth; the estimate = floor / η + overhead, exactly."""
    context = 128
    weights = (L70_PARAMS - L70_VH) * 2            # every weight but the input embedding table, bf16
    kv = context * L70_KV_PER_TOKEN
    floor = (weights + kv) / H200_BW
    overhead = 250e-6
    row = latency_from_names("llama-3.1-70b", "h200", isl=context, osl=2, batch=1, tp=1,
                             efficiencies=Efficiencies(eta_mem=0.8, step_overhead_s=overhead)).rows[0]
    assert row["bound"] == "memory"
    assert row["decode_weight_bytes_per_gpu"] == weights
    assert row["decode_kv_bytes_per_gpu"] == kv
    assert_allclose(row["floor_decode_step_s"], floor, rtol=1e-12)
    assert_allclose(row["decode_step_s"], floor / 0.8 + overhead, rtol=1e-12)
    # the input embedding is 1.5 % of the weights; at short context the floor is within 1.5 % of
    # "weight bytes / bandwidth" with the whole checkpoint
    assert_allclose(floor, weight_bytes(load_model("llama-3.1-70b")) / H200_BW, rtol=1.5e-2)


def test_large_batch_sums_the_operator_rooflines():
    """Batch 512: the GEMMs are compute-bound while attention streams the KV cache; the kernels run
    one after the other, so the step is the sum of each class's roofline, not one max over the step."""
    batch, context = 512, 2048
    weights = (L70_PARAMS - L70_VH) * 2
    kv = batch * context * L70_KV_PER_TOKEN
    dense_flops = batch * (2 * (L70_PARAMS - 2 * L70_VH) + 2 * L70_VH)
    attention_flops = batch * 80 * 4 * 64 * 128 * context
    bw, peak = H200_BW * 0.8, H100_BF16 * 0.75
    gemms, attention = max(weights / bw, dense_flops / peak), max(kv / bw, attention_flops / peak)
    assert dense_flops / peak > weights / bw and kv / bw > attention_flops / peak
    step = decode_step(model_cost(load_model("llama-3.1-70b"), VLLM), machine(), batch, context)
    assert_allclose(step.time_s, gemms + attention + 100e-6, rtol=1e-12)
    assert_allclose(step.floor_s, max((weights + kv) / H200_BW, (dense_flops + attention_flops) / H100_BF16),
                    rtol=1e-12)
    assert str(step.bound) == "compute"      # more time in compute-limited kernels than memory-limited ones


def test_prefill_flops_llama_2_70b_8k_closed_form():
    """FLOPs = 2 × (P − 2Vh) × n + 2 × Vh (LM head on the last token) + Σ_i 2 × 64 × 256 × i × 80."""
    n = 8192
    cost = model_cost(load_model("llama-2-70b"), VLLM)
    attention = 80 * 2 * 64 * (128 + 128) * n * (n + 1) / 2
    expected = 2 * (L2_PARAMS - 2 * L2_VH) * n + 2 * L2_VH + attention
    m = machine(bandwidth_bytes_per_s=3.35e12)
    p = prefill(cost, m, 1, n)
    assert_allclose(p.flops, expected, rtol=1e-12)
    # the textbook 2·P·n + attention is within 1 % (the embedding rows are the difference)
    assert_allclose(p.flops, 2 * L2_PARAMS * n + attention, rtol=1e-2)
    assert str(p.bound) == "compute"
    assert_allclose(p.time_s, expected / (H100_BF16 * 0.75) + 100e-6, rtol=1e-12)


def test_mixtral_experts_read_per_step_follow_the_closed_form():
    card = load_model("mixtral-8x7b")
    cost = model_cost(card, VLLM)
    expert = 176_160_768                       # 3 × 4096 × 14336
    always = card.params_total - 32 * 8 * expert - 32_000 * 4_096   # everything but routed experts and embedding
    batches = np.array([1, 2, 4, 8, 16, 32, 64])
    touched = 8 * (1 - (1 - 2 / 8) ** batches)
    step = decode_step(cost, machine(), batches, 512)
    assert_allclose(step.experts_touched, touched, rtol=1e-12)
    assert_allclose(step.weight_bytes, (always + 32 * touched * expert) * 2, rtol=1e-12)
    assert step.experts_touched[0] == pytest.approx(2.0)     # batch 1: ~2 of 8 per layer
    assert step.experts_touched[-1] > 7.9999                  # batch 64: nearly all


def test_expert_parallel_rank_reads_its_share():
    assert_allclose(experts_touched(256, 8, [1, 64, 1024], ep=8),
                    32 * (1 - (1 - 8 / 256) ** np.array([1, 64, 1024])), rtol=1e-12)


def test_decode_attention_flops_per_kind():
    llama = model_cost(load_model("llama-3.1-70b"), VLLM)
    assert_allclose(llama.decode_attention_flops(1000), 80 * 4 * 64 * 128 * 1000)
    gemma = model_cost(load_model("gemma-2-9b"), VLLM)   # 21 sliding (4096) + 21 full, 16 heads of 256
    for ctx in (1000, 10_000):
        expected = 21 * 2 * 16 * 512 * min(ctx, 4096) + 21 * 2 * 16 * 512 * ctx
        assert_allclose(gemma.decode_attention_flops(ctx), expected)
    ds = model_cost(load_model("deepseek-v3"), VLLM)     # absorbed MLA: QK over 576, PV over 512
    assert_allclose(ds.decode_attention_flops(4096), 61 * 2 * 128 * (512 + 64 + 512) * 4096)
    assert_allclose(ds.prefill_attention_flops(0, 2), 61 * 2 * 128 * (128 + 64 + 128) * 3)
    # transformers (4.x caches, 5.x expands after reading) runs attention over the per-head K/V
    for profile in ("hf", "hf4"):
        hf = model_cost(load_model("deepseek-v3"), get_profile(profile))
        assert_allclose(hf.decode_attention_flops(10), 61 * 2 * 128 * (128 + 64 + 128) * 10)


def test_cumulative_keys_matches_the_sum():
    for window in (math.inf, 7, 100):
        for n in (0, 1, 6, 7, 8, 250):
            assert cumulative_keys(n, window) == sum(min(i, window) for i in range(1, n + 1))


def test_weights_split_adds_up_to_the_checkpoint():
    for name, dtype in [("llama-3.1-70b", "bf16"), ("llama-3.1-70b", "fp8"), ("llama-3.1-70b", "int4"),
                        ("mixtral-8x7b", "fp8"), ("deepseek-v3", "auto"), ("gpt-oss-120b", "auto"),
                        ("gemma-2-9b", "bf16")]:
        card = load_model(name)
        cost = model_cost(card, VLLM, dtype)
        embedding = 0 if card.tie_word_embeddings else cost.lm_head_weight_bytes
        experts = routed_expert_params(card) and cost.expert_weight_bytes * card.moe.num_experts * card.moe.num_moe_layers
        assert_allclose(cost.dense_weight_bytes + embedding + experts, weight_bytes(card, dtype), rtol=1e-12)


def test_deepseek_v3_body_params_match_the_published_active_count():
    card = load_model("deepseek-v3")   # 36.6B active incl. LM head, excl. embedding (README_WEIGHTS.md)
    cost = model_cost(card, VLLM)
    assert cost.body_params_per_token + cost.lm_head_params == card.params_active


def test_kv_read_is_the_kv_model_at_every_tp():
    card = load_model("llama-3.1-70b")
    cost = model_cost(card, VLLM, tps=(1, 2, 8, 16))
    for tp in (1, 2, 8, 16):
        per_seq = kv_layout(card, get_profile("ideal"), "auto", tp).sequence_bytes(3000, per_gpu=True)
        step = decode_step(cost, machine(scale_up_domain=16), 4, 3000, tp=tp)
        assert_allclose(step.kv_bytes, 4 * per_seq)
    # tp 16 > 8 KV heads: replicated, so per-GPU KV stops shrinking (40,960 B/token per rank at tp 8 and 16)
    assert_allclose(cost.kv_sequence_bytes(1, 16), cost.kv_sequence_bytes(1, 8))


def test_tp_allreduce_term():
    cost = model_cost(load_model("llama-3.1-70b"), VLLM, tps=(8,))
    m = machine()
    step = decode_step(cost, m, 4, 1000, tp=8)
    one = 2 * 7 / 8 * (4 * 8192 * 2) / 450e9 + 10e-6
    assert_allclose(step.comm_s, (2 * 80 + 1) * one, rtol=1e-12)
    assert_allclose(step.time_s, max(step.memory_s, step.compute_s) + step.comm_s + 100e-6, rtol=1e-12)
    overlapped = decode_step(cost, m, 4, 1000, tp=8, overlap_comm=True)
    assert overlapped.time_s < step.time_s


def test_expert_parallel_alltoall_term():
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM, "auto")
    step = decode_step(cost, machine(compute_dtype="fp8", peak_flops_per_s=1979e12), 64, 2048, tp=1, ep=8)
    # fp8 GEMMs: dispatch in FP8 with one fp32 scale per 128 channels, combine in BF16 (DeepEP, V3 §3.3.4)
    copies = 64 / 8 * 8 * 7 / 8            # tokens per rank × top-k × off-rank share
    dispatch = copies * (7168 + 56 * 4) / 450e9 + 10e-6
    combine = copies * 7168 * 2 / 450e9 + 10e-6
    assert_allclose(step.comm_s, 58 * (dispatch + combine), rtol=1e-12)
    # dense weights replicated on every rank, experts split eight ways
    touched = 32 * (1 - (1 - 8 / 256) ** 64)
    assert_allclose(step.weight_bytes, cost.dense_weight_bytes + 58 * touched * 44_040_192, rtol=1e-12)


def test_slow_link_makes_a_step_communication_bound():
    cost = model_cost(load_model("llama-3.1-8b"), VLLM, tps=(8,))
    step = decode_step(cost, machine(scale_up_bytes_per_s=1e9, scale_up_latency_s=50e-6), 256, 1000, tp=8)
    assert str(step.bound) == "communication"


def test_mean_tpot_is_exact_when_affine_and_not_the_final_length():
    cost = model_cost(load_model("llama-3.1-70b"), VLLM)
    m = machine()
    isl, osl = 4096, 2048

    def f(c):
        return decode_step(cost, m, 1, c).time_s

    mean = mean_over_output(f, isl, osl)
    # memory-bound throughout: affine in the context, so the mean is the average of the ends
    assert_allclose(mean, (f(isl + 1) + f(isl + osl - 1)) / 2, rtol=1e-12)
    assert mean < f(isl + osl - 1)


def test_mean_tpot_with_a_crossover_is_close_to_the_exact_sum():
    cost = model_cost(load_model("llama-3.1-8b"), VLLM)
    m = machine(bandwidth_bytes_per_s=20e12)    # push a large batch across the ridge inside the output

    def f(c):
        return decode_step(cost, m, 160, c).time_s

    isl, osl = 1000, 3000
    brute = np.mean([f(c) for c in range(isl + 1, isl + osl)])
    steps = f(np.arange(isl + 1, isl + osl))
    assert (steps[0] != steps[-1]) and len({str(b) for b in decode_step(cost, m, 160, np.array([isl, isl + osl])).bound}) == 2
    assert_allclose(mean_over_output(f, isl, osl), brute, rtol=1e-3)
    assert_allclose(mean_over_output(f, isl, 40), np.mean([f(c) for c in range(isl + 1, isl + 40)]), rtol=1e-12)


def test_speculative_tokens_per_step():
    assert_allclose(speculative_tokens_per_step(3, 0.7), (1 - 0.7 ** 4) / (1 - 0.7))
    assert speculative_tokens_per_step(3, 1.0) == 4
    assert speculative_tokens_per_step(5, 0.0) == 1


def test_speculation_pays_at_small_batch_and_not_when_compute_bound():
    spec = Speculation(k=3, alpha=0.8)
    rows = latency_from_names("llama-3.1-70b", "h200", isl=1024, osl=128, batch=[1, 1024], tp=8, speculation=spec).rows
    small, large = rows
    assert small["spec_speedup"] > 1.5
    assert large["spec_speedup"] < small["spec_speedup"]
    expected = (1 - 0.8 ** 4) / (1 - 0.8)
    assert small["spec_tokens_per_step"] == pytest.approx(expected)
    assert_allclose(small["tpot_s"] * small["spec_speedup"], small["tpot_without_spec_s"], rtol=1e-12)


def test_chunked_prefill_counts_passes_and_keeps_attention():
    cost = model_cost(load_model("llama-3.1-8b"), VLLM)
    m = machine()
    whole = prefill(cost, m, 4, 3000)
    chunked = prefill(cost, m, 4, 3000, chunk_tokens=512)
    assert chunked.passes == math.ceil(4 * 3000 / 512)
    assert_allclose(chunked.flops, whole.flops, rtol=1e-12)   # same tokens, same causal attention, same LM rows
    assert chunked.weight_bytes > whole.weight_bytes          # the weights are read once per pass
    assert chunked.time_s >= whole.time_s


def test_efficiency_defaults_are_sourced_not_one():
    result = latency_from_names("llama-3.1-8b", "h200", isl=1024, osl=16)
    notes = " ".join(result.assumptions)
    assert result.rows[0]["eta_flops"] == 0.75 and "arXiv:2407.08608" in notes
    assert result.rows[0]["eta_mem"] == 0.8            # from the h200 card (aiconfigurator's 0.8)
    # vLLM's per-operator default: 3 kernels per dense layer + the embedding, + the RoPE of each of the 32 attention
    # layers (kvplan.plans.sizing.kernels.attention_kernels)
    assert "aiconfigurator" in notes and result.rows[0]["step_overhead_s"] == pytest.approx(3e-6 * (3 * 32 + 1 + 32))


def test_overrides_take_precedence_over_the_card():
    row = latency_from_names("llama-3.1-8b", "h200", isl=1024, osl=16,
                             efficiencies=Efficiencies(eta_mem=0.5, eta_flops=0.5, step_overhead_s=0.0)).rows[0]
    assert (row["eta_mem"], row["eta_flops"], row["step_overhead_s"]) == (0.5, 0.5, 0.0)


def test_fp8_weights_use_the_fp8_peak_and_a_missing_peak_is_an_error():
    row = latency_from_names("llama-3.1-70b", "h100-sxm", isl=1024, osl=16, tp=2, weights_dtype="fp8").rows[0]
    assert row["compute_dtype"] == "fp8"
    assert row["ridge_point_flop_per_byte"] == pytest.approx(1979e12 / 3.35e12)
    with pytest.raises(MissingFigureError, match=r"a100-80gb.*peak_flops_per_s\.fp8"):
        latency_from_names("llama-2-70b", "a100-80gb", isl=128, osl=16, tp=4, weights_dtype="fp8")
    row = latency_from_names("llama-3.1-8b", "h100-sxm", isl=128, osl=16, weights_dtype="int4").rows[0]
    assert row["compute_dtype"] == "bf16"


def test_bad_input_names_the_field():
    with pytest.raises(InputError, match="--batch"):
        latency_from_names("llama-3.1-8b", "h200", batch=0)
    with pytest.raises(InputError, match="max_context"):
        latency_from_names("llama-3.1-8b", "h200", isl=131_072, osl=256)
    with pytest.raises(InputError, match="--ep"):
        latency_from_names("llama-3.1-8b", "h200", ep=2)
    with pytest.raises(InputError, match="tp"):
        latency_from_names("llama-3.1-70b", "h200", tp=3)


# --------------------------------------------------------------------------- published measurements
# TensorRT-LLM v0.9.0 docs/source/performance.md (every row of its throughput and first-token tables) with
# kvplan's flat-roofline estimates (perf_model="roofline") as docs/_latency_validation.md prints them:
# (card, model, batch, tp, isl, osl, kind,
# measured [tok/s/GPU or ms], kvplan with default η, kvplan with the card's calibrated η). These tests keep
# the page honest: an estimate that moves by more than 0.5 % fails until the page is regenerated.

CALIBRATED = {"h200": Efficiencies(0.654, 0.52, 0.00073), "h100-sxm": Efficiencies(0.751, 0.467, 0.0005),
              "a100-80gb": Efficiencies(0.76, 0.641, 0.0)}
TRTLLM_V090 = [
    ("h200", "llama-2-7b", 896, 1, 128, 128, "tput", 20618, 32150.0, 23630.0),
    ("h200", "llama-2-7b", 120, 1, 128, 2048, "tput", 8348, 10390.0, 8270.0),
    ("h200", "llama-2-7b", 64, 1, 2048, 128, "tput", 2391, 3110.0, 2320.0),
    ("h200", "llama-2-7b", 56, 1, 2048, 2048, "tput", 3522, 3917.0, 3116.0),
    ("h200", "llama-2-70b", 1024, 1, 128, 128, "tput", 3989, 5159.0, 3604.0),
    ("h200", "llama-2-70b", 512, 2, 128, 2048, "tput", 3963, 5915.0, 4473.0),
    ("h200", "llama-2-70b", 64, 1, 2048, 128, "tput", 418, 530.0, 379.5),
    ("h200", "llama-2-70b", 64, 1, 2048, 2048, "tput", 1458, 1934.0, 1537.0),
    ("h200", "mixtral-8x7b", 1024, 2, 128, 128, "tput", 5444, 22790.0, 16450.0),
    ("h200", "mixtral-8x7b", 256, 2, 128, 2048, "tput", 4973, 12870.0, 10220.0),
    ("h200", "mixtral-8x7b", 64, 2, 2048, 128, "tput", 605, 1752.0, 1314.0),
    ("h200", "mixtral-8x7b", 64, 2, 2048, 2048, "tput", 1821, 3437.0, 2706.0),
    ("h200", "mistral-7b-v0.1", 896, 1, 128, 128, "tput", 20460, 44240.0, 31020.0),
    ("h200", "mistral-7b-v0.1", 120, 1, 128, 2048, "tput", 8950, 26050.0, 19920.0),
    ("h200", "mistral-7b-v0.1", 64, 1, 2048, 128, "tput", 2423, 4418.0, 3154.0),
    ("h200", "mistral-7b-v0.1", 56, 1, 2048, 2048, "tput", 3867, 9895.0, 7550.0),
    ("h200", "llama-2-7b", 1, 1, 128, 1, "ttft", 5.7, 4.109, 5.774),
    ("h200", "llama-2-7b", 1, 1, 2048, 1, "ttft", 30.2, 21.09, 30.62),
    ("h200", "llama-2-70b", 1, 4, 128, 1, "ttft", 17.8, 14.79, 16.81),
    ("h200", "llama-2-70b", 1, 4, 2048, 1, "ttft", 103.0, 75.35, 97.67),
    ("h200", "mixtral-8x7b", 1, 2, 128, 1, "ttft", 12.1, 9.603, 12.41),
    ("h200", "mixtral-8x7b", 1, 2, 2048, 1, "ttft", 87.7, 23.59, 32.9),
    ("h200", "mistral-7b-v0.1", 1, 1, 128, 1, "ttft", 5.9, 4.359, 6.081),
    ("h200", "mistral-7b-v0.1", 1, 1, 2048, 1, "ttft", 31.7, 22.51, 32.66),
    ("h100-sxm", "llama-2-7b", 896, 1, 128, 128, "tput", 19854, 27180.0, 20430.0),
    ("h100-sxm", "llama-2-7b", 120, 1, 128, 2048, "tput", 6944, 7323.0, 6786.0),
    ("h100-sxm", "llama-2-7b", 84, 1, 2048, 128, "tput", 2163, 2595.0, 2035.0),
    ("h100-sxm", "llama-2-7b", 56, 1, 2048, 2048, "tput", 2826, 2781.0, 2555.0),
    ("h100-sxm", "llama-2-70b", 1024, 2, 128, 128, "tput", 3214, 4364.0, 2928.0),
    ("h100-sxm", "llama-2-70b", 512, 4, 128, 2048, "tput", 2725, 4320.0, 3402.0),
    ("h100-sxm", "llama-2-70b", 96, 2, 2048, 128, "tput", 346, 457.0, 320.4),
    ("h100-sxm", "llama-2-70b", 64, 2, 2048, 2048, "tput", 1011, 1274.0, 1145.0),
    ("h100-sxm", "mixtral-8x7b", 512, 2, 128, 128, "tput", 5255, 15260.0, 12390.0),
    ("h100-sxm", "mixtral-8x7b", 128, 2, 128, 2048, "tput", 3408, 5508.0, 5058.0),
    ("h100-sxm", "mixtral-8x7b", 64, 2, 2048, 128, "tput", 588, 1479.0, 1142.0),
    ("h100-sxm", "mixtral-8x7b", 32, 2, 2048, 2048, "tput", 1317, 1438.0, 1306.0),
    ("h100-sxm", "mistral-7b-v0.1", 896, 1, 128, 128, "tput", 20404, 41630.0, 27710.0),
    ("h100-sxm", "mistral-7b-v0.1", 120, 1, 128, 2048, "tput", 8623, 18620.0, 16920.0),
    ("h100-sxm", "mistral-7b-v0.1", 84, 1, 2048, 128, "tput", 2405, 4106.0, 2888.0),
    ("h100-sxm", "mistral-7b-v0.1", 56, 1, 2048, 2048, "tput", 3731, 7229.0, 6409.0),
    ("h100-sxm", "llama-2-7b", 1, 1, 128, 1, "ttft", 6.3, 5.636, 6.383),
    ("h100-sxm", "llama-2-7b", 1, 1, 2048, 1, "ttft", 30.8, 21.91, 33.79),
    ("h100-sxm", "llama-2-70b", 1, 4, 128, 1, "ttft", 19.6, 18.89, 19.29),
    ("h100-sxm", "llama-2-70b", 1, 8, 2048, 1, "ttft", 85.1, 57.0, 71.35),
    ("h100-sxm", "mixtral-8x7b", 1, 2, 128, 1, "ttft", 13.4, 12.99, 14.33),
    ("h100-sxm", "mixtral-8x7b", 1, 2, 2048, 1, "ttft", 89.5, 24.79, 36.33),
    ("h100-sxm", "mistral-7b-v0.1", 1, 1, 128, 1, "ttft", 6.5, 5.993, 6.765),
    ("h100-sxm", "mistral-7b-v0.1", 1, 1, 2048, 1, "ttft", 32.4, 23.34, 36.06),
    ("a100-80gb", "llama-2-7b", 256, 1, 128, 128, "tput", 5390, 5719.0, 5103.0),
    ("a100-80gb", "llama-2-7b", 32, 1, 128, 2048, "tput", 1484, 1573.0, 1515.0),
    ("a100-80gb", "llama-2-7b", 32, 1, 2048, 128, "tput", 533, 536.7, 485.4),
    ("a100-80gb", "llama-2-7b", 16, 1, 2048, 2048, "tput", 603, 637.2, 609.9),
    ("a100-80gb", "llama-2-70b", 1024, 4, 128, 128, "tput", 686, 754.0, 655.8),
    ("a100-80gb", "llama-2-70b", 512, 8, 128, 2048, "tput", 684, 978.0, 885.4),
    ("a100-80gb", "llama-2-70b", 96, 4, 2048, 128, "tput", 80, 84.45, 74.06),
    ("a100-80gb", "llama-2-70b", 64, 4, 2048, 2048, "tput", 289, 359.5, 340.2),
    ("a100-80gb", "mixtral-8x7b", 512, 2, 128, 128, "tput", 2842, 3931.0, 3563.0),
    ("a100-80gb", "mixtral-8x7b", 128, 2, 128, 2048, "tput", 1724, 1778.0, 1698.0),
    ("a100-80gb", "mixtral-8x7b", 64, 2, 2048, 128, "tput", 319, 343.5, 306.7),
    ("a100-80gb", "mixtral-8x7b", 32, 2, 2048, 2048, "tput", 801, 454.3, 432.0),
    ("a100-80gb", "mistral-7b-v0.1", 896, 1, 128, 128, "tput", 6251, 7337.0, 6358.0),
    ("a100-80gb", "mistral-7b-v0.1", 120, 1, 128, 2048, "tput", 3776, 5836.0, 5610.0),
    ("a100-80gb", "mistral-7b-v0.1", 64, 1, 2048, 128, "tput", 698, 768.2, 674.9),
    ("a100-80gb", "mistral-7b-v0.1", 56, 1, 2048, 2048, "tput", 1576, 2129.0, 2015.0),
    ("a100-80gb", "llama-2-7b", 1, 1, 128, 1, "ttft", 16.2, 16.87, 17.14),
    ("a100-80gb", "llama-2-7b", 1, 1, 2048, 1, "ttft", 132.4, 127.4, 147.4),
    ("a100-80gb", "llama-2-70b", 1, 4, 128, 1, "ttft", 45.6, 48.52, 49.3),
    ("a100-80gb", "llama-2-70b", 1, 8, 2048, 1, "ttft", 249.2, 199.5, 224.6),
    ("a100-80gb", "mixtral-8x7b", 1, 2, 128, 1, "ttft", 23.8, 38.3, 39.83),
    ("a100-80gb", "mixtral-8x7b", 1, 2, 2048, 1, "ttft", 160.9, 126.0, 145.2),
    ("a100-80gb", "mistral-7b-v0.1", 1, 1, 128, 1, "ttft", 16.3, 18.05, 18.39),
    ("a100-80gb", "mistral-7b-v0.1", 1, 1, 2048, 1, "ttft", 139.6, 136.3, 157.8),
]


def _published_estimate(card, model, batch, tp, isl, osl, kind, efficiencies):
    dtype = "auto" if card == "a100-80gb" else "fp8"
    row = latency_from_names(model, card, isl=isl, osl=osl, batch=batch, tp=tp, weights_dtype=dtype, kv_dtype=dtype,
                             engine="trtllm", efficiencies=efficiencies, perf_model="roofline").rows[0]
    return row["tokens_per_s_per_gpu"] if kind == "tput" else row["ttft_s"] * 1e3


@pytest.mark.parametrize("row", TRTLLM_V090, ids=lambda r: f"{r[0]}-{r[1]}-b{r[2]}-tp{r[3]}-{r[4]}-{r[5]}-{r[6]}")
def test_published_trtllm_rows_match_the_validation_page(row):
    card, model, batch, tp, isl, osl, kind, _measured, default, calibrated = row
    assert_allclose(_published_estimate(card, model, batch, tp, isl, osl, kind, Efficiencies()), default, rtol=5e-3)
    assert_allclose(_published_estimate(card, model, batch, tp, isl, osl, kind, CALIBRATED[card]), calibrated,
                    rtol=5e-3)


def test_calibrated_llama_rows():
    """The page's summary: one calibrated set per card puts its Llama-2 rows within 15 % on average."""
    for card in CALIBRATED:
        errors = [abs(r[9] - r[7]) / r[7] for r in TRTLLM_V090 if r[0] == card and r[1].startswith("llama")]
        assert len(errors) == 12 and np.mean(errors) < 0.15


# --------------------------------------------------------------------------- invariants

MODELS = ["llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3", "qwen3-next-80b-a3b"]
_COSTS = {name: model_cost(load_model(name), VLLM, tps=(1, 2, 4)) for name in MODELS}
prop = settings(max_examples=80, deadline=None)


@prop
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 2048), extra=st.integers(0, 512),
       context=st.integers(1, 200_000), tp=st.sampled_from([1, 2, 4]))
def test_more_batch_never_lowers_step_time(name, batch, extra, context, tp):
    cost, m = _COSTS[name], machine()
    assert decode_step(cost, m, batch + extra, context, tp=tp).time_s >= decode_step(cost, m, batch, context, tp=tp).time_s


@prop
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 512), context=st.integers(1, 200_000),
       extra=st.integers(0, 50_000), tp=st.sampled_from([1, 2, 4]))
def test_more_context_never_lowers_step_time(name, batch, context, extra, tp):
    cost, m = _COSTS[name], machine()
    assert decode_step(cost, m, batch, context + extra, tp=tp).time_s >= decode_step(cost, m, batch, context, tp=tp).time_s


@prop
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 512), context=st.integers(1, 100_000),
       eta=st.floats(0.05, 1.0), more=st.floats(0.0, 0.95), which=st.sampled_from(["eta_mem", "eta_flops"]),
       prompt=st.integers(1, 8192))
def test_higher_efficiency_never_raises_time(name, batch, context, eta, more, which, prompt):
    cost = _COSTS[name]
    low = machine(**{which: eta})
    high = machine(**{which: eta + (1 - eta) * more})
    assert decode_step(cost, high, batch, context).time_s <= decode_step(cost, low, batch, context).time_s
    assert prefill(cost, high, 1, prompt).time_s <= prefill(cost, low, 1, prompt).time_s


@prop
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 64), context=st.integers(1, 100_000))
def test_estimate_never_beats_the_floor(name, batch, context):
    step = decode_step(_COSTS[name], machine(), batch, context)
    assert step.time_s >= step.floor_s


def test_inline_cards_need_no_shipped_files():
    """Pure math on cards written inline: a two-layer toy checked term by term."""
    card = ModelCard.model_validate({
        "name": "toy", "family": "toy", "source": ["test"], "params_total": 1_000_000, "hidden_size": 64,
        "vocab_size": 1000, "num_attention_heads": 4, "max_context": 4096, "dtype": "bf16",
        "layer_groups": [{"kind": "full", "count": 2, "num_kv_heads": 2, "head_dim": 16}],
    })
    hw = HardwareCard.model_validate({
        "name": "toy-gpu", "vendor": "test", "source": ["test"], "hbm_capacity_bytes": 10**10,
        "hbm_capacity_basis": "datasheet", "hbm_bandwidth_bytes_per_s": 1e12, "peak_flops_per_s": {"bf16": 1e14},
        "efficiency": {"memory_bandwidth": 0.5, "flops": 0.5, "step_overhead_s": 1e-5},
    })
    row = latency_from_names(card, hw, isl=100, osl=2, batch=2).rows[0]
    weights = (1_000_000 - 64_000) * 2
    kv = 2 * 100 * (2 * 2 * 2 * 16 * 2)        # 2 seqs × 100 tokens × (2 layers × K,V × 2 heads × 16 × 2 B)
    assert row["decode_weight_bytes_per_gpu"] == weights and row["decode_kv_bytes_per_gpu"] == kv
    assert_allclose(row["decode_step_s"], (weights + kv) / (1e12 * 0.5) + 1e-5, rtol=1e-12)
    flops = 2 * (2 * (1_000_000 - 128_000) + 2 * 64_000 + 2 * 2 * 4 * 32 * 100)
    assert_allclose(row["decode_flops_per_gpu"], flops, rtol=1e-12)


def test_machine_is_frozen_and_replaceable():
    m = machine()
    assert dataclasses.replace(m, eta_mem=1.0).eta_mem == 1.0
    assert m.ridge_flop_per_byte == pytest.approx(H100_BF16 / H200_BW)
    hw = load_hardware("h200")
    assert hw.peak_flops_per_s["bf16"] == H100_BF16 and hw.hbm_bandwidth_bytes_per_s == H200_BW

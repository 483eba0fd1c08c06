"""vLLM's default start-up terms (activation peak, non-torch memory): closed forms worked by hand,
the public logs they were fitted on, and the logs kept apart to score them (tests/validation)."""

from __future__ import annotations

import pytest

from kvplan.calc.memory import vllm_activation_peak_bytes, vllm_non_torch_bytes
from kvplan.cards.loader import load_model
from kvplan.plans.build import fit_from_names

GiB = 2**30


def test_sampler_transient_sets_the_peak_at_the_default_batch():
    # Llama-3.1-8B (h 4096, i 14336, vocab 128,256), 8,192 tokens, 256 sequences, tp 1:
    # forward 1.1 × 8192 × (2·4096 + 3·14336) × 2 B = 922,746,880 B
    # sampler 10.5 × 256 × 128,256 × 4 B = 1,379,008,512 B (the larger)
    card = load_model("llama-3.1-8b")
    assert vllm_activation_peak_bytes(card, 8192, 1, 256) == pytest.approx(1_379_008_512, abs=1)
    # one sequence: sampler 10.5 × 128,256 × 4 = 5,386,752 B, so the forward pass sets the peak
    assert vllm_activation_peak_bytes(card, 8192, 1, 1) == pytest.approx(922_746_880, abs=1)
    # tp 2 at 8,192 tokens: forward 1.1 × 8192 × (8192 + 3·7168) × 2 = 535,193,190.4 B < sampler
    assert vllm_activation_peak_bytes(card, 8192, 2, 256) == pytest.approx(1_379_008_512, abs=1)


def test_forward_transient_grows_with_batched_tokens():
    card = load_model("llama-3.1-8b")
    # 20,000 tokens: 1.1 × 20,000 × 102,400 B = 2,252,800,000 B; 29,000: 3,266,560,000 B
    assert vllm_activation_peak_bytes(card, 20_000) == pytest.approx(2_252_800_000, abs=1)
    assert vllm_activation_peak_bytes(card, 29_000) == pytest.approx(3_266_560_000, abs=1)
    # fewer tokens than sequences: the sampler sees min(max_num_seqs, tokens) rows
    assert vllm_activation_peak_bytes(card, 16, 1, 256) == pytest.approx(
        max(1.1 * 16 * 102_400, 10.5 * 16 * 128_256 * 4), abs=1)


def test_moe_transient_counts_the_shared_gate_up_and_down_cache():
    # Mixtral-8x7B: h 4096, expert i 14336, top-2, vocab 32,000, every layer MoE.
    card = load_model("mixtral-8x7b")
    # tp 1: 2·4096 + 2 × (max(2·14336, 4096) + 14336) = 94,208 elements a token;
    # 1.1 × 8192 × 94,208 × 2 = 1,697,854,259.2 B (sampler 10.5 × 256 × 32,000 × 4 = 344,064,000 B)
    assert vllm_activation_peak_bytes(card, 8192, 1) == pytest.approx(1_697_854_259.2, rel=1e-12)
    # tp 8: i/tp 1792, max(3584, 4096) = 4096 (the down cache is wider): 8192 + 2 × 5888 = 19,968;
    # 1.1 × 8192 × 19,968 × 2 = 359,871,283.2 B, just above the sampler's 344,064,000 B
    assert vllm_activation_peak_bytes(card, 8192, 8) == pytest.approx(359_871_283.2, rel=1e-12)


def test_non_torch_memory_by_world_size():
    assert vllm_non_torch_bytes(1) == pytest.approx(0.35 * GiB)
    assert vllm_non_torch_bytes(2) == vllm_non_torch_bytes(8) == vllm_non_torch_bytes(1, 2) == pytest.approx(3.58 * GiB)


def test_fit_uses_the_default_terms_and_says_so():
    # H100-SXM card: 79.65 GiB runtime total (85,520,809,984 B); util 0.9; weights 8,030,261,248 × 2 B.
    # vLLM V1 on a GPU with >= 70 GiB other than an A100 profiles 8,192 tokens and max_num_seqs 1,024
    # (vllm/engine/arg_utils.py): the sampler's 10.5 × 1,024 × 128,256 × 4 B = 5,516,034,048 B sets the peak.
    # KV = 0.9 × 85,520,809,984 − 16,060,522,496 − 5,516,034,048 − 0.35 × 2^30 = 55,016,362,803.2 B
    row = fit_from_names("llama-3.1-8b", "h100-sxm", seq=8192).rows[0]
    assert row["activation_bytes"] == pytest.approx(5_516_034_048, abs=1)
    assert row["non_torch_bytes"] == pytest.approx(375_809_638.4, abs=1)
    assert row["cudagraph_bytes"] == 0
    assert row["kv_cache_memory_bytes"] == pytest.approx(
        0.9 * 85_520_809_984 - 16_060_522_496 - 5_516_034_048 - 375_809_638.4, abs=1)
    # the old fixed 256 sequences, passed explicitly: the sampler's 1,379,008,512 B
    row = fit_from_names("llama-3.1-8b", "h100-sxm", seq=8192, max_num_seqs=256).rows[0]
    assert row["activation_bytes"] == pytest.approx(1_379_008_512, abs=1)
    notes = " ".join(fit_from_names("llama-3.1-8b", "h100-sxm", seq=8192, tp=2).assumptions)
    assert "non-torch memory (NCCL, CUDA context) assumed 3.58 GiB" in notes
    assert "activation peak estimated" in notes and "CUDA-graph memory assumed 0" in notes

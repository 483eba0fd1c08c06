"""KV bytes against closed forms worked by hand and against published figures (ENGINES.md §8)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc.kv import kv_layout
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile
from kvplan.errors import InputError
from kvplan.plans.build import size_from_names


GiB = 2**30


def layout(model, engine="ideal", dtype="auto", tp=1, pp=1, **kw):
    return kv_layout(load_model(model), get_profile(engine), dtype, tp, pp, **kw)


@pytest.mark.parametrize(
    ("model", "expected", "closed_form"),
    [
        # DeepSeek-V3 paper (arXiv 2505.09343) Table 1, BF16 KV per token
        ("deepseek-v3", 70_272, 61 * 576 * 2),
        ("qwen2.5-72b", 327_680, 80 * 2 * 8 * 128 * 2),
        ("llama-3.1-405b", 516_096, 126 * 2 * 8 * 128 * 2),
    ],
)
def test_deepseek_v3_paper_table1(model, expected, closed_form):
    assert expected == closed_form
    assert layout(model).bytes_per_token == expected
    # the ratios the paper discusses: 4.66x and 7.34x
    if model != "deepseek-v3":
        assert round(expected / 70_272, 2) in (4.66, 7.34)


def test_llama_3_1_70b_128k_is_exactly_40_gib():
    """Mooncake README's "40 GB" for 128k tokens of Llama-3-70B is 40 GiB at 131,072 tokens."""
    lay = layout("llama-3.1-70b", engine="vllm")
    assert lay.bytes_per_token == 80 * 2 * 8 * 128 * 2 == 327_680
    assert float(lay.sequence_bytes(131_072)) == 40 * GiB == 42_949_672_960


@pytest.mark.parametrize("tp", [8, 16, 32])
def test_gqa_heads_replicate_beyond_kv_heads(tp):
    """max(1, 8 // tp) heads per rank: 40,960 B/token/GPU at TP8 and still at TP16 (vLLM get_num_kv_heads)."""
    lay = layout("llama-3.1-70b", engine="vllm", tp=tp)
    assert lay.bytes_per_token_per_gpu == 80 * 2 * 1 * 128 * 2 == 40_960
    assert lay.bytes_per_token == 327_680  # logical stays one copy


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16, 32])
def test_mla_latent_replicated_on_every_rank(tp):
    lay = layout("deepseek-v3", engine="vllm", tp=tp)
    assert lay.bytes_per_token_per_gpu == 70_272


def test_transformers_4_cached_decompressed_mla():
    """transformers 4.x cached K [B,128,S,192] and V [B,128,S,128] per layer: 61 × 128 × 320 × 2 B."""
    lay = layout("deepseek-v3", engine="hf4")
    assert lay.bytes_per_token == 61 * 128 * (192 + 128) * 2 == 4_997_120
    assert round(lay.bytes_per_token / 70_272) == 71


def test_transformers_5_caches_the_latent():
    """transformers 5.x caches K [B,1,S,512] and V [B,1,S,64] (measured in tests/validation)."""
    assert layout("deepseek-v3", engine="hf").bytes_per_token == 61 * (512 + 64) * 2 == 70_272


def test_transformers_broadcasts_falcon_40b_kv_to_every_query_head():
    """Falcon's new decoder architecture: _split_heads broadcasts 8 KV heads to the 128 query heads."""
    assert layout("falcon-40b", engine="hf").bytes_per_token == 60 * 2 * 128 * 64 * 2
    assert layout("falcon-40b", engine="vllm").bytes_per_token == 60 * 2 * 8 * 64 * 2


def test_falcon_7b_multi_query_in_transformers():
    """Falcon-7B: 32 layers, one KV head of 64 → 8,192 B/token (ENGINES.md §4)."""
    assert layout("falcon-7b", engine="hf").bytes_per_token == 32 * 2 * 1 * 64 * 2 == 8_192


def test_qwen3_32b_uses_config_head_dim_not_hidden_over_heads():
    # 64 layers, 8 KV heads, head_dim 128 (hidden/heads would give 80 and understate 1.6x)
    assert layout("qwen3-32b").bytes_per_token == 64 * 2 * 8 * 128 * 2 == 262_144


@pytest.mark.parametrize(
    ("model", "tokens", "gib"),
    [
        # Hugging Face blog "Llama 3.1", FP16 KV cache column, values in GiB at 1,024/16,000/128,000 tokens
        ("llama-3.1-8b", 1_024, 0.125), ("llama-3.1-8b", 16_000, 1.95), ("llama-3.1-8b", 128_000, 15.62),
        ("llama-3.1-70b", 1_024, 0.313), ("llama-3.1-70b", 16_000, 4.88), ("llama-3.1-70b", 128_000, 39.06),
    ],
)
def test_hf_blog_llama31_kv_table(model, tokens, gib):
    got = float(layout(model).sequence_bytes(tokens)) / GiB
    assert_allclose(got, gib, atol=0.006)


def test_hf_blog_405b_figures_are_twice_the_real_cache():
    """The blog's 405B column (0.984/15.38/123.05) fits 1,032,192 B/token: 2x the real 516,096."""
    got = np.array([float(layout("llama-3.1-405b").sequence_bytes(t)) / GiB for t in (1_024, 16_000, 128_000)])
    blog = np.array([0.984, 15.38, 123.05])
    assert_allclose(got, [0.492, 7.69, 61.52], atol=0.006)
    assert_allclose(blog / got, 2.0, rtol=0.002)


def test_fp8_halves_bf16_and_int4_carries_scales():
    bf16 = layout("llama-3.1-8b", dtype="bf16").bytes_per_token
    assert layout("llama-3.1-8b", dtype="fp8").bytes_per_token == bf16 / 2
    # int4: 0.5 B per element + fp16 scale and zero (4 B) per KV head for K and for V, per layer
    assert layout("llama-3.1-8b", dtype="int4").bytes_per_token == 32 * (8 * 256 * 0.5 + 2 * 8 * 4)
    # NVFP4: 0.5 B + one fp8 scale per 16 elements
    assert layout("llama-3.1-8b", dtype="fp4").bytes_per_token == 32 * 8 * 256 * (0.5 + 1 / 16)


def test_fp8_ds_mla_is_656_bytes_per_token_layer():
    assert layout("deepseek-v3", engine="vllm", dtype="fp8_ds_mla").bytes_per_token == 61 * 656


def test_per_token_head_scales():
    """vLLM *_per_token_head: 2 × heads_r × 4 B of fp32 scales per token per layer."""
    lay = layout("llama-3.1-8b", engine="vllm", dtype="int8_per_token_head", tp=2)
    assert lay.bytes_per_token_per_gpu == 32 * (4 * 256 * 1 + 2 * 4 * 4)


def test_vllm_block_rounding():
    lay = layout("llama-3.1-8b", engine="vllm")
    assert float(lay.sequence_bytes(1)) == 16 * 131_072
    assert float(lay.sequence_bytes(17)) == 32 * 131_072
    assert float(layout("llama-3.1-8b", engine="trtllm").sequence_bytes(33)) == 64 * 131_072


def test_sliding_window_gemma2_each_engine():
    """Gemma-2-9B: 21 sliding (4096) + 21 full layers, 8 KV heads of 256.

    The released config says torch_dtype float32: serving engines run it in 16-bit, transformers
    keeps the checkpoint's 4-byte dtype.
    """
    per_layer = 2 * 8 * 256 * 2
    seq = 32_768
    ideal = float(layout("gemma-2-9b").sequence_bytes(seq))
    assert ideal == 21 * per_layer * seq + 21 * per_layer * 4096
    hf = float(layout("gemma-2-9b", engine="hf").sequence_bytes(seq))
    assert hf == 2 * (21 * per_layer * seq + 21 * per_layer * 4095)
    # vLLM: cdiv(min(W − 1 + 8192, L), 16) + 1 pages for the sliding layers
    vllm = float(layout("gemma-2-9b", engine="vllm").sequence_bytes(seq))
    sliding_pages = -(-(4095 + 8192) // 16) + 1
    assert vllm == 21 * per_layer * seq + 21 * per_layer * sliding_pages * 16


def test_sliding_window_below_window_holds_every_token():
    assert float(layout("mistral-7b-v0.1").sequence_bytes(1000)) == 1000 * 32 * 2 * 8 * 128 * 2


def test_pipeline_stage_holds_its_layers():
    lay = layout("llama-3.1-70b", engine="vllm", pp=4)
    assert lay.bytes_per_token_per_gpu == 20 * 4_096
    assert layout("llama-3.1-405b", pp=4).bytes_per_token_per_gpu == 32 * 4_096  # ceil(126 / 4)


def test_linear_attention_state_is_constant():
    lay = layout("qwen3-next-80b-a3b")
    a, b = lay.sequence_bytes(1_000), lay.sequence_bytes(100_000)
    full = [g for g in lay.groups if g.kind == "full"][0]
    assert float(b - a) == 99_000 * full.bytes_per_token_layer * full.layers
    assert lay.state_bytes_per_sequence > 0


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-70b", 3), ("llama-3.1-8b", 5), ("qwen3-32b", 128)])
def test_invalid_tp_is_rejected(model, tp):
    with pytest.raises(InputError, match="tp"):
        layout(model, engine="vllm", tp=tp)


def test_size_total_is_per_sequence_times_batch():
    rows = size_from_names("llama-3.1-70b", seq=[4096, 131072], batch=[1, 8]).rows
    assert len(rows) == 4
    for row in rows:
        assert row["kv_bytes_total"] == row["kv_bytes_per_sequence"] * row["batch"]
        assert row["kv_bytes_per_sequence"] == row["seq_len"] * 327_680


def test_seed_claim_150gb_at_128k_depends_on_attention_and_concurrency():
    """README: GQA 70B needs 4 sequences (bf16) or 7 (fp8) to pass 150 GB at 128k; MHA 65B needs one."""
    from ..conftest import ROOT

    gqa = layout("llama-3.1-70b", engine="vllm")
    one = float(gqa.sequence_bytes(131_072))
    assert 3 * one < 150e9 < 4 * one
    fp8 = float(layout("llama-3.1-70b", engine="vllm", dtype="fp8").sequence_bytes(131_072))
    assert 6 * fp8 < 150e9 < 7 * fp8
    mha = kv_layout(load_model(str(ROOT / "examples" / "cards" / "llama-65b.yaml")), get_profile("vllm"))
    assert float(mha.sequence_bytes(131_072)) == 80 * 2 * 64 * 128 * 2 * 131_072 > 2 * 150e9

"""kvplan's ``hf`` profile against the bytes a real transformers cache holds, to the byte.

Models of random weights are built locally from shrunk released configs (see
``tests/validation/real_caches.py``); nothing is downloaded. The first test is the cross-check
itself (measured == predicted, for the config as released and as transformers saves it); the
others pin down, from the measured tensors, what transformers keeps, so that a mismatch names
its cause. Where kvplan and transformers disagree the test asserts the measured bytes: it fails
until kvplan is fixed, and is not marked xfail.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the validation extra (torch) is needed to build real caches")
transformers = pytest.importorskip("transformers", reason="the validation extra (transformers) is needed")

from tests.validation.real_caches import (  # noqa: E402
    ARCHITECTURES,
    imported_card,
    measure,
    measure_cache,
    predict,
    run_decode_step,
    run_prefill,
    shrunk_config,
)

pytestmark = pytest.mark.validation

CASES = [
    pytest.param(key, n, b, variant, id=f"{key}-N{n}-B{b}-{variant}")
    for key, arch in ARCHITECTURES.items()
    for n, b in [(n, 1) for n in arch.seq_lens] + [(max(arch.seq_lens), 2)]
    for variant in ("hub", "saved")
]
SLIDING = ["mistral-7b-v0.1", "gemma-2-9b", "gemma-3", "gpt-oss-20b"]


def _tokens_kept(measurement, layer: int) -> int:
    keys = next(t for t in measurement.tensors if t.layer == layer and t.name == "keys")
    return keys.shape[-2]


@pytest.mark.parametrize(("key", "seq_len", "batch", "variant"), CASES)
def test_cache_bytes_match_kvplan(key, seq_len, batch, variant):
    """Σ .nbytes of the returned cache == kv_layout(card, hf).sequence_bytes(N) × batch."""
    measurement = measure(key, seq_len, batch)
    measured, predicted = measurement.kv_state_bytes, predict(key, seq_len, batch, variant)
    assert predicted == measured, (
        f"{key} N={seq_len} B={batch} ({variant} config): kvplan {predicted:,} B, "
        f"transformers {measured:,} B in {measurement.cache_class}: {measurement.layer_summary()}"
    )


@pytest.mark.parametrize("key", SLIDING)
def test_sliding_layers_expose_min_n_and_w_minus_one_tokens(key):
    """DynamicSlidingWindowLayer.update keeps ``full[:, :, -W + 1:]`` (cache_utils.py), full layers all N."""
    cfg = shrunk_config(key)
    window = cfg["sliding_window"]
    for seq_len in ARCHITECTURES[key].seq_lens:
        m = measure(key, seq_len)
        for layer in {t.layer for t in m.tensors}:
            cls = next(t.cache_class for t in m.tensors if t.layer == layer)
            expected = min(seq_len, window - 1) if cls == "DynamicSlidingWindowLayer" else seq_len
            assert _tokens_kept(m, layer) == expected, (key, seq_len, layer, cls)


@pytest.mark.parametrize("key", SLIDING)
def test_sliding_layer_storage_is_the_prompt_then_w_tokens(key):
    """The W − 1 tokens are a view: after a prefill of N tokens the layer still pins N tokens of
    storage (the ``torch.cat`` of the whole prompt), and after the first decode step W tokens
    (``cat`` of W − 1 cached + 1 new, viewed down to W − 1). Full layers pin exactly what they show."""
    cfg = shrunk_config(key)
    window, seq_len = cfg["sliding_window"], max(ARCHITECTURES[key].seq_lens)
    cache, model = run_prefill(key, seq_len)
    after_prefill = measure_cache(cache)
    # bytes per token summed over the sliding layers' K and V, from the measured tensors
    per_token = sum(t.nbytes // _tokens_kept(after_prefill, t.layer) for t in after_prefill.tensors
                    if t.cache_class == "DynamicSlidingWindowLayer")
    assert per_token > 0
    hidden_tokens = seq_len - (window - 1)
    assert after_prefill.storage_bytes - after_prefill.kv_state_bytes == per_token * hidden_tokens
    after_decode = measure_cache(run_decode_step(key, cache, model))
    assert after_decode.storage_bytes - after_decode.kv_state_bytes == per_token * 1


def test_gemma3_every_sixth_layer_is_global():
    """Gemma3TextConfig: layer i is global iff (i + 1) % sliding_window_pattern == 0; kvplan counts the same."""
    m = measure("gemma-3", 24)
    classes = [next(t.cache_class for t in m.tensors if t.layer == i) for i in range(7)]
    assert classes == ["DynamicSlidingWindowLayer"] * 5 + ["DynamicLayer", "DynamicSlidingWindowLayer"]
    counts = {g.kind: g.count for g in imported_card("gemma-3").layer_groups}
    assert counts == {"sliding": 6, "full": 1}


def test_gemma2_even_layers_slide():
    m = measure("gemma-2-9b", 24)
    classes = [next(t.cache_class for t in m.tensors if t.layer == i) for i in range(4)]
    assert classes == ["DynamicSlidingWindowLayer", "DynamicLayer"] * 2


def test_falcon_7b_multi_query_caches_one_kv_head():
    """FalconAttention keeps ``config.num_kv_heads if (new_decoder_architecture or not multi_query) else 1``."""
    m = measure("falcon-7b", 16)
    assert {t.shape for t in m.tensors} == {(1, 1, 16, 16)}


def test_falcon_40b_caches_kv_broadcast_to_every_query_head():
    """new_decoder_architecture: ``_split_heads`` broadcasts K/V to the query heads and ``forward``
    reshapes them to ``num_heads`` before ``layer_past.update`` (modeling_falcon.py), so the cache
    holds num_attention_heads heads, not num_kv_heads."""
    cfg = shrunk_config("falcon-40b")
    m = measure("falcon-40b", 16)
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert {t.shape for t in m.tensors} == {(1, cfg["num_attention_heads"], 16, head_dim)}


def test_deepseek_v3_cache_layout():
    """transformers 5.x caches the compressed latent (``cache.update(kv_nope, k_rot)`` in
    DeepseekV3Attention.forward: K [B, 1, S, kv_lora_rank], V [B, 1, S, qk_rope_head_dim]);
    4.x cached the decompressed K [B, H, S, nope + rope] and V [B, H, S, v_head_dim]."""
    cfg = shrunk_config("deepseek-v3")
    m = measure("deepseek-v3", 16)
    keys = {t.shape for t in m.tensors if t.name == "keys"}
    values = {t.shape for t in m.tensors if t.name == "values"}
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert keys == {(1, 1, 16, cfg["kv_lora_rank"])}
        assert values == {(1, 1, 16, cfg["qk_rope_head_dim"])}
    else:
        heads = cfg["num_attention_heads"]
        assert keys == {(1, heads, 16, cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])}
        assert values == {(1, heads, 16, cfg["v_head_dim"])}


def test_qwen3_next_linear_state_shapes():
    """LinearAttentionLayer: conv state [B, 2·key_dim + value_dim, linear_conv_kernel_dim] in the model
    dtype (the whole kernel, not kernel − 1), recurrent state [B, v_heads, k_dim, v_dim] in fp32
    (torch_chunk_gated_delta_rule computes in fp32 and returns that state)."""
    cfg = shrunk_config("qwen3-next-80b-a3b")
    m = measure("qwen3-next-80b-a3b", 16)
    conv_dim = 2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"] + \
        cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
    conv = {(t.shape, t.dtype) for t in m.tensors if t.name.startswith("conv_states")}
    recurrent = {(t.shape, t.dtype) for t in m.tensors if t.name.startswith("recurrent_states")}
    assert conv == {((1, conv_dim, cfg["linear_conv_kernel_dim"]), "bf16")}
    assert recurrent == {((1, cfg["linear_num_value_heads"], cfg["linear_key_head_dim"],
                           cfg["linear_value_head_dim"]), "fp32")}


def test_sliding_layers_carry_an_8_byte_window_scalar():
    """``_sliding_window_tensor`` (int64 scalar) is bookkeeping, not KV: 8 B per sliding layer."""
    m = measure("gemma-3", 9)
    assert m.bookkeeping_bytes == 8 * 6
    assert measure("llama-3.1-8b", 9).bookkeeping_bytes == 0

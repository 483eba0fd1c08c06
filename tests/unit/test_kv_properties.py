"""Invariants of the KV model over random architectures (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc.kv import kv_layout
from kvplan.cards.schema import ModelCard
from kvplan.engines import ENGINE_NAMES, get_profile

heads_kv = st.sampled_from([(32, 32), (32, 8), (64, 8), (32, 1), (16, 4), (64, 16)])
kinds = st.sampled_from(["full", "sliding", "hybrid"])


def card(heads: int, kv_heads: int, layers: int, head_dim: int, kind: str, window: int) -> ModelCard:
    full = {"kind": "full", "count": layers, "num_kv_heads": kv_heads, "head_dim": head_dim}
    sliding = {"kind": "sliding", "count": layers, "num_kv_heads": kv_heads, "head_dim": head_dim, "window": window}
    groups = {"full": [full], "sliding": [sliding], "hybrid": [full, sliding]}[kind]
    return ModelCard.model_validate({
        "name": "prop", "family": "prop", "source": ["test"], "params_total": 10**9, "hidden_size": heads * head_dim,
        "vocab_size": 32000, "num_attention_heads": heads, "max_context": 10**6, "dtype": "bf16",
        "layer_groups": groups,
    })


settings_ = settings(max_examples=60, deadline=None)


@settings_
@given(hk=heads_kv, layers=st.integers(1, 96), head_dim=st.sampled_from([64, 128, 256]), kind=kinds,
       window=st.integers(16, 8192), engine=st.sampled_from(ENGINE_NAMES),
       seq=st.integers(1, 500_000), extra=st.integers(0, 100_000))
def test_more_tokens_never_less_kv(hk, layers, head_dim, kind, window, engine, seq, extra):
    lay = kv_layout(card(*hk, layers, head_dim, kind, window), get_profile(engine))
    assert lay.sequence_bytes(seq + extra) >= lay.sequence_bytes(seq)


@settings_
@given(hk=heads_kv, layers=st.integers(1, 96), head_dim=st.sampled_from([64, 128]), kind=kinds,
       window=st.integers(16, 8192), seq=st.integers(1, 200_000))
def test_fp8_is_half_of_bf16(hk, layers, head_dim, kind, window, seq):
    c = card(*hk, layers, head_dim, kind, window)
    bf16 = kv_layout(c, get_profile("vllm"), "bf16").sequence_bytes(seq)
    fp8 = kv_layout(c, get_profile("vllm"), "fp8").sequence_bytes(seq)
    assert fp8 * 2 == bf16


@settings_
@given(hk=heads_kv, layers=st.integers(1, 96), head_dim=st.sampled_from([64, 128]), seq=st.integers(1, 200_000),
       engine=st.sampled_from(ENGINE_NAMES))
def test_gqa_never_exceeds_mha_of_the_same_shape(hk, layers, head_dim, seq, engine):
    heads, kv = hk
    gqa = kv_layout(card(heads, kv, layers, head_dim, "full", 1), get_profile(engine)).sequence_bytes(seq)
    mha = kv_layout(card(heads, heads, layers, head_dim, "full", 1), get_profile(engine)).sequence_bytes(seq)
    assert gqa <= mha


@settings_
@given(hk=heads_kv, layers=st.integers(1, 96), head_dim=st.sampled_from([64, 128]), kind=kinds,
       window=st.integers(16, 8192), seq=st.integers(1, 200_000), tp_exp=st.integers(0, 5),
       engine=st.sampled_from(["vllm", "sglang", "trtllm", "ideal"]))
def test_tp_never_increases_per_gpu_bytes(hk, layers, head_dim, kind, window, seq, tp_exp, engine):
    heads, kv = hk
    c = card(heads, kv, layers, head_dim, kind, window)
    tp = 2**tp_exp
    if heads % tp or heads % (2 * tp):
        return
    one = kv_layout(c, get_profile(engine), tp=tp).sequence_bytes(seq, per_gpu=True)
    two = kv_layout(c, get_profile(engine), tp=2 * tp).sequence_bytes(seq, per_gpu=True)
    assert two <= one
    # and the logical one-copy size does not depend on tp
    assert kv_layout(c, get_profile(engine), tp=2 * tp).sequence_bytes(seq) == \
        kv_layout(c, get_profile(engine), tp=tp).sequence_bytes(seq)

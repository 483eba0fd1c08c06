"""KV transfer over links, layer-wise overlap, and the load-vs-recompute condition."""

from __future__ import annotations

from numpy.testing import assert_allclose

from kvplan.calc.transfer import break_even_tokens, exposed_transfer_s, mooncake_min_bandwidth, transfer_s

GiB = 2**30


def test_128k_llama70b_request_over_rdma_and_nvlink():
    """40 GiB of bf16 KV (131,072 × 327,680 B): ~0.5 s at Mooncake's 87 GB/s, ~0.05 s at 900 GB/s."""
    kv = 131_072 * 327_680
    assert kv == 40 * GiB
    assert_allclose(transfer_s(kv, 87e9), 42_949_672_960 / 87e9)  # 0.4937 s
    assert_allclose(transfer_s(kv, 87e9), 0.49, atol=0.01)
    assert_allclose(transfer_s(kv, 900e9), 0.0477, atol=0.001)
    # 4 × 200 Gbps RoCE at Mooncake's measured 87% efficiency is the same 87 GB/s
    assert_allclose(transfer_s(kv, 25e9, efficiency=0.87, links=4), transfer_s(kv, 87e9))


def test_layerwise_overlap_exposes_only_the_unhidden_part():
    layers = 80
    # transfer slower than prefill: exposed = transfer − (L−1)/L × prefill
    assert_allclose(exposed_transfer_s(0.494, 0.30, layers), 0.494 - 79 / 80 * 0.30)
    # transfer faster than prefill: only the last layer's share is exposed
    assert_allclose(exposed_transfer_s(0.048, 0.30, layers), 0.048 / 80)
    # the fixed latency is never hidden
    assert_allclose(exposed_transfer_s(0.048, 0.30, layers, latency_s=0.002), 0.002 + 0.048 / 80)


def test_slower_link_never_lowers_exposed_time():
    import numpy as np

    x = np.linspace(0.001, 2.0, 400)
    exposed = exposed_transfer_s(x, 0.5, 61)
    assert np.all(np.diff(exposed) >= 0)


def test_mooncake_eq2_llama3_70b():
    """FAST'25 Eq. 2 with LLaMA3-70B (d = 8192, GQA 8 → 4,096 B/token/layer, a = 4, b = 22) at an 8k prefix:
    reuse pays above ~6 GB/s on 8×A800 (8 × 312 TFLOP/s) and ~19 GB/s on 8×H800 (8 × 989.5 TFLOP/s)."""
    kv_per_token_layer = 2 * 8 * 128 * 2
    a800 = mooncake_min_bandwidth(8 * 312e12, kv_per_token_layer, 8192, 8192)
    h800 = mooncake_min_bandwidth(8 * 989.5e12, kv_per_token_layer, 8192, 8192)
    assert_allclose(a800 / 1e9, 6, rtol=0.05)
    assert_allclose(h800 / 1e9, 19, rtol=0.05)


def test_break_even_with_a_linear_recompute():
    # recompute 1 ms per token, load 0.5 ms per token + 10 ms latency → break-even at 20 tokens
    n = break_even_tokens(0.5e-3, 1.0, 10e-3, lambda t: t * 1e-3)
    assert n == 21  # first n where recompute strictly exceeds load
    assert break_even_tokens(2e-3, 1.0, 0.0, lambda t: t * 1e-3) == -1

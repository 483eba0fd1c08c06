"""Moving KV cache over a link: P→D transfer, tier loads, and the load-versus-recompute break-even.

Transfer of ``bytes`` over ``links`` links of ``bandwidth`` bytes/s per direction at efficiency η,
plus a fixed per-transfer latency:

    transfer_s = latency_s + bytes / (links × bandwidth × η)

Layer-wise overlap (vLLM/SGLang/Mooncake connectors send a layer's KV as soon as it is
computed): prefill of L layers takes p = prefill_s / L per layer, and sending a layer takes
x = transfer_s / L. As a two-stage pipeline the last byte arrives at p + x + (L − 1)·max(p, x)
after prefill starts, so the part of the transfer that TTFT sees is

    exposed_s = latency_s + (x                          if x ≤ p
                             transfer − (L − 1)/L · prefill   otherwise)

Load versus recompute (Mooncake, FAST'25, §3 Eq. 2): reusing n cached prefix tokens pays
when loading their KV is faster than recomputing it:

    n × kv_bytes_per_token / B  <  prefill FLOPs(n) / G
    ⇔  B / G  >  kv_bytes_per_token_per_layer / (a·n·d + b·d²)

with d the hidden size, a = 4 and b = 22 the attention and dense FLOP coefficients Mooncake
uses for LLaMA3-70B (FLOPs per token per layer a·n·d + b·d²), G the aggregate compute.
"""

from __future__ import annotations

import numpy as np


def transfer_s(num_bytes, bandwidth_bytes_per_s, efficiency=1.0, links=1, latency_s=0.0):
    """Seconds to move ``num_bytes``: latency + bytes / (links × bandwidth × efficiency)."""
    rate = np.asarray(bandwidth_bytes_per_s, float) * np.asarray(efficiency, float) * np.asarray(links, float)
    return np.asarray(latency_s, float) + np.asarray(num_bytes, float) / rate


def exposed_transfer_s(transfer_time_s, prefill_time_s, layers, latency_s=0.0):
    """Part of a layer-wise transfer not hidden behind prefill (see the module docstring).

    ``transfer_time_s`` excludes the fixed latency, which is always exposed.
    """
    x = np.asarray(transfer_time_s, float)
    p = np.asarray(prefill_time_s, float)
    n = np.asarray(layers, float)
    hidden = np.where(x <= p, x / n, x - (n - 1) / n * p)
    return np.asarray(latency_s, float) + hidden


def mooncake_min_bandwidth(compute_flops_per_s, kv_bytes_per_token_per_layer, hidden_size, prefix_tokens,
                           a: float = 4.0, b: float = 22.0):
    """Mooncake Eq. 2: the storage bandwidth above which loading n cached tokens beats recomputing.

    B_min = G × kv_bytes_per_token_per_layer / (a·n·d + b·d²).
    """
    n = np.asarray(prefix_tokens, float)
    d = float(hidden_size)
    return np.asarray(compute_flops_per_s, float) * kv_bytes_per_token_per_layer / (a * n * d + b * d * d)


def break_even_tokens(kv_bytes_per_token, load_bandwidth_bytes_per_s, load_latency_s,
                      recompute_s_of_tokens, upper: int = 10_000_000) -> int:
    """Shortest prefix length n (scalar) from which loading beats recomputing; -1 if none ≤ ``upper``.

    Loading costs ``latency + n × kv_bytes_per_token / bandwidth`` (linear in n); recompute is
    super-linear (attention ∝ n²), so once loading wins it keeps winning. Found by bisection on
    ``recompute_s_of_tokens(n) − load(n)``, which is non-decreasing for n past the crossing.
    """

    def gain(n: int) -> float:
        load = load_latency_s + n * kv_bytes_per_token / load_bandwidth_bytes_per_s
        return float(recompute_s_of_tokens(n)) - load

    if gain(upper) <= 0:
        return -1
    lo, hi = 1, upper
    if gain(lo) > 0:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if gain(mid) > 0:
            hi = mid
        else:
            lo = mid
    return hi

"""Mixture-of-experts traffic: how many distinct experts a batch of tokens touches.

A decode step of B tokens through one MoE layer with E routed experts, each token choosing k
of them, reads the weights of every expert at least one token chose. With routing taken as
uniform and independent across tokens (no load-balancing skew), an expert is missed by one
token with probability ``1 − k/E`` and by all B tokens with probability ``(1 − k/E)^B``, so the
expected number of distinct experts read per layer is

    touched(B) = E × (1 − (1 − k/E)^B)

which is ``k`` at B = 1 and tends to ``E`` as B grows (Mixtral-8x7B, k/E = 2/8: 2.0 at B = 1,
5.47 at B = 4, 7.92 at B = 16, 8 − 8 × 0.75^64 ≈ 8.0 at B = 64).

With expert parallelism over ``ep`` ranks each rank holds E/ep experts and the tokens of the
whole instance are routed to them, so one rank reads ``(E/ep) × (1 − (1 − k/E)^B)`` experts:
the same fraction of its own experts.

Peers get this wrong in both directions (PEERS.md): GenZ reads ``k`` experts at any batch,
llm-analysis reads all ``E / ep``. Real routers are skewed, which lowers the touched count at
mid-size batches (hot experts absorb more tokens); the uniform form is an upper bound at a
given B for that reason, and exact for the uniform router.
"""

from __future__ import annotations

import numpy as np


def experts_touched(num_experts, experts_per_token, tokens, ep=1):
    """Expected distinct routed experts one rank reads in one layer for ``tokens`` routed tokens.

    ``(E / ep) × (1 − (1 − k/E)^tokens)``; broadcasts over every argument. ``tokens`` may be
    fractional (an expectation); zero tokens touch zero experts.
    """
    e = np.asarray(num_experts, dtype=np.float64)
    k = np.asarray(experts_per_token, dtype=np.float64)
    n = np.asarray(tokens, dtype=np.float64)
    return e / np.asarray(ep, dtype=np.float64) * (1.0 - (1.0 - k / e) ** n)

"""Tier math: load versus recompute, LRU hit rate per tier, spilled decode KV and its TPOT cost.

All quantities are per GPU unless named otherwise: a tensor-parallel instance of ``tp`` GPUs
holds ``kv_bytes_per_token_per_gpu`` bytes of every token on each GPU, and every GPU moves its
own shard over its own path, so tier bandwidths are per accelerator (the system-card
convention) and a load of ``n`` tokens takes

    load_s(n) = latency + n × kv_bytes_per_token_per_gpu / read_bytes_per_s        (0 when n = 0)

Recomputing a cached prefix. A prompt of ``S`` tokens whose first ``a`` tokens' KV is already
in HBM prefills only positions ``a+1 … S`` (a "suffix"): FLOPs ``2 × params × (S − a)`` plus
causal attention ``Σ_{i=a+1..S} i`` keys per layer, KV read = the prefix's KV once. What a
cache hit of ``a`` tokens saves is ``suffix(0, S) − suffix(a, S)``; ``suffix(0, S)`` is the whole
prefill. Both come from the roofline (:func:`kvplan.calc.roofline.forward_pass`), so the
efficiencies, the TP all-reduces and the step overhead are the latency model's.

Tier hit rates from the LRU curve (exclusive hierarchy: the hottest ``C_1`` blocks in tier 1,
the next ``C_2`` in tier 2, …; a hit moves its block to the top and evicted blocks are demoted
one tier down, so the tiers together behave as one LRU stack of ``C_1 + C_2 + …`` blocks)::

    H_t = curve(C_1 + … + C_t)        hit_t = H_t − H_{t−1}

Demotion traffic: every access whose block is not in tiers 1..t−1 pushes one block across the
boundary into tier t, so blocks are written into tier t at ``block accesses/s × (1 − B_{t−1})``
with ``B`` the plain (non-prefix) LRU block-hit curve at the cumulative capacity above it.

Decode KV that does not fit in HBM is read from the next tiers on every step (greedy, in tier
order), adding ``Σ_t spilled_t / read_t + latency_t`` to the step: the hot path belongs in HBM.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kvplan.calc.roofline import Machine, ModelCost, forward_pass


def load_s(tokens, kv_bytes_per_token_per_gpu: float, read_bytes_per_s: float, latency_s: float = 0.0):
    """Seconds to load ``tokens`` tokens of KV from a tier: latency + bytes / bandwidth (0 for 0 tokens)."""
    n = np.asarray(tokens, dtype=np.float64)
    return np.where(n > 0, latency_s + n * kv_bytes_per_token_per_gpu / read_bytes_per_s, 0.0)


def suffix_prefill_s(cost: ModelCost, machine: Machine, cached_tokens, prompt_tokens, *, tp: int = 1,
                     overlap_comm: bool = False, dp: int = 1, pass_fn=None):
    """Prefill of positions ``a+1 … S`` of one prompt whose first ``a`` tokens' KV is already in HBM.

    ``a = 0`` is the whole prefill (equal to :func:`kvplan.calc.roofline.prefill` at batch 1).
    ``a`` is clipped to ``S − 1``: an engine always computes the last prompt token (its logits).

    ``dp > 1``: an instance of ``dp`` attention data-parallel ranks (tp GPUs each), every rank
    running one such prompt at once (a loaded prefill pool), the MoE layers expert-parallel over
    the instance (:func:`kvplan.calc.roofline.forward_pass` with ``ep = dp``): the pass carries
    ``dp × (S − a)`` tokens, per-GPU KV is one rank's, and the time is that of each rank's prompt.
    ``pass_fn`` replaces ``forward_pass`` (the per-operator model, :mod:`kvplan.calc.operators`:
    prefill attention efficiency at the prompt length S).
    """
    s = np.asarray(prompt_tokens, dtype=np.float64)
    a = np.clip(np.asarray(cached_tokens, dtype=np.float64), 0.0, np.maximum(s - 1, 0.0))
    a, s = np.broadcast_arrays(a, s)
    new = s - a
    kv = new * cost.kv_token_bytes(tp) + cost.kv_sequence_bytes(a, tp) * (a > 0)
    attention = cost.prefill_attention_flops(a, s)
    return (pass_fn or forward_pass)(cost, machine, tokens=dp * new, kv_bytes=kv, attention_flops=dp * attention,
                                     lm_head_rows=dp * np.ones_like(s), tp=tp, ep=dp, overlap_comm=overlap_comm,
                                     batch=dp * np.ones_like(s), context=s, phase="prefill").time_s


def recompute_s(cost: ModelCost, machine: Machine, tokens, *, tp: int = 1, overlap_comm: bool = False, pass_fn=None):
    """Prefill of ``tokens`` tokens from nothing: what loading them from a tier competes with."""
    return suffix_prefill_s(cost, machine, 0.0, tokens, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn)


def context_recompute_s(cost: ModelCost, machine: Machine, tokens, *, tp: int = 1, overlap_comm: bool = False,
                        pass_fn=None):
    """What caching a whole context of ``n`` tokens saves: ``suffix(0, n) − suffix(n − 1, n)``.

    The pass for the last token runs either way (its logits are needed), so below the roofline
    ridge (a memory-bound pass that reads the weights anyway) recomputing costs almost nothing
    extra, and loading only pays once the prefill turns compute-bound. This is the recompute
    side of the per-tier break-even.
    """
    n = np.asarray(tokens, dtype=np.float64)
    whole = suffix_prefill_s(cost, machine, 0.0, n, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn)
    last = suffix_prefill_s(cost, machine, n - 1, n, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn)
    return whole - last


def recompute_saved_s(cost: ModelCost, machine: Machine, cached_from, cached_to, prompt_tokens, *, tp: int = 1,
                      overlap_comm: bool = False, pass_fn=None):
    """Prefill time saved by tokens ``cached_from … cached_to`` of the prefix being cached:
    ``suffix(from, S) − suffix(to, S)``."""
    before = suffix_prefill_s(cost, machine, cached_from, prompt_tokens, tp=tp, overlap_comm=overlap_comm,
                              pass_fn=pass_fn)
    after = suffix_prefill_s(cost, machine, cached_to, prompt_tokens, tp=tp, overlap_comm=overlap_comm,
                             pass_fn=pass_fn)
    return before - after


def cumulative_capacities(capacities: Sequence[float]) -> np.ndarray:
    """``C_1, C_1 + C_2, …``: the LRU stack depth each tier ends at."""
    return np.cumsum(np.asarray(capacities, dtype=np.float64))


def tier_hit_rates(cumulative_hit: Sequence[float]) -> np.ndarray:
    """Per-tier hit rates from the cumulative curve values: ``H_t − H_{t−1}`` (H_0 = 0)."""
    h = np.asarray(cumulative_hit, dtype=np.float64)
    return np.diff(np.concatenate(([0.0], h)))


def demotion_blocks_per_s(block_access_rate_per_s: float, block_hit_above) -> np.ndarray:
    """Blocks written into each tier per second: ``accesses/s × (1 − B_{t−1})`` (B_0 = 0 for the top tier)."""
    above = np.asarray(block_hit_above, dtype=np.float64)
    return block_access_rate_per_s * (1.0 - above)


def spill(active_bytes, hbm_bytes: float, tier_bytes: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Place ``active_bytes`` of decode KV: HBM first, the rest greedily into the tiers in order.

    Returns (bytes in each tier, bytes that fit nowhere); broadcasts over ``active_bytes`` (the
    tier axis is the last one).
    """
    active = np.asarray(active_bytes, dtype=np.float64)
    left = np.maximum(active - hbm_bytes, 0.0)
    placed = []
    for capacity in tier_bytes:
        take = np.minimum(left, capacity)
        placed.append(take)
        left = left - take
    if not placed:
        return np.zeros((*active.shape, 0)), left
    return np.stack(placed, axis=-1), left


def decode_penalty_s(spilled_bytes, read_bytes_per_s: Sequence[float], latency_s: Sequence[float]):
    """Extra time per decode step to read spilled KV: ``Σ_t spilled_t / read_t + latency_t`` (tiers read)."""
    spilled = np.asarray(spilled_bytes, dtype=np.float64)
    if spilled.shape[-1] == 0:
        return np.zeros(spilled.shape[:-1])
    bandwidth = np.asarray(read_bytes_per_s, dtype=np.float64)
    latency = np.asarray(latency_s, dtype=np.float64)
    return (spilled / bandwidth + np.where(spilled > 0, latency, 0.0)).sum(axis=-1)


def littles_law_tokens(rate_per_s: float, time_s: float, tokens: float) -> float:
    """Tokens held on average: ``rate × time until reuse × tokens per item`` (Little's law, L = λW)."""
    return float(rate_per_s) * float(time_s) * float(tokens)

"""Prefix hits of every request once a policy has assigned requests to instances.

Each instance is one LRU prefix cache of ``C = floor(cache_tokens / block_tokens)`` blocks that sees
only its own requests, in timestamp order, so its hits are exactly ``kvplan workload``'s on that
sub-trace: stack distances over the instance's block accesses (:func:`kvplan.workload.reuse.stack_distances`),
their running maximum inside each request (:func:`kvplan.workload.reuse.request_running_max`), and a
block is a prefix hit iff that maximum is below ``C``. With N = 1 this is ``lru_hit_rate`` itself.

Tokens: a request whose first ``h`` blocks hit finds ``min(h × block_tokens, ISL)`` prompt tokens in the
cache (Mooncake's last block may be partial); its prefill skips ``min(h × block_tokens, ISL − 1)`` of them,
since an engine always computes the last prompt token to get its logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.workload.reuse import request_running_max, stack_distances
from kvplan.workload.traces import Trace


@dataclass(frozen=True, eq=False)
class Hits:
    """Per request: instance, prefix-hit blocks, prompt blocks; per instance: requests, blocks, hit blocks."""

    instance: np.ndarray
    hit_blocks: np.ndarray
    blocks: np.ndarray
    instance_requests: np.ndarray
    instance_blocks: np.ndarray
    instance_hit_blocks: np.ndarray

    def cached_tokens(self, isl: np.ndarray, block_tokens: int) -> np.ndarray:
        """Prompt tokens found in the cache: ``min(hit blocks × block_tokens, ISL)``."""
        return np.minimum(self.hit_blocks * block_tokens, isl)

    def skipped_tokens(self, isl: np.ndarray, block_tokens: int) -> np.ndarray:
        """Prompt tokens the prefill does not compute: ``min(hit blocks × block_tokens, ISL − 1)``, >= 0."""
        return np.maximum(np.minimum(self.hit_blocks * block_tokens, isl - 1), 0)


def _rows_of(offsets: np.ndarray, requests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR offsets of the chosen requests and the positions of their blocks in the full id array."""
    lengths = np.diff(offsets)[requests]
    sub = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    gather = np.repeat(offsets[:-1][requests] - sub[:-1], lengths) + np.arange(sub[-1], dtype=np.int64)
    return sub, gather


def instance_hits(trace: Trace, instance: np.ndarray, n: int, capacity_blocks: int) -> Hits:
    """Exact per-instance LRU prefix hits for an assignment (module docstring)."""
    offsets = trace.block_offsets
    blocks = np.diff(offsets)
    hit_block = np.zeros(trace.block_ids.size, dtype=bool)
    for k in range(n):
        requests = np.flatnonzero(instance == k)
        if requests.size == 0:
            continue
        sub, gather = _rows_of(offsets, requests)
        ids = trace.block_ids[gather]
        prefix = request_running_max(stack_distances(ids), sub)
        hit_block[gather] = prefix < min(int(capacity_blocks), ids.size)
    request = np.repeat(np.arange(trace.requests), blocks)
    hit_blocks = np.bincount(request, weights=hit_block, minlength=trace.requests).astype(np.int64)
    return Hits(instance, hit_blocks, blocks,
                np.bincount(instance, minlength=n), np.bincount(instance, weights=blocks, minlength=n).astype(np.int64),
                np.bincount(instance, weights=hit_blocks, minlength=n).astype(np.int64))


def no_hits(trace: Trace, instance: np.ndarray, n: int) -> Hits:
    """A trace without hash_ids: loads only, no cache figures."""
    zeros = np.zeros(trace.requests, dtype=np.int64)
    return Hits(instance, zeros, zeros, np.bincount(instance, minlength=n), np.zeros(n, np.int64), np.zeros(n, np.int64))

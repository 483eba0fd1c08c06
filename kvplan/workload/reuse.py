"""Prefix-cache reuse from block traces: LRU hit rate versus cache capacity.

The access sequence: requests in timestamp order (ties in file order), each request's prompt
blocks (``hash_ids``, ``block_tokens`` = 512 tokens each in Mooncake) in prompt order. The cache
holds ``C`` blocks (``C = floor(cache_tokens / block_tokens)``) under LRU, and **every** block a
request touches becomes the most recently used, hit or miss (a missed block is recomputed by the
prefill and then cached), so how the cache evolves does not depend on ``C``.

Two hit definitions, both in blocks:

- **block hit** (plain LRU): an access hits when its block is in the cache.
- **prefix hit** (the default, ``lru_hit_rate``): an access hits only when its block *and every
  earlier block of the same request* are in the cache. vLLM's automatic prefix caching and
  SGLang's radix cache reuse only a contiguous prompt prefix; the lookup stops at the first miss.

Stack distance (Mattson et al., 1970): for an access to block ``b`` at position ``t`` whose previous
access is at ``p``, ``D_t`` = number of distinct blocks touched in ``(p, t)``; ``D_t = ∞`` for a first
touch. Under LRU with ``C`` blocks the access is a block hit iff ``D_t < C``, so one pass gives the
whole curve: ``block_hit_rate(C) = #{t : D_t < C} / N``.

Because the update sequence is the same for every ``C``, LRU's inclusion property holds (the cache
of ``C`` blocks is a subset of the cache of ``C + 1`` at every instant), and block ``k`` of a request
is a prefix hit iff ``max(D_0, …, D_k) < C`` over that request's blocks. The prefix curve is therefore
exact from the same distances: ``prefix_hit_rate(C) = #{t : M_t < C} / N`` with ``M`` the running
maximum of ``D`` inside each request. ``simulate_lru`` replays an ``OrderedDict`` LRU per capacity and
is the reference the tests compare against.

``D`` is computed without a per-access Python loop: ``D_t = (t − p − 1) − Q_t`` where ``Q_t`` counts
the reuse intervals ``(j, next(j))`` nested strictly inside ``(p, t)``, i.e. positions ``j`` in
``(p, t)`` whose block is touched again before ``t``. Ordering the reuse intervals by start, ``Q`` is
"how many later intervals end earlier", counted by a bottom-up merge sort whose ``log2 M`` levels
are each a handful of vectorised numpy calls (``M`` reuses; ``O(M log² M)`` worst case from the
per-level ``searchsorted``, ``O(M log M)`` sorting since timsort merges the sorted runs). This plays
the role of the usual Fenwick tree over last-access times without a per-access Python loop.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kvplan.errors import InputError
from kvplan.workload.traces import Trace


@dataclass(frozen=True, eq=False)
class ReuseProfile:
    """Stack distances of every block access of a trace, and the curves they give.

    ``distance`` and ``prefix_distance`` use ``accesses`` (larger than any capacity that matters)
    for a first touch; ``prefix_distance`` is the running maximum of ``distance`` in each request.
    """

    distance: np.ndarray
    prefix_distance: np.ndarray
    unique_blocks: int
    block_tokens: int

    @property
    def accesses(self) -> int:
        return int(self.distance.size)

    def block_hit_rate(self, capacity_blocks) -> np.ndarray:
        """Share of accesses that hit an LRU cache of ``capacity_blocks`` (any block, no prefix rule)."""
        return _share_below(self.distance, capacity_blocks)

    def prefix_hit_rate(self, capacity_blocks) -> np.ndarray:
        """Share of accesses that hit with every earlier block of their request (prefix semantics)."""
        return _share_below(self.prefix_distance, capacity_blocks)

    def curve(self, *, prefix: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The whole step curve: capacities (blocks) where the hit rate changes, and the rate from there on.

        ``rate[k]`` holds for ``capacity[k] <= C < capacity[k + 1]``; below ``capacity[0]`` it is 0.
        """
        d = self.prefix_distance if prefix else self.distance
        steps, counts = np.unique(d[d < self.accesses], return_counts=True)
        total = max(self.accesses, 1)
        return steps + 1, np.cumsum(counts) / total


def _share_below(distance: np.ndarray, capacity_blocks) -> np.ndarray:
    capacity = np.asarray(capacity_blocks, dtype=np.int64)
    if distance.size == 0:
        return np.zeros(capacity.shape)
    capacity = np.minimum(capacity, distance.size)  # first touches carry distance = accesses: never hits
    ordered = np.sort(distance)
    return np.searchsorted(ordered, capacity, side="left") / distance.size


def capacity_blocks(cache_tokens, block_tokens: int = 512) -> np.ndarray:
    """Whole blocks a cache of ``cache_tokens`` holds: ``floor(cache_tokens / block_tokens)``."""
    return np.asarray(cache_tokens, dtype=np.int64) // int(block_tokens)


def stack_distances(ids: np.ndarray) -> np.ndarray:
    """LRU stack distance of each access in ``ids``: distinct other ids since its previous access.

    First accesses get ``len(ids)``. ``D_t = (t − p − 1) − #{j : p < j, next(j) < t}``.
    """
    ids = np.asarray(ids, dtype=np.int64)
    n = ids.size
    distance = np.full(n, n, dtype=np.int64)
    if n < 2:
        return distance
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    starts, ends = order[:-1][same], order[1:][same]  # reuse intervals (p, t), one per repeat access
    by_start = np.argsort(starts, kind="stable")
    starts, ends = starts[by_start], ends[by_start]
    nested = later_and_smaller(ends)
    distance[ends] = (ends - starts - 1) - nested
    return distance


def later_and_smaller(values: np.ndarray) -> np.ndarray:
    """For each ``i``: ``#{k > i : values[k] < values[i]}`` (distinct values), by vectorised merge sort.

    Values are replaced by their ranks (a permutation of ``0..n−1``). At the level with runs of
    width ``w`` (each run sorted), an element of an even run counts the smaller elements of the
    next run with one ``searchsorted`` on the globally sorted keys ``run × n + rank``; then pairs of
    runs merge by sorting ``(run // 2) × n + rank`` (timsort merges two sorted runs in linear time).
    Ranks identify elements, so counts accumulate by rank and no permutation is tracked.
    """
    n = values.size
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    ranks = np.empty(n, dtype=np.int64)
    ranks[np.argsort(values, kind="stable")] = np.arange(n)
    counts_by_rank = np.zeros(n, dtype=np.int64)
    slot = np.arange(n)
    vals = ranks.copy()  # vals[s]: rank held in slot s; sorted within each run
    shift = 0
    while (1 << shift) < n:
        run = slot >> shift
        keys = run * n + vals
        left = (run & 1) == 0
        following = run[left] + 1
        found = np.searchsorted(keys, following * n + vals[left], side="left")
        counts_by_rank[vals[left]] += found - np.minimum(following << shift, n)
        keys -= (run - (run >> 1)) * n  # → (run // 2) × n + rank
        keys.sort(kind="stable")
        vals = keys - (slot >> (shift + 1)) * n
        shift += 1
    return counts_by_rank[ranks]


def reuse_profile(trace: Trace) -> ReuseProfile:
    """Stack distances (block and prefix) of a trace with ``hash_ids``."""
    if not trace.has_blocks:
        raise InputError(f"trace '{trace.source}' has no hash_ids, so block reuse cannot be computed",
                         "use a Mooncake-style trace whose rows carry hash_ids")
    ids, offsets = trace.block_ids, trace.block_offsets
    distance = stack_distances(ids)
    first_touches = int(np.count_nonzero(distance == distance.size))
    return ReuseProfile(distance, request_running_max(distance, offsets), first_touches, trace.block_tokens)


def request_running_max(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` restarted at each request (CSR ``offsets``), vectorised.

    Shifting request ``r`` by ``r × (max + 1)`` makes one global ``maximum.accumulate`` segment-wise.
    """
    if values.size == 0:
        return values.copy()
    request = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    shift = request * (int(values.max()) + 1)
    return np.maximum.accumulate(values + shift) - shift


def unlimited_hit_rates(trace: Trace) -> tuple[float, float, int]:
    """(prefix, block) hit rates with an unbounded cache, and the number of distinct blocks.

    Block: a block hits when it was seen before. Prefix: it counts only when it and all earlier
    blocks of its request were seen before.
    """
    ids, offsets = trace.block_ids, trace.block_offsets
    if ids is None or ids.size == 0:
        return 0.0, 0.0, 0
    order = np.argsort(ids, kind="stable")
    repeat = np.concatenate(([False], ids[order[1:]] == ids[order[:-1]]))
    seen = np.empty(ids.size, dtype=np.int64)
    seen[order] = repeat
    prefix_seen = 1 - request_running_max(1 - seen, offsets)  # 0 from the first unseen block on
    return float(prefix_seen.mean()), float(seen.mean()), int(ids.size - np.count_nonzero(repeat))


def simulate_lru(trace: Trace, capacity: int) -> tuple[float, float]:
    """Reference replay with an ``OrderedDict`` LRU of ``capacity`` blocks: (prefix, block) hit rates.

    O(N) per capacity; the stack-distance curve must agree with it exactly.
    """
    cache: OrderedDict[int, None] = OrderedDict()
    prefix_hits = block_hits = total = 0
    offsets, ids = trace.block_offsets, trace.block_ids.tolist()
    for r in range(offsets.size - 1):
        in_prefix = True
        for block in ids[offsets[r]:offsets[r + 1]]:
            total += 1
            if block in cache:
                block_hits += 1
                prefix_hits += in_prefix
                cache.move_to_end(block)
            else:
                in_prefix = False
                if capacity > 0:
                    cache[block] = None
                    if len(cache) > capacity:
                        cache.popitem(last=False)
    return (prefix_hits / total, block_hits / total) if total else (0.0, 0.0)

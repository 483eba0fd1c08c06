"""Routing policies: which of N instances serves each request of a trace.

Requests are taken in timestamp order, ties in file order (the order of :class:`kvplan.workload.traces.Trace`).
A request is *in flight* on its instance from its arrival until ``arrival + time_in_system_s`` (the
fleet model's service time, :mod:`kvplan.plans.route.service`); a request finishing exactly when
another arrives no longer counts. Load = requests in flight.

- ``round-robin``: request i goes to instance ``i mod N``.
- ``random``: uniform and independent, ``numpy.random.default_rng(seed).integers(0, N)``.
- ``least-loaded``: fewest requests in flight; ties to the lowest index (SGLang's shortest-queue pick,
  ``min_by_key``, keeps the first minimum).
- ``prefix-aware``: SGLang's cache-aware router (sgl-router ``policies/cache_aware.rs``). The system is
  *imbalanced* when ``max_load − min_load > balance_abs_threshold`` **and**
  ``max_load > balance_rel_threshold × min_load``; then the request goes to the least-loaded instance.
  Otherwise the instance whose cache holds the longest prefix of the request is chosen when the match
  rate (matched tokens / prompt tokens) exceeds ``cache_threshold``, else the instance holding the
  fewest cached blocks (SGLang: "the smallest tree", most cache room). Ties: fewest in flight, then the
  lowest index. SGLang's defaults (``router_args.py``): cache_threshold 0.3, balance_abs_threshold 64,
  balance_rel_threshold 1.5. SGLang matches against an approximate radix tree of the text it routed;
  kvplan matches against each instance's exact LRU cache state (what KV-event routers such as Dynamo's see).
- ``consistent-hash``: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
  "Consistent Hashing with Bounded Loads", SODA 2018). The key is a hash of the request's first K blocks;
  each instance sits on the ring at ``virtual_nodes`` points (160, as sgl-router's ``ConsistentHash``
  default); walking clockwise from the key, the request goes to the first instance whose load is below
  ``ceil(c × (in flight + 1) / N)`` with ``c = hash_balance_factor`` (1.25: Vimeo's and brpc's default).

``prefix-aware`` needs the caches' state at every decision, so it replays an exact LRU per instance
(:func:`prefix_aware`); the other policies decide from loads alone and their hits are computed
afterwards from the assignment (:mod:`kvplan.plans.route.replay`).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict

import numpy as np

from kvplan.workload.traces import Trace

POLICIES = ("round-robin", "random", "least-loaded", "prefix-aware", "consistent-hash")
PREFIX_POLICIES = ("prefix-aware", "consistent-hash")  # need hash_ids to decide
LOAD_POLICIES = ("least-loaded", "prefix-aware", "consistent-hash")  # need service times to count loads
SGLANG_CACHE_THRESHOLD = 0.3
SGLANG_BALANCE_ABS_THRESHOLD = 64
SGLANG_BALANCE_REL_THRESHOLD = 1.5
RING_VIRTUAL_NODES = 160
HASH_BALANCE_FACTOR = 1.25
HASH_BLOCKS = 4
_MASK64 = (1 << 64) - 1


def round_robin(requests: int, n: int) -> np.ndarray:
    return np.arange(requests, dtype=np.int64) % n


def random_assignment(requests: int, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=requests, dtype=np.int64)


def least_loaded(arrival_s: np.ndarray, done_s: np.ndarray, n: int) -> np.ndarray:
    """Fewest requests in flight at each arrival; ties to the lowest index."""
    load = [0] * n
    heap: list[tuple[float, int]] = []
    out = np.empty(arrival_s.size, dtype=np.int64)
    for i, (t, done) in enumerate(zip(arrival_s.tolist(), done_s.tolist())):
        while heap and heap[0][0] <= t:
            load[heapq.heappop(heap)[1]] -= 1
        k = load.index(min(load))
        load[k] += 1
        heapq.heappush(heap, (done, k))
        out[i] = k
    return out


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea, Flood, OOPSLA 2014): a fixed, well-mixed 64-bit hash."""
    z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def prefix_keys(trace: Trace, blocks: int) -> np.ndarray:
    """Per request, a hash of its first ``blocks`` block ids (fewer when the prompt is shorter)."""
    offsets, ids = trace.block_offsets, trace.block_ids
    lengths = np.diff(offsets)
    key = np.zeros(trace.requests, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(blocks):
            has = lengths > j
            block = np.zeros(trace.requests, dtype=np.uint64)
            block[has] = ids[offsets[:-1][has] + j].astype(np.uint64)
            key = np.where(has, splitmix64(key ^ splitmix64(block + np.uint64(j))), key)
    return key


def consistent_hash(trace: Trace, done_s: np.ndarray, n: int, *, blocks: int = HASH_BLOCKS,
                    balance_factor: float = HASH_BALANCE_FACTOR, virtual_nodes: int = RING_VIRTUAL_NODES) -> np.ndarray:
    """Bounded-load consistent hashing on the first ``blocks`` blocks (module docstring)."""
    with np.errstate(over="ignore"):
        points = splitmix64(np.arange(n * virtual_nodes, dtype=np.uint64) + np.uint64(1 << 40))
    order = np.argsort(points, kind="stable")
    ring_points, ring_owner = points[order], (order // virtual_nodes).astype(np.int64)
    start = np.searchsorted(ring_points, prefix_keys(trace, blocks), side="left") % ring_points.size
    owners = ring_owner.tolist()
    size = len(owners)
    load = [0] * n
    in_flight = 0
    heap: list[tuple[float, int]] = []
    out = np.empty(trace.requests, dtype=np.int64)
    for i, (t, done, s) in enumerate(zip(trace.arrival_s.tolist(), done_s.tolist(), start.tolist())):
        while heap and heap[0][0] <= t:
            load[heapq.heappop(heap)[1]] -= 1
            in_flight -= 1
        cap = math.ceil(balance_factor * (in_flight + 1) / n)
        k = owners[s]
        while load[k] >= cap:  # some instance is below the mean (+1), so the walk ends
            s = s + 1 if s + 1 < size else 0
            k = owners[s]
        load[k] += 1
        in_flight += 1
        heapq.heappush(heap, (done, k))
        out[i] = k
    return out


def prefix_aware(trace: Trace, done_s: np.ndarray, n: int, capacity_blocks: int, *,
                 cache_threshold: float = SGLANG_CACHE_THRESHOLD,
                 balance_abs_threshold: float = SGLANG_BALANCE_ABS_THRESHOLD,
                 balance_rel_threshold: float = SGLANG_BALANCE_REL_THRESHOLD
                 ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """SGLang's cache-aware routing over exact per-instance LRU caches of ``capacity_blocks`` blocks.

    Returns (instance per request, prefix-hit blocks counted by the replay itself, holder prefix in blocks
    per request: the longest prefix any instance held at arrival, and the holder's load minus the chosen
    instance's load at that moment; the holder is the least-loaded instance with that prefix). The LRU update is
    :func:`kvplan.workload.reuse.simulate_lru`'s: every touched block becomes most recent, a missed block is
    inserted (when the capacity is > 0), a block hits only while every earlier block of the request did.
    ``holders[b]`` is a bit mask of the instances caching block ``b``, so the longest cached prefix on every
    instance comes from one walk over the request's blocks.
    """
    caches = [OrderedDict() for _ in range(n)]
    holders: dict[int, int] = {}
    load = [0] * n
    heap: list[tuple[float, int]] = []
    everyone = (1 << n) - 1
    out = np.empty(trace.requests, dtype=np.int64)
    holder_depth = np.zeros(trace.requests, dtype=np.int64)
    holder_extra = np.zeros(trace.requests, dtype=np.int64)
    offsets = trace.block_offsets.tolist()
    ids = trace.block_ids.tolist()
    isl = trace.isl.tolist()
    bt = trace.block_tokens
    hits = 0
    for r, (t, done) in enumerate(zip(trace.arrival_s.tolist(), done_s.tolist())):
        while heap and heap[0][0] <= t:
            load[heapq.heappop(heap)[1]] -= 1
        blocks = ids[offsets[r]:offsets[r + 1]]
        mask, depth = everyone, 0
        for b in blocks:
            m = mask & holders.get(b, 0)
            if not m:
                break
            mask, depth = m, depth + 1
        holder_depth[r] = depth
        holder = min((load[j], j) for j in _bits(mask))[1] if depth else -1
        top, bottom = max(load), min(load)
        if top - bottom > balance_abs_threshold and top > balance_rel_threshold * bottom:
            k = load.index(bottom)
        elif depth and min(depth * bt, isl[r]) > cache_threshold * isl[r]:
            k = holder
        else:
            k = min((len(caches[j]), load[j], j) for j in range(n))[2]
        out[r] = k
        holder_extra[r] = load[holder] - load[k] if depth else 0
        load[k] += 1
        heapq.heappush(heap, (done, k))
        cache, bit = caches[k], 1 << k
        in_prefix = True
        for b in blocks:
            if b in cache:
                hits += in_prefix
                cache.move_to_end(b)
            else:
                in_prefix = False
                if capacity_blocks > 0:
                    cache[b] = None
                    holders[b] = holders.get(b, 0) | bit
                    if len(cache) > capacity_blocks:
                        old = cache.popitem(last=False)[0]
                        left = holders[old] & ~bit
                        if left:
                            holders[old] = left
                        else:
                            del holders[old]
    return out, hits, holder_depth, holder_extra


def _bits(mask: int):
    j = 0
    while mask:
        if mask & 1:
            yield j
        mask >>= 1
        j += 1

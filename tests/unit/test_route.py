"""kvplan route's library: policies worked by hand, exactness against kvplan workload and an independent
OrderedDict replay on the shipped Mooncake trace, bounded loads, and bad input."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.errors import InputError
from kvplan.plans.route import POLICIES, RouterSettings, route
from kvplan.plans.route import policies as pol
from kvplan.plans.route.replay import instance_hits
from kvplan.plans.fleet.workload import lru_rows
from kvplan.workload.traces import make_trace, read_trace

from ..conftest import DATA, TRACES_DIR

TINY = DATA / "traces" / "tiny_mooncake.jsonl"
MOONCAKE = TRACES_DIR / "conversation_trace.jsonl"
THREE_M = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def mooncake():
    return read_trace(MOONCAKE)


@pytest.fixture(scope="module")
def tiny():
    return read_trace(TINY)


def _rows(result, policy=None):
    return [r for r in result.rows if r["kind"] == "route" and (policy is None or r["policy"] == policy)]


def test_round_robin_on_tiny_trace_by_hand(tiny):
    # N = 2: requests 0, 2, 4 on instance 0, 1 and 3 on instance 1 (unbounded cache, 100 blocks).
    # instance 0: [0,1] miss miss; [0,3] 0 hits; [0,1,2,5] 0 and 1 hit → 3 of 8 blocks.
    # instance 1: [0,1,2] all miss; [4,1,2] 4 misses, so 1 and 2 no longer count → 0 of 6.
    row, = _rows(route(tiny, [2], ["round-robin"], cache_tokens=100 * 512))
    assert row["instance_requests"] == [3, 2]
    assert_allclose(row["hit_rate"], 3 / 14)
    assert_allclose(row["instance_hit_rates"], [3 / 8, 0.0])
    assert_allclose(row["token_hit_rate"], (512 + 1024) / 7168)
    assert row["prefill_tokens_saved"] == 512 + 1024
    assert_allclose(row["load_imbalance"], 3 / 2.5)


def test_prefix_aware_on_tiny_trace_by_hand(tiny):
    # every request in flight 5 s; SGLang thresholds (abs 64: never imbalanced here).
    # r0 → 0 (all empty); r1 [0,1,2]: inst 0 holds 2 blocks, 1024/1536 > 0.3 → 0; r2 [0,3]: 512/1024 → 0;
    # r3 [4,1,2]: no prefix anywhere → fewest cached blocks → 1; r4 [0,1,2,5]: 3 blocks on 0 → 0.
    done = tiny.arrival_s + 5.0
    instance, hits, depth, _ = pol.prefix_aware(tiny, done, 2, 100)
    assert instance.tolist() == [0, 0, 0, 1, 0]
    assert depth.tolist() == [0, 2, 1, 0, 3]
    assert hits == 2 + 1 + 3
    row, = _rows(route(tiny, [2], ["prefix-aware"], cache_tokens=100 * 512, service_time_s=5.0))
    assert_allclose(row["hit_rate"], 6 / 14)
    assert_allclose(row["load_imbalance"], 4 / 2.5)


def test_prefix_aware_balances_when_sglang_says_imbalanced(tiny):
    # abs threshold 0, rel 1.5: at r1 the loads are [1, 0]: 1 − 0 > 0 and 1 > 1.5 × 0 → least-loaded (1)
    done = tiny.arrival_s + 5.0
    instance, *_ = pol.prefix_aware(tiny, done, 2, 100, balance_abs_threshold=0, balance_rel_threshold=1.5)
    assert instance[1] == 1


def test_least_loaded_on_tiny_trace_by_hand(tiny):
    # 5 s in flight: t=0 → 0; t=1 → 1; t=3 loads [1,1] → 0; t=6 r0, r1 done (≤ 6) → [1,0] → 1; t=10 → [0,1] → 0
    assert pol.least_loaded(tiny.arrival_s, tiny.arrival_s + 5.0, 2).tolist() == [0, 1, 0, 1, 0]


def test_round_robin_ties_in_file_order():
    trace = make_trace([0, 0, 0, 1], [512] * 4, [1] * 4, [[1], [2], [3], [4]])
    assert pol.round_robin(trace.requests, 3).tolist() == [0, 1, 2, 0]


def test_random_is_seeded():
    a = pol.random_assignment(1000, 8, 7)
    assert a.tolist() == pol.random_assignment(1000, 8, 7).tolist()
    assert a.tolist() != pol.random_assignment(1000, 8, 8).tolist()
    assert set(a.tolist()) == set(range(8))


def test_n1_every_policy_equals_workload_lru_hit_rate(mooncake):
    expected = lru_rows(mooncake, [THREE_M])[0]["lru_hit_rate"]
    rows = _rows(route(mooncake, [1], POLICIES, cache_tokens=THREE_M, service_time_s=20.0))
    assert [r["policy"] for r in rows] == list(POLICIES)
    for row in rows:
        assert row["hit_rate"] == pytest.approx(expected, abs=1e-15), row["policy"]


def _ordered_dict_replay(trace, instance, n, capacity):
    """Independent reference: one OrderedDict LRU per instance, requests in trace order."""
    caches = [OrderedDict() for _ in range(n)]
    hits = 0
    for r in range(trace.requests):
        cache, in_prefix = caches[int(instance[r])], True
        for block in trace.blocks(r).tolist():
            if block in cache:
                hits += in_prefix
                cache.move_to_end(block)
            else:
                in_prefix = False
                cache[block] = None
                if len(cache) > capacity:
                    cache.popitem(last=False)
    return hits


@pytest.mark.parametrize("n", [4, 16])
def test_round_robin_equals_ordered_dict_replay(mooncake, n):
    capacity = THREE_M // 512
    row, = _rows(route(mooncake, [n], ["round-robin"], cache_tokens=THREE_M))
    instance = np.arange(mooncake.requests) % n
    assert row["hit_blocks"] == _ordered_dict_replay(mooncake, instance, n, capacity)
    assert row["prompt_blocks"] == mooncake.block_ids.size


def test_prefix_aware_replay_agrees_with_per_instance_stack_distances(mooncake):
    capacity = THREE_M // 512
    instance, hits, _, _ = pol.prefix_aware(mooncake, mooncake.arrival_s + 20.0, 4, capacity)
    assert hits == int(instance_hits(mooncake, instance, 4, capacity).hit_blocks.sum())


def test_prefix_aware_beats_round_robin_at_every_n_on_mooncake(mooncake):
    result = route(mooncake, [2, 4, 8, 16], ["round-robin", "prefix-aware"], cache_tokens=THREE_M,
                   service_time_s=20.0)
    by = {(r["policy"], r["instances"]): r for r in _rows(result)}
    for n in (2, 4, 8, 16):
        assert by["prefix-aware", n]["hit_rate"] > by["round-robin", n]["hit_rate"], n
        assert by["prefix-aware", n]["load_imbalance"] >= 1.0
    # never above what an unlimited cache gives (36.64 % on this trace, kvplan workload)
    assert by["prefix-aware", 16]["hit_rate"] <= 0.3664 + 5e-5


def test_consistent_hash_respects_its_load_bound(mooncake):
    n, factor = 8, 1.25
    done = mooncake.arrival_s + 30.0
    instance = pol.consistent_hash(mooncake, done, n, balance_factor=factor)
    arrival = mooncake.arrival_s
    for r in range(0, mooncake.requests, 97):  # recount loads independently at a sample of decisions
        flying = (arrival[:r] <= arrival[r]) & (done[:r] > arrival[r])
        load = np.bincount(instance[:r][flying], minlength=n)
        assert load[instance[r]] < math.ceil(factor * (flying.sum() + 1) / n)


def test_consistent_hash_keeps_a_conversation_together():
    # same first 4 blocks → same key → same instance while loads allow (one request in flight at a time)
    trace = make_trace([0, 10, 20, 30], [4096] * 4, [1] * 4,
                       [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 4, 7], [9, 9, 9, 9]])
    instance = pol.consistent_hash(trace, trace.arrival_s + 1.0, 8)
    assert instance[0] == instance[1] == instance[2]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=6), min_size=1, max_size=30),
       st.integers(1, 4), st.integers(0, 8))
def test_round_robin_hits_grow_with_cache_and_match_replay(blocks, n, capacity):
    trace = make_trace(np.arange(len(blocks), dtype=float), [512 * len(b) for b in blocks], [1] * len(blocks), blocks)
    instance = pol.round_robin(trace.requests, n)
    small = instance_hits(trace, instance, n, capacity).hit_blocks.sum()
    large = instance_hits(trace, instance, n, capacity + 1).hit_blocks.sum()
    assert small <= large  # LRU inclusion holds per instance: the assignment does not depend on the cache
    if capacity > 0:
        assert small == _ordered_dict_replay(trace, instance, n, capacity)


def test_bad_input(tiny):
    azure = read_trace(DATA / "traces" / "tiny_azure.csv")
    with pytest.raises(InputError, match="no hash_ids") as err:
        route(azure, [2], ["prefix-aware"], service_time_s=5.0)
    assert "Mooncake" in err.value.hint
    with pytest.raises(InputError, match="--instances"):
        route(tiny, [0], ["round-robin"], cache_tokens=1024)
    with pytest.raises(InputError, match="unknown routing policy") as err:
        route(tiny, [2], ["prefix-awre"], cache_tokens=1024)
    assert "did you mean 'prefix-aware'" in err.value.hint
    with pytest.raises(InputError, match="time in system"):
        route(tiny, [2], ["least-loaded"], cache_tokens=1024)
    with pytest.raises(InputError, match="--balance-threshold"):
        route(tiny, [2], ["round-robin"], cache_tokens=1024, router=RouterSettings(balance_rel_threshold=0.5))


def test_trace_without_hash_ids_gives_loads_only():
    azure = read_trace(DATA / "traces" / "tiny_azure.csv")
    row, = _rows(route(azure, [2], ["round-robin"]))
    assert row["hit_rate"] is None and row["load_imbalance"] >= 1.0

"""``kvplan route``: N instances behind a router, each with its own prefix cache — hits, balance, savings.

One row per (policy, N) (``kind: route``):

- ``hit_rate``: prompt blocks served from the instances' caches / prompt blocks, prefix semantics as
  ``kvplan workload`` (a block counts only when it and every earlier block of its request hit on the
  instance the request went to); ``token_hit_rate`` = Σ min(hit blocks × block_tokens, ISL) / Σ ISL.
- ``instance_hit_rates``: the same block share per instance (``None`` for an instance given no request).
- ``load_imbalance`` = max / mean requests per instance (1 = perfectly even).
- ``prefill_tokens_saved`` = Σ min(hit blocks × block_tokens, ISL − 1) (the last token is always computed).
- with a deployment (:mod:`kvplan.plans.route.service`): the per-instance cache is the deployment's KV
  pool, prefill GPU-seconds saved, TTFT p50/p99 at N and the GPUs the fleet needs at the SLOs.

Loads (requests in flight) need each request's time in system: from the deployment's fleet model, or a
fixed ``service_time_s``; policies that read loads are refused without one.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvplan.errors import InputError
from kvplan.plans.route import policies as pol
from kvplan.plans.route.replay import Hits, instance_hits, no_hits
from kvplan.result import Result
from kvplan.workload.reuse import capacity_blocks
from kvplan.workload.traces import Trace

COLUMNS = ["policy", "instances", "hit_rate", "token_hit_rate", "instance_hit_rate_min", "instance_hit_rate_max",
           "load_imbalance", "prefill_tokens_saved"]
MAX_INSTANCES = 1024


@dataclass(frozen=True)
class RouterSettings:
    """Knobs of the policies (defaults: SGLang's router, bounded-load hashing; see policies.py)."""

    seed: int = 0
    cache_threshold: float = pol.SGLANG_CACHE_THRESHOLD
    balance_abs_threshold: float = pol.SGLANG_BALANCE_ABS_THRESHOLD
    balance_rel_threshold: float = pol.SGLANG_BALANCE_REL_THRESHOLD
    hash_blocks: int = pol.HASH_BLOCKS
    hash_balance_factor: float = pol.HASH_BALANCE_FACTOR


def check_policies(names: Sequence[str]) -> list[str]:
    """Known policy names, in the order given (duplicates dropped); an unknown one is an error with a suggestion."""
    out = []
    for name in names:
        key = str(name).strip().lower().replace("_", "-")
        if key not in pol.POLICIES:
            close = difflib.get_close_matches(key, pol.POLICIES, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise InputError(f"unknown routing policy {ascii(str(name))}",
                             f"{hint}choose from: {', '.join(pol.POLICIES)}")
        if key not in out:
            out.append(key)
    if not out:
        raise InputError("no routing policy given", f"choose from: {', '.join(pol.POLICIES)}")
    return out


def check_instances(values: Sequence[int]) -> list[int]:
    out = [int(v) for v in values]
    bad = [v for v in out if not 1 <= v <= MAX_INSTANCES]
    if bad or not out:
        raise InputError(f"--instances must be whole numbers from 1 to {MAX_INSTANCES:,} (got {bad[0] if bad else 'none'})",
                         "write e.g. --instances 1,2,4,8,16")
    return list(dict.fromkeys(out))


def _check_settings(router: RouterSettings) -> None:
    checks = [("--cache-threshold", router.cache_threshold, 0 <= router.cache_threshold <= 1, "in [0, 1]"),
              ("--balance-abs-threshold", router.balance_abs_threshold, router.balance_abs_threshold >= 0, ">= 0"),
              ("--balance-threshold", router.balance_rel_threshold, router.balance_rel_threshold >= 1, ">= 1"),
              ("--hash-blocks", router.hash_blocks, router.hash_blocks >= 1, ">= 1"),
              ("--hash-balance-factor", router.hash_balance_factor, router.hash_balance_factor > 1, "> 1")]
    for flag, value, ok, need in checks:
        if not ok or value != value:
            raise InputError(f"{flag} must be {need} (got {value})", "see 'kvplan route --help'")


def assign(policy: str, trace: Trace, n: int, capacity: int, done_s: np.ndarray | None,
           router: RouterSettings) -> tuple[np.ndarray, np.ndarray | None]:
    """Instance of every request under ``policy`` and, for prefix-aware, the holders' prefix depth."""
    if policy == "round-robin":
        return pol.round_robin(trace.requests, n), None
    if policy == "random":
        return pol.random_assignment(trace.requests, n, router.seed), None
    if policy == "least-loaded":
        return pol.least_loaded(trace.arrival_s, done_s, n), None
    if policy == "consistent-hash":
        return pol.consistent_hash(trace, done_s, n, blocks=router.hash_blocks,
                                   balance_factor=router.hash_balance_factor), None
    instance, _, depth, _ = pol.prefix_aware(trace, done_s, n, capacity, cache_threshold=router.cache_threshold,
                                          balance_abs_threshold=router.balance_abs_threshold,
                                          balance_rel_threshold=router.balance_rel_threshold)
    return instance, depth


def route_row(policy: str, trace: Trace, hits: Hits, n: int, cache_tokens: int | None, capacity: int) -> dict:
    """The figures every (policy, N) row carries, without a deployment."""
    requests = hits.instance_requests
    row = {"kind": "route", "policy": policy, "instances": n, "requests": trace.requests,
           "cache_tokens_per_instance": cache_tokens, "cache_blocks_per_instance": capacity if trace.has_blocks else None,
           "instance_requests": [int(v) for v in requests],
           "load_imbalance": float(requests.max() / requests.mean())}
    if not trace.has_blocks:
        row.update({k: None for k in ("hit_rate", "token_hit_rate", "instance_hit_rates", "instance_hit_rate_min",
                                      "instance_hit_rate_max", "prompt_blocks", "hit_blocks", "prefill_tokens",
                                      "prefill_tokens_saved", "prefill_tokens_saved_fraction")})
        return row
    isl, bt = trace.isl, trace.block_tokens
    total = int(hits.blocks.sum())
    per = [float(h / b) if b else None for h, b in zip(hits.instance_hit_blocks, hits.instance_blocks)]
    seen = [p for p in per if p is not None]
    prompt_tokens = int(isl.sum())
    saved = int(hits.skipped_tokens(isl, bt).sum())
    row.update({
        "hit_rate": float(hits.hit_blocks.sum() / total) if total else 0.0,
        "token_hit_rate": float(hits.cached_tokens(isl, bt).sum() / prompt_tokens) if prompt_tokens else 0.0,
        "instance_hit_rates": per,
        "instance_hit_rate_min": min(seen) if seen else None, "instance_hit_rate_max": max(seen) if seen else None,
        "prompt_blocks": total, "hit_blocks": int(hits.hit_blocks.sum()),
        "prefill_tokens": prompt_tokens, "prefill_tokens_saved": saved,
        "prefill_tokens_saved_fraction": saved / prompt_tokens if prompt_tokens else 0.0,
    })
    return row


def route(trace: Trace, instances: Sequence[int], policies: Sequence[str] = pol.POLICIES, *,
          cache_tokens: int | None = None, service_time_s: float | None = None, service=None,
          router: RouterSettings = RouterSettings()) -> Result:
    """Every policy at every N over ``trace``; see the module docstring for the rows.

    ``service`` (a :class:`kvplan.plans.route.service.ServiceModel`) supplies the deployment: the cache size,
    each request's time in system at N, and the prefill and fleet figures. Without it ``cache_tokens`` is
    the per-instance cache and ``service_time_s`` (if given) every request's time in system.
    """
    policies, instances = check_policies(policies), check_instances(instances)
    _check_settings(router)
    needs_blocks = [p for p in policies if p in pol.PREFIX_POLICIES]
    name = ascii(Path(trace.source).name or trace.source)[1:-1]
    if needs_blocks and not trace.has_blocks:
        raise InputError(f"{name}: {', '.join(needs_blocks)} routes by prompt blocks, and this "
                         f"{trace.trace_format or 'trace'} trace has no hash_ids",
                         "give a Mooncake-style JSONL trace with hash_ids, a synthetic workload (--rate --isl --osl "
                         "--turns), or --policy round-robin,random,least-loaded")
    if service is not None:
        cache_tokens = service.cache_tokens
    if cache_tokens is None and trace.has_blocks:
        raise InputError("no cache size: give --cache-tokens (per instance) or a deployment (MODEL HARDWARE)",
                         "e.g. --cache-tokens 3M, or kvplan route TRACE llama-3.1-8b h100-sxm")
    if cache_tokens is not None and cache_tokens < 0:
        raise InputError(f"--cache-tokens must be >= 0 (got {cache_tokens})", "write e.g. --cache-tokens 3M")
    if service_time_s is not None and not service_time_s > 0:
        raise InputError(f"--service-time must be > 0 (got {service_time_s:g} s)", "write e.g. --service-time 20s")
    loaders = [p for p in policies if p in pol.LOAD_POLICIES]
    if loaders and service is None and service_time_s is None:
        raise InputError(f"{', '.join(loaders)} route by requests in flight, which needs each request's time in system",
                         "give a deployment (MODEL HARDWARE: the fleet model's service times), or --service-time 20s, "
                         "or --policy round-robin,random")
    capacity = int(capacity_blocks(cache_tokens or 0, trace.block_tokens)) if trace.has_blocks else 0
    rows, notes = [], []
    for n in instances:
        done = None
        if service is not None:
            done = trace.arrival_s + service.time_in_system_s(n)
        elif service_time_s is not None:
            done = trace.arrival_s + service_time_s
        for policy in policies:
            instance, depth = assign(policy, trace, n, capacity, done, router)
            hits = instance_hits(trace, instance, n, capacity) if trace.has_blocks else no_hits(trace, instance, n)
            row = route_row(policy, trace, hits, n, cache_tokens, capacity)
            if service is not None:
                row.update(service.figures(n, hits, trace))
            rows.append(row)
    notes.append(_note(trace, cache_tokens, capacity, service, service_time_s))
    if service is not None:
        notes += service.notes
    columns = COLUMNS + ([c for c in service.columns] if service is not None else [])
    result = Result(title=f"Routing: {name} ({trace.requests:,} requests)", rows=rows, columns=columns,
                    explain=EXPLAIN, assumptions=notes)
    if service is not None:
        service.add_migration(result, trace, instances, policies, capacity, router)
    return result


EXPLAIN = [
    "each instance: LRU over its own requests' prompt blocks; a block hits when it and every earlier block of "
    "its request are cached there (kvplan workload's prefix rule); N = 1 is kvplan workload's lru_hit_rate",
    "hit_rate = Σ hit blocks / Σ prompt blocks; token_hit_rate = Σ min(hit blocks × block_tokens, ISL) / Σ ISL",
    "load_imbalance = max_k requests_k / mean_k requests_k",
    "prefill_tokens_saved = Σ min(hit blocks × block_tokens, ISL − 1)",
    "prefix-aware (SGLang cache_aware): imbalanced iff max − min > abs_threshold and max > rel_threshold × min → "
    "least-loaded; else longest cached prefix if matched/ISL > cache_threshold; else fewest cached blocks",
    "consistent-hash: key = hash(first K blocks); first instance clockwise with load < ceil(c × (in flight + 1) / N)",
]


def presentation(result: Result) -> list[Result]:
    """Tables for people: the policy × N table with percentages, then the KV-migration table if any."""
    route_rows = [r for r in result.rows if r.get("kind") == "route"]
    shown = []
    for r in route_rows:
        row = dict(r)
        for key in ("hit_rate", "token_hit_rate", "instance_hit_rate_min", "instance_hit_rate_max"):
            row[key] = _pct(r.get(key))
        row["load_imbalance"] = None if r.get("load_imbalance") is None else f"{r['load_imbalance']:.3f}"
        shown.append(row)
    tables = [Result(title=result.title, rows=shown, columns=result.columns, explain=result.explain,
                     assumptions=result.assumptions)]
    migration = [r for r in result.rows if r.get("kind") == "migration"]
    if migration:
        from kvplan.plans.route.migration import COLUMNS as MIGRATION_COLUMNS

        rows = [{**r, **{k: _pct(r[k]) for k in ("route_to_holder_share", "copy_share", "recompute_share")}}
                for r in migration]
        tables.append(Result(title="KV migration for prefix-aware's diverted requests: wait at the holder, copy, "
                                   "or recompute", rows=rows, columns=MIGRATION_COLUMNS))
    return tables


def _pct(value) -> str | None:
    return None if value is None else f"{value * 100:.2f} %"


def _note(trace: Trace, cache_tokens, capacity, service, service_time_s) -> str:
    parts = []
    if trace.has_blocks:
        parts.append(f"per-instance LRU of {capacity:,} blocks ({trace.block_tokens}-token blocks, "
                     f"{cache_tokens:,} tokens; 1M = 1024² tokens)")
    else:
        parts.append("no hash_ids: loads and imbalance only, no cache figures")
    if service is None and service_time_s is not None:
        parts.append(f"every request in flight for --service-time {service_time_s:g} s")
    parts.append("requests routed in timestamp order, ties in file order")
    return "; ".join(parts)

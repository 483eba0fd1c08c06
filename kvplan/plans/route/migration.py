"""KV migration: when prefix-aware routing sends a request away from the instance holding its longest prefix.

For every such *diverted* request (the longest cached prefix ``h`` tokens sits on another instance than the
one it went to, which holds ``a < h``), three ways to serve the missing ``m = h − a`` tokens:

- route to the holder and wait: the holder had ``Δ`` more requests in flight; the extra wait is taken as
  ``Δ⁺ × E[S] × E[S] / E[T]`` (the extra requests that are prefilling, each holding the prefill for E[S];
  E[S] and E[T] the fleet model's mean prefill and time in system at N) — an estimate, not a queue model;
- copy the KV over the link between the instances: ``latency + m × kv_bytes_per_token_per_gpu / (line rate × η)``
  (:func:`kvplan.calc.transfer.transfer_s`; every GPU of a TP instance moves its own shard in parallel);
- recompute: ``suffix(a, S) − suffix(h, S)`` of the deployment's step-time model (``suffix_prefill_s`` of
  :class:`kvplan.calc.steptime.StepTimes`: per-operator by default, the roofline with ``--perf-model roofline``).

The cheapest wins, per request and link. Break-even per link: the shortest context n for which copying its
KV beats recomputing it, ``latency + n × bytes / bandwidth < suffix(0, n) − suffix(n − 1, n)``
(:func:`kvplan.calc.transfer.break_even_tokens`, as ``kvplan tier`` does for its tiers).
"""

from __future__ import annotations

import numpy as np

from kvplan.calc.transfer import break_even_tokens, transfer_s
from kvplan.plans.route import policies as pol
from kvplan.plans.route.replay import instance_hits

COLUMNS = ["policy", "instances", "link", "link_bandwidth_bytes_per_s", "break_even_tokens", "diverted_requests",
           "route_to_holder_share", "copy_share", "recompute_share"]


def migration_rows(service, trace, instances, capacity: int, router) -> tuple[list[dict], list[str]]:
    tp, cost, steps = service.shape.tp, service.cost, service.steps
    bpt = float(cost.kv_token_bytes(tp))
    isl = trace.isl.astype(np.float64)
    bt = trace.block_tokens

    def context_saved(n):
        return steps.context_recompute_s(n)

    even = {label: break_even_tokens(bpt, link.bandwidth_bytes_per_s, link.latency_s, context_saved)
            for label, link in service.links}
    rows = []
    for n in instances:
        if n < 2:
            continue
        time_s = service.time_in_system_s(n)
        done = trace.arrival_s + time_s
        instance, _, depth, extra = pol.prefix_aware(
            trace, done, n, capacity, cache_threshold=router.cache_threshold,
            balance_abs_threshold=router.balance_abs_threshold, balance_rel_threshold=router.balance_rel_threshold)
        hits = instance_hits(trace, instance, n, capacity)
        have = hits.skipped_tokens(trace.isl, bt).astype(np.float64)
        held = np.maximum(np.minimum(depth * bt, trace.isl - 1), 0).astype(np.float64)
        diverted = held > have
        a, h, s = have[diverted], held[diverted], isl[diverted]
        missing = h - a
        recompute = np.asarray(steps.suffix_prefill_s(a, s)) - np.asarray(steps.suffix_prefill_s(h, s))
        prefill_mean = float(np.mean(service.full_prefill_s))
        queue = np.maximum(extra[diverted], 0) * prefill_mean * prefill_mean / float(np.mean(time_s))
        for label, link in service.links:
            copy = transfer_s(missing * bpt, link.line_rate_bytes_per_s, link.efficiency, 1, link.latency_s)
            choice = np.argmin(np.stack([queue, copy, recompute]), axis=0) if missing.size else np.zeros(0, int)
            count = max(int(diverted.sum()), 1)
            rows.append({
                "kind": "migration", "policy": "prefix-aware", "instances": n, "link": label, "link_kind": link.kind,
                "link_bandwidth_bytes_per_s": link.bandwidth_bytes_per_s, "link_latency_s": link.latency_s,
                "kv_bytes_per_token_per_gpu": bpt, "break_even_tokens": even[label] if even[label] > 0 else None,
                "diverted_requests": int(diverted.sum()), "diverted_tokens": float(missing.sum()),
                "route_to_holder_share": float((choice == 0).sum() / count),
                "copy_share": float((choice == 1).sum() / count), "recompute_share": float((choice == 2).sum() / count),
                "queue_s_mean": _mean(queue), "copy_s_mean": _mean(copy), "recompute_s_mean": _mean(recompute),
            })
    notes = ["migration: a diverted request's missing prefix is served by the cheapest of waiting at the holder "
             "(Δ in flight × E[S] × E[S]/E[T], an estimate), copying its KV over the link, or recomputing it"]
    notes += [f"{label}: {_link_note(note)}" for label, link in service.links for note in link.notes]
    return rows, notes


def _link_note(note: str) -> str:
    """The link resolver's note, worded for a KV copy between instances (its flags belong to kvplan pd)."""
    return note.replace("P→D ", "KV copy: ").split(" (pass --link-")[0]


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def links_for(hardware, system, extra_systems=(), cards=()) -> list:
    """(label, PathLink) for every link between instances the cards describe: the deployment's system (or
    hardware card) scale-up, host and NIC paths, then the scale-up fabric of each extra system (e.g. a
    supernode's, for comparison)."""
    from kvplan.cards.loader import load_system
    from kvplan.plans.links import load_side
    from kvplan.plans.pd.link import PathLink, resolve_link

    out = []
    side = load_side(hardware, system, tuple(cards))
    for kind in ("scale_up", "host_link", "nic"):
        if side.link(kind) is not None:
            link = resolve_link(kind, side, side)
            out.append((f"{side.name} {kind}", link))
    for name in extra_systems:
        sys_card = load_system(name, tuple(cards))
        if sys_card.scale_up is not None:
            link = sys_card.scale_up
            out.append((f"{sys_card.name} scale_up", PathLink("scale_up", f"{sys_card.name} scale_up: {link.name}",
                                                               link.bandwidth_bytes_per_s * link.count,
                                                               float(link.efficiency or 1.0), float(link.latency_s or 0.0))))
    return out

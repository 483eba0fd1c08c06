"""The seed's engineering checklist (§10) for a PD deployment, answered with the plan's numbers.

1. Where the KV lives: decode HBM, ``decode GPUs × KV budget per GPU``; the layout (MLA latent
   once per attention-DP rank, replicated over its TP ranks); the cached prefix's tier.
2. How fast decode reads it each step: per GPU ``(b/dp) × KV per request`` at the mean decode
   context over ``HBM bandwidth × η_mem`` (the decode attention's own η_mem where the step model has a flat
   pair for it, e.g. FlashMLA's 3000 GB/s on H800), and its share of the step (TPOT at the SLO statistic).
3. Whether high concurrency forces swapping: the KV budget holds ``budget / KV per request``
   sequences per rank; the SLO batch uses a share of it; beyond, the engine preempts.
4. Whether migration keeps up: P→D link utilisation ``ρ``, wait, exposed transfer.
5. The tail cost of remote KV: TTFT / TPOT at the SLO statistics over the NIC against the
   scale-up link (the placements), and the load of the cached prefix from the system's tier
   at the p99 prompt (``F × ISL_p99 × KV bytes per token per GPU / tier read bandwidth``).
6. Verdict: whether the placement in one scale-up domain saves GPUs or SLO headroom over
   partitions / across domains; and what breaks first for the chosen xPyD as the context (ISL)
   or the rate grows (factors 1.25 … 8, the first failing constraint of
   :meth:`kvplan.plans.pd.search.PairModel.evaluate`).
"""

from __future__ import annotations

import math

from kvplan.units import format_bytes, format_seconds

FACTORS = (1.25, 1.5, 2.0, 3.0, 4.0, 8.0)


def _sec(v) -> str:
    return format_seconds(v) if v is not None and math.isfinite(v) else "∞"


def _b(v) -> str:
    return format_bytes(v) if v is not None and math.isfinite(v) else "∞"


def checklist(setup, workload, outcome, plans, models_for) -> tuple[list[str], dict]:
    """(lines, figures) of the checklist for the chosen candidate ``outcome.best``; ``plans``: the base plan first,
    then the others (:class:`~kvplan.plans.pd.result.PdPlan`; the placements among them)."""
    c = outcome.best
    if c is None:
        return ["checklist: no plan meets the SLOs, nothing to check"], {}
    base = plans[0]
    dep_d = setup.decode.deployments[c.shape_d]
    dm = c.pair.d
    stat_t, stat_d = setup.ttft.stat, setup.tpot.stat
    b_slo = base.decode_batch_at_slo or 0.0
    tpot = base.tpot_at(stat_d)
    figures: dict = {}
    lines = []
    # 1. where the KV lives
    total = base.decode.gpus * dm.kv_budget_bytes_per_gpu
    shape = c.shape_d
    copies = (f"MLA latent once per attention-DP rank, replicated on its {shape.tp} TP rank(s)"
              if setup.card.layer_groups and any(g.kind == "mla" for g in setup.card.layer_groups)
              else f"KV heads split over TP {shape.tp}")
    tier = _tier(setup)
    lines.append(f"1. KV lives in decode HBM: {base.decode.gpus} GPUs × {_b(dm.kv_budget_bytes_per_gpu)} budget = "
                 f"{_b(total)} ({copies}); cached prefix ({setup.cached_fraction:.3g} of prompt tokens) in "
                 + (f"{tier.name} ({tier.kind})" if tier else "a tier the system card does not list"))
    figures["kv_pool_bytes"] = total
    # 2. decode's read per step
    read = b_slo * dm.kv_request_bytes_per_gpu
    machine = dep_d.machine
    eta = _decode_attention_eta_mem(dep_d, machine.eta_mem)
    read_s = read / (machine.bandwidth_bytes_per_s * eta)
    figures.update(decode_kv_read_bytes_per_gpu=read, decode_kv_read_s=read_s)
    lines.append(f"2. decode reads {_b(read)} of KV per GPU per step (batch {b_slo:,.0f} over {shape.dp} rank(s) at "
                 f"context {dm.context:,.0f}) in {_sec(read_s)} at {machine.bandwidth_bytes_per_s / 1e12:.3g} TB/s × "
                 f"η {eta:.3g}: {read_s / tpot:.0%} of the {_sec(tpot)} step" if tpot else "2. no step")
    # 3. swapping
    per_rank = dm.kv_budget_bytes_per_gpu / (dm.kv_request_bytes_per_gpu * shape.dp) if dm.kv_request_bytes_per_gpu \
        else math.inf
    cap = min(per_rank * shape.dp, dm.max_num_seqs)
    headroom = cap / b_slo if b_slo else math.inf
    figures.update(decode_capacity_sequences=cap, concurrency_headroom=headroom)
    lines.append(f"3. swapping: the KV budget holds {per_rank:,.0f} sequences per rank (max_num_seqs "
                 f"{dep_d.engine.max_num_seqs}); the {stat_d} batch uses {b_slo / cap:.0%} of "
                 f"{cap:,.0f} per instance — " + ("no swapping at this load; " if headroom >= 1 else "the engine "
                 "preempts (swaps or recomputes) now; ") + f"KV headroom ×{headroom:.2g} in concurrency (the step time "
                 "may saturate decode throughput before the KV fills: item 6)")
    # 4. migration
    rho, wait = base.link_utilization, base.link_wait_s
    keeps = rho is not None and rho < 1
    figures.update(migration_keeps_up=keeps)
    lines.append(f"4. migration: P→D over {base.link} at utilisation {rho:.3g}, wait {_sec(wait)}, exposed "
                 f"{_sec(base.exposed_transfer_s)} of a {_sec(base.kv_transfer_s)} transfer — "
                 + ("keeps up" if keeps else "does not keep up"))
    # 5. remote KV tail
    placed = {r.placement.name: r for r in plans if r.placement is not None}
    near, far = placed.get("one-domain"), placed.get("partitions") or placed.get("across-domains")
    text = "5. remote KV tail: "
    if near and far and near.feasible and far.feasible:
        d_ttft = far.ttft_at(stat_t) - near.ttft_at(stat_t)
        d_tpot = far.tpot_at(stat_d) - near.tpot_at(stat_d)
        figures.update(remote_ttft_cost_s=d_ttft, remote_tpot_cost_s=d_tpot)
        text += (f"over the NIC ({far.placement.name}) TTFT {stat_t} {d_ttft * 1e3:+.3g} ms, TPOT {stat_d} "
                 f"{d_tpot * 1e3:+.3g} ms against one domain")
    else:
        text += "placements not both planned (see notes)"
    if tier is not None and setup.cached_fraction:
        token_bytes = dm.receive_bytes_per_gpu.max() / max(workload.isl_max, 1.0)
        load = setup.cached_fraction * workload.isl_quantile(0.99) * token_bytes / tier.read_bytes_per_s
        figures["prefix_load_p99_s"] = load
        text += (f"; loading the cached prefix of the p99 prompt from {tier.name}: {_sec(load)} per GPU at "
                 f"{tier.read_bytes_per_s / 1e9:.3g} GB/s")
    lines.append(text)
    # 6. verdict
    lines.append("6. " + _verdict(setup, workload, c, placed, models_for, figures))
    return lines, figures


def _tier(setup):
    system = setup.decode.side.system or setup.prefill.side.system
    if system is None or not system.tiers:
        return None
    order = {"remote": 0, "nvme": 1, "cxl": 2, "host_dram": 3}
    return min(system.tiers, key=lambda t: order.get(t.kind, 9))


def _verdict(setup, workload, c, placed, models_for, figures) -> str:
    """A supernode is needed when the picked placement beats instances assembled from separate nodes."""
    picked = next((r for r in placed.values() if r.placement.picked), None)
    across = placed.get("across-domains")
    stat = setup.tpot.stat
    if picked is None:
        text = "supernode: no placement meets the SLOs"
    elif across is None:
        text = "supernode: cannot tell — across-domains not planned (a NIC figure is missing, see notes)"
    elif picked is across or picked.total_gpus == across.total_gpus and across.feasible and \
            not picked.tpot_at(stat) < 0.9 * across.tpot_at(stat):
        text = (f"supernode: not needed — assembled from {min(setup.prefill.node, setup.decode.node)}-GPU nodes "
                f"over the NIC the same SLOs take the same {across.total_gpus} GPUs")
    else:
        other = (f"{across.total_gpus} GPUs, TPOT {_sec(across.tpot_at(stat))}" if across.feasible
                 else f"misses the SLOs ({across.binding_constraint})")
        text = (f"supernode: yes — {picked.placement.name} {picked.total_gpus} GPUs, TPOT {_sec(picked.tpot_at(stat))}; "
                f"assembled from {min(setup.prefill.node, setup.decode.node)}-GPU nodes over the NIC: {other}")
    figures["needs_supernode"] = text.startswith("supernode: yes")
    x, y = c.point.x, c.point.y
    breaks = []
    for what in ("isl", "rate"):
        for k in FACTORS:
            scaled = workload.scaled(isl=k) if what == "isl" else workload.scaled(rate=k)
            if what == "isl":
                prefill, decode = models_for(setup, scaled, None, (c.shape_p, c.shape_d))
                from kvplan.plans.pd.model import transfer_model
                from kvplan.plans.pd.search import PairModel

                pm, dm = prefill[c.shape_p], decode[c.shape_d]
                t = transfer_model(dm.receive_bytes_per_gpu, c.shape_d.tp, c.shape_p.tp, pm.service_s,
                                   setup.card.num_layers, c.link.bandwidth_bytes_per_s, c.link.latency_s)
                point = PairModel(scaled, pm, dm, t, setup.ttft, setup.tpot,
                                  max_utilization=setup.max_utilization).evaluate(x, y, full=False)
            else:
                point = c.pair.evaluate(x, y, rate=scaled.rate_per_s, full=False)
            if point.failures:
                breaks.append(f"{'context' if what == 'isl' else 'rate'} ×{k:g}: {', '.join(dict.fromkeys(point.failures))}")
                figures[f"breaks_at_{what}_factor"] = k
                break
        else:
            breaks.append(f"{'context' if what == 'isl' else 'rate'}: holds to ×{FACTORS[-1]:g}")
    return text + f"; for {x}P{y}D what breaks first: " + "; ".join(breaks)


def _decode_attention_eta_mem(dep, default: float) -> float:
    """The decode attention's η_mem where the step model runs it at a flat pair (the card's, or a published
    kernel figure such as FlashMLA's 3000 GB/s on H800); ``default`` (the card's η_mem) otherwise."""
    from kvplan.calc.efficiency import Flat

    parts = getattr(dep.steps.pass_fn, "parts", None)
    att = getattr(parts[1], "attention_decode", None) if parts else None
    return att.eta_mem if isinstance(att, Flat) else default

"""``kvplan tier``: place the KV cache across HBM, host DRAM, CXL, NVMe and a remote pool (DESIGN.md §2.6).

Content, hot to cold. Active decode KV is read on every step, so it belongs in HBM; the prefix
and session cache (KV kept for reuse) fills what HBM has left and then spills down the tiers:
HBM → host DRAM → CXL → NVMe → remote pool, as one exclusive LRU stack (:mod:`kvplan.calc.tiering`).

Per tier (bandwidths per accelerator, capacities for the whole fleet of ``nodes`` systems):

- capacity: HBM = instances × (the engine's KV budget per GPU − active decode KV per GPU) / bytes
  per token per GPU; a lower tier = its capacity (minus any decode KV spilled into it) / (tp ×
  bytes per token per GPU). Active decode KV comes from Little's law (:mod:`kvplan.plans.tiers.fleet`).
- hit rate: ``H_t = curve(C_1 + … + C_t)``, ``hit_t = H_t − H_{t−1}`` on the exact prefix-LRU curve of
  the trace's 512-token blocks (:mod:`kvplan.workload.reuse`); in blocks, as Mooncake reports it.
- break-even: the shortest context ``n`` for which ``latency + n × kv_bytes_per_token_per_gpu / read``
  is below what caching the context saves, ``suffix(0, n) − suffix(n − 1, n)`` (the last token's
  pass runs anyway), by :func:`kvplan.calc.transfer.break_even_tokens`; the explain output sets each
  tier's bandwidth against Mooncake's Eq. 2 minimum (FAST'25 §3,
  :func:`kvplan.calc.transfer.mooncake_min_bandwidth`, unit-tested in tests/unit/test_transfer.py).
- TTFT saved at the p50/p99 ISL ``S``: the prefix ``a_t = H_t × S`` is cached through tier t, and
  tier t's share saves ``suffix(a_{t−1}, S) − suffix(a_t, S) − load_t(a_t − a_{t−1})`` (signed: a
  tier whose load is slower than recompute at that length shows a negative saving).
- prefill GPU-seconds saved per second: ``λ × tp × mean over requests of`` the recompute each
  tier's hits save, from every request's own prefix hits in the LRU replay (loads are DMA: they
  free the GPUs even where they are slower than recompute).

The savings feed the PD recommendation: :func:`kvplan.plans.pd.plan.plan_pd` is planned at
``cached_prefix_fraction`` 0 and at the measured token share of prompts served from the tiers
(:mod:`kvplan.plans.tiers.pd`); fewer prefill GPUs is the payoff.

If the active decode KV does not fit in HBM, the part that spills is read from the next tiers on
every step: TPOT grows by ``Σ spilled_t / read_t + latency_t``, at the mean and at the p99 of the
batch's KV (the sum of B sampled decode contexts, B the Little's-law batch). The verdict says so
plainly: the hot path belongs in HBM.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvplan.calc import tiering
from kvplan.calc.transfer import break_even_tokens, mooncake_min_bandwidth
from kvplan.cards.loader import load_hardware, load_model, load_system
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.errors import InfeasibleError, InputError
from kvplan.plans import deployment
from kvplan.plans.deployment import EngineSettings, Parallelism
from kvplan.plans.sizing.latency import Efficiencies
from kvplan.plans.tiers.fleet import Fleet, aggregated_fleet, size_fleet
from kvplan.plans.tiers.inputs import CapacityOverrides, TierSpec, resolve_tiers
from kvplan.plans.tiers.pd import pd_feedback, pd_sentence
from kvplan.plans.tiers.reuse import ReuseInput, request_hit_blocks
from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds

TIER_COLUMNS = [
    "tier", "kind", "capacity_bytes", "capacity_tokens", "read_bytes_per_s", "latency_s", "break_even_tokens",
    "hit_rate", "cumulative_hit_rate", "ttft_saved_p50_s", "ttft_saved_p99_s", "prefill_gpu_s_saved_per_s",
    "content",
]
KIND_LABEL = {"hbm": "HBM", "host_dram": "host DRAM", "cxl": "CXL", "nvme": "NVMe", "remote": "remote pool"}
CONTEXT_DRAWS = 4000
HOT_PATH = "HBM keeps the hot path (active decode KV); slower tiers take cold state (prefix and session cache)"


@dataclass
class TierPlan:
    """The plan's Result plus what the chart needs: the hit-rate curve and the tier boundaries."""

    result: Result
    curve_tokens: np.ndarray
    curve_hit_rate: np.ndarray
    boundaries: list[tuple[str, str, float]]  # (tier, kind, cumulative tokens where it ends)
    unlimited_hit_rate: float


@dataclass(frozen=True)
class Deployment:
    card: ModelCard
    hardware: HardwareCard
    system: SystemCard | None
    tp: int
    accelerators_per_node: int


def load_deployment(model, hardware, system, tp, cards) -> Deployment:
    card = model if isinstance(model, ModelCard) else load_model(model, cards)
    sys_card = system if isinstance(system, SystemCard) or system is None else load_system(system, cards)
    if hardware is None and sys_card is None:
        raise InputError("no hardware: give a HARDWARE card or --system SYSTEM", "e.g. kvplan tier MODEL --system hgx-h100-8")
    hw_name = hardware if hardware is not None else sys_card.accelerator
    hw = hw_name if isinstance(hw_name, HardwareCard) else load_hardware(hw_name, cards)
    if sys_card is not None and hw.name != sys_card.accelerator:
        raise InputError(f"system {sys_card.name} holds {sys_card.accelerator}, not {hw.name}",
                         "give the system alone, or a hardware card that matches it")
    per_node = sys_card.accelerators if sys_card is not None else None
    tp = tp if tp is not None else (per_node or 1)
    if tp < 1:
        raise InputError(f"--tp must be >= 1 (got {tp})")
    if per_node is not None and per_node % tp:
        raise InputError(f"--tp {tp} does not divide the system's {per_node} accelerators",
                         "choose a tp that divides them (one or more instances per node)")
    return Deployment(card, hw, sys_card, tp, per_node or tp)


def tier_plan(
    model: str | ModelCard, hardware: str | HardwareCard | None = None, *, system: str | SystemCard | None = None,
    reuse: ReuseInput, tp: int | None = None, nodes: int | None = None, decode_batch: float | None = None,
    kv_dtype: str = "auto",
    weights_dtype: str = "auto", engine: str = "vllm", gpu_memory_utilization: float | None = None,
    tiers_file: Path | None = None, overrides: CapacityOverrides = CapacityOverrides(),
    efficiencies: Efficiencies = Efficiencies(), overlap_comm: bool = False, seed: int = 0,
    pd: bool = True, ttft_slo: str | None = None, tpot_slo: str | None = None, cards: tuple[Path, ...] = (),
    resolved: deployment.Deployment | None = None, instances: int | None = None, perf_model: str = "operators",
) -> TierPlan:
    """Capacity, content, hit rate, break-even and savings of every tier for one deployment and workload.

    ``resolved``: an already resolved deployment (its engine settings, tp and system) in place of
    ``model``/``hardware``/``system``/``tp`` and the engine arguments; ``instances``: the fleet's
    instance count, fixed (a plan's fleet: the tiers are placed on it, a spill is priced as a what-if).
    Prefill (recompute) and decode step times come from the deployment's step-time model
    (``perf_model``: the per-operator model by default, ``"roofline"`` for one η pair; a ``resolved``
    deployment brings its own).
    """
    if resolved is not None:
        if resolved.pp != 1:
            raise InputError(f"the tier plan places tensor-parallel instances (got pp={resolved.pp})",
                             "use pipeline_parallel_size 1")
        model, hardware, system, tp = resolved.model, resolved.hardware, resolved.system, resolved.tp
        engine = resolved.engine.engine
        perf_model = resolved.engine.perf_model
    dep = load_deployment(model, hardware, system, tp, cards)
    card, hw, tp = dep.card, dep.hardware, dep.tp
    if resolved is None:
        resolved = deployment.resolve(card, hw, system=dep.system, parallel=Parallelism(tp=tp), engine=EngineSettings(
            engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
            gpu_memory_utilization=gpu_memory_utilization, efficiencies=efficiencies, perf_model=perf_model))
    if instances is not None and (not isinstance(instances, int) or instances < 1):
        raise InputError(f"instances must be a whole number >= 1 (got {instances})")
    cost, machine = resolved.cost, resolved.machine
    pass_fn = resolved.steps.pass_fn
    notes = [*resolved.notes, *resolved.step_notes]
    bpt = float(cost.kv_token_bytes(tp))  # KV bytes per token on one GPU
    trace = reuse.trace
    isl, osl = trace.isl.astype(np.float64), trace.osl.astype(np.float64)
    budget = _hbm_budget(resolved)

    def recompute(n):
        return tiering.recompute_s(cost, machine, n, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn)

    def context_saved(n):
        return tiering.context_recompute_s(cost, machine, n, tp=tp, overlap_comm=overlap_comm, pass_fn=pass_fn)

    hbm_nodes = None
    if decode_batch is not None:  # a what-if: B sequences held per instance, only ρ_p < 1 required
        fleet = size_fleet(cost, machine, tp=tp, accelerators_per_node=dep.accelerators_per_node,
                           rate_per_s=reuse.rate_per_s, isl_samples=isl, osl_mean=float(osl.mean()), nodes=nodes,
                           decode_batch=decode_batch, overlap_comm=overlap_comm, pass_fn=pass_fn)
    else:
        def fits_hbm(f: Fleet) -> bool:
            """The hot path stays in HBM: the p99 of an instance's decode batch KV fits the engine's budget."""
            return _active_decode_kv(cost, f, isl, osl, tp, seed)[1][1] <= budget

        fleet, fleet_notes = aggregated_fleet(resolved, reuse, dep.accelerators_per_node, nodes, ttft_slo, tpot_slo,
                                              float(np.mean(recompute(isl))), fits=fits_hbm, instances=instances)
        if (nodes is not None or instances is not None) and not fits_hbm(fleet):
            hbm_nodes = aggregated_fleet(resolved, reuse, dep.accelerators_per_node, None, ttft_slo, tpot_slo,
                                         float(np.mean(recompute(isl))), fits=fits_hbm)[0].nodes
        else:
            hbm_nodes = fleet.nodes
        notes += fleet_notes
    tiers, tier_notes = resolve_tiers(hw, dep.system, fleet.nodes, tiers_file=tiers_file, overrides=overrides)
    notes += tier_notes

    active_mean, batch_totals, seq_mean = _active_decode_kv(cost, fleet, isl, osl, tp, seed)
    gpus = fleet.gpus
    tier_gpu_bytes = [(t.capacity_bytes or 0.0) / gpus for t in tiers]
    spilled, unplaced = tiering.spill(active_mean, budget, tier_gpu_bytes)
    if unplaced > 0:
        raise InfeasibleError(
            f"active decode KV needs {format_bytes(active_mean)} per GPU ({fleet.decode_batch:.1f} sequences of "
            f"{format_bytes(seq_mean)}); HBM ({format_bytes(budget)}) and every tier together hold "
            f"{format_bytes(budget + sum(tier_gpu_bytes))}", "add nodes (--nodes), raise --tp, or use --kv-dtype fp8")
    spilled_q, _ = tiering.spill(batch_totals, budget, tier_gpu_bytes)
    penalty_q = tiering.decode_penalty_s(spilled_q, [t.read_bytes_per_s for t in tiers], [t.latency_s for t in tiers])

    # cache capacity per tier (fleet tokens) → cumulative LRU depth → hit rates
    hbm = TierSpec(name=f"HBM ({hw.name})", kind="hbm", capacity_bytes=None, read_bytes_per_s=hw.hbm_bandwidth_bytes_per_s,
                   write_bytes_per_s=None, latency_s=0.0, cost_per_gb=None, origin=f"hardware card {hw.name}",
                   line_rate_bytes_per_s=hw.hbm_bandwidth_bytes_per_s)
    all_tiers = [hbm, *tiers]
    cache_gpu_bytes = np.array([max(budget - active_mean, 0.0)]
                               + [max(c - s, 0.0) for c, s in zip(tier_gpu_bytes, spilled)])
    cache_tokens = np.floor(cache_gpu_bytes / bpt) * fleet.instances
    cumulative_tokens = tiering.cumulative_capacities(cache_tokens)
    cumulative_blocks = np.floor(cumulative_tokens / reuse.block_tokens).astype(np.int64)
    prof = reuse.profile
    cum_hit = prof.prefix_hit_rate(cumulative_blocks)
    hit = tiering.tier_hit_rates(cum_hit)
    block_hit_above = np.concatenate(([0.0], prof.block_hit_rate(cumulative_blocks)[:-1]))

    # savings: TTFT at the ISL percentiles, prefill GPU-seconds from every request's own hits
    isl_q = np.percentile(isl, [50, 99])
    saved_q = _ttft_saved(cost, machine, all_tiers, cum_hit, isl_q, bpt, tp, overlap_comm, pass_fn)
    cached, gpu_s_saved, prefill_gpu_s = _prefill_savings(cost, machine, reuse, cumulative_blocks, isl, tp,
                                                          overlap_comm, pass_fn)

    # per-tier figures
    p50_isl = float(isl_q[0])
    compute = tp * machine.peak_flops_per_s * machine.eta_flops
    per_layer = bpt * tp / cost.layers
    demoted = tiering.demotion_blocks_per_s(reuse.block_access_rate_per_s, block_hit_above)
    rows, explain = [], []
    for i, tier in enumerate(all_tiers):
        row = _tier_row(tier, i, cache_tokens[i], cache_gpu_bytes[i] * gpus, cum_hit[i], hit[i], saved_q[:, i],
                        gpu_s_saved[i], bpt, tp, card, context_saved, fleet, active_mean, spilled, cumulative_tokens)
        row["mooncake_eq2_min_read_bytes_per_s"] = float(mooncake_min_bandwidth(
            compute, per_layer, card.hidden_size, p50_isl))
        row["write_bytes_per_s_needed"] = (float(demoted[i] * reuse.block_tokens * bpt / fleet.instances)
                                           if i > 0 and cache_tokens[i] > 0 else None)
        row["write_utilization"] = (row["write_bytes_per_s_needed"] / tier.write_bytes_per_s
                                    if row["write_bytes_per_s_needed"] is not None and tier.write_bytes_per_s
                                    else None)
        rows.append(row)
        explain.extend(_explain_tier(tier, row, bpt, tp, compute, per_layer, card, p50_isl, context_saved))
    summary = _summary(reuse, fleet, budget, active_mean, batch_totals, penalty_q, spilled, tiers, cum_hit,
                       saved_q, gpu_s_saved, prefill_gpu_s, isl_q, recompute, cumulative_tokens, bpt, tp)
    summary["cached_prefix_fraction"] = float(cached[-1].sum() / isl.sum()) if isl.sum() > 0 else 0.0
    summary["nodes_min_hbm"] = hbm_nodes
    pd_explain: list[str] = []
    if pd:
        fields, pd_notes, pd_explain = pd_feedback(
            card, hw, dep.system, trace, summary["cached_prefix_fraction"], ttft=ttft_slo, tpot=tpot_slo,
            engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
            gpu_memory_utilization=gpu_memory_utilization, efficiencies=efficiencies, cards=cards,
            perf_model=perf_model)
        summary.update(fields)
        notes += pd_notes
    rows.append(summary)
    explain = _explain_head(card, hw, cost, machine, fleet, reuse, budget, active_mean, bpt, tp, isl_q,
                            recompute, decode_batch is not None) + explain + pd_explain
    notes += _notes(card, isl, tiers, reuse)
    verdict, failed = _verdict(summary, tiers, spilled, budget, active_mean, cum_hit)
    if pd_sentence(summary):
        verdict += f"; {pd_sentence(summary)}"
    title = f"Tier plan: {card.name} on {fleet.nodes} × {dep.system.name if dep.system else hw.name}"
    result = Result(title=title, rows=rows, columns=TIER_COLUMNS, explain=explain,
                    assumptions=list(dict.fromkeys(notes)), verdict=verdict, failed=failed)
    caps, rates = prof.curve(prefix=True)
    return TierPlan(result, caps * float(reuse.block_tokens), rates,
                    [(r["tier"], r["kind"], float(t)) for r, t in zip(rows, cumulative_tokens)],
                    float(prof.prefix_hit_rate(prof.accesses)))


def _active_decode_kv(cost, fleet: Fleet, isl, osl, tp, seed) -> tuple[float, np.ndarray, float]:
    """Decode KV per GPU: (mean = B × E[KV(context)], [p50, p99] of a batch's total, E[KV of one sequence]).

    A decoding sequence's context is its prompt plus a uniform share of its output; the batch total is
    the sum of ``round(B)`` contexts drawn from the workload's requests (seeded), so its p99 carries the
    long prompts' tail.
    """
    rng = np.random.default_rng(seed)
    batch = max(1, round(fleet.decode_batch))
    draws = int(min(CONTEXT_DRAWS, max(200, 4_000_000 // batch)))  # bounded memory at huge batches
    pick = rng.integers(0, isl.size, size=(draws, batch))
    seq_bytes = cost.kv_sequence_bytes(isl[pick] + rng.random(pick.shape) * osl[pick], tp)
    seq_mean = float(seq_bytes.mean())
    return fleet.decode_batch * seq_mean, np.percentile(seq_bytes.sum(axis=1), [50, 99]), seq_mean


def _prefill_savings(cost, machine, reuse: ReuseInput, cumulative_blocks, isl, tp, overlap_comm, pass_fn=None):
    """(cached tokens per boundary and request, GPU-s saved per s per tier, prefill GPU-s per s without cache).

    Request r's hits at boundary t are its prefix-hit blocks at LRU depth C_t (≤ ISL − 1 tokens); tier t
    saves ``suffix(a_{t−1,r}, S_r) − suffix(a_{t,r}, S_r)``, × λ × tp GPU-seconds per second on average.
    """
    hits_blocks = request_hit_blocks(reuse, cumulative_blocks)
    cached = np.minimum(hits_blocks * reuse.block_tokens, np.maximum(isl - 1, 0))
    suffix = np.stack([tiering.suffix_prefill_s(cost, machine, a, isl, tp=tp, overlap_comm=overlap_comm,
                                                pass_fn=pass_fn)
                       for a in np.vstack([np.zeros_like(isl), cached])])
    gpu_s_saved = reuse.rate_per_s * tp * (suffix[:-1] - suffix[1:]).mean(axis=1)
    return cached, gpu_s_saved, reuse.rate_per_s * tp * float(suffix[0].mean())


def _hbm_budget(dep) -> float:
    """The engine's KV budget on one GPU (the deployment's start-up arithmetic); none left is infeasible."""
    budget = float(dep.memory.kv_cache_memory_bytes)
    if budget <= 0:
        raise InfeasibleError(
            f"{dep.model.name} at tp={dep.tp} leaves no KV memory on {dep.hardware.name}: weights take "
            f"{format_bytes(dep.memory.weights_bytes_per_gpu)} per GPU of {format_bytes(dep.memory.gpu_memory_bytes)}",
            "raise --tp or quantise the weights (--weights-dtype fp8)")
    return budget


def _ttft_saved(cost, machine, tiers, cum_hit, isl_q, bpt, tp, overlap_comm, pass_fn=None) -> np.ndarray:
    """Shape (2, tiers): TTFT each tier's share of the prefix saves at the p50 and p99 ISL."""
    out = np.zeros((isl_q.size, len(tiers)))
    for q, s in enumerate(isl_q):
        cached = np.minimum(np.concatenate(([0.0], cum_hit)) * s, max(s - 1, 0))
        suffix = tiering.suffix_prefill_s(cost, machine, cached, np.full(cached.shape, s), tp=tp,
                                          overlap_comm=overlap_comm, pass_fn=pass_fn)
        for i, tier in enumerate(tiers):
            tokens = cached[i + 1] - cached[i]
            load = 0.0 if tier.kind == "hbm" else float(tiering.load_s(tokens, bpt, tier.read_bytes_per_s,
                                                                       tier.latency_s))
            out[q, i] = suffix[i] - suffix[i + 1] - load
    return out


def _tier_row(tier, i, tokens, cache_bytes, cum_hit, hit, saved, gpu_s, bpt, tp, card, recompute, fleet,
              active_mean, spilled, cumulative_tokens) -> dict:
    if tier.kind == "hbm":
        breakeven = 1
        content = (f"active decode KV ({fleet.decode_batch:.1f} seq × {fleet.instances} instance(s)) + the hottest "
                   f"{_tokens(tokens)} tokens of prefix/session cache")
    else:
        breakeven = break_even_tokens(bpt, tier.read_bytes_per_s, tier.latency_s, recompute, upper=card.max_context)
        if tier.capacity_bytes is None:
            flag = {"remote": "--remote-pool SIZE"}.get(tier.kind, "a capacity in --tiers FILE")
            content = f"unused: no capacity given (pass {flag})"
        else:
            start = cumulative_tokens[i - 1]
            content = f"prefix/session cache, LRU depth {_tokens(start)}–{_tokens(cumulative_tokens[i])} tokens"
            if spilled[i - 1] > 0:
                content = f"SPILLED decode KV ({format_bytes(spilled[i - 1])}/GPU) + " + content
    row = {
        "tier": tier.name, "kind": tier.kind, "capacity_bytes": float(cache_bytes), "capacity_tokens": int(tokens),
        "read_bytes_per_s": tier.read_bytes_per_s, "latency_s": tier.latency_s,
        "break_even_tokens": int(breakeven), "hit_rate": float(hit), "cumulative_hit_rate": float(cum_hit),
        "ttft_saved_p50_s": float(saved[0]), "ttft_saved_p99_s": float(saved[1]),
        "prefill_gpu_s_saved_per_s": float(gpu_s), "content": content,
        "tier_capacity_bytes": None if tier.kind == "hbm" else tier.capacity_bytes,
        "write_bytes_per_s": tier.write_bytes_per_s, "cost_per_gb": tier.cost_per_gb,
        "cost": (tier.cost_per_gb * tier.capacity_bytes / 1e9 if tier.cost_per_gb is not None
                 and tier.capacity_bytes is not None else None),
        "active_kv_bytes_per_gpu": float(active_mean if tier.kind == "hbm" else spilled[i - 1]),
        "origin": tier.origin,
    }
    return row


def _summary(reuse, fleet: Fleet, budget, active_mean, batch_totals, penalty_q, spilled, tiers, cum_hit, saved_q,
             gpu_s_saved, prefill_gpu_s, isl_q, recompute, cumulative_tokens, bpt, tp) -> dict:
    total_saved = np.maximum(saved_q, 0.0).sum(axis=1)
    prof = reuse.profile
    unlimited = float(prof.prefix_hit_rate(prof.accesses))
    return {
        "tier": "total", "kind": "summary", "capacity_bytes": float(cumulative_tokens[-1] * bpt * tp),
        "capacity_tokens": int(cumulative_tokens[-1]), "read_bytes_per_s": None, "latency_s": None,
        "break_even_tokens": None, "hit_rate": float(cum_hit[-1]), "cumulative_hit_rate": float(cum_hit[-1]),
        "ttft_saved_p50_s": float(total_saved[0]), "ttft_saved_p99_s": float(total_saved[1]),
        "prefill_gpu_s_saved_per_s": float(gpu_s_saved.sum()),
        "content": "all tiers (a tier whose load loses to recompute is skipped in the TTFT totals)",
        "workload": reuse.label, "rate_per_s": reuse.rate_per_s, "requests": reuse.trace.requests,
        "block_tokens": reuse.block_tokens, "unlimited_hit_rate": unlimited,
        "hit_rate_share_of_unlimited": float(cum_hit[-1] / unlimited) if unlimited > 0 else None,
        "reuse_capacity_tokens_littles_law": reuse.littles_law_tokens,
        "reuse_capacity_bytes_littles_law": reuse.littles_law_tokens * bpt * tp,
        "isl_p50": float(isl_q[0]), "isl_p99": float(isl_q[1]),
        "prefill_p50_s": float(recompute(isl_q[0])), "prefill_p99_s": float(recompute(isl_q[1])),
        "prefill_gpu_s_per_s_without_cache": prefill_gpu_s,
        "prefill_gpu_share_saved": float(gpu_s_saved.sum() / prefill_gpu_s) if prefill_gpu_s > 0 else None,
        "nodes": fleet.nodes, "nodes_auto": fleet.auto, "tp": tp, "instances": fleet.instances, "gpus": fleet.gpus,
        "plan_instances": fleet.plan_instances,
        "prefill_load_per_instance": fleet.prefill_load, "decode_batch_per_instance": float(fleet.decode_batch),
        "tpot_s": fleet.tpot_s, "hbm_kv_budget_bytes_per_gpu": budget,
        "active_kv_bytes_per_gpu": float(active_mean), "active_kv_p50_bytes_per_gpu": float(batch_totals[0]),
        "active_kv_p99_bytes_per_gpu": float(batch_totals[1]),
        "active_kv_fits_hbm": bool(active_mean <= budget),
        "active_kv_spilled_bytes_per_gpu": float(spilled.sum()),
        "tpot_penalty_p50_s": float(penalty_q[0]), "tpot_penalty_p99_s": float(penalty_q[1]),
    }


def _explain_head(card, hw, cost, machine, fleet, reuse, budget, active_mean, bpt, tp, isl_q, recompute,
                  decode_given) -> list[str]:
    r50 = float(recompute(isl_q[0]))
    return [
        f"{card.name} on {hw.name}, tp={tp}: KV per token per GPU = {bpt:,.0f} B ({bpt * tp:,.0f} B per instance)",
        f"workload: {reuse.label}; λ = {reuse.rate_per_s:.4g} req/s, ISL p50 {isl_q[0]:,.0f} / p99 {isl_q[1]:,.0f}",
        f"recompute(n) = roofline prefill of n tokens (2 × params × n + causal attention, η_flops "
        f"{machine.eta_flops:g}, η_mem {machine.eta_mem:g}): recompute(p50 ISL) = {format_seconds(r50)}",
        (f"fleet: {fleet.nodes} node(s) × {fleet.accelerators_per_node // tp} instance(s) of tp={tp}"
         if fleet.instances == fleet.nodes * (fleet.accelerators_per_node // tp) else
         f"fleet: {fleet.instances} instance(s) of tp={tp} on {fleet.nodes} node(s)")
        + (f" (kvplan plan's fleet: {fleet.plan_instances} instance(s), on whole nodes)"
           if fleet.plan_instances is not None and fleet.auto else "") + "; per instance "
        + (f"ρ_p = λ/I × E[prefill] = {fleet.rate_per_s:.4g}/{fleet.instances} × "
           f"{format_seconds(fleet.mean_prefill_s)} = {fleet.prefill_load:.3f}" if decode_given else
           f"prefill utilisation (kvplan plan: λ/I × E[X + (S − X)/k], chunks packed) = {fleet.prefill_load:.3f}"),
        (f"decode batch B = {fleet.decode_batch:.2f} (given), TPOT = step(B, {fleet.decode_context:,.0f}) / (1 − ρ_p)"
         f" = {format_seconds(fleet.tpot_s)}" if decode_given else
         f"decode batch (Little's law, kvplan plan's fleet model) B = {fleet.decode_batch:.2f}, mean TPOT (prefill "
         f"chunks interleaved) = {format_seconds(fleet.tpot_s)}"),
        f"HBM: KV budget {format_bytes(budget)} per GPU (engine rule, kvplan fit) − active decode KV "
        f"B × E[KV(context)] = {format_bytes(active_mean)} → {format_bytes(max(budget - active_mean, 0))} per GPU "
        f"of prefix cache",
        "tiers: exclusive LRU stack, H_t = curve(C_1 + … + C_t), hit_t = H_t − H_{t−1} (prefix hits, per block)",
    ]


def _explain_tier(tier, row, bpt, tp, compute, per_layer, card, p50_isl, recompute) -> list[str]:
    if tier.kind == "hbm":
        return [f"{tier.name}: {_tokens(row['capacity_tokens'])} tokens of cache, hit {row['hit_rate']:.2%} "
                "(already resident: no load)"]
    b_min = row["mooncake_eq2_min_read_bytes_per_s"]
    aggregate = tier.read_bytes_per_s * tp
    n = row["break_even_tokens"]
    lines = [
        f"{tier.name}: {_tokens(row['capacity_tokens'])} tokens, hit {row['hit_rate']:.2%} (cumulative "
        f"{row['cumulative_hit_rate']:.2%}); load(n) = {format_seconds(tier.latency_s)} + n × {bpt:,.0f} B / "
        f"{tier.read_bytes_per_s / 1e9:,.3g} GB/s per GPU",
        f"  break-even: {'none up to ' + format(card.max_context, ',') + ' tokens' if n < 0 else f'{n:,} tokens'}"
        + ("" if n < 0 else f" (load {format_seconds(float(tiering.load_s(n, bpt, tier.read_bytes_per_s, tier.latency_s)))}"
                            f" < recompute saved {format_seconds(float(recompute(n)))})"),
        f"  Mooncake Eq. 2 (FAST'25): B_min = G × {per_layer:,.0f} B/token/layer / (4 n d + 22 d²) at n = "
        f"{p50_isl:,.0f}, G = {compute / 1e12:,.0f} TFLOP/s → {b_min / 1e9:,.3g} GB/s; this tier: "
        f"{tp} × {tier.read_bytes_per_s / 1e9:,.3g} = {aggregate / 1e9:,.3g} GB/s → "
        f"{'loading pays' if aggregate > b_min else 'recompute is faster'} at the p50 ISL",
    ]
    if row["write_bytes_per_s_needed"] is not None:
        util = row["write_utilization"]
        lines.append(f"  demotions into it: {row['write_bytes_per_s_needed'] / 1e9:,.3g} GB/s per GPU"
                     + (f" = {util:.1%} of its write bandwidth" if util is not None else " (no write bandwidth on the card)"))
    return lines


def _notes(card, isl, tiers, reuse) -> list[str]:
    notes = [HOT_PATH,
             f"hit rates are prefix hits over {reuse.block_tokens}-token blocks in an LRU replay of the workload; "
             "TTFT savings take each tier's share of the p50/p99 prompt, loads not overlapped with prefill"]
    over = int(np.count_nonzero(isl > card.max_context))
    if over:
        notes.append(f"{over} request(s) exceed {card.name}'s max context ({card.max_context:,}); kept as given")
    if any(g.kind == "mla" for g in card.layer_groups):
        notes.append("MLA latents are replicated on every TP rank; tiers store each rank's copy (LMCache without "
                     "save_only_first_rank), so tier tokens are tp× fewer than one copy would allow")
    if any(g.kind not in ("full",) for g in card.layer_groups):
        notes.append("Mooncake Eq. 2's a = 4, b = 22 are for dense GQA attention (LLaMA3-70B); the break-even "
                     "column uses the roofline instead")
    for t in tiers:
        if t.capacity_bytes is None:
            notes.append(f"{t.name}: no capacity on the card; not used")
    return notes


def _verdict(summary, tiers, spilled, budget, active_mean, cum_hit) -> tuple[str, bool]:
    if active_mean > budget:
        where = ", ".join(f"{format_bytes(s)} from {t.name}" for t, s in zip(tiers, spilled) if s > 0)
        return (f"active decode KV ({format_bytes(active_mean)} per GPU) does not fit in HBM "
                f"({format_bytes(budget)}): every decode step reads {where}, TPOT +"
                f"{format_seconds(summary['tpot_penalty_p50_s'])} (p99 +{format_seconds(summary['tpot_penalty_p99_s'])}). "
                "A what-if: vLLM and SGLang preempt rather than stream decode KV from host memory. The hot path "
                "belongs in HBM: " + (f"{summary['nodes_min_hbm']} nodes keep it there (omit --nodes to plan them), "
                                      if summary.get("nodes_min_hbm") else "add nodes, ")
                + "raise tp or use fp8 KV; slower tiers are for cold state.", True)
    text = (f"active decode KV fits in HBM ({format_bytes(active_mean)} of {format_bytes(budget)} per GPU): the hot "
            f"path stays in HBM; the tiers hold the prefix/session cache and hit {cum_hit[-1]:.2%} of prompt blocks "
            f"(unlimited cache: {summary['unlimited_hit_rate']:.2%}), saving "
            f"{summary['prefill_gpu_share_saved'] or 0:.1%} of prefill GPU time")
    if summary["tpot_penalty_p99_s"] > 0:
        text += (f"; at the p99 of the batch's KV ({format_bytes(summary['active_kv_p99_bytes_per_gpu'])}) decode would "
                 f"spill, TPOT +{format_seconds(summary['tpot_penalty_p99_s'])}")
    return text, False


def _tokens(n: float) -> str:
    n = float(n)
    for unit, step in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= step:
            return f"{n / step:,.3g}{unit}"
    return f"{n:,.0f}"

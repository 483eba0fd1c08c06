"""The per-operator side of ``kvplan latency``: tables, draft passes, memory notes and ``--explain`` lines."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from kvplan.calc.operators import OP_LABELS, OP_NAMES, Shapes, model_shapes, op_times
from kvplan.plans.sizing.perfmodel import make_pass, weights_per_gpu
from kvplan.units import format_bytes, format_seconds


def with_system(hardware, system, cards=()):
    """The hardware card with a system's links: its scale-up link, NIC and scale-up domain replace the card's.

    ``hardware`` may itself name a system card (its accelerator is loaded). A system holds the
    NIC a multi-node instance (EP across nodes) talks over.
    """
    from kvplan.cards.schema import HardwareCard
    from kvplan.plans.pd.link import load_side

    if isinstance(hardware, HardwareCard) and system is None:
        return hardware
    side = load_side(hardware, system, tuple(cards))
    hw, sys_card = side.hardware, side.system
    if sys_card is None:
        return hw
    update = {"scale_up_domain": sys_card.scale_up_domain}
    for name in ("scale_up", "nic"):
        link = getattr(sys_card, name, None)
        if link is not None:
            update[name] = link
    return hw.model_copy(update=update)


@lru_cache(maxsize=1)
def load_tables():
    """The shipped per-kernel tables (kvplan/data/perf), or None where none ship."""
    try:
        from kvplan.calc.perfdb import load_default
    except ImportError:
        return None
    return load_default()


def draft_pass(pass_fn, card, draft_cost):
    """The target's pass function re-aimed at a draft (an MTP/EAGLE head or a separate draft model)."""
    shapes, effs, par, graph_sizes, clamped = pass_fn.parts
    if draft_cost.name.startswith(card.name + "-draft"):
        scale = draft_cost.layers / shapes.layers
        draft_shapes = Shapes(shapes.attention_params * scale, shapes.mlp_params * scale, draft_cost.layers,
                              shapes.hidden)
    else:
        draft_shapes = model_shapes(card, draft_cost)
    return make_pass(draft_shapes, effs, par, graph_sizes, clamped)


def memory_notes(card, hw, cost, batch, final_context, tp, dp, expert_parallel, redundant_experts) -> list[str]:
    """Say so when a row's weights and KV per GPU exceed the GPU's memory (latency does not gate on it)."""
    weights = weights_per_gpu(card, cost, tp, dp, expert_parallel, redundant_experts)
    kv = batch / dp * cost.kv_sequence_bytes(final_context, tp)
    over = np.flatnonzero(weights + kv > hw.hbm_capacity_bytes)
    notes = []
    if expert_parallel and redundant_experts:
        notes.append(f"{redundant_experts} redundant experts per MoE layer: "
                     f"{format_bytes(cost.moe_layers * redundant_experts * cost.expert_weight_bytes / (tp[0] * dp))} "
                     "more weights per GPU (counted)")
    if over.size:
        i = over[0]
        notes.append(f"{over.size} row(s) do not fit in {hw.name}'s {format_bytes(hw.hbm_capacity_bytes)}, e.g. "
                     f"tp={int(tp[i])} dp={int(dp)}, batch {int(batch[i])} at {int(final_context[i]):,} tokens needs "
                     f"{format_bytes(weights[i])} of weights + {format_bytes(kv[i])} of KV per GPU; the latency is "
                     "shown anyway (check with kvplan fit)")
    return notes


def explain_operators(card, cost, machine, row, pre, step, i) -> list[str]:
    times = op_times(step)
    lines = [
        f"{card.name} on {machine.name}: tp={row['tp']}, dp={row['dp']}, EP={row['ep']}, batch={row['batch']}, "
        f"context={row['context']:,}, weights {cost.weights_dtype}, KV {row['kv_dtype']}, compute "
        f"{machine.compute_dtype} (per-operator model)",
        f"  decode weights read        = {step.weight_bytes[i]:,.0f} B per GPU (dense ÷ tp"
        + (", experts: touched local experts" if cost.is_moe else "") + ")",
        f"  decode KV read             = {row['batch']} seq ÷ dp {row['dp']} × KV at {row['context']:,} tokens → "
        f"{step.kv_bytes[i]:,.0f} B per GPU",
        f"  decode FLOPs               = {step.flops[i]:.4g} per GPU",
        f"  memory time                = Σ bytes / (BW × η) = {format_seconds(step.memory_s[i])}; compute time = "
        f"Σ FLOPs / (peak × η) = {format_seconds(step.compute_s[i])} (each operator: its own η)",
    ]
    for k, name in enumerate(OP_NAMES):
        if name == "expert_gemms" and not cost.is_moe:
            continue
        lines.append(f"  {OP_LABELS[name]:26s} = max(bytes/(BW η) {format_seconds(step.op_memory_s[k][i])}, "
                     f"FLOPs/(peak η) {format_seconds(step.op_compute_s[k][i])}) = {format_seconds(times[name][i])}")
    lines += [
        f"  communication              = {format_seconds(step.comm_s[i])} (TP all-reduce, EP dispatch + combine)",
        f"  host overhead              = {format_seconds(step.overhead_s[i])}",
        f"  step                       = Σ operators + comm + overhead = {format_seconds(step.time_s[i])} "
        f"({row['bound']}-bound); floor = max(bytes / peak BW, FLOPs / peak) = {format_seconds(step.floor_s[i])}",
        f"  intensity                  = {row['arithmetic_intensity_flop_per_byte']:.3g} FLOP/B vs ridge "
        f"{machine.ridge_flop_per_byte:.3g} FLOP/B",
        f"  prefill                    = {row['batch']} × {row['isl']:,} tokens in {row['prefill_passes']} pass(es) "
        f"→ {format_seconds(pre.time_s[i])}; TTFT {format_seconds(row['ttft_s'])}",
        f"  request                    = TTFT + ({row['osl']} − 1) × TPOT {format_seconds(row['tpot_s'])} = "
        f"{format_seconds(row['e2e_s'])}; {row['tokens_per_s']:,.1f} tok/s, {row['tokens_per_s_per_gpu']:,.1f} per GPU",
    ]
    return lines

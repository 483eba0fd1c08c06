"""The per-operator side of ``kvplan latency``: tables, draft passes, memory notes and ``--explain`` lines."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from kvplan.calc.operators import OP_LABELS, OP_NAMES, Shapes, model_shapes, op_times
from kvplan.plans.sizing.kernels import elementwise_kernels
from kvplan.plans.sizing.perfmodel import load_tables, make_pass, weights_per_gpu  # noqa: F401 (load_tables re-exported)
from kvplan.units import format_bytes, format_seconds


@lru_cache(maxsize=1)
def error_bands() -> dict:
    """Expected error per group (dense-batch1, dense-max, moe, prefill) from docs/validation.md §(e)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "data" / "error_bands.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("groups", {})
    except (OSError, ValueError):
        return {}


def band_columns(is_moe: bool, batch: int) -> dict:
    """The expected-error keys of one latency row: its throughput/TPOT group and the prefill group."""
    bands = error_bands()
    group = "moe" if is_moe else ("dense-batch1" if batch == 1 else "dense-max")
    out = {"error_band_group": group}
    for prefix, g in (("error_band", group), ("ttft_error_band", "prefill")):
        band = bands.get(g)
        if band is None:
            continue
        out.update({f"{prefix}_median_abs": band["median_abs"], f"{prefix}_bias": band["bias"],
                    f"{prefix}_p90_abs": band["p90_abs"], f"{prefix}_set": band["set"], f"{prefix}_rows": band["n"]})
    return out


def band_line(row: dict) -> str:
    if "error_band_median_abs" not in row:
        return f"  expected error             = none published for group {row['error_band_group']}"
    line = (f"  expected error             = group {row['error_band_group']} ({row['error_band_rows']} rows, "
            f"{row['error_band_set']} set, docs/validation.md §e): median |error| {row['error_band_median_abs']:.0%}, "
            f"bias {row['error_band_bias']:+.0%}, p90 {row['error_band_p90_abs']:.0%}")
    if "ttft_error_band_median_abs" in row:
        line += (f"; TTFT (prefill group): median |error| {row['ttft_error_band_median_abs']:.0%}, "
                 f"p90 {row['ttft_error_band_p90_abs']:.0%}")
    return line


def draft_pass(pass_fn, card, draft_cost):
    """The target's pass function re-aimed at a draft (an MTP/EAGLE head or a separate draft model).

    The draft's fixed per-pass cost is its own kernels, not the target's: the launch floor scales
    as the draft's element-wise kernels over the target's, each counted as the step overhead counts
    them (:func:`kvplan.plans.sizing.kernels.elementwise_kernels`: 3 per dense-MLP layer, 2 per MoE
    layer, + 1), and the per-sequence host work is charged once per engine step, in the
    verification pass, not again in each draft pass.
    """
    import dataclasses

    shapes, effs, par, graph_sizes, clamped = pass_fn.parts
    if draft_cost.name.startswith(card.name + "-draft"):
        scale = draft_cost.layers / shapes.layers
        draft_shapes = Shapes(shapes.attention_params * scale, shapes.mlp_params * scale, draft_cost.layers,
                              shapes.hidden)
    else:
        draft_shapes = model_shapes(card, draft_cost)
    target = elementwise_kernels(card.num_layers, card.moe.num_moe_layers if card.moe is not None else 0)
    kernels = elementwise_kernels(draft_cost.layers, draft_cost.moe_layers) / target
    draft_effs = dataclasses.replace(effs, overhead_base_s=effs.overhead_base_s * kernels, overhead_per_seq_s=0.0)
    return make_pass(draft_shapes, draft_effs, par, graph_sizes, clamped, getattr(pass_fn, "mixed_graphs", True))


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


def dispatch_source(row: dict) -> str:
    """Where a latency row's per-layer prefill dispatch comes from, in a few words."""
    from kvplan.engines import prefill_dispatch

    profile = prefill_dispatch(row["engine"]) if row.get("engine") else None
    if profile is None or profile.per_layer_s != row.get("prefill_dispatch_per_layer_s"):
        return "--prefill-overhead"
    stand_in = "vLLM's figure standing in, " if row["engine"] != "vllm" else ""
    return (f"{stand_in}NVIDIA aiconfigurator vllm_backend.py _prefill_dispatch_overhead_ms at 095f58a "
            "(kvplan.engines.PREFILL_DISPATCH)")


def decode_dispatch_source(row: dict) -> str:
    """Where a latency row's per-layer eager decode dispatch comes from, in a few words."""
    from kvplan.engines import eager_decode_dispatch

    figure, _source = eager_decode_dispatch(row["engine"])
    if figure != row.get("decode_dispatch_per_layer_s"):
        return "--prefill-overhead"
    stand_in = "vLLM's figure standing in, " if row["engine"] != "vllm" else ""
    return (f"{stand_in}NVIDIA aiconfigurator vllm_backend.py _prefill_dispatch_overhead_ms at 095f58a "
            "(kvplan.engines.eager_decode_dispatch)")


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
        f"  step                       = " + (f"λ_dp {row['dp_imbalance']:.3f} × " if row.get("dp_imbalance", 1.0) != 1.0
                                             else "") + ("max(Σ operators + comm + overhead, L × t_dispatch)" if row.get("decode_eager") else
                                                     "Σ operators + comm + overhead") + f" = {format_seconds(step.time_s[i])} "
        f"({row['bound']}-bound); floor = max(bytes / peak BW, FLOPs / peak) = {format_seconds(step.floor_s[i])}",
    ]
    if row.get("decode_eager"):
        host = cost.layers * row["decode_dispatch_per_layer_s"]
        why = "--enforce-eager" if row.get("enforce_eager") else "no CUDA graph holds this batch"
        lines.append(f"  eager decode ({why}) = max(GPU step {format_seconds(step.time_s[i] - row['decode_dispatch_s'])}, "
                     f"{cost.layers:g} layers × {format_seconds(row['decode_dispatch_per_layer_s'])} host dispatch = "
                     f"{format_seconds(host)}) = {format_seconds(step.time_s[i])} (" + (
                         "host-bound: the GPU waits for the launches" if row["decode_dispatch_s"] > 0 else
                         "GPU-bound: the launches run ahead") + "; " + (
                         "every decode step" if row.get("enforce_eager") else "every decode batch larger than the "
                         "engine's largest CUDA graph") + f"; {decode_dispatch_source(row)})")
    lines += [
        f"  intensity                  = {row['arithmetic_intensity_flop_per_byte']:.3g} FLOP/B vs ridge "
        f"{machine.ridge_flop_per_byte:.3g} FLOP/B",
        f"  prefill                    = {row['batch']} × {row['isl']:,} tokens in {row['prefill_passes']} pass(es) "
        f"→ {format_seconds(pre.time_s[i])}; TTFT = prefill + first decode step"
        + (" + prefill dispatch" if row.get("request_dispatch_s") else "") + f" = {format_seconds(row['ttft_s'])}",
        "  prefill dispatch           = " + (
            f"{cost.layers:g} layers × {format_seconds(row['prefill_dispatch_per_layer_s'])} = "
            f"{format_seconds(row['request_dispatch_s'])} once per request, added to its TTFT (the host dispatch of a "
            f"prefill no CUDA graph covers, in no step time, as NVIDIA aiconfigurator's TTFT; {dispatch_source(row)})"
            if row.get("request_dispatch_s") else
            f"{row['prefill_dispatch_s'] / (cost.layers * row['prefill_dispatch_per_layer_s']):.0f} eager pass(es) × "
            f"{cost.layers:g} layers × {format_seconds(row['prefill_dispatch_per_layer_s'])} = "
            f"{format_seconds(row['prefill_dispatch_s'])} of the prefill (--enforce-eager: no CUDA graphs, once per "
            f"forward; {dispatch_source(row)})" if row.get("prefill_dispatch_s") else
            "none (every pass replays a CUDA graph, or the engine charges none; see the notes)"),
        f"  request                    = TTFT + ({row['osl']} − 1) × TPOT {format_seconds(row['tpot_s'])} = "
        f"{format_seconds(row['e2e_s'])}; {row['tokens_per_s']:,.1f} tok/s, {row['tokens_per_s_per_gpu']:,.1f} per GPU",
        band_line(row),
    ]
    return lines


def explain_roofline(card, cost, machine, row, pre, step, i) -> list[str]:
    bw, peak = machine.bandwidth_bytes_per_s, machine.peak_flops_per_s
    lines = [
        f"{card.name} on {machine.name}: tp={row['tp']}, ep={row['ep']}, batch={row['batch']}, "
        f"context={row['context']:,}, weights {cost.weights_dtype}, KV {row['kv_dtype']}, compute {machine.compute_dtype}",
    ]
    moe = ""
    if cost.is_moe:
        moe = (f" + {cost.moe_layers:g} MoE layers × {row['experts_touched_per_layer']:.2f} experts touched "
               f"[E(1−(1−k/E)^B), E={cost.num_experts}, k={cost.experts_per_token}] × "
               f"{format_bytes(cost.expert_weight_bytes)}")
    lines += [
        f"  decode weights read = dense {format_bytes(cost.dense_weight_bytes)}{moe}, "
        f"{'÷ tp' if row['ep'] == 1 else 'dense replicated, experts ÷ ep'} → {step.weight_bytes[i]:,.0f} B per GPU",
        f"  decode KV read      = {row['batch']} seq × KV at {row['context']:,} tokens → {step.kv_bytes[i]:,.0f} B per GPU",
        f"  decode FLOPs        = batch × (2 × {cost.body_params_per_token:,.0f} params + 2 × "
        f"{cost.lm_head_params:,.0f} LM head + attention) → {step.flops[i]:.4g} per GPU",
        f"  memory time         = {step.bytes[i]:.4g} B / ({bw:.4g} B/s × η_mem {machine.eta_mem:g}) = "
        f"{format_seconds(step.memory_s[i])} (all bytes)",
        f"  compute time        = {step.flops[i]:.4g} FLOP / ({peak:.4g} FLOP/s × η_flops {machine.eta_flops:g}) = "
        f"{format_seconds(step.compute_s[i])} (all FLOPs)",
        *[f"  {label:19s} = max(memory {format_seconds(step.op_memory_s[k][i])}, compute "
          f"{format_seconds(step.op_compute_s[k][i])}) = {format_seconds(max(step.op_memory_s[k][i], step.op_compute_s[k][i]))}"
          for k, label in enumerate(("dense GEMMs", "expert GEMMs", "attention")) if k != 1 or cost.is_moe],
        f"  communication       = {format_seconds(step.comm_s[i])} "
        f"({'none at one GPU' if row['gpus'] == 1 else 'TP all-reduce / EP all-to-all, not overlapped'})",
        f"  step                = Σ operators + comm + overhead {format_seconds(machine.step_overhead_s)} = "
        f"{format_seconds(step.time_s[i])} ({row['bound']}-bound); floor = max(bytes / peak BW, FLOPs / peak) = "
        f"{format_seconds(step.floor_s[i])}",
        f"  intensity           = {row['arithmetic_intensity_flop_per_byte']:.3g} FLOP/B vs ridge "
        f"{machine.ridge_flop_per_byte:.3g} FLOP/B (peak FLOPS / peak BW)",
        f"  prefill             = {row['batch']} × {row['isl']:,} tokens in {row['prefill_passes']} pass(es): "
        f"{pre.flops[i]:.4g} FLOP (2 × params × tokens + causal attention ∝ S²), {pre.bytes[i]:.4g} B → "
        f"{format_seconds(pre.time_s[i])} ({row['prefill_bound']}-bound); TTFT = prefill + first decode step "
        f"{format_seconds(row['first_decode_step_s'])} = {format_seconds(row['ttft_s'])}",
        f"  request             = TTFT {format_seconds(row['ttft_s'])} + ({row['osl']} − 1) × mean TPOT "
        f"{format_seconds(row['tpot_s'])} = {format_seconds(row['e2e_s'])}; {row['tokens_per_s']:,.1f} tok/s, "
        f"{row['tokens_per_s_per_gpu']:,.1f} per GPU",
    ]
    return lines

"""The H800 operator profile: DeepSeek's own published H800 kernel figures as per-operator efficiencies.

H800 SXM has no aiconfigurator tables. DeepSeek publishes H800 SXM5 figures for the kernels it serves
DeepSeek-V3/R1 with (:mod:`kvplan.calc.deepseek_kernels`, ``kvplan/data/deepseek_h800_kernels.csv``):
DeepGEMM's FP8 GEMMs, FlashMLA's decode kernel, DeepEP's all-to-all. On an ``h800-sxm`` card the
per-operator model reads them where they measure the operator and keeps the card's flat η (named in
the notes) where nobody measured it; ``--eta-mem`` / ``--eta-flops`` or ``--perf-model roofline``
bypass the profile as they bypass the tables. These are DeepSeek's kernels at their own best figures,
not an engine's wrappers around them (vLLM's measured FP8 linear on H100 reaches ~0.95 TB/s where
DeepGEMM's row reaches 2.2–2.7 TB/s): the profile is what an engine running that stack can reach.
"""

from __future__ import annotations

from kvplan.calc.deepseek_kernels import FLASHMLA_SOURCE, MLA_SHAPES, applies, dense_curve, flashmla_decode
from kvplan.calc.efficiency import Flat
from kvplan.calc.operators import OperatorEfficiencies
from kvplan.calc.perfdb import deepgemm_curve

# MLA prefill attention: DeepSeek publishes no dense MLA prefill figure for H800 (FlashMLA's dense prefill kernel
# is SM100 only; its H800 prefill figure, 640 TFLOPS, is the sparse DSA kernel of V3.2). FlashAttention-3, the
# Hopper prefill kernel, reports "with FP16 reaching up to 740 TFLOPs/s (75% utilization)" on H100 SXM5 (Shah et
# al., arXiv:2407.08608, abstract), the H800's compute die: the card's η_flops runs there at the BF16 peak.
PREFILL_NOTE = ("MLA prefill attention: no DeepSeek H800 figure (FlashMLA's dense prefill is SM100 only): the card's "
                "η at the BF16 peak (DeepSeek computes core MLA in BF16); FlashAttention-3 reports up to 740 TFLOPS "
                "(75%) on H100 SXM5, arXiv:2407.08608")


def efficiencies(card, hw, machine, cost, tp: int, expert_parallel: bool, alltoall: str, redundant: float,
                 gemm_dtype: str, moe_dtype: str, base_s: float, per_seq_s: float, notes: list[str]):
    """The per-operator efficiencies of DeepSeek's H800 stack for one deployment, or None where none applies.

    Per operator, where the published figure measures it (else the card's flat η, named in ``notes``):
    attention GEMMs — DeepGEMM's dense rows for DeepSeek-V3's MLA projections (128 heads, hidden 7168, TP 1,
    128-block FP8); dense MLP and shared-expert GEMMs — the same rows (hidden 7168, TP 1); routed experts —
    DeepGEMM's grouped rows under DeepEP dispatch (:func:`kvplan.calc.perfdb.deepgemm_curve`); decode
    attention — FlashMLA for MLA, at the BF16 peak; LM head (BF16) and prefill attention — the card's η.
    """
    if not applies(hw.name):
        return None
    bw = hw.hbm_bandwidth_bytes_per_s
    fp8_peak = hw.peak_flops_per_s.get("fp8") or machine.peak_flops_per_s
    bf16_peak = hw.peak_flops_per_s.get("bf16") or machine.peak_flops_per_s
    flat = Flat(machine.eta_mem, machine.eta_flops, f"{hw.name} card")
    used, missing = [], []
    h = card.hidden_size
    expert_inter = card.moe.expert_params / (3 * h) if card.moe else 0.0  # one expert's intermediate size
    group = card.layer_groups[0]
    mla = group.kind == "mla"
    dense_ok = tp == 1 and gemm_dtype == "fp8_block" and h == 7168
    attn = flat
    if dense_ok and mla and (group.num_heads or card.num_attention_heads) == 128 and group.kv_lora_rank == 512:
        attn = dense_curve(tuple((card.num_layers, n, k) for n, k in MLA_SHAPES), bw, fp8_peak,
                           "DeepSeek-V3 MLA projections")
        used.append(f"attention GEMMs: {attn.source}")
    else:
        missing.append("attention GEMMs")
    mlp = flat
    if dense_ok:
        dense_layers = card.num_layers - (card.moe.num_moe_layers if card.moe else 0)
        shapes = []
        if dense_layers and card.intermediate_size:
            i = card.intermediate_size
            shapes += [(dense_layers, 2 * i, h), (dense_layers, h, i)]
        if card.moe and card.moe.num_shared_experts:
            c = card.moe.num_moe_layers * card.moe.num_shared_experts
            shapes += [(c, 2 * expert_inter, h), (c, h, expert_inter)]
        if shapes:
            mlp = dense_curve(tuple(shapes), bw, fp8_peak, "dense MLP and shared-expert GEMMs")
            used.append(f"MLP GEMMs: {mlp.source}")
    if mlp is flat:
        missing.append("MLP GEMMs")
    experts = flat
    if cost.is_moe:
        curve = (deepgemm_curve("h800_sxm", moe_dtype, h, expert_inter, cost.experts_per_token, cost.num_experts + redundant,
                                bw, fp8_peak) if expert_parallel and alltoall == "deepep" else None)
        if curve is not None:
            experts = curve
            used.append(f"routed experts: {curve.source}")
        else:
            missing.append("routed-expert GEMMs")
    decode = flat
    if mla:
        decode = flashmla_decode(bw, bf16_peak)
        used.append(f"decode attention: {FLASHMLA_SOURCE}")
    else:
        missing.append("decode attention")
    missing.append("LM head (BF16)")
    if not used:  # no operator of this deployment has a DeepSeek figure
        return None
    notes.append(f"{hw.name}: DeepSeek's own kernels measured on H800 SXM5 (kvplan/data/deepseek_h800_kernels.csv; "
                 "what DeepSeek's stack reaches, DeepGEMM / FlashMLA / DeepEP, not any engine's wrappers): "
                 + "; ".join(used))
    notes.append(f"no DeepSeek H800 figure for {', '.join(missing)}: the card's η_mem {machine.eta_mem:g}, "
                 f"η_flops {machine.eta_flops:g} (flat)" + (f"; {PREFILL_NOTE}" if mla else ""))
    return OperatorEfficiencies(attn, mlp, flat, experts, decode, flat, base_s, per_seq_s, {},
                                attention_peak_flops_per_s=bf16_peak if mla else None)


__all__ = ["efficiencies", "PREFILL_NOTE"]

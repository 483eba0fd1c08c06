"""The default step overhead: 3 µs per element-wise kernel, counted per layer kind as aiconfigurator's graphs do.

Hand counts from NVIDIA aiconfigurator 095f58a, aic-core/src/aiconfigurator_core/sdk/models/ (generation ops):
llama.py (LLAMA: Llama, Qwen2, Qwen3 dense) charges generation_embedding once and generation_add_norm_1,
generation_add_norm_2, generation_act_gate per layer; moe.py (MOE: Mixtral, gpt-oss, Qwen3-MoE) charges the
embedding and the two add_norms per layer (the experts' activation is inside the fused MoE op).
"""

import pytest

from kvplan.cards.loader import load_hardware, load_model
from kvplan.engines import get_profile
from kvplan.plans.build import latency_from_names
from kvplan.plans.sizing.latency import Efficiencies, resolve_machine


def _overhead(model, hardware="h100-sxm", engine="trtllm", **kw):
    """The default step overhead on ``engine`` (TensorRT-LLM: aiconfigurator's graph count alone, its attention op
    holding the RoPE; vLLM and SGLang add their attention-layer kernels, tested below)."""
    result = latency_from_names(model, hardware, isl=233, osl=16, batch=1, engine=engine, **kw)
    return result.rows[0]["step_overhead_s"], " ".join(result.assumptions)


def test_qwen3_8b_counts_llamas_three_kernels_per_layer_and_no_qk_norm_in_decode():
    """Qwen3ForCausalLM is aiconfigurator's LLAMA family; its q/k norm is not charged in decode (the decode
    attention drops use_qk_norm). 36 layers: 1 embedding + 36 × (add_norm_1, add_norm_2, act_gate) = 109
    kernels, 3 µs × 109 = 327 µs."""
    overhead, notes = _overhead("qwen3-8b")
    assert overhead == pytest.approx(327e-6, rel=1e-12)
    assert "3 × 36 dense layers + 1 = 109 kernels" in notes and "sdk/models/llama.py" in notes


def test_a_llama_model_is_unchanged():
    """Llama-3.1-8B, 32 layers: 3 × 32 + 1 = 97 kernels, 291 µs (the count before the per-kind split)."""
    overhead, notes = _overhead("llama-3.1-8b")
    assert overhead == pytest.approx(291e-6, rel=1e-12)
    assert "97 kernels" in notes


@pytest.mark.parametrize("model, layers, micros", [("mixtral-8x7b", 32, 195.0), ("gpt-oss-120b", 36, 219.0),
                                                    ("qwen3-235b-a22b", 94, 567.0)])
def test_moe_families_count_two_kernels_per_moe_layer(model, layers, micros):
    """MOE family: 1 embedding + L × (add_norm_1, add_norm_2): Mixtral 2 × 32 + 1 = 65 → 195 µs,
    gpt-oss-120b 2 × 36 + 1 = 73 → 219 µs, Qwen3-235B-A22B 2 × 94 + 1 = 189 → 567 µs."""
    card = load_model(model)
    assert card.moe.num_moe_layers == card.num_layers == layers
    tp = 8 if model == "qwen3-235b-a22b" else 2
    overhead, notes = _overhead(model, tp=tp)
    assert overhead == pytest.approx(micros * 1e-6, rel=1e-12)
    assert f"2 × {layers} MoE layers + 1" in notes


def test_deepseek_v3_counts_its_dense_layers_at_three_and_its_moe_layers_at_two():
    """61 layers, the first 3 dense: 3 × 3 + 2 × 58 + 1 = 126 kernels, 378 µs."""
    overhead, notes = _overhead("deepseek-v3", hardware="h200", tp=8)
    assert overhead == pytest.approx(378e-6, rel=1e-12)
    assert "3 × 3 dense + 2 × 58 MoE layers + 1 = 126 kernels" in notes


def test_an_explicit_or_card_overhead_replaces_the_count():
    """--step-overhead and the card's efficiency.step_overhead_s stay one figure per forward, whatever the model."""
    overhead, notes = _overhead("mixtral-8x7b", tp=2, efficiencies=Efficiencies(step_overhead_s=1e-4))
    assert overhead == 1e-4 and "3 µs ×" not in notes
    hw = load_hardware("h200")
    hw = hw.model_copy(update={"efficiency": hw.efficiency.model_copy(update={"step_overhead_s": 2e-5})})
    from kvplan.calc.roofline import model_cost

    cost = model_cost(load_model("mixtral-8x7b"), get_profile("vllm"), tps=[2])
    machine, notes = resolve_machine(hw, "bf16", "bf16", cost.layers, Efficiencies(), 2, moe_layers=cost.moe_layers)
    assert machine.step_overhead_s == 2e-5 and not any("3 µs ×" in n for n in notes)


@pytest.mark.parametrize("model, engine, tp, kernels", [
    # Llama-3.1-8B: 3 × 32 + 1 = 97, + RoPE in each of 32 full layers = 129 kernels (vLLM and SGLang alike)
    ("llama-3.1-8b", "vllm", 1, 129), ("llama-3.1-8b", "sglang", 1, 129),
    # Qwen3-235B-A22B, 94 MoE layers: 2 × 94 + 1 = 189; vLLM + RoPE 94 = 283; SGLang + (q/k norm, RoPE) × 94 = 377
    ("qwen3-235b-a22b", "vllm", 8, 283), ("qwen3-235b-a22b", "sglang", 8, 377),
    # Qwen3-Next-80B-A3B: 2 × 48 + 1 = 97, + (q/k norm, RoPE, output gate sigmoid and multiply) × 12 full-attention
    # layers + (split_reshape_cat, conv1d update, gating + recurrence, gated RMSNorm) × its 36 linear ones = 289
    ("qwen3-next-80b-a3b", "sglang", 8, 289),
    # gpt-oss-20b: 2 × 24 + 1 = 49, + RoPE in its 12 sliding and 12 full layers = 73
    ("gpt-oss-20b", "vllm", 1, 73),
    # OPT-13B: learned positions, no RoPE: 3 × 40 + 1 = 121 on any engine
    ("opt-13b", "vllm", 1, 121),
    # DeepSeek-V3 on vLLM: its MLA layers are not counted (kernels.MLA_KERNELS_SOURCE): 3 × 3 + 2 × 58 + 1 = 126
    ("deepseek-v3", "vllm", 8, 126),
    # TensorRT-LLM's attention op holds the RoPE: the graph count alone, 2 × 94 + 1 = 189
    ("qwen3-235b-a22b", "trtllm", 8, 189),
])
def test_vllm_and_sglang_add_the_kernels_their_attention_layers_run_outside_the_measured_op(model, engine, tp, kernels):
    """kvplan.plans.sizing.kernels.attention_kernels: vLLM and SGLang rotate q, k in the model before the attention
    call that aiconfigurator's collectors time; SGLang's Qwen3 models run apply_qk_norm before it too."""
    hardware = "b200" if model in ("qwen3-235b-a22b", "qwen3-next-80b-a3b", "deepseek-v3") else "h100-sxm"
    overhead, notes = _overhead(model, hardware=hardware, engine=engine, tp=tp)
    assert overhead == pytest.approx(kernels * 3e-6, rel=1e-12)
    assert f"= {kernels} kernels" in notes


def test_the_roofline_model_keeps_the_graph_count():
    """--perf-model roofline prices no operator from a measured table: Llama-3.1-8B on vLLM stays 3 × 32 + 1 = 97."""
    overhead, notes = _overhead("llama-3.1-8b", engine="vllm", perf_model="roofline")
    assert overhead == pytest.approx(97 * 3e-6, rel=1e-12) and "= 97 kernels" in notes


@pytest.mark.parametrize("model, hardware, kv_dtype, kernels", [
    # SGLang forward_absorb (forward_mla.py @c513a48), FP8 checkpoint, per MLA layer: q_a ‖ kv_a norm (1) +
    # W_UK quantise + bmm_fp8 (2) + RoPE (1) + W_UV quantise + bmm_fp8 (2) = 6; DeepSeek-V3: 126 + 6 × 61 = 492
    ("deepseek-v3", "h200", None, 492),
    # B200 with a BF16 KV cache: trtllm_mla does not fuse the RoPE (_fuse_rope_for_trtllm_mla needs FP8 KV): 492
    ("deepseek-v3", "b200", None, 492),
    # B200 with an FP8 KV cache: the RoPE is fused into the backend's rope + quantise: 126 + 5 × 61 = 431
    ("deepseek-v3", "b200", "fp8", 431),
    # Kimi-K2, 61 layers (1 dense): 3 × 1 + 2 × 60 + 1 = 124, + 6 × 61 = 490
    ("kimi-k2", "h200", None, 490),
])
def test_sglang_mla_layers_add_the_absorbed_paths_kernels(model, hardware, kv_dtype, kernels):
    """SGLang runs the q_a / kv_a norms, both absorbed bmms (with their FP8 activation quantise) and, unless the
    SM100 trtllm_mla backend fuses it with an FP8 KV cache, the RoPE outside the MLA attention call that
    aiconfigurator's collector times (collect_mla.py lines 584-593)."""
    kw = {"kv_dtype": kv_dtype} if kv_dtype else {}
    overhead, notes = _overhead(model, hardware=hardware, engine="sglang", tp=8, **kw)
    assert overhead == pytest.approx(kernels * 3e-6, rel=1e-12)
    assert f"= {kernels} kernels" in notes and "MLA layers" in notes and "forward_mla.py @c513a48" in notes


def test_a_bf16_mla_checkpoint_has_no_quantise_kernels():
    """BF16 weights: torch.bmm alone for W_UK and W_UV: 1 + 1 + 1 + 1 = 4 per MLA layer."""
    from kvplan.plans.sizing.kernels import attention_kernels

    card, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    assert attention_kernels(card, "sglang", weights_dtype="bf16", kv_dtype="bf16", hardware=hw) == ((61.0, 4, "MLA"),)
    assert attention_kernels(card, "sglang", weights_dtype="fp8", kv_dtype="bf16", hardware=hw) == ((61.0, 6, "MLA"),)
    # not counted on AMD (SGLang's ROCm MLA path, forward_mla_rocm.py, was not read) nor on vLLM
    assert attention_kernels(card, "sglang", weights_dtype="fp8", hardware=load_hardware("mi300x")) == ()
    assert attention_kernels(card, "vllm", weights_dtype="fp8", hardware=hw) == ()


def test_sglang_gated_deltanet_layers_add_their_decode_kernels():
    """Qwen3-Next on SGLang: 4 kernels per Gated DeltaNet layer (qwen3_next.py @0201bc8, gdn_backend.py @a53109f)
    and 2 + 2 per full-attention layer (q/k norm, RoPE; the output gate's sigmoid and multiply); vLLM keeps the
    RoPE alone (its Qwen3-Next was not read)."""
    from kvplan.plans.sizing.kernels import attention_kernels

    card = load_model("qwen3-next-80b-a3b")
    assert attention_kernels(card, "sglang", hardware=load_hardware("b200")) == (
        (12.0, 4, "attention"), (36.0, 4, "linear-attention"))
    assert attention_kernels(card, "vllm", hardware=load_hardware("b200")) == ((12.0, 1, "attention"),)
    overhead, notes = _overhead("qwen3-next-80b-a3b", hardware="b200", engine="sglang", tp=8)
    assert overhead == pytest.approx(289 * 3e-6, rel=1e-12)
    assert "4 × 36 linear-attention layers" in notes and "gdn_backend.py @a53109f" in notes

"""kvplan's default step overhead: a fixed latency per element-wise kernel of a forward, counted per layer kind.

NVIDIA aiconfigurator (ai-dynamo/aiconfigurator, Apache-2.0, commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce)
prices every element-wise op of its model graphs (``ops.ElementWise``, ``ops.Embedding``) through one memory-op
formula, ``bytes / (mem_bw × mem_bw_empirical_scaling_factor) + mem_empirical_constant_latency``
(aic-core/rust/aiconfigurator-core/src/operators/attention.rs ``mem_op_latency_ms``, lines 39-44), with
``mem_empirical_constant_latency: 0.000003`` ("3us ... nonofficial correction based on observations",
aic-core/src/aiconfigurator_core/systems/*.yaml). Each op is charged ``scale_factor`` times (the layer count;
operators/elementwise.rs line 62), so the constant is paid once per kernel per layer. Its generation (decode)
graphs, in aic-core/src/aiconfigurator_core/sdk/models/ (family per HF architecture: common.py line 691
``ARCHITECTURE_TO_MODEL_FAMILY``), charge per forward:

- LLAMA (``LlamaForCausalLM``, ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``): ``generation_embedding`` (llama.py
  line 142) and, per layer, ``generation_add_norm_1`` (143), ``generation_add_norm_2`` (168),
  ``generation_act_gate`` (176): 3 L + 1. Qwen3's per-head q/k RMSNorm is not charged in decode: the decode
  attention drops ``use_qk_norm`` (rust src/py_ops.rs lines 1125-1127, "the decode table never keyed on it").
- MOE (``MixtralForCausalLM``, ``GptOssForCausalLM``, ``Qwen3MoeForCausalLM``): ``generation_embedding``
  (moe.py line 271), ``generation_add_norm_1`` (272), ``generation_add_norm_2`` (297): 2 L + 1. The routed
  experts' activation is inside the fused MoE op, and the block adds no element-wise op without shared experts
  (moe.py line 248 ``num_shared_experts=0``; blocks/moe.py lines 333-363).
- DEEPSEEK (``DeepseekV3ForCausalLM``: DeepSeek-V3, Kimi-K2): ``generation_embedding`` (deepseek.py line 875),
  ``generation_add_norm_1`` (876), ``generation_add_norm_2`` (884): 2 L + 1 on the main stream. The shared
  expert's ``generation_shared_act_gate`` (915) runs in the overlapped group of ``generation_moe_overlap``
  (line 986, latency = max(routed, shared)), behind the routed experts.

kvplan counts the card's layers by kind with these figures: 3 kernels per layer with a dense MLP (add+norm × 2,
activation), 2 per MoE layer (add+norm × 2), + 1 (the embedding). aiconfigurator's DeepSeek graph prices all
61 layers as MoE layers (2 × 61 + 1 = 123); kvplan counts DeepSeek-V3's 3 dense layers at the dense figure
(3 × 3 + 2 × 58 + 1 = 126). Cards of architectures aiconfigurator has no graph for take the same per-kind
counts. Its context (prefill) graphs charge more (the attention's fused rope, KV-write and, for Qwen3, q/k
norm extras, rust operators/attention.rs lines 258-267); kvplan charges one overhead per forward, this count.
Engines whose model code runs kernels between the QKV GEMM and the attention call that no measured operator
holds (``attention_kernels``), one more each per attention layer:

- RoPE on vLLM and SGLang: their models rotate q and k in the layer's forward before the attention call (SGLang
  python/sglang/srt/models/llama.py @0023954 ``LlamaAttention.forward``: ``q, k = self.rotary_emb(positions, q,
  k)`` then ``self.attn(q, k, v, forward_batch)``; qwen3_moe.py @008af3a ``apply_qk_norm_rope``; vLLM
  vllm/model_executor/models/gpt_oss.py @0025d69 ``OAIAttention.forward``: ``q, k = self.rotary_emb(positions,
  q, k)``), and aiconfigurator's decode-attention collectors time the attention call from q, k already rotated
  (collector/sglang/collect_attn.py @095f58a line 672 ``layer(q, k, v, forward_batch)``; collector/vllm/
  collect_attn.py lines 296-312: ``do_kv_cache_update`` and ``impl.forward``), the KV-cache write included. Not on
  TensorRT-LLM, whose attention op applies RoPE inside the measured op where its backend fuses it (collector/
  trtllm/collect_attn.py lines 194-202), nor for OPT (learned positions, no RoPE). Full and sliding layers only:
  MLA and linear-attention layers keep the count above. The per-operator model only (``--perf-model
  operators``, the default): the one-η roofline prices no operator from a measured table.
- Qwen3's per-head q/k RMSNorm on SGLang (families qwen3, qwen3-next): ``apply_qk_norm`` before the RoPE
  (qwen3.py @01b5f57 ``Qwen3Attention.forward_prepare_native``, qwen3_moe.py @008af3a ``apply_qk_norm_rope``:
  one fused in-place q/k norm kernel, or q_norm and k_norm on two streams), counted once. Not counted on vLLM:
  it compiles the layer with torch.compile, and how its compiled graph groups the norm with the RoPE was not
  read here.
- MLA decode layers on SGLang (DeepSeek-V2/V3/R1, Kimi-K2; NVIDIA GPUs): the absorbed path
  ``DeepseekMLAForwardMixin.forward_absorb_prepare`` / ``forward_absorb_core`` (sgl-project/sglang
  python/sglang/srt/models/deepseek_common/attention_forward_methods/forward_mla.py @c513a48) runs, between the
  fused q_a/kv_a GEMM and q_b GEMM (kvplan's attention GEMMs) and the o_proj GEMM, these kernels outside the
  attention call: ``q = self.q_a_layernorm(q)`` beside ``k_nope = self.kv_a_layernorm(k_nope)`` (two streams when
  a CUDA graph is captured: counted once); the W_UK absorption, ``bmm_fp8(q_nope_val, self.w_kc, ...)`` after
  ``per_tensor_quant_mla_fp8`` where ``w_kc`` is FP8 (or DeepGEMM's masked grouped GEMM after
  ``per_token_group_quant_mla_deep_gemm_masked_fp8``: two kernels either way), ``torch.bmm`` alone in BF16;
  ``q_pe, k_pe = self.rotary_emb(positions, q_pe, k_pe)`` unless ``_fuse_rope_for_trtllm_mla`` (the trtllm_mla
  backend, SGLang's DeepSeek default on SM100 (B200, GB200), with an FP8 KV cache: the backend's fused
  RoPE + quantise); and the W_UV absorption after the attention, again quantise + ``bmm_fp8`` (FP8) or
  ``torch.bmm``. aiconfigurator 095f58a collector/sglang/collect_mla.py times only ``layer(q, k, v,
  forward_batch, q_rope=..., k_rope=...)`` (lines 203-214, 584-593: q already absorbed, q_rope given), and kvplan
  holds the bmms' weights (kv_b_proj) in the attention GEMMs' bytes at one representative shape, which prices
  no kernel of their own. So per MLA layer: 1 (norms) + 2 × (1 bmm + 1 quantise if the weights are FP8) +
  1 RoPE unless fused = 6 for an FP8 checkpoint with a BF16 KV cache (4 in BF16; 5 on SM100 with an FP8 KV
  cache). aiconfigurator measures the two bmm ops themselves (its mla_bmm tables, collector/sglang/
  collect_mla_bmm.py: quantise + bmm_fp8, or torch.bmm) and charges them in its graph (sdk/models/deepseek.py
  ``generation_bmm_pre`` / ``generation_bmm_post``, lines 821-840): SGLang 0.5.14 on H100 at 16 heads and one
  token, 7.3 µs FP8 and 4.0 µs BF16 for W_UK (``mla_gen_pre``), 7.6 µs and 4.5 µs for W_UV (``mla_gen_post``),
  against the 2 × 3 µs and 3 µs charged here: the floor, not the measured time. Not counted on vLLM (its MLA
  decode rows are aiconfigurator's vLLM 0.14.0 kernel tables, whose collector is not in 095f58a, so what they
  time was not read) nor on AMD GPUs (SGLang's ROCm MLA path, forward_mla_rocm.py, was not read).
- Gated DeltaNet (linear-attention) decode layers on SGLang (Qwen3-Next, family qwen3-next): between the
  in_proj_qkvz / in_proj_ba GEMMs and the out_proj GEMM (kvplan's attention GEMMs), ``Qwen3GatedDeltaNet.forward``
  (sgl-project/sglang python/sglang/srt/models/qwen3_next.py @0201bc8) runs ``fused_qkvzba_split_reshape_cat``
  (a Triton kernel, under a CUDA graph where num_v_heads / num_k_heads is 1, 2 or 4: Qwen3-Next's 32 / 16),
  the backend's decode and ``core_attn_out = self.norm(core_attn_out, z)`` (RMSNormGated, one kernel);
  ``GDNAttnBackend.forward_decode`` (python/sglang/srt/layers/attention/linear/gdn_backend.py @a53109f) runs
  ``causal_conv1d_update`` and one fused gating + recurrent-update kernel (``TritonGDNKernel.decode``:
  ``fused_sigmoid_gating_delta_rule_update``, or the packed decode "fuse QKV extraction + gating + recurrent
  update into a single Triton kernel"). aiconfigurator measures the latter two (collector/sglang/collect_gdn.py
  at 095f58a: ``causal_conv1d_update``, ``fused_recurrent_gated_delta_rule_packed_decode``) and charges them as
  GDN ops of their own (sdk/models/qwen35.py ``generation_gdn_conv1d``, ``generation_gdn_recurrence``); kvplan
  ships no GDN table, prices the layers' recurrent state as bytes read in the attention operator, and so no
  kernel of theirs: 4 per linear-attention layer. Qwen3-Next's full-attention layers also apply their output
  gate after the attention call (``Qwen3HybridAttentionDecoderLayer.self_attention``: ``gate =
  torch.sigmoid(gate)``, ``attn_output = attn_output * gate``): 2 more per full-attention layer. Not counted:
  the recurrent kernel's write of the state back in place (bytes, not a kernel), the shared-expert gate of
  Qwen3-Next's MoE block, vLLM's Qwen3-Next (not read).
"""

from __future__ import annotations

ELEMENTWISE_LATENCY_S = 3e-6
DENSE_LAYER_KERNELS = 3      # add+norm × 2, activation (aiconfigurator models/llama.py lines 143, 168, 176)
MOE_LAYER_KERNELS = 2        # add+norm × 2 (models/moe.py lines 272, 297; models/deepseek.py lines 876, 884)
FORWARD_KERNELS = 1          # the embedding (models/llama.py line 142, moe.py 271, deepseek.py 875)
KERNELS_SOURCE = ("aiconfigurator 095f58a mem_empirical_constant_latency 3 µs, charged per element-wise kernel "
                  "of its generation graphs: 3 per dense-MLP layer (add+norm ×2, activation: sdk/models/llama.py "
                  "lines 143, 168, 176), 2 per MoE layer (add+norm ×2, the experts' activation inside the fused "
                  "MoE op: sdk/models/moe.py lines 272, 297, deepseek.py lines 876, 884), + 1 embedding")


ROPE_ENGINES = ("vllm", "sglang")
NO_ROPE_FAMILIES = ("opt",)
QK_NORM_FAMILIES = ("qwen3", "qwen3-next")
ATTENTION_KERNELS_SOURCE = (
    "RoPE outside the measured attention op on vLLM and SGLang (SGLang models/llama.py @0023954 and qwen3_moe.py "
    "@008af3a, vLLM models/gpt_oss.py @0025d69: q, k = self.rotary_emb(positions, q, k) before the attention call; "
    "aiconfigurator 095f58a collector/sglang/collect_attn.py line 672 and collector/vllm/collect_attn.py lines "
    "296-312 time the attention from rotated q, k); Qwen3's q/k RMSNorm on SGLang (qwen3.py @01b5f57, "
    "qwen3_moe.py @008af3a: apply_qk_norm before the RoPE)")


MLA_ENGINES = ("sglang",)
MLA_VENDORS = ("NVIDIA",)
FUSED_ROPE_MLA_HARDWARE = ("b200", "gb200")     # SM100: SGLang's DeepSeek default MLA backend is trtllm_mla
MLA_KERNELS_SOURCE = (
    "SGLang MLA decode outside the measured attention call (models/deepseek_common/attention_forward_methods/"
    "forward_mla.py @c513a48 forward_absorb_prepare / forward_absorb_core: q_a_layernorm beside kv_a_layernorm, "
    "the W_UK and W_UV bmms (per_tensor_quant_mla_fp8 + bmm_fp8 where w_kc is FP8, torch.bmm in BF16), "
    "rotary_emb on q_pe, k_pe unless _fuse_rope_for_trtllm_mla; aiconfigurator 095f58a collector/sglang/"
    "collect_mla.py lines 584-593 time the attention call alone)")


LINEAR_ENGINES = ("sglang",)
GDN_FAMILIES = ("qwen3-next",)
GDN_LAYER_KERNELS = 4          # split_reshape_cat, causal_conv1d_update, gating + recurrent update, RMSNormGated
OUTPUT_GATE_FAMILIES = ("qwen3-next",)
OUTPUT_GATE_KERNELS = 2        # torch.sigmoid(gate), attn_output * gate
GDN_KERNELS_SOURCE = (
    "SGLang Gated DeltaNet decode outside any measured op (models/qwen3_next.py @0201bc8 Qwen3GatedDeltaNet.forward: "
    "fused_qkvzba_split_reshape_cat, self.norm(core_attn_out, z); layers/attention/linear/gdn_backend.py @a53109f "
    "GDNAttnBackend.forward_decode: causal_conv1d_update, the fused gating + recurrent update; aiconfigurator "
    "095f58a times the last two in collector/sglang/collect_gdn.py, a table kvplan does not ship) and Qwen3-Next's "
    "attention output gate (Qwen3HybridAttentionDecoderLayer.self_attention: torch.sigmoid(gate), "
    "attn_output * gate)")


def _mla_layer_kernels(weights_dtype: str | None, kv_dtype: str | None, hardware: str | None) -> int:
    """SGLang's kernels per MLA decode layer outside the measured ops (module docstring): the q_a / kv_a norms
    (two streams, 1), each absorbed bmm (1, + its activation quantise where the weights are FP8) and the RoPE
    (1, unless the SM100 trtllm_mla backend fuses it with an FP8 KV cache)."""
    fp8 = str(weights_dtype or "").startswith("fp8")
    fused_rope = (hardware in FUSED_ROPE_MLA_HARDWARE) and str(kv_dtype or "").startswith("fp8")
    return 1 + 2 * (1 + (1 if fp8 else 0)) + (0 if fused_rope else 1)


def attention_kernels(card, engine: str | None, *, weights_dtype: str | None = None, kv_dtype: str | None = None,
                      hardware=None, perf_model: str = "operators") -> tuple[tuple[float, int, str], ...]:
    """The kernels ``engine``'s model code runs in its attention layers outside every measured operator (module
    docstring), one (layers, kernels each, label) part per layer kind: RoPE on vLLM and SGLang, + Qwen3's q/k norm
    on SGLang (+ Qwen3-Next's output gate), per full or sliding layer; SGLang's MLA decode kernels per MLA layer on
    NVIDIA GPUs (they depend on the resolved ``weights_dtype``, ``kv_dtype`` and the ``hardware`` card); SGLang's
    Gated DeltaNet decode kernels per linear-attention layer. Empty where nothing is charged, and for every
    ``perf_model`` but the per-operator one (the one-η roofline prices no operator from a measured table)."""
    from kvplan.engines import canonical_engine

    if perf_model != "operators":
        return ()
    engine = canonical_engine(engine) if engine else None
    parts = []
    if engine in ROPE_ENGINES and card.family not in NO_ROPE_FAMILIES:
        layers = float(sum(g.count for g in card.layer_groups if g.kind in ("full", "sliding")))
        each = 1 + (1 if engine == "sglang" and card.family in QK_NORM_FAMILIES else 0)
        each += OUTPUT_GATE_KERNELS if engine in LINEAR_ENGINES and card.family in OUTPUT_GATE_FAMILIES else 0
        if layers:
            parts.append((layers, each, "attention"))
    vendor = getattr(hardware, "vendor", None)
    if engine in MLA_ENGINES and vendor in MLA_VENDORS:
        mla = float(sum(g.count for g in card.layer_groups if g.kind == "mla"))
        if mla:
            parts.append((mla, _mla_layer_kernels(weights_dtype, kv_dtype, getattr(hardware, "name", None)), "MLA"))
    if engine in LINEAR_ENGINES and card.family in GDN_FAMILIES:
        linear = float(sum(g.count for g in card.layer_groups if g.kind == "linear"))
        if linear:
            parts.append((linear, GDN_LAYER_KERNELS, "linear-attention"))
    return tuple(parts)


def _parts(attention) -> tuple:
    """``attention`` as (layers, each, label) parts: a tuple of parts, or one (layers, each) pair."""
    if not attention:
        return ()
    if isinstance(attention[0], (tuple, list)):
        return tuple(attention)
    return ((attention[0], attention[1], "attention"),)


def elementwise_kernels(layers: float, moe_layers: float = 0.0, attention=()) -> float:
    """Element-wise kernels of one forward: 3 per dense-MLP layer, 2 per MoE layer, + 1, and the engine's
    ``attention`` kernels, Σ layers × kernels each over its parts (:func:`attention_kernels`)."""
    dense = float(layers) - float(moe_layers)
    return (DENSE_LAYER_KERNELS * dense + MOE_LAYER_KERNELS * float(moe_layers) + FORWARD_KERNELS
            + sum(float(p[0]) * p[1] for p in _parts(attention)))


def attention_sources(attention) -> str:
    """The sources of the ``attention`` parts charged (empty where none)."""
    labels = {p[2] for p in _parts(attention) if p[0] and p[1]}
    sources = (("attention", ATTENTION_KERNELS_SOURCE), ("MLA", MLA_KERNELS_SOURCE),
               ("linear-attention", GDN_KERNELS_SOURCE))
    return "; ".join(src for label, src in sources if label in labels)


def kernels_note(layers: float, moe_layers: float, attention=()) -> str:
    """The count in words: ``3 × 3 dense + 2 × 58 MoE layers + 1 + 6 × 61 MLA layers = 492 kernels``."""
    dense = float(layers) - float(moe_layers)
    parts = []
    if dense:
        parts.append(f"{DENSE_LAYER_KERNELS} × {dense:g} dense")
    if moe_layers:
        parts.append(f"{MOE_LAYER_KERNELS} × {float(moe_layers):g} MoE")
    extra = "".join(f" + {p[1]} × {float(p[0]):g} {p[2]} layers" for p in _parts(attention) if p[0] and p[1])
    total = elementwise_kernels(layers, moe_layers, attention)
    return f"{' + '.join(parts)} layers + {FORWARD_KERNELS}{extra} = {total:g} kernels"


__all__ = ["ELEMENTWISE_LATENCY_S", "DENSE_LAYER_KERNELS", "MOE_LAYER_KERNELS", "FORWARD_KERNELS", "KERNELS_SOURCE",
           "ATTENTION_KERNELS_SOURCE", "MLA_KERNELS_SOURCE", "GDN_KERNELS_SOURCE", "attention_kernels",
           "attention_sources", "elementwise_kernels", "kernels_note"]

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


def elementwise_kernels(layers: float, moe_layers: float = 0.0) -> float:
    """Element-wise kernels of one forward: 3 per dense-MLP layer, 2 per MoE layer, + 1 (module docstring)."""
    dense = float(layers) - float(moe_layers)
    return DENSE_LAYER_KERNELS * dense + MOE_LAYER_KERNELS * float(moe_layers) + FORWARD_KERNELS


def kernels_note(layers: float, moe_layers: float) -> str:
    """The count in words: ``3 × 3 dense + 2 × 58 MoE layers + 1 = 126 kernels``."""
    dense = float(layers) - float(moe_layers)
    parts = []
    if dense:
        parts.append(f"{DENSE_LAYER_KERNELS} × {dense:g} dense")
    if moe_layers:
        parts.append(f"{MOE_LAYER_KERNELS} × {float(moe_layers):g} MoE")
    return f"{' + '.join(parts)} layers + {FORWARD_KERNELS} = {elementwise_kernels(layers, moe_layers):g} kernels"


__all__ = ["ELEMENTWISE_LATENCY_S", "DENSE_LAYER_KERNELS", "MOE_LAYER_KERNELS", "FORWARD_KERNELS", "KERNELS_SOURCE",
           "elementwise_kernels", "kernels_note"]

"""Bytes per element of KV-cache and weight formats, with the scales the formats carry.

KV formats (``--kv-dtype``):

==========================  =========  ==================================================
name                        B/element  scales (per token, per layer)
==========================  =========  ==================================================
bf16, fp16                  2          none
fp32                        4          none
fp8, fp8_e4m3, fp8_e5m2     1          per-tensor (negligible); vLLM stores uint8
int8                        1          per-tensor (TensorRT-LLM INT8 KV)
fp8_per_token_head,         1          one fp32 scale per KV head for K and for V:
int8_per_token_head                    2 × heads × 4 B (vLLM ``*_per_token_head``)
int4                        0.5        fp16 scale + fp16 zero per KV head for K and for V:
                                       2 × heads × 4 B (LMDeploy per-head per-token int4)
fp4 (NVFP4)                 0.5        one fp8 scale per 16 elements: +1/16 B per element
fp8_ds_mla                  —          656 B per token per layer, MLA only (vLLM)
==========================  =========  ==================================================

Weight formats (``--weights-dtype``) count bits per weight of the quantised linear layers;
embeddings and the LM head stay in the model dtype:
bf16/fp16 16, fp32 32, fp8 8, int8 8, int4 4 + 16/128 (AWQ/GPTQ g128: one fp16 scale per
128 weights) + 4/128 (packed int4 zero point) = 4.15625, mxfp4 4 + 8/32 = 4.25 (OCP MX spec:
one E8M0 scale per 32), fp4 (NVFP4) 4 + 8/16 = 4.5 (one E4M3 scale per 16).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InputError


@dataclass(frozen=True)
class KVFormat:
    """A KV-cache element format."""

    name: str
    element_bytes: float
    per_head_scale_bytes: float = 0.0  # per token per layer per KV head, for K and V each
    group_scale_bytes_per_element: float = 0.0
    mla_token_layer_bytes: int | None = None  # a fixed MLA record (fp8_ds_mla)

    def bytes_for(self, elements: float, heads: float) -> float:
        """Bytes of ``elements`` K+V elements spread over ``heads`` heads (×2 for K and V scales)."""
        return (
            elements * (self.element_bytes + self.group_scale_bytes_per_element)
            + 2 * heads * self.per_head_scale_bytes
        )


KV_FORMATS: dict[str, KVFormat] = {
    "bf16": KVFormat("bf16", 2),
    "fp16": KVFormat("fp16", 2),
    "fp32": KVFormat("fp32", 4),
    "fp8": KVFormat("fp8", 1),
    "fp8_e4m3": KVFormat("fp8_e4m3", 1),
    "fp8_e5m2": KVFormat("fp8_e5m2", 1),
    "int8": KVFormat("int8", 1),
    "fp8_per_token_head": KVFormat("fp8_per_token_head", 1, per_head_scale_bytes=4),
    "int8_per_token_head": KVFormat("int8_per_token_head", 1, per_head_scale_bytes=4),
    "int4": KVFormat("int4", 0.5, per_head_scale_bytes=4),
    "fp4": KVFormat("fp4", 0.5, group_scale_bytes_per_element=1 / 16),
    "fp8_ds_mla": KVFormat("fp8_ds_mla", 1, mla_token_layer_bytes=656),
}
KV_DTYPE_NAMES = ("auto", *KV_FORMATS)

WEIGHT_BITS: dict[str, float] = {
    "fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8,
    "int4": 4 + 16 / 128 + 4 / 128, "mxfp4": 4 + 8 / 32, "fp4": 4 + 8 / 16,
}
WEIGHT_DTYPE_NAMES = ("auto", *WEIGHT_BITS)
MODEL_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def kv_format(name: str, model_dtype: str) -> KVFormat:
    """Resolve ``--kv-dtype`` (``auto`` = the model's dtype, as in vLLM and TensorRT-LLM)."""
    if name == "auto":
        name = model_dtype
    try:
        return KV_FORMATS[name]
    except KeyError:
        raise InputError(
            f"unknown KV cache dtype '{name}'", f"choose one of: {', '.join(KV_DTYPE_NAMES)}"
        ) from None


def weight_bits(name: str) -> float:
    try:
        return WEIGHT_BITS[name]
    except KeyError:
        raise InputError(
            f"unknown weights dtype '{name}'", f"choose one of: {', '.join(WEIGHT_DTYPE_NAMES)}"
        ) from None

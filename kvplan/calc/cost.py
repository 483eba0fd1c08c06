"""What a model costs per forward pass: weight bytes by operator class, FLOPs per token, attention per key.

:func:`model_cost` resolves a model card for one weight format, KV format and engine into a
:class:`ModelCost` (formulas and sources in :mod:`kvplan.calc.roofline`'s docstring: weights read,
FLOPs per token ``2 × body_params``, attention FLOPs per query token per key per layer, causal
prefill keys ``Σ min(i, window)``). :mod:`kvplan.calc.roofline` times passes over it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from kvplan.calc.dtypes import MODEL_DTYPE_BYTES, weight_bits
from kvplan.calc.kv import KVLayout, kv_layout
from kvplan.calc.memory import routed_expert_params
from kvplan.cards.schema import ModelCard
from kvplan.engines import EngineProfile
from kvplan.errors import CardError


def compute_dtype_for(weights_dtype: str, model_dtype: str) -> str:
    """The tensor-core dtype the GEMMs run in for a weight format.

    bf16/fp16/fp32 → themselves; fp8 → fp8 (W8A8, TensorRT-LLM / vLLM FP8); int8 → int8
    (SmoothQuant W8A8); fp4 → fp4 (NVFP4 W4A4); int4 (AWQ/GPTQ) and mxfp4 (gpt-oss on Hopper)
    dequantise to the model dtype (W4A16) before the multiply.
    """
    if weights_dtype in ("int4", "mxfp4"):
        return model_dtype
    return weights_dtype


# --------------------------------------------------------------------------- model figures


@dataclass(frozen=True)
class AttentionGroup:
    """A layer group's attention cost: FLOPs per query token per key per layer, and its window."""

    kind: str
    layers: float
    decode_flops_per_key: float
    prefill_flops_per_key: float
    window: float  # math.inf when every key is attended


@dataclass(frozen=True)
class ModelCost:
    """A model card resolved into the figures a roofline needs (one weight and KV format)."""

    name: str
    weights_dtype: str
    hidden_size: int
    layers: float
    other_weight_bytes: float     # always-read weights except the LM head, whole model
    lm_head_weight_bytes: float
    expert_weight_bytes: float    # one routed expert in one layer
    moe_layers: float
    num_experts: int
    experts_per_token: int
    dense_params_per_token: float   # always-read matmul parameters a token passes through, LM head excluded
    routed_params_per_token: float  # k routed experts in every MoE layer
    lm_head_params: float
    groups: tuple[AttentionGroup, ...]
    layouts: dict = field(compare=False, repr=False)  # tp -> KVLayout (reads: no paging)
    kv_scale: float = 1.0
    max_nodes_per_token: int | None = None   # node-limited routing (card moe.max_nodes_per_token)

    @property
    def dense_weight_bytes(self) -> float:
        """Weights every pass reads in full (whole model, one copy)."""
        return self.other_weight_bytes + self.lm_head_weight_bytes

    @property
    def body_params_per_token(self) -> float:
        """Every matmul parameter one token passes through except the LM head."""
        return self.dense_params_per_token + self.routed_params_per_token

    @property
    def is_moe(self) -> bool:
        return self.moe_layers > 0

    def layout(self, tp: int) -> KVLayout:
        try:
            return self.layouts[int(tp)]
        except KeyError:
            raise KeyError(f"no KV layout resolved for tp={tp}; pass it in model_cost(tps=...)") from None

    def kv_sequence_bytes(self, context, tp=1):
        """KV bytes one sequence of ``context`` tokens holds on one GPU (what a decode step reads)."""
        ctx = np.asarray(context, dtype=np.float64)
        tpa = np.asarray(tp)
        if tpa.ndim == 0:
            return self.layout(int(tpa)).sequence_bytes(ctx, per_gpu=True) * self.kv_scale
        ctx_b, tp_b = np.broadcast_arrays(ctx, tpa)
        out = np.empty(ctx_b.shape)
        for t in np.unique(tp_b):  # a handful of tp values, each one vectorised evaluation
            mask = tp_b == t
            out[mask] = self.layout(int(t)).sequence_bytes(ctx_b[mask], per_gpu=True)
        return out * self.kv_scale

    def kv_token_bytes(self, tp=1):
        """KV bytes one new token writes on one GPU (every layer stores it, windows included)."""
        tpa = np.asarray(tp)
        if tpa.ndim == 0:
            return self.layout(int(tpa)).bytes_per_token_per_gpu * self.kv_scale
        keys, where = np.unique(tpa, return_inverse=True)  # a handful of tp values, looked up once each
        values = np.array([self.layout(int(t)).bytes_per_token_per_gpu for t in keys], dtype=float)
        return values[where].reshape(tpa.shape) * self.kv_scale

    def decode_attention_flops(self, position):
        """Attention FLOPs of one query token at ``position`` (it attends min(position, window) keys)."""
        pos = np.asarray(position, dtype=np.float64)
        total = np.zeros_like(pos)
        for g in self.groups:
            if g.decode_flops_per_key:
                total = total + g.layers * g.decode_flops_per_key * np.minimum(pos, g.window)
        return total

    def prefill_attention_flops(self, start, end):
        """Causal attention FLOPs of positions ``start+1 … end`` of one sequence: Σ min(i, window) keys."""
        a = np.asarray(start, dtype=np.float64)
        b = np.asarray(end, dtype=np.float64)
        total = np.zeros(np.broadcast_shapes(a.shape, b.shape))
        for g in self.groups:
            if g.prefill_flops_per_key:
                keys = cumulative_keys(b, g.window) - cumulative_keys(a, g.window)
                total = total + g.layers * g.prefill_flops_per_key * keys
        return total

    def draft_layers(self, layers: float = 1) -> ModelCost:
        """An MTP / EAGLE-style draft: ``layers`` average decoder layers of this model plus its LM head.

        Per-layer terms (weights, experts, attention, KV, all-reduces) scale by layers / L; the LM
        head is kept whole. aiconfigurator charges MTP the same way: (nextn + L) / L of a step
        (sdk/models/llama.py ``_mtp_scale_factor``).
        """
        s = layers / self.layers
        return dataclasses.replace(
            self, name=f"{self.name}-draft{layers:g}", layers=float(layers),
            other_weight_bytes=self.other_weight_bytes * s, moe_layers=self.moe_layers * s,
            dense_params_per_token=self.dense_params_per_token * s,
            routed_params_per_token=self.routed_params_per_token * s,
            groups=tuple(dataclasses.replace(g, layers=g.layers * s) for g in self.groups),
            kv_scale=self.kv_scale * s,
        )


def cumulative_keys(n, window=math.inf):
    """``Σ_{i=1..n} min(i, window)``: keys attended by the first n causal positions of a sequence."""
    n = np.asarray(n, dtype=np.float64)
    full = n * (n + 1) / 2
    if math.isinf(window):
        return full
    w = float(window)
    return np.where(n <= w, full, w * (w + 1) / 2 + (n - w) * w)


def _attention_group(card: ModelCard, group, decompressed_mla: bool) -> AttentionGroup:
    heads = group.num_heads or card.num_attention_heads
    if group.kind in ("full", "sliding"):
        per_key = 2.0 * heads * (group.head_dim + group.v_dim)
        window = float(group.window) if group.kind == "sliding" else math.inf
        return AttentionGroup(group.kind, float(group.count), per_key, per_key, window)
    if group.kind == "mla":
        per_head_dims = 2.0 * heads * (group.qk_nope_head_dim + group.qk_rope_head_dim + group.v_head_dim)
        absorbed = 2.0 * heads * (2 * group.kv_lora_rank + group.qk_rope_head_dim)
        return AttentionGroup("mla", float(group.count), per_head_dims if decompressed_mla else absorbed,
                              per_head_dims, math.inf)
    return AttentionGroup(group.kind, float(group.count), 0.0, 0.0, math.inf)


def read_profile(engine: EngineProfile) -> EngineProfile:
    """The engine's KV storage format, read without paging: attention kernels read only the
    tokens a sequence holds (no block rounding) and only the window of a sliding layer."""
    return dataclasses.replace(engine, block_size=None, sliding_retained="window", sliding_extra_pages=0)


def model_cost(
    card: ModelCard, engine: EngineProfile, weights_dtype: str = "auto", kv_dtype: str = "auto",
    tps=(1,),
) -> ModelCost:
    """Resolve ``card`` for one weight format, KV format and engine, with KV layouts for ``tps``."""
    dtype = (card.weights_dtype or card.dtype) if weights_dtype == "auto" else weights_dtype
    model_bytes = MODEL_DTYPE_BYTES[card.dtype]
    lm_head_params = card.vocab_size * card.hidden_size
    input_embedding = 0 if card.tie_word_embeddings else lm_head_params
    routed = routed_expert_params(card)
    other = card.params_total - routed - input_embedding - lm_head_params
    if other < 0:
        raise CardError(
            f"{card.name}: params_total ({card.params_total:,}) is smaller than the routed experts "
            f"({routed:,}) plus the embedding and LM head ({input_embedding + lm_head_params:,})",
            "check params_total and moe.expert_params in the card",
        )
    if dtype in MODEL_DTYPE_BYTES:
        other_b = expert_b = lm_b = float(MODEL_DTYPE_BYTES[dtype])
    else:
        bits = weight_bits(dtype)
        expert_b = bits / 8
        other_b = float(model_bytes) if (dtype == "mxfp4" and card.moe is not None) else bits / 8
        lm_b = float(model_bytes)
    moe = card.moe
    moe_layers = moe.num_moe_layers if moe else 0
    expert_params = moe.expert_params if moe else 0
    top_k = moe.experts_per_token if moe else 0
    profile = read_profile(engine)
    layouts = {int(t): kv_layout(card, profile, kv_dtype, int(t)) for t in sorted({int(t) for t in tps})}
    return ModelCost(
        name=card.name, weights_dtype=dtype, hidden_size=card.hidden_size, layers=float(card.num_layers),
        other_weight_bytes=other * other_b, lm_head_weight_bytes=lm_head_params * lm_b,
        expert_weight_bytes=expert_params * expert_b, moe_layers=float(moe_layers),
        num_experts=moe.num_experts if moe else 0, experts_per_token=top_k,
        dense_params_per_token=float(other), routed_params_per_token=float(moe_layers * top_k * expert_params),
        lm_head_params=float(lm_head_params),
        groups=tuple(_attention_group(card, g, engine.mla_decompressed or engine.transformers)
                     for g in card.layer_groups),
        layouts=layouts, max_nodes_per_token=moe.max_nodes_per_token if moe else None,
    )

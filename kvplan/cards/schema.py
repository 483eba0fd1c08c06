"""Pydantic schemas of the cards: model, hardware and system.

Every card is strict: unknown keys are rejected, values are frozen, sizes are positive, and
each card names its public ``source``. ``field_sources`` maps a dotted field path (for
example ``hbm_bandwidth_bytes_per_s`` or ``layer_groups.0.window``) to the document it was
taken from and, for a derived figure, how it was derived.
"""

# No ``from __future__ import annotations`` here: pydantic would evaluate every field's annotation
# string when the classes are made, about a fifth of this module's import (kvplan size loads it).
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

NAME_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"
ModelDtype = Literal["bf16", "fp16", "fp32"]
WeightDtype = Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4", "mxfp4", "fp4"]
FlopsDtype = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
LayerKind = Literal["full", "sliding", "mla", "linear", "ssm"]


# Upper bounds, far above any real model or machine, so that a typo or a hostile card is refused
# before the arithmetic turns it into a memory bomb or an int64 overflow (num_hidden_layers: 10**12).
MAX_LAYERS = 4096          # the deepest released models have ~130 layers
MAX_HEADS = 8192
MAX_DIM = 1 << 20          # head dims, hidden size, intermediate size, state elements
MAX_TOKENS = 1 << 32       # context, windows (Llama 4 Scout's 10M context is 2^23.3)
MAX_PARAMS = 10**15
MAX_VOCAB = 1 << 24
MAX_EXPERTS = 1 << 16
MAX_NAME = 120
# Rates and times of a hardware or system card, bounded so that a card's figures cannot push a
# step time, a queueing moment (times squared) or a rate past float range (a card with
# hbm_bandwidth_bytes_per_s: 1e-300 gave infinite step times and NaN percentiles with numpy
# overflow warnings). The slowest figures allowed (1 MB/s, 1 MFLOP/s, 0.1% efficiency) price a
# 405B-parameter decode step at ~1e13 s, finite squared; the fastest (1 EB/s, 1 ZFLOP/s) are
# ~10^5 times today's HBM (H200: 4.8 TB/s) and ~10^5 times B200's dense FP4 (9 PFLOP/s).
MIN_RATE_BYTES_PER_S, MAX_RATE_BYTES_PER_S = 1e6, 1e18
MIN_FLOPS_PER_S, MAX_FLOPS_PER_S = 1e6, 1e21
MIN_EFFICIENCY = 0.001     # a share of a peak below 0.1%: no device runs (the --eta-* flags' floor too)
MAX_LATENCY_S = 3600.0     # a link's or a tier's fixed latency, a per-step overhead: an hour is far past any
MAX_LINKS = 1024           # links of one kind per accelerator


class StrictModel(BaseModel):
    """Base of every card: forbid unknown keys, freeze values, finite numbers only (no .inf/.nan)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, allow_inf_nan=False, strict=True)


def _as_list(value):
    return [value] if isinstance(value, str) else value


class Card(StrictModel):
    """Fields every card has: a name, where its figures come from, free notes."""

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME, description="lowercase, hyphenated card name")
    source: list[str] = Field(min_length=1, description="public documents the figures come from")
    field_sources: dict[str, str] = Field(default_factory=dict)
    notes: str | None = None

    _normalise_source = field_validator("source", mode="before")(_as_list)

    @model_validator(mode="after")
    def _field_sources_name_fields(self):
        for path in self.field_sources:
            if not _has_path(self, path.split(".")):
                raise ValueError(f"field_sources names '{path}', which is not a field of this card")
        return self


def _has_path(obj, parts: list[str]) -> bool:
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if isinstance(obj, (list, tuple)):
        return head.isdigit() and int(head) < len(obj) and _has_path(obj[int(head)], rest)
    if isinstance(obj, dict):
        return head in obj and _has_path(obj[head], rest)
    if isinstance(obj, BaseModel):
        return head in type(obj).model_fields and _has_path(getattr(obj, head), rest)
    return False


# --------------------------------------------------------------------------- model cards


class LayerGroup(StrictModel):
    """A run of layers that store the same kind of per-token state.

    - ``full``: K and V for every token: ``num_kv_heads × (head_dim + v_head_dim)`` elements.
    - ``sliding``: as full, but only the last ``window`` tokens are kept.
    - ``mla``: one latent of ``kv_lora_rank + qk_rope_head_dim`` elements (no factor 2);
      ``num_heads``, ``qk_nope_head_dim`` and ``v_head_dim`` describe the decompressed K/V
      that Hugging Face transformers caches instead.
    - ``linear`` / ``ssm``: a constant state per sequence (``conv_state_elements`` +
      ``recurrent_state_elements`` per layer), independent of context length.
    """

    kind: LayerKind
    count: int = Field(gt=0, le=MAX_LAYERS)
    num_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS, description="query heads (default: the model's)")
    num_kv_heads: int | None = Field(default=None, gt=0, le=MAX_HEADS)
    head_dim: int | None = Field(default=None, gt=0, le=MAX_DIM, description="K head size")
    v_head_dim: int | None = Field(default=None, gt=0, le=MAX_DIM, description="V head size (default: head_dim)")
    window: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="sliding window in tokens")
    kv_lora_rank: int | None = Field(default=None, gt=0, le=MAX_DIM)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=MAX_DIM)
    qk_nope_head_dim: int | None = Field(default=None, gt=0, le=MAX_DIM)
    conv_state_elements: int | None = Field(default=None, ge=0, le=MAX_DIM * MAX_HEADS, description="conv_dim × (kernel − 1)")
    conv_kernel: int | None = Field(default=None, gt=1, le=MAX_DIM, description="causal conv kernel width")
    recurrent_state_elements: int | None = Field(default=None, ge=0, le=MAX_DIM * MAX_DIM)

    @model_validator(mode="after")
    def _fields_for_kind(self):
        needed = {
            "full": ("num_kv_heads", "head_dim"),
            "sliding": ("num_kv_heads", "head_dim", "window"),
            "mla": ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_heads"),
            "linear": ("conv_state_elements", "recurrent_state_elements"),
            "ssm": ("conv_state_elements", "recurrent_state_elements"),
        }[self.kind]
        missing = [f for f in needed if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a '{self.kind}' layer group needs {', '.join(missing)}")
        return self

    @property
    def v_dim(self) -> int:
        return self.v_head_dim if self.v_head_dim is not None else (self.head_dim or 0)


class MoE(StrictModel):
    """Mixture-of-experts figures; ``expert_params`` is one routed expert in one layer."""

    num_experts: int = Field(gt=0, le=MAX_EXPERTS)
    experts_per_token: int = Field(gt=0, le=MAX_EXPERTS)
    num_moe_layers: int = Field(gt=0, le=MAX_LAYERS)
    expert_params: int = Field(gt=0, le=MAX_PARAMS)
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    # node-limited routing: a token's routed experts lie on at most this many EP nodes (DeepSeek-V3's M)
    max_nodes_per_token: int | None = Field(default=None, gt=0, le=MAX_EXPERTS)

    @model_validator(mode="after")
    def _top_k_le_experts(self):
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) exceeds num_experts ({self.num_experts})"
            )
        return self


class ModelCard(Card):
    """A model's architecture as far as serving cost is concerned.

    ``resolution`` (not a card field): how the loader got here when the name asked for was not
    the card's own (a quantised repo id, a model directory), said as a Note by the commands.
    """

    _resolution: str | None = PrivateAttr(default=None)

    @property
    def resolution(self) -> str | None:
        return self._resolution

    family: str
    aliases: list[str] = Field(default_factory=list, description="Hugging Face repo ids")
    params_total: int = Field(gt=0, le=MAX_PARAMS)
    params_active: int | None = Field(default=None, gt=0, le=MAX_PARAMS, description="MoE: parameters used per token")
    hidden_size: int = Field(gt=0, le=MAX_DIM)
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    num_attention_heads: int = Field(gt=0, le=MAX_HEADS)
    intermediate_size: int | None = Field(default=None, gt=0, le=MAX_DIM)
    tie_word_embeddings: bool = False
    max_context: int = Field(gt=0, le=MAX_TOKENS, description="max_position_embeddings")
    dtype: ModelDtype = Field(description="torch_dtype of the released weights")
    weights_dtype: WeightDtype | None = Field(
        default=None, description="dtype of the released checkpoint when it is quantised (fp8, mxfp4)"
    )
    layer_groups: list[LayerGroup] = Field(min_length=1, max_length=MAX_LAYERS)
    moe: MoE | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if self.num_layers > MAX_LAYERS:
            raise ValueError(f"{self.num_layers} layers in all: more than the {MAX_LAYERS} kvplan accepts")
        if self.params_active is not None and self.params_active > self.params_total:
            raise ValueError(
                f"params_active ({self.params_active}) exceeds params_total ({self.params_total})"
            )
        if self.moe is not None and self.moe.num_moe_layers > self.num_layers:
            raise ValueError(
                f"moe.num_moe_layers ({self.moe.num_moe_layers}) exceeds the layer count ({self.num_layers})"
            )
        for i, group in enumerate(self.layer_groups):
            if group.num_kv_heads and group.num_kv_heads > (group.num_heads or self.num_attention_heads):
                raise ValueError(
                    f"layer_groups.{i}: num_kv_heads ({group.num_kv_heads}) exceeds the query heads "
                    f"({group.num_heads or self.num_attention_heads})"
                )
        return self

    @property
    def num_layers(self) -> int:
        return sum(g.count for g in self.layer_groups)

    @property
    def active_params(self) -> int:
        return self.params_active if self.params_active is not None else self.params_total

    @property
    def attention_kinds(self) -> str:
        """'GQA', 'MQA', 'MHA', 'MLA', or a '+'-joined mix for hybrid models."""
        kinds = []
        for g in self.layer_groups:
            if g.kind == "mla":
                label = "MLA"
            elif g.kind in ("linear", "ssm"):
                label = "linear" if g.kind == "linear" else "SSM"
            else:
                heads = g.num_heads or self.num_attention_heads
                label = "MQA" if g.num_kv_heads == 1 else ("MHA" if g.num_kv_heads == heads else "GQA")
                if g.kind == "sliding":
                    label += f"-SWA{g.window}"
            if label not in kinds:
                kinds.append(label)
        return "+".join(kinds)


# --------------------------------------------------------------------------- hardware cards


class Link(StrictModel):
    """A data path: bandwidth per direction, fixed latency, and the efficiency reached in practice."""

    name: str
    bandwidth_bytes_per_s: float = Field(ge=MIN_RATE_BYTES_PER_S, le=MAX_RATE_BYTES_PER_S,
                                         description="per direction, per accelerator")
    latency_s: float | None = Field(default=None, ge=0, le=MAX_LATENCY_S)
    efficiency: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1, description="share of line rate reached")
    count: int = Field(default=1, gt=0, le=MAX_LINKS, description="links of this kind per accelerator (NICs)")


class Tier(StrictModel):
    """A memory tier behind the accelerator's HBM."""

    name: str
    kind: Literal["host_dram", "cxl", "nvme", "remote"]
    capacity_bytes: int | None = Field(default=None, gt=0, le=1 << 60)
    read_bytes_per_s: float = Field(ge=MIN_RATE_BYTES_PER_S, le=MAX_RATE_BYTES_PER_S)
    write_bytes_per_s: float | None = Field(default=None, ge=MIN_RATE_BYTES_PER_S, le=MAX_RATE_BYTES_PER_S)
    latency_s: float | None = Field(default=None, ge=0, le=MAX_LATENCY_S)
    cost_per_gb: float | None = Field(default=None, ge=0)


class Efficiency(StrictModel):
    """Share of peak reached in practice, and a fixed per-step overhead (sourced defaults)."""

    memory_bandwidth: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1)
    flops: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1)
    flops_by_dtype: dict[str, float] | None = Field(
        default=None, description="share of each dtype's peak (e.g. fp8 GEMMs reach less of theirs than bf16)")
    step_overhead_s: float | None = Field(default=None, ge=0, le=MAX_LATENCY_S)

    @field_validator("flops_by_dtype")
    @classmethod
    def _shares(cls, value):
        for dtype, share in (value or {}).items():
            if not MIN_EFFICIENCY <= share <= 1:
                raise ValueError(f"flops_by_dtype.{dtype} must be in [{MIN_EFFICIENCY}, 1] (got {share})")
        return value


class HardwareCard(Card):
    """One accelerator."""

    vendor: str
    aliases: list[str] = Field(default_factory=list)
    hbm_capacity_bytes: int = Field(gt=0, le=1 << 50, description="memory capacity the runtime sees")
    hbm_capacity_basis: Literal["runtime", "datasheet"] = Field(
        description="runtime: total bytes the runtime reports (e.g. torch total_memory); datasheet: nominal"
    )
    hbm_bandwidth_bytes_per_s: float = Field(ge=MIN_RATE_BYTES_PER_S, le=MAX_RATE_BYTES_PER_S)
    peak_flops_per_s: dict[FlopsDtype, float] = Field(
        min_length=1, description="dense (not 2:4 sparse) peak per dtype"
    )
    efficiency: Efficiency = Field(default_factory=Efficiency)
    scale_up: Link | None = None
    scale_up_domain: int | None = Field(default=None, gt=0, le=1 << 20, description="accelerators in one scale-up domain")
    nic: Link | None = None
    host_link: Link | None = None
    tiers: list[Tier] = Field(default_factory=list)
    usual_system: str | None = Field(
        default=None, pattern=NAME_PATTERN,
        description="the shipped system card this accelerator usually comes in (planners assume it without --system)")

    @field_validator("peak_flops_per_s")
    @classmethod
    def _positive_flops(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, flops in value.items():
            if not MIN_FLOPS_PER_S <= flops <= MAX_FLOPS_PER_S:
                raise ValueError(f"peak_flops_per_s.{dtype}: must be between {MIN_FLOPS_PER_S:g} and "
                                 f"{MAX_FLOPS_PER_S:g} FLOP/s (got {flops})")
        return value


class SystemCard(Card):
    """Accelerators grouped into a node or a scale-up domain (HGX node, NVL72, CloudMatrix-384)."""

    accelerator: str = Field(description="hardware card name")
    accelerators: int = Field(gt=0, le=1 << 20, description="accelerators in the system")
    scale_up_domain: int = Field(gt=0, le=1 << 20, description="accelerators joined by the scale-up link")
    node_accelerators: int | None = Field(
        default=None, gt=0, le=1 << 20, description="accelerators of one node (server, compute tray) instances are placed in; "
                                                    "default: accelerators")
    scale_up: Link | None = None
    nic: Link | None = None
    host_link: Link | None = None
    tiers: list[Tier] = Field(default_factory=list)


def check_name(name: str) -> bool:
    return re.fullmatch(NAME_PATTERN, name) is not None

"""KV-cache size: bytes per token, per sequence and per GPU, for every layer kind.

Per token, per layer (b = bytes per element of the KV format):

- full / sliding attention: ``kv_heads × (head_dim + v_head_dim) × b``
  (``2 × kv_heads × head_dim × b`` when K and V heads are the same size).
- MLA latent (vLLM, SGLang, TensorRT-LLM): ``(kv_lora_rank + qk_rope_head_dim) × b``, one copy, no factor 2.
- MLA decompressed (Hugging Face transformers): ``heads × ((qk_nope + qk_rope) + v_head_dim) × b``.
- linear attention / SSM: no per-token bytes; a constant state per sequence.

Tokens held by one sequence of length L: ``L`` for full and MLA layers, ``min(L, retained)``
for sliding layers (retained depends on the engine, see ``kvplan.engines``), rounded up to
whole blocks by paged engines.

Per GPU: ``kv_heads_per_rank = max(1, kv_heads // tp)`` (heads are replicated when
tp > kv_heads; vLLM ``get_num_kv_heads``); MLA latents are replicated on every TP rank;
pipeline parallelism puts ``ceil(count / pp)`` layers of a group on the heaviest stage.
Total = per sequence × concurrency.

All sequence functions accept numpy arrays and broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvplan.calc.dtypes import MODEL_DTYPE_BYTES, KVFormat, kv_format
from kvplan.cards.schema import LayerGroup, ModelCard
from kvplan.engines import VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, EngineProfile, serving_dtype
from kvplan.errors import InputError, MissingFigureError


@dataclass(frozen=True)
class GroupLayout:
    """One layer group, resolved for an engine, a KV format and a parallel layout."""

    kind: str
    layers: int
    layers_per_gpu: int
    bytes_per_token_layer: float          # logical, one copy of every head
    bytes_per_token_layer_per_gpu: float  # one rank's share, with replication
    retained_tokens: float                # math.inf when every token is kept
    extra_pages: int
    state_bytes_layer: float              # constant per-sequence state, logical
    state_bytes_layer_per_gpu: float
    formula: str                          # the per-token-per-layer term, numbers substituted


@dataclass(frozen=True)
class KVLayout:
    """A model's KV storage under one engine, dtype and (tp, pp)."""

    groups: tuple[GroupLayout, ...]
    block_size: int | None
    tp: int
    pp: int
    kv_dtype: str

    @property
    def bytes_per_token(self) -> float:
        """Logical bytes per token over all layers, every layer counted as if it kept the token."""
        return sum(g.bytes_per_token_layer * g.layers for g in self.groups)

    @property
    def bytes_per_token_per_gpu(self) -> float:
        return sum(g.bytes_per_token_layer_per_gpu * g.layers_per_gpu for g in self.groups)

    @property
    def state_bytes_per_sequence(self) -> float:
        return sum(g.state_bytes_layer * g.layers for g in self.groups)

    def tokens_held(self, group: GroupLayout, seq_len):
        """Tokens of ``seq_len`` that one sequence keeps in ``group``, rounded to blocks."""
        seq = np.asarray(seq_len, dtype=np.float64)
        if group.kind in ("linear", "ssm"):
            return np.zeros_like(seq)
        held = np.minimum(seq, group.retained_tokens)
        if self.block_size:
            bs = self.block_size
            held = (np.ceil(held / bs) + group.extra_pages) * bs
        return held

    def sequence_bytes(self, seq_len, *, per_gpu: bool = False):
        """Bytes one sequence of ``seq_len`` tokens holds (logical, or one GPU's share)."""
        seq = np.asarray(seq_len, dtype=np.float64)
        total = np.zeros_like(seq)
        for g in self.groups:
            if per_gpu:
                per_layer, layers, state = g.bytes_per_token_layer_per_gpu, g.layers_per_gpu, g.state_bytes_layer_per_gpu
            else:
                per_layer, layers, state = g.bytes_per_token_layer, g.layers, g.state_bytes_layer
            total = total + (self.tokens_held(g, seq) * per_layer + state) * layers
        return total

    def max_sequence_len(self, budget_bytes, concurrency, upper: int, *, per_gpu: bool = True):
        """Largest L ≤ ``upper`` with ``concurrency × sequence_bytes(L) ≤ budget`` (0 if none).

        Sequence bytes never decrease with L, so a vectorised bisection over integers is exact.
        """
        budget = np.asarray(budget_bytes, dtype=np.float64)
        conc = np.asarray(concurrency, dtype=np.float64)
        shape = np.broadcast_shapes(budget.shape, conc.shape)
        lo = np.zeros(shape)
        hi = np.full(shape, float(upper))
        fits_upper = conc * self.sequence_bytes(hi, per_gpu=per_gpu) <= budget
        for _ in range(int(math.ceil(math.log2(upper + 1))) + 1):
            mid = np.floor((lo + hi + 1) / 2)
            ok = conc * self.sequence_bytes(mid, per_gpu=per_gpu) <= budget
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid - 1)
        return np.where(fits_upper, float(upper), lo)


def heads_per_rank(kv_heads: int, tp: int) -> int:
    """``max(1, kv_heads // tp)``: KV heads are replicated once tp exceeds them."""
    return max(1, kv_heads // tp)


def check_parallel(card: ModelCard, tp: int, pp: int) -> None:
    """The divisibility rules engines enforce before they start (vLLM ``verify_with_parallel_config``)."""
    if tp < 1 or pp < 1:
        raise InputError(f"--tp and --pp must be >= 1 (got tp={tp}, pp={pp})", "use positive integers")
    for g in card.layer_groups:
        kv = g.num_kv_heads
        if kv and (kv % tp if tp <= kv else tp % kv):
            raise InputError(
                f"{card.name}: tp={tp} does not fit {kv} KV heads "
                f"(tp must divide the KV heads, or be a multiple of them)",
                f"valid tp values up to 64: {', '.join(map(str, _valid_tps(kv, card.num_attention_heads)))}",
            )
    if card.num_attention_heads % tp:
        raise InputError(
            f"{card.name}: {card.num_attention_heads} attention heads are not divisible by tp={tp}",
            f"choose a tp that divides {card.num_attention_heads}",
        )
    if pp > card.num_layers:
        raise InputError(f"pp={pp} exceeds the {card.num_layers} layers of {card.name}", "lower --pp")


def _valid_tps(kv_heads: int, heads: int) -> list[int]:
    return [d for d in range(1, 65) if heads % d == 0 and (kv_heads % d == 0 if d <= kv_heads else d % kv_heads == 0)]


def _retained(group: LayerGroup, engine: EngineProfile, max_num_batched_tokens: int) -> float:
    if group.kind != "sliding":
        return math.inf
    window = group.window
    if engine.sliding_retained == "vllm":
        return window - 1 + max_num_batched_tokens
    if engine.sliding_retained == "window_minus_one":
        return window - 1
    return window


def _group_layout(
    card: ModelCard, group: LayerGroup, engine: EngineProfile, fmt: KVFormat,
    tp: int, pp: int, max_num_batched_tokens: int,
) -> GroupLayout:
    model_bytes = MODEL_DTYPE_BYTES[serving_dtype(card.dtype, engine)]
    layers_per_gpu = math.ceil(group.count / pp)
    state, state_gpu = 0.0, 0.0
    if group.kind in ("full", "sliding"):
        if fmt.mla_token_layer_bytes is not None:
            raise InputError(f"KV dtype {fmt.name} applies to MLA models only", "use fp8 for this model")
        dims = group.head_dim + group.v_dim
        kv_heads = group.num_kv_heads
        if card.family in engine.expands_grouped_kv and kv_heads > 1:
            kv_heads = group.num_heads or card.num_attention_heads  # K/V broadcast before caching
        rank_heads = heads_per_rank(kv_heads, tp) if engine.shards_heads else kv_heads
        logical = fmt.bytes_for(kv_heads * dims, kv_heads)
        per_gpu = fmt.bytes_for(rank_heads * dims, rank_heads)
        formula = f"{kv_heads} kv_heads × ({group.head_dim} + {group.v_dim}) × {fmt.element_bytes:g} B"
        if kv_heads != group.num_kv_heads:
            formula += f" ({engine.name} broadcasts the {group.num_kv_heads} KV heads to every query head)"
        if fmt.per_head_scale_bytes:
            formula += f" + 2 × {kv_heads} × {fmt.per_head_scale_bytes:g} B scales"
    elif group.kind == "mla" and engine.mla_decompressed:
        k_dim = group.qk_nope_head_dim + group.qk_rope_head_dim
        elements = group.num_heads * (k_dim + group.v_head_dim)
        logical = per_gpu = fmt.bytes_for(elements, group.num_heads)
        formula = (f"{group.num_heads} heads × (({group.qk_nope_head_dim} + {group.qk_rope_head_dim})"
                   f" + {group.v_head_dim}) × {fmt.element_bytes:g} B (decompressed K/V)")
    elif group.kind == "mla":
        latent = group.kv_lora_rank + group.qk_rope_head_dim
        if fmt.mla_token_layer_bytes is not None:
            logical = per_gpu = float(fmt.mla_token_layer_bytes)
            formula = f"{fmt.mla_token_layer_bytes} B ({fmt.name} record)"
        else:
            # one K-only latent "head": a single scale where the format has per-head scales
            logical = per_gpu = fmt.bytes_for(latent, 0) + fmt.per_head_scale_bytes
            formula = f"({group.kv_lora_rank} + {group.qk_rope_head_dim}) latent × {fmt.element_bytes:g} B"
    else:  # linear attention / SSM: constant state
        logical = per_gpu = 0.0
        ssm_bytes = 4 if engine.recurrent_state_fp32 else model_bytes
        conv = group.conv_state_elements
        if engine.conv_state_full_kernel:
            if group.conv_kernel is None:
                raise MissingFigureError(
                    f"{card.name}: the '{engine.name}' profile needs layer_groups conv_kernel "
                    "(it keeps the whole kernel of conv state)", "add conv_kernel to the card")
            conv = conv // (group.conv_kernel - 1) * group.conv_kernel
        state = conv * model_bytes + group.recurrent_state_elements * ssm_bytes
        state_gpu = state / tp if engine.shards_heads else state
        formula = (f"{conv} conv × {model_bytes} B + "
                   f"{group.recurrent_state_elements} recurrent × {ssm_bytes} B per sequence")
    return GroupLayout(
        kind=group.kind, layers=group.count, layers_per_gpu=layers_per_gpu,
        bytes_per_token_layer=float(logical), bytes_per_token_layer_per_gpu=float(per_gpu),
        retained_tokens=_retained(group, engine, max_num_batched_tokens),
        extra_pages=engine.sliding_extra_pages if group.kind == "sliding" and engine.block_size else 0,
        state_bytes_layer=float(state), state_bytes_layer_per_gpu=float(state_gpu), formula=formula,
    )


def kv_layout(
    card: ModelCard, engine: EngineProfile, kv_dtype: str = "auto", tp: int = 1, pp: int = 1,
    *, block_size: int | None = None, max_num_batched_tokens: int | None = None,
) -> KVLayout:
    """Resolve a model card into per-group byte counts for one engine, KV dtype and (tp, pp)."""
    check_parallel(card, tp, pp)
    if not engine.shards_heads and tp > 1:
        raise InputError(
            f"the '{engine.name}' profile keeps every head on one device (tp must be 1, got {tp})",
            "use --engine vllm, sglang or trtllm for tensor parallelism",
        )
    if block_size is not None and block_size < 1:
        raise InputError(f"--block-size must be >= 1 (got {block_size})", "vLLM uses 16, TensorRT-LLM 32")
    fmt = kv_format(kv_dtype, serving_dtype(card.dtype, engine))
    if fmt.mla_token_layer_bytes is not None and engine.mla_decompressed:
        raise InputError(f"KV dtype {fmt.name} is a vLLM MLA format", "use --engine vllm")
    mnbt = max_num_batched_tokens or VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS
    groups = tuple(_group_layout(card, g, engine, fmt, tp, pp, mnbt) for g in card.layer_groups)
    bs = block_size if block_size is not None else engine.block_size
    return KVLayout(groups=groups, block_size=bs, tp=tp, pp=pp, kv_dtype=fmt.name)

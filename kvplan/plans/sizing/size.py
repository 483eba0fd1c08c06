"""``kvplan size``: KV bytes per token, per sequence, per GPU and in total.

One row per point of the Cartesian product of the given lists (seq × batch × KV dtype ×
tp × pp × engine). The planner takes the layouts (:class:`kvplan.plans.deployment.ModelLayout`,
one per KV dtype × tp × pp × engine, resolved once by the deployment layer); for each the
seq × batch grid is one vectorised numpy evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kvplan.calc.kv import KVLayout
from kvplan.cards.schema import ModelCard
from kvplan.errors import InputError
from kvplan.result import Result

if TYPE_CHECKING:
    from kvplan.plans.deployment import ModelLayout

SIZE_COLUMNS = [
    "seq_len", "batch", "kv_dtype", "tp", "pp", "engine",
    "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_bytes_per_sequence",
    "kv_bytes_per_sequence_per_gpu", "kv_bytes_total", "kv_bytes_total_per_gpu",
]


def as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_positive(name: str, values: Sequence[int]) -> None:
    for v in values:
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be a positive integer (got {v})", f"pass {name} as 1 or more")


def size_rows(card: ModelCard, layout: KVLayout, engine: str, seq, batch) -> list[dict]:
    """Rows for every (seq, batch) pair of one layout, computed as numpy arrays."""
    seq_grid, batch_grid = np.meshgrid(np.asarray(seq, float), np.asarray(batch, float), indexing="ij")
    seq_flat, batch_flat = seq_grid.ravel(), batch_grid.ravel()
    per_seq = layout.sequence_bytes(seq_flat)
    per_seq_gpu = layout.sequence_bytes(seq_flat, per_gpu=True)
    rows = []
    for s, b, ps, pg in zip(seq_flat, batch_flat, per_seq, per_seq_gpu):
        rows.append({
            "model": card.name, "seq_len": int(s), "batch": int(b), "kv_dtype": layout.kv_dtype,
            "tp": layout.tp, "pp": layout.pp, "engine": engine, "attention": card.attention_kinds,
            "layers": card.num_layers, "block_size": layout.block_size,
            "kv_bytes_per_token": _num(layout.bytes_per_token),
            "kv_bytes_per_token_per_gpu": _num(layout.bytes_per_token_per_gpu),
            "kv_state_bytes_per_sequence": _num(layout.state_bytes_per_sequence),
            "kv_bytes_per_sequence": _num(ps), "kv_bytes_per_sequence_per_gpu": _num(pg),
            "kv_bytes_total": _num(ps * b), "kv_bytes_total_per_gpu": _num(pg * b),
            "gpus": layout.tp * layout.pp,
        })
    return rows


def _num(x) -> int | float:
    """Whole byte counts as int (JSON prints 70272, not 70272.0); fractions stay float."""
    x = float(x)
    return int(x) if x.is_integer() else x


def explain_layout(card: ModelCard, layout: KVLayout, seq_len: int) -> list[str]:
    lines = [f"{card.name}: {card.num_layers} layers, {card.attention_kinds}, KV dtype {layout.kv_dtype}, "
             f"tp={layout.tp}, pp={layout.pp}, block={layout.block_size or 'none'}"]
    for g in layout.groups:
        held = layout.tokens_held(g, seq_len)
        lines.append(
            f"  {g.kind:8s} × {g.layers:3d} layers: {g.formula} = {g.bytes_per_token_layer:,.0f} B/token/layer"
            f" (per GPU {g.bytes_per_token_layer_per_gpu:,.0f} on {g.layers_per_gpu} layers)"
            + (f"; holds {float(held):,.0f} of {seq_len:,} tokens" if g.kind not in ("linear", "ssm") else
               f"; state {g.state_bytes_layer:,.0f} B/layer/sequence")
        )
    lines.append(f"  per token: Σ = {layout.bytes_per_token:,.0f} B (one copy); "
                 f"{layout.bytes_per_token_per_gpu:,.0f} B on one GPU")
    lines.append(f"  per sequence of {seq_len:,} tokens: {float(layout.sequence_bytes(seq_len)):,.0f} B; "
                 f"per GPU {float(layout.sequence_bytes(seq_len, per_gpu=True)):,.0f} B")
    return lines


def size(layouts: Sequence[ModelLayout], seq: int | Sequence[int] = 131072, batch: int | Sequence[int] = 1, *,
         max_num_batched_tokens: int | None = None) -> Result:
    """KV-cache size of every layout (one model; :func:`kvplan.plans.deployment.model_layouts`) at every seq × batch.

    ``max_num_batched_tokens`` is the setting the layouts were built with (it bounds vLLM's
    sliding-window tokens, said in a note).
    """
    if not layouts:
        raise InputError("no layout to size", "give at least one KV dtype, tp, pp and engine")
    card = layouts[0].model
    seqs, batches = as_list(seq), as_list(batch)
    check_positive("--seq", seqs)
    check_positive("--batch", batches)
    rows, explain, assumptions = [], [], [card.resolution] if card.resolution else []
    for item in layouts:
        rows.extend(size_rows(card, item.layout, item.profile.name, seqs, batches))
        explain.extend(explain_layout(card, item.layout, max(seqs)))
    if max(seqs) > card.max_context:
        assumptions.append(f"seq {max(seqs):,} exceeds {card.name}'s max_position_embeddings "
                           f"({card.max_context:,}); the arithmetic is shown anyway")
    if any(g.kind == "sliding" for g in card.layer_groups) and any(item.profile.name == "vllm" for item in layouts):
        assumptions.append("vLLM sliding layers keep window − 1 + max_num_batched_tokens "
                           f"({max_num_batched_tokens or 8192}) tokens plus one page")
    return Result(title=f"KV cache size: {card.name}", rows=rows, columns=SIZE_COLUMNS,
                  explain=explain, assumptions=assumptions)

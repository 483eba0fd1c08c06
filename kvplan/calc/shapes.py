"""How a model's always-read parameters split into GEMMs, per layer group, for the per-operator step model.

The step model (:mod:`kvplan.calc.operators`) charges each group's bytes and FLOPs as totals
(``attention_params``, ``mlp_params``); the GEMMs listed here only decide the group's efficiency: each
measured at its own per-GPU shape (N, K) and combined by its share of the group's work
(:func:`kvplan.calc.gemm_grid.group_curve`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.calc.roofline import ModelCost
from kvplan.cards.schema import ModelCard


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer, whole model: ``out × in`` features in each of ``layers`` layers.

    Per GPU under tensor parallelism ``tp`` (Megatron / vLLM): column-parallel ``n = out / tp``, ``k = in``;
    row-parallel ``n = out``, ``k = in / tp``; replicated (an MoE router: every rank holds and runs the whole
    ``hidden × num_experts`` gate) ``n = out``, ``k = in`` at any ``tp``. A fused QKV projection adds
    ``max(kv_heads / tp, 1) × kv_width`` output features to its query part ``out / tp``: vLLM's
    ``QKVParallelLinear`` replicates the KV heads when there are fewer than ``tp``
    (``num_kv_heads = max(1, total_kv_heads // tp)``).
    """

    label: str
    out_features: float
    in_features: float
    split: str              # "column" | "row" | "replicated"
    layers: float
    kv_heads: float = 0.0   # QKV only: the KV heads (replicated below one per GPU) and their width d + d_v
    kv_width: float = 0.0

    def nk(self, tp: float) -> tuple[float, float]:
        """(N, K) per GPU at tensor-parallel size ``tp``."""
        if self.split == "row":
            return float(self.out_features), float(self.in_features) / tp
        if self.split == "replicated":
            return float(self.out_features), float(self.in_features)
        kv = max(self.kv_heads / tp, 1.0) * self.kv_width if self.kv_heads else 0.0
        return float(self.out_features) / tp + kv, float(self.in_features)


@dataclass(frozen=True)
class Shapes:
    """How a model's always-read parameters split into GEMMs (whole model, one copy).

    ``attention_linears`` / ``mlp_linears``: each group's linear layers (:class:`Linear`) where the card
    splits the group exactly; empty where it cannot (MLA, linear attention; an MoE model's routers and norms
    without dense MLP or shared expert), and the group is then priced at one representative shape
    (:meth:`gemm_nk`). Only each GEMM's share of the group's η changes with the list; bytes and FLOPs are
    ``attention_params`` / ``mlp_params`` either way. ``router_linears``: the MoE layers' routers, a part
    (``replicated_params``) of ``mlp_params`` that every rank holds whole and runs in bf16; the step model prices
    them apart from the rest of the group (:func:`kvplan.calc.operators.operator_pass`).
    """

    attention_params: float
    mlp_params: float
    layers: float
    hidden: int
    shared_params: float = 0.0      # the shared experts' part of mlp_params (MoE layers' always-read MLP)
    replicated_params: float = 0.0  # the routers' part of mlp_params: whole on every rank, not divided by tp
    attention_linears: tuple = ()
    mlp_linears: tuple = ()
    router_linears: tuple = ()

    def gemm_nk(self, kind: str, tp):
        """(N, K) of the representative GEMM of ``kind`` per GPU: K = hidden, N = params / layer / hidden / tp
        (the MLP group's params without its routers)."""
        params = self.attention_params if kind == "attention" else self.mlp_params - self.replicated_params
        n = params / max(self.layers, 1.0) / self.hidden / np.asarray(tp, dtype=np.float64)
        return n, float(self.hidden)

    def gemm_list(self, kind: str, tp: int) -> tuple[tuple[str, float, float, float], ...]:
        """The group's GEMMs per GPU at ``tp``: (label, N, K, weight = layers × N × K), the weight being each
        GEMM's share of the group's bytes and FLOPs (both ∝ N K at one M). Equal shapes are merged; a group
        the card cannot split is its one representative GEMM (:meth:`gemm_nk`), labelled ``representative``.
        ``kind="router"``: the MoE routers (replicated: the same (N, K) at every tp), empty for a dense model."""
        if kind == "router":
            return tuple((lin.label, *lin.nk(float(tp)), lin.layers * lin.out_features * lin.in_features)
                         for lin in self.router_linears)
        linears = self.attention_linears if kind == "attention" else self.mlp_linears
        if not linears:
            n, k = self.gemm_nk(kind, tp)
            return (("representative", float(n), float(k), 1.0),)
        merged: dict = {}
        for lin in linears:
            n, k = lin.nk(float(tp))
            label, w = merged.get((n, k), (lin.label, 0.0))
            merged[(n, k)] = (label, w + lin.layers * n * k)
        return tuple((label, n, k, w) for (n, k), (label, w) in merged.items())


def _head_geometry(card: ModelCard, g) -> tuple[int, int, int, int]:
    """(query heads, KV heads, head dim, value head dim) of a layer group, the card's defaults filled in."""
    heads = g.num_heads or card.num_attention_heads
    d = g.head_dim or card.hidden_size // card.num_attention_heads
    return heads, g.num_kv_heads or heads, d, g.v_head_dim or d


def _attention_linears(card: ModelCard) -> tuple:
    """QKV (column-parallel, KV heads replicated below one per GPU) and O (row-parallel) of every full /
    sliding layer group: ``hidden × (h d + kv (d + d_v))`` and ``h d_v × hidden`` (HF config shapes)."""
    out = []
    for g in card.layer_groups:
        heads, kv, d, dv = _head_geometry(card, g)
        out.append(Linear("QKV", heads * d, card.hidden_size, "column", g.count, kv, d + dv))
        out.append(Linear("O", card.hidden_size, heads * dv, "row", g.count))
    return tuple(out)


ROUTER_BYTES = 2.0      # bf16 routers whatever the checkpoint's dtype (ROUTER_SOURCE)
ROUTER_SOURCE = (
    "an MoE router (gate) is replicated on every tensor-parallel rank, n = num_experts, k = hidden, and kept in "
    "bf16 when the experts are quantised: SGLang python/sglang/srt/models/qwen3_moe.py @008af3a "
    "Qwen3MoeSparseMoeBlock 'self.gate = ReplicatedLinear(config.hidden_size, config.num_experts, ...)' ('The "
    "online Fp8/mxfp8 path keeps the gate in bf16'); vLLM vllm/model_executor/models/gpt_oss.py @0025d69 MLPBlock "
    "'self.router = torch.nn.Linear(config.hidden_size, config.num_local_experts, dtype=torch.bfloat16)'")


def _router_linears(card: ModelCard) -> tuple:
    """Each MoE layer's router: ``hidden → num_experts``, replicated (ROUTER_SOURCE)."""
    moe = card.moe
    if not moe or not moe.num_moe_layers:
        return ()
    return (Linear("router", moe.num_experts, card.hidden_size, "replicated", moe.num_moe_layers),)


def _mlp_linears(card: ModelCard, gated: bool) -> tuple:
    """Dense MLP layers at ``intermediate_size`` and the shared experts at theirs (``S × P_e / (3 h)``):
    gate_up (column, ``2 i`` gated, ``i`` not) and down (row, ``i``). The routers are listed apart
    (:func:`_router_linears`)."""
    moe, h = card.moe, card.hidden_size
    dense_layers = card.num_layers - (moe.num_moe_layers if moe else 0)
    out = []
    up = "gate_up" if gated else "up"
    if dense_layers and card.intermediate_size:
        i = card.intermediate_size
        out += [Linear(up, (2 if gated else 1) * i, h, "column", dense_layers), Linear("down", h, i, "row", dense_layers)]
    if moe and moe.num_shared_experts:
        i = moe.num_shared_experts * moe.expert_params / (3 * h)
        out += [Linear("shared gate_up", 2 * i, h, "column", moe.num_moe_layers),
                Linear("shared down", h, i, "row", moe.num_moe_layers)]
    return tuple(out)


def model_shapes(card: ModelCard, cost: ModelCost) -> Shapes:
    """Split the always-read matmul parameters into attention projections and MLPs.

    Attention (full / sliding layers): ``hidden × (h d + 2 kv d) + h d_v × hidden`` per layer
    (QKV and O). Other attention kinds (MLA, linear) take the remainder after the dense MLPs
    ``(L − L_moe) × 3 × hidden × intermediate``, shared experts ``L_moe × shared × P_e`` and routers
    ``L_moe × hidden × num_experts``.
    The split only picks each GEMM's shape for its efficiency; bytes and FLOPs are the totals.

    Each group's GEMMs (:meth:`Shapes.gemm_list`): attention's QKV and O where every layer is full or
    sliding (MLA and linear attention keep one representative shape: their projections are not split here);
    the MLP's gate_up and down where the card gives the dense layers' ``intermediate_size`` (and the shared
    experts'). Gated or not is what the card's parameter count says: with full / sliding attention the MLP
    remainder is ``≈ 3 h i`` (SwiGLU: gate, up, down) or ``≈ 2 h i`` (OPT, Falcon: fc1, fc2) per dense layer,
    whichever is nearer; MLA / linear-attention cards are split at ``3 h i`` (gated) as above.
    """
    other = cost.dense_params_per_token
    attention = 0.0
    geometric = True
    for g in card.layer_groups:
        if g.kind in ("full", "sliding"):
            heads, kv, d, dv = _head_geometry(card, g)
            attention += g.count * card.hidden_size * (heads * d + kv * d + kv * dv + heads * dv)
        else:
            geometric = False
    moe = card.moe
    shared = moe.num_moe_layers * moe.num_shared_experts * moe.expert_params if moe else 0.0
    routers = sum(lin.layers * lin.out_features * lin.in_features for lin in _router_linears(card))
    dense_layers = card.num_layers - (moe.num_moe_layers if moe else 0)
    gated = True
    if geometric:
        attention = min(attention, other)
        mlp = other - attention
        per_hi = (mlp - shared - routers) / max(card.hidden_size * (card.intermediate_size or 0) * dense_layers, 1)
        gated = not (dense_layers and abs(per_hi - 2.0) < abs(per_hi - 3.0))
    else:
        mlp = min(3.0 * card.hidden_size * (card.intermediate_size or 0) * dense_layers + shared + routers, other)
        attention = other - mlp
    return Shapes(attention_params=float(attention), mlp_params=float(mlp), layers=float(card.num_layers),
                  hidden=card.hidden_size, shared_params=float(min(shared, mlp)),
                  replicated_params=float(min(routers, mlp - min(shared, mlp))),
                  attention_linears=_attention_linears(card) if geometric else (),
                  mlp_linears=_mlp_linears(card, gated), router_linears=_router_linears(card))


__all__ = ["Linear", "Shapes", "model_shapes", "ROUTER_BYTES", "ROUTER_SOURCE"]

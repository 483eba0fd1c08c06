"""Shapes of the PD pools: TP × attention DP (× EP) per instance, and how many nodes a pool takes.

An instance of a pool is ``tp × dp`` GPUs (vLLM's ``--tensor-parallel-size`` and
``--data-parallel-size``; with ``--enable-expert-parallel`` the routed experts are split over
``ep = tp × dp`` ranks, with ``R`` redundant experts ``(E + R) / ep`` per rank). DeepSeek's
day-6 deployment is tp = 1 with dp = 32 (prefill, 4 nodes) and dp = 144 (decode, 18 nodes).

Whole nodes: an instance of g GPUs sits in nodes of ``n`` accelerators (the system card's
``node_accelerators``, else its ``accelerators``) only when ``g`` divides ``n`` (several
instances share a node) or ``n`` divides ``g`` (an instance spans whole nodes); otherwise GPUs of
a node are stranded and the shape is refused. ``nodes = instances × g / n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.cards.schema import ModelCard
from kvplan.errors import InputError, KvplanError
from kvplan.plans.deployment import Parallelism, fewest_redundant_experts
from kvplan.plans.links import Side
from kvplan.plans.pd.model import valid_tps


@dataclass(frozen=True, order=True)
class Shape:
    """One instance's layout: TP × attention DP, expert parallel or not."""

    tp: int
    dp: int = 1
    expert_parallel: bool = False
    redundant_experts: int = 0

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def ep(self) -> int:
        return self.gpus if self.expert_parallel else 1

    def parallelism(self) -> Parallelism:
        return Parallelism(tp=self.tp, dp=self.dp, expert_parallel=self.expert_parallel,
                           redundant_experts=self.redundant_experts)

    def label(self) -> str:
        text = f"TP{self.tp}" if self.dp == 1 else f"TP{self.tp}×DP{self.dp}"
        return text + (f" EP{self.ep}" if self.expert_parallel else "")


def node_size(side: Side) -> int:
    """Accelerators of one node (server, tray) of the pool's system; the scale-up domain without a system."""
    if side.system is not None:
        return int(getattr(side.system, "node_accelerators", None) or side.system.accelerators)
    domain = side.scale_up_domain
    return int(domain) if math.isfinite(domain) and domain >= 1 else 1


def fits_nodes(gpus: int, node: int) -> bool:
    """An instance of ``gpus`` GPUs uses whole nodes of ``node`` accelerators (divides it or spans whole ones)."""
    return node % gpus == 0 or gpus % node == 0


def pool_shapes(card: ModelCard, side: Side, tps: list[int], dps: list[int], expert_parallel: bool,
                redundant_experts: int | None, what: str) -> tuple[list[Shape], list[str]]:
    """The (TP, DP) shapes of a pool the model, the node and EP allow; the others dropped with a note.

    ``redundant_experts`` None (not given) with EP: the fewest replicas that let ``ep`` divide the experts,
    ``R = (−E) mod ep`` (256 experts over EP144: R = 32, DeepSeek's published figure; over EP32: 0), said in a note.

    A DP value no TP can place on whole nodes, or the only shape asked being refused, is an
    :class:`InputError` (the command line asked for something the hardware cannot hold).
    """
    flag = f"--{what}-dp"
    for d in dps:
        if not isinstance(d, int) or isinstance(d, bool) or d < 1:
            raise InputError(f"{flag} values must be whole numbers >= 1 (got {d})", f"e.g. {flag} 1,8,32")
    ok_tps, notes = valid_tps(card, tps, side.scale_up_domain, what)
    node = node_size(side)
    shapes: list[Shape] = []
    refused: list[KvplanError] = []
    for d in dps:
        placed = [t for t in ok_tps if fits_nodes(t * d, node)]
        if ok_tps and not placed:
            raise InputError(
                f"{flag} {d}: an instance of {' or '.join(f'{t}×{d}' for t in ok_tps)} GPUs does not divide a "
                f"{node}-GPU node of {side.name} nor span whole nodes",
                f"choose a DP with TP × DP dividing {node} or a multiple of {node} (e.g. {flag} {node})")
        for t in placed:
            r = redundant_experts
            if r is None:
                r = fewest_redundant_experts(card, t * d) if expert_parallel else 0
                if r:
                    notes.append(f"{what} TP{t}×DP{d}: EP{t * d} does not divide {card.name}'s "
                                 f"{card.moe.num_experts} routed experts; {r} redundant experts make it divide "
                                 f"({(card.moe.num_experts + r) // (t * d)} per GPU; pass --ep-redundant-experts)")
            shape = Shape(t, d, expert_parallel, r)
            try:
                shape.parallelism().check(card)
            except KvplanError as exc:
                refused.append(exc)
                notes.append(f"{what} {shape.label()} skipped: {exc.message}")
                continue
            shapes.append(shape)
    if not shapes and refused:
        raise refused[0]
    return shapes, notes

"""Two-batch overlap (``--two-batch-overlap``): which models an engine runs it for."""

from __future__ import annotations

from kvplan.errors import InputError


def check_two_batch_overlap(card) -> None:
    """``--two-batch-overlap`` needs a MoE model: an InputError on a dense one.

    SGLang's ``--enable-two-batch-overlap`` splits a step into two micro-batches whose MoE
    dispatch/combine overlaps the other's compute; its layer strategies exist for MoE decoder layers
    only (DeepseekV2, Qwen3-MoE, MiMoV2, DeepseekV4); SGLang refuses any other layer
    (sglang python/sglang/srt/batch_overlap/operations_strategy.py, ``OperationsStrategy.init_new_tbo``).
    """
    if card.moe is None:
        raise InputError(f"--two-batch-overlap: {card.name} is a dense model (SGLang's two-batch overlap "
                         "overlaps MoE dispatch/combine; it has no strategy for dense layers)",
                         "drop --two-batch-overlap for dense models (latency: --overlap-comm models TP "
                         "communication overlap)")

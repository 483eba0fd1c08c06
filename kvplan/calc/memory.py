"""Memory budget: weights, activations, runtime reserves, and the KV cache left over.

Each engine computes the KV budget of one GPU its own way (ENGINES.md §1–§3):

- vLLM:   ``total × util − weights − activation_peak − non_torch − cudagraph``
          (``vllm/v1/worker/gpu_worker.py: determine_available_memory``)
- SGLang: ``mem_fraction_static × total − weights`` (no profiling pass; activations and
          graphs live in ``1 − fraction``; ``model_runner_kv_cache_mixin.py``)
- TensorRT-LLM: ``free_gpu_memory_fraction × (total − weights − activation_peak − non_torch)``
          (a fraction of the memory *free after loading and profiling*; KvCacheConfig)
- hf:     everything left after weights and activations (DynamicCache grows until OOM)
- ideal:  ``total × util − weights``

Weights on one GPU: ``(quantised params × bits / 8 + unquantised params × model bytes) / (tp × pp)``.
Embeddings and the LM head stay in the model dtype; for ``mxfp4`` only the routed experts
are quantised (gpt-oss ships its experts in MXFP4 and the rest in bf16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.calc.dtypes import MODEL_DTYPE_BYTES, weight_bits
from kvplan.cards.schema import ModelCard
from kvplan.engines import EngineProfile


def embedding_params(card: ModelCard) -> int:
    """Input embedding plus (untied) LM head: ``vocab × hidden × (1 if tied else 2)``."""
    return card.vocab_size * card.hidden_size * (1 if card.tie_word_embeddings else 2)


def routed_expert_params(card: ModelCard) -> int:
    """All routed experts of all MoE layers: ``moe_layers × experts × expert_params``."""
    if card.moe is None:
        return 0
    return card.moe.num_moe_layers * card.moe.num_experts * card.moe.expert_params


def weight_bytes(card: ModelCard, weights_dtype: str = "auto", model_dtype: str | None = None) -> float:
    """Bytes of all weights (one copy) in ``weights_dtype`` (``auto``: the checkpoint's format).

    ``model_dtype`` is the dtype the engine runs unquantised tensors in (default: the card's).
    """
    model_dtype = model_dtype or card.dtype
    dtype = (card.weights_dtype or model_dtype) if weights_dtype == "auto" else weights_dtype
    model_bytes = MODEL_DTYPE_BYTES[model_dtype]
    if dtype in MODEL_DTYPE_BYTES:
        return float(card.params_total * MODEL_DTYPE_BYTES[dtype])
    bits = weight_bits(dtype)
    if dtype == "mxfp4" and card.moe is not None:
        quantised = min(routed_expert_params(card), card.params_total)
    else:
        quantised = max(card.params_total - embedding_params(card), 0)
    return quantised * bits / 8 + (card.params_total - quantised) * model_bytes


def activation_peak_bytes(card: ModelCard, num_tokens: int, tp: int = 1, max_num_seqs: int = 256,
                          model_dtype: str | None = None) -> float:
    """Estimated activation peak of one forward pass over ``num_tokens`` tokens on one rank.

    Estimate (not a measurement): the MLP transient ``tokens × (2 × hidden + 3 × inter / tp) × b``
    (residual + normed input, gate/up output and activation output; for MoE the routed
    intermediate × top-k) plus fp32 sampler logits ``max_num_seqs × vocab × 4``. Engines
    measure this in a profiling run and print it ("PyTorch activation peak memory"); pass the
    printed figure to reproduce an engine exactly.
    """
    b = MODEL_DTYPE_BYTES[model_dtype or card.dtype]
    if card.moe is not None:
        inter = card.moe.expert_params / (3 * card.hidden_size) * card.moe.experts_per_token
    else:
        inter = card.intermediate_size or 4 * card.hidden_size
    mlp = num_tokens * (2 * card.hidden_size + 3 * inter / tp) * b
    logits = max_num_seqs * card.vocab_size * 4
    return float(mlp + logits)


@dataclass(frozen=True)
class Budget:
    """The terms of one GPU's KV budget, all in bytes; ``kv_cache_bytes`` may be negative."""

    gpu_memory_bytes: float
    utilization: float
    weights_bytes: float
    activation_bytes: float
    non_torch_bytes: float
    cudagraph_bytes: float
    kv_cache_bytes: float
    rule: str


def kv_budget(
    engine: EngineProfile, gpu_memory_bytes: float, utilization: float, weights_bytes: float,
    activation_bytes: float = 0.0, non_torch_bytes: float = 0.0, cudagraph_bytes: float = 0.0,
) -> Budget:
    """KV-cache bytes on one GPU under ``engine``'s budget rule (see the module docstring)."""
    reserves = activation_bytes + non_torch_bytes + cudagraph_bytes
    if engine.budget == "fraction_of_total":
        kv = gpu_memory_bytes * utilization - weights_bytes - reserves
        rule = "total × util − weights − activation − non_torch − cudagraph"
    elif engine.budget == "fraction_of_total_preload":
        kv = gpu_memory_bytes * utilization - weights_bytes
        rule = "mem_fraction_static × total − weights"
    elif engine.budget == "fraction_of_free":
        kv = utilization * (gpu_memory_bytes - weights_bytes - reserves)
        rule = "free_gpu_memory_fraction × (total − weights − activation − non_torch)"
    else:
        kv = gpu_memory_bytes - weights_bytes - reserves
        rule = "total − weights − activation (grows until out of memory)"
    return Budget(gpu_memory_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes,
                  cudagraph_bytes, float(kv), rule)


def num_blocks(kv_cache_bytes, block_bytes_per_gpu: float):
    """Whole blocks that fit: ``floor(kv_bytes / (page bytes × layers on the rank))``, never < 0."""
    return np.maximum(np.floor(np.asarray(kv_cache_bytes, dtype=np.float64) / block_bytes_per_gpu), 0)

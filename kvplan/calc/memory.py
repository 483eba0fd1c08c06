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


GiB = 2**30

# vLLM's start-up profile (vllm/v1/worker/gpu_model_runner.py: profile_run) is two passes, and the
# torch peak it logs is the larger of their transients (fitted on public logs; ENGINES.md §1):
VLLM_FORWARD_FACTOR = 1.1       # × the MLP transient; fitted 1.07 on issue #10517 (Llama-3.1-8B, V0,
                                # 17.06 → 17.98 GiB torch peak from 20,000 to 29,000 tokens), rounded up
VLLM_SAMPLER_COPIES = 10.5      # × one fp32 logits matrix; fitted 10.3 on PR #10511 (Llama-3-8B, 8,192
                                # tokens: 1.26 GiB at tp 1 and at tp 2 alike: the sampler, not the MLP)
# non-torch memory (NCCL and custom all-reduce buffers, cuBLAS workspaces; vllm/utils/mem_utils.py):
VLLM_NON_TORCH_SINGLE_BYTES = 0.35 * GiB   # one GPU: the largest of issues #10517 (0.35), #12126 (0.16)
                                           # and #12330 (0.10 GiB)
VLLM_NON_TORCH_MULTI_BYTES = 3.58 * GiB    # tp × pp > 1: PR #10511's tp 2 log (3.58 GiB per GPU)


def vllm_activation_peak_bytes(card: ModelCard, num_tokens: int, tp: int = 1, max_num_seqs: int = 256,
                               model_dtype: str | None = None) -> float:
    """vLLM's profiled torch peak above the weights: ``max(forward, sampler)`` on one rank (bytes).

    - forward: ``1.1 × tokens × per-token MLP transient × b``; the transient is ``2h + 3i/tp``
      elements for a dense MLP (residual + normed input, gate/up output, activation output) and
      ``2h + k × (max(2i/tp, h) + i/tp)`` for a MoE layer (``fused_moe.py``: the gate/up cache
      shares its buffer with the down-projection cache of ``k × h`` per token; ``k`` experts per
      token, ``i`` one expert's intermediate size); a MoE model with dense layers takes the larger.
    - sampler (``_dummy_sampler_run``): ``10.5 × min(max_num_seqs, tokens) × vocab × 4`` B,
      fp32 logits gathered whole on every rank, with the sort/softmax copies of top-k/top-p.

    Fitted on the logs named at ``VLLM_FORWARD_FACTOR`` and ``VLLM_SAMPLER_COPIES``; an estimate:
    pass the engine's logged figure to reproduce it exactly.
    """
    b = MODEL_DTYPE_BYTES[model_dtype or card.dtype]
    h = card.hidden_size
    dense = 2 * h + 3 * (card.intermediate_size or 4 * h) / tp
    per_token = dense
    if card.moe is not None:
        inter = card.moe.expert_params / (3 * h) / tp
        routed = 2 * h + card.moe.experts_per_token * (max(2 * inter, h) + inter)
        per_token = routed if card.moe.num_moe_layers >= card.num_layers else max(routed, dense)
    forward = VLLM_FORWARD_FACTOR * num_tokens * per_token * b
    sampler = VLLM_SAMPLER_COPIES * min(max_num_seqs, num_tokens) * card.vocab_size * 4
    return float(max(forward, sampler))


def vllm_non_torch_bytes(tp: int = 1, pp: int = 1) -> float:
    """vLLM's non-torch memory per GPU: 0.35 GiB alone, 3.58 GiB with any peer (see the constants)."""
    return VLLM_NON_TORCH_SINGLE_BYTES if tp * pp == 1 else VLLM_NON_TORCH_MULTI_BYTES


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

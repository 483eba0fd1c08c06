"""Public engine start-up logs (vLLM, SGLang, TensorRT-LLM) and kvplan's reproduction of them.

Each record quotes the logged lines, names its source, lists the public inputs (model, GPU,
tp, utilisation, dtype, the memory terms the log prints) and computes the logged figure with
kvplan: ``kvplan.plans.sizing.fit.fit`` with ``Overrides`` for the terms the log prints, or
``kv_layout`` bytes per token where the log relates tokens to bytes (SGLang's
``#tokens = KV bytes // cell``, TensorRT-LLM's "Allocated X GiB for max tokens (N)").

``tolerance`` is the log's own rounding carried through the arithmetic (a GiB figure printed
to 0.01 is ±0.005 GiB), plus one unit where the engine floors; ``tolerance_reason`` says how.
Where kvplan disagrees beyond that, ``agrees`` is False and ``disagreement`` says what is
known; the test then pins the gap instead of widening the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvplan.calc.kv import kv_layout
from kvplan.cards.hf_import import card_dict_from_config
from kvplan.cards.loader import load_model
from kvplan.cards.schema import ModelCard
from kvplan.engines import get_profile
from kvplan.plans.sizing.fit import Overrides
from kvplan.plans.build import fit_from_names


GiB = 2**30


def _card(name: str, source: str, **config) -> ModelCard:
    """A card for a model kvplan does not ship, imported from its public config.json fields."""
    return ModelCard.model_validate(card_dict_from_config(config, name, source))


def tinyllama() -> ModelCard:
    return _card(
        "tinyllama-1.1b-chat", "https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0/blob/main/config.json",
        model_type="llama", hidden_size=2048, intermediate_size=5632, num_attention_heads=32,
        num_key_value_heads=4, num_hidden_layers=22, vocab_size=32000, max_position_embeddings=2048,
        torch_dtype="bfloat16", tie_word_embeddings=False)


def qwq_32b() -> ModelCard:
    return _card(
        "qwq-32b", "https://huggingface.co/Qwen/QwQ-32B/blob/main/config.json",
        model_type="qwen2", hidden_size=5120, intermediate_size=27648, num_attention_heads=40,
        num_key_value_heads=8, num_hidden_layers=64, vocab_size=152064, max_position_embeddings=131072,
        torch_dtype="bfloat16", tie_word_embeddings=False)


def qwen3_30b_a3b() -> ModelCard:
    return _card(
        "qwen3-30b-a3b", "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        model_type="qwen3_moe", hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
        num_experts=128, num_experts_per_tok=8, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        num_hidden_layers=48, vocab_size=151936, max_position_embeddings=40960, torch_dtype="bfloat16",
        tie_word_embeddings=False)


def _bytes_per_token(card: ModelCard | str, engine: str, tp: int = 1, kv_dtype: str = "auto") -> float:
    card = card if isinstance(card, ModelCard) else load_model(card)
    return kv_layout(card, get_profile(engine), kv_dtype, tp).bytes_per_token_per_gpu


def _fit_row(*args, **kwargs) -> dict:
    return fit_from_names(*args, **kwargs).rows[0]


@dataclass(frozen=True)
class EngineLog:
    """One logged figure, its public inputs, and kvplan's value for it."""

    key: str
    engine: str
    source: str
    quote: tuple[str, ...]
    inputs: str
    quantity: str
    unit: str
    logged: float
    tolerance: float
    tolerance_reason: str
    compute: Callable[[], float]
    agrees: bool = True
    disagreement: str = ""
    documented_error: float | None = None   # kvplan − logged, pinned where they disagree

    def kvplan(self) -> float:
        return float(self.compute())

    @property
    def error(self) -> float:
        return self.kvplan() - self.logged

    @property
    def relative_error(self) -> float:
        return self.error / self.logged


def _vllm_12330() -> dict:
    return _fit_row("llama-3.1-8b", "a100-40gb", seq=8192, gpu_memory_utilization=0.90, overrides=Overrides(
        gpu_memory_bytes=39.50 * GiB, weights_bytes=14.96 * GiB, non_torch_bytes=0.10 * GiB,
        activation_bytes=9.37 * GiB))


def _vllm_10517(seq: int, peak_gib: float) -> dict:
    # V0 of that release folded the weights into the torch peak: weights 0, activation = the peak
    return _fit_row("llama-3.1-8b", "a100-40gb", seq=seq, gpu_memory_utilization=0.90, overrides=Overrides(
        gpu_memory_bytes=23.58 * GiB, weights_bytes=0, activation_bytes=peak_gib * GiB, non_torch_bytes=0.35 * GiB))


def _vllm_lmcache_3430() -> dict:
    return _fit_row("qwen3-8b", "l40s", seq=16384, overrides=Overrides(kv_cache_memory_bytes=6.37 * GiB))


def _vllm_21348() -> dict:
    return _fit_row("qwen3-235b-a22b", "h100-sxm", seq=40960, tp=4,
                    overrides=Overrides(kv_cache_memory_bytes=8.11 * GiB))


def _sglang_qwq() -> dict:
    # rest = avail_after_weights − pre_load_avail × (1 − f) = f × pre_load_avail − weights (ENGINES.md §2)
    return _fit_row(qwq_32b(), "l40s", seq=131072, tp=4, engine="sglang", gpu_memory_utilization=0.85,
                    overrides=Overrides(gpu_memory_bytes=21.63 * GiB, weights_bytes=(21.63 - 6.09) * GiB))


LOGS: tuple[EngineLog, ...] = (
    EngineLog(
        "vllm-12330-blocks", "vllm", "https://github.com/vllm-project/vllm/issues/12330",
        ("the current vLLM instance can use total_gpu_memory (39.50GiB) x gpu_memory_utilization (0.90) = 35.55GiB",
         "model weights take 14.96GiB; non_torch_memory takes 0.10GiB; PyTorch activation peak memory takes 9.37GiB; "
         "the rest of the memory reserved for KV Cache is 11.12GiB.",
         "# GPU blocks: 5691, # CPU blocks: 2048"),
        "Meta-Llama-3-8B, A100-40GB, util 0.90, max_model_len 8192, bf16 KV, tp 1 (vLLM V0)",
        "GPU blocks", "blocks", 5691,
        10, "4 GiB inputs printed to 0.01: 0.005 × (0.9 + 1 + 1 + 1) = 0.0195 GiB = 10 blocks of 2 MiB",
        lambda: _vllm_12330()["num_blocks"]),
    EngineLog(
        "vllm-12330-concurrency", "vllm", "https://github.com/vllm-project/vllm/issues/12330",
        ("Maximum concurrency for 8192 tokens per request: 11.12x",),
        "as above", "max concurrency at 8192", "x", 11.12,
        0.025, "±10 blocks × 16 / 8192 = ±0.020, plus 0.005 print rounding",
        lambda: _vllm_12330()["max_concurrency"]),
    EngineLog(
        "vllm-10517-20000", "vllm", "https://github.com/vllm-project/vllm/issues/10517",
        ("Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB "
         "memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90",
         "GPU blocks: 1952, # CPU blocks: 2048", "Maximum concurrency for 20000 tokens per request: 1.56x"),
        "meta-llama/Llama-3.1-8B-Instruct, RTX 3090, util 0.90, max_model_len 20000, bf16 KV, tp 1 (vLLM V0)",
        "GPU blocks", "blocks", 1952,
        8, "3 GiB inputs printed to 0.01: 0.005 × (0.9 + 1 + 1) = 0.0145 GiB = 7.4 blocks, +1 for the floor",
        lambda: _vllm_10517(20000, 17.06)["num_blocks"]),
    EngineLog(
        "vllm-10517-29000", "vllm", "https://github.com/vllm-project/vllm/issues/10517",
        ("Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB "
         "memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90",
         "# GPU blocks: 1478, # CPU blocks: 2048", "Maximum concurrency for 29000 tokens per request: 0.82x",
         "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
         "(23648)."),
        "as above at max_model_len 29000 (start-up refused)", "KV cache tokens", "tokens", 23648,
        8 * 16, "as above: ±8 blocks of 16 tokens",
        lambda: _vllm_10517(29000, 17.98)["kv_cache_tokens"]),
    EngineLog(
        "vllm-lmcache-3430", "vllm", "https://github.com/LMCache/LMCache/issues/3430",
        ("[gpu_worker.py:462] Available KV cache memory: 6.37 GiB",
         "[kv_cache_utils.py:1710] GPU KV cache size: 46,368 tokens",
         "[kv_cache_utils.py:1711] Maximum concurrency for 16,384 tokens per request: 2.83x"),
        "Qwen/Qwen3-8B, RTX A5000 24 GB, vLLM 0.21.0, max_model_len 16384, bf16 KV, tp 1",
        "GPU KV cache tokens", "tokens", 46368,
        3 * 16, "6.37 GiB printed to 0.01: ±0.005 GiB = ±2.3 blocks of 2.25 MiB, +1 for the floor → ±3 blocks",
        lambda: _vllm_lmcache_3430()["kv_cache_tokens"]),
    EngineLog(
        "vllm-lmcache-3430-concurrency", "vllm", "https://github.com/LMCache/LMCache/issues/3430",
        ("[kv_cache_utils.py:1711] Maximum concurrency for 16,384 tokens per request: 2.83x",),
        "as above", "max concurrency at 16,384", "x", 2.83,
        0.01, "±3 blocks / 1,024 blocks per request = ±0.003, plus 0.005 print rounding",
        lambda: _vllm_lmcache_3430()["max_concurrency"]),
    EngineLog(
        "vllm-21348", "vllm", "https://github.com/vllm-project/vllm/issues/21348",
        ("Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens"),
        "Qwen3-235B-A22B-FP8, 4×H100, tp 4, bf16 KV (auto), LMCacheConnectorV1",
        "GPU KV cache tokens", "tokens", 178880,
        8 * 16, "8.11 GiB printed to 0.01: ±7 blocks of 16 × 48,128 B, +1 for the floor",
        lambda: _vllm_21348()["kv_cache_tokens"],
        agrees=False, documented_error=2048,
        disagreement=("kvplan 11,308 blocks from 8.11 GiB, the log 11,180 (−128 blocks, −1.1%), beyond rounding. "
                      "The line is one worker's budget; vLLM gives every rank the smallest block count "
                      "of the 4 ranks, which the log does not print (cause not confirmed).")),
    EngineLog(
        "sglang-21348", "sglang", "https://github.com/vllm-project/vllm/issues/21348",
        ("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",),
        "Qwen3-235B-A22B-FP8, 4×H100, tp 4, mem_fraction_static 0.93, bf16 KV",
        "#tokens = (K + V bytes) // cell", "tokens", 367404,
        224, "K and V printed to 0.01 GiB: ±0.01 GiB / 48,128 B cell = ±223 tokens, +1",
        lambda: (8.23 + 8.23) * GiB // _bytes_per_token("qwen3-235b-a22b", "sglang", tp=4)),
    EngineLog(
        "sglang-qwq-32b-l4", "sglang",
        "https://github.com/didier-durand/llms-in-clouds/blob/main/docs/sglang.md",
        ("[TP0] Load weight begin. avail mem=21.63 GB",
         "[TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem usage=15.54 GB.",
         "[TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB"),
        "Qwen/QwQ-32B, 4×L4 24 GB (g6.12xlarge), tp 4, mem_fraction_static 0.85 (default), bf16 KV, SGLang 0.4.3.post4",
        "#tokens from the budget 0.85 × 21.63 − 15.54 GiB", "tokens", 46611,
        95, "6.09 and 21.63 × 0.15 printed to 0.01: ±0.00575 GiB / 65,536 B cell = ±94 tokens, +1",
        lambda: _sglang_qwq()["kv_cache_tokens"]),
    EngineLog(
        "sglang-qwq-32b-l4-ksize", "sglang",
        "https://github.com/didier-durand/llms-in-clouds/blob/main/docs/sglang.md",
        ("[TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB",),
        "as above", "K size of 46,611 tokens", "GiB", 1.42,
        0.005, "printed to 0.01 GiB",
        lambda: 46611 * _bytes_per_token(qwq_32b(), "sglang", tp=4) / 2 / GiB),
    EngineLog(
        "sglang-18263", "sglang", "https://github.com/sgl-project/sglang/pull/18263",
        ("Case 2: candidate_kv_budget 164149629787 / 152.88 GB",
         "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1669816, K size: 76.44 GB, V size: 76.44 GB"),
        "Qwen3MoeForCausalLM (the PR runs Qwen/Qwen3-30B-A3B-Instruct: 48 layers, 4 KV heads of 128), one AMD GPU, "
        "tp 1, mem_fraction_static 0.911, bf16 KV",
        "#tokens = budget bytes // cell", "tokens", 1669816,
        0, "the budget is printed in bytes: exact",
        lambda: 164149629787 // _bytes_per_token(qwen3_30b_a3b(), "sglang")),
    EngineLog(
        "trtllm-dynamo-tinyllama-tp2", "trtllm",
        "https://github.com/ai-dynamo/dynamo/blob/34be266cb557c951d8df7fe0d5c5b89d2c4b76ea/"
        "examples/python_rs/llm/tensorrt_llm/README.md",
        ("[TensorRT-LLM][INFO] Number of tokens per block: 32.",
         "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 18.88 GiB for max tokens in paged KV cache (1800032)."),
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0 (the README's config), tp 2, bf16 KV, PyTorch backend",
        "GiB for 1,800,032 tokens on one rank", "GiB", 18.88,
        0.005, "printed to 0.01 GiB",
        lambda: 1800032 * _bytes_per_token(tinyllama(), "trtllm", tp=2) / GiB),
    EngineLog(
        "trtllm-dynamo-llama-8b", "trtllm",
        "https://github.com/ai-dynamo/dynamo/blob/34be266cb557c951d8df7fe0d5c5b89d2c4b76ea/"
        "examples/python_rs/llm/tensorrt_llm/README.md",
        ("[TensorRT-LLM][INFO] Number of tokens per block: 64.",
         "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 26.91 GiB for max tokens in paged KV cache (220480).",
         "max_seq_len=131072, max_num_requests=2048, max_num_tokens=8192"),
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B (the example's llm_api_config.yaml; Llama-3.1-8B geometry), "
        "one H100, tp 1, bf16 KV",
        "GiB for 220,480 tokens", "GiB", 26.91,
        0.005, "printed to 0.01 GiB",
        lambda: 220480 * _bytes_per_token("llama-3.1-8b", "trtllm") / GiB),
)

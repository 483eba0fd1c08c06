"""Engine profiles: how each serving engine stores the KV cache and budgets memory for it.

Every default here is version-dependent engine behaviour, cited to the engine's source
(see ENGINES.md of the project's design notes). A profile changes *how* the same model
state is stored (block rounding, MLA compression, sliding-window retention, state dtypes)
and *how much* memory the engine gives the cache (fraction of total vs of free memory).

=========  ===========================================  ========  =====  =================
profile    KV budget                                    fraction  block  MLA
=========  ===========================================  ========  =====  =================
vllm       total × util − weights − act − non-torch     0.90      16     latent, per rank
           − cudagraph (vllm/v1/worker/gpu_worker.py)
sglang     fraction × total − weights (no profiling)    derived   1      latent, per rank
trtllm     fraction × (total − weights − act − other)   0.90      32     latent, K-only
hf         everything left after weights (DynamicCache) —         —      latent (transformers ≥ 5)
hf4        as hf, for transformers 4.x                  —         —      decompressed K/V
ideal      total × util − weights                       0.90      —      latent
=========  ===========================================  ========  =====  =================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan.errors import InputError

Budget = Literal["fraction_of_total", "fraction_of_total_preload", "fraction_of_free", "all_free"]


@dataclass(frozen=True)
class EngineProfile:
    """How one engine lays out and budgets the KV cache.

    ``sliding_extra_tokens``: vLLM keeps ``W − 1 + max_num_batched_tokens`` tokens of a
    sliding-window layer in flight and one extra page (``SlidingWindowSpec``); transformers
    keeps ``W − 1``; SGLang and TensorRT-LLM keep ``W``.
    """

    name: str
    budget: Budget
    block_size: int | None
    mla_decompressed: bool
    shards_heads: bool
    sliding_retained: Literal["vllm", "window", "window_minus_one"]
    sliding_extra_pages: int
    recurrent_state_fp32: bool
    default_utilization: float | None
    source: str
    transformers: bool = False          # runs the checkpoint's own dtype, one device
    expands_grouped_kv: tuple[str, ...] = ()  # families whose K/V are broadcast to every query head
    conv_state_full_kernel: bool = False  # linear layers keep conv_kernel (not kernel − 1) columns


PROFILES: dict[str, EngineProfile] = {
    "vllm": EngineProfile(
        name="vllm", budget="fraction_of_total", block_size=16, mla_decompressed=False,
        shards_heads=True, sliding_retained="vllm", sliding_extra_pages=1,
        recurrent_state_fp32=False, default_utilization=0.9,
        source="vllm/config/cache.py; vllm/v1/kv_cache_interface.py; vllm/v1/worker/gpu_worker.py",
    ),
    "sglang": EngineProfile(
        name="sglang", budget="fraction_of_total_preload", block_size=1, mla_decompressed=False,
        shards_heads=True, sliding_retained="window", sliding_extra_pages=0,
        recurrent_state_fp32=True, default_utilization=None,
        source="python/sglang/srt/server_args.py; model_executor/model_runner_kv_cache_mixin.py",
    ),
    "trtllm": EngineProfile(
        name="trtllm", budget="fraction_of_free", block_size=32, mla_decompressed=False,
        shards_heads=True, sliding_retained="window", sliding_extra_pages=0,
        recurrent_state_fp32=False, default_utilization=0.9,
        source="tensorrt_llm/llmapi/llm_args.py (KvCacheConfig); tensorrt_llm/_torch/pyexecutor/_util.py",
    ),
    # transformers 5.x, measured with 5.24 (tests/validation): MLA caches the compressed latent
    # (modeling_deepseek_v3.py: "Cache read / write is performed while latent KV is still
    # compressed"); Falcon's new decoder architecture broadcasts K/V to every query head before
    # caching (modeling_falcon.py: _split_heads; 5.25 caches num_kv_heads instead, so the validation extra
    # installs transformers < 5.25, pyproject.toml); Qwen3-Next keeps the whole conv kernel and an
    # fp32 recurrent state (cache_utils.py, modeling_qwen3_next.py).
    "hf": EngineProfile(
        name="hf", budget="all_free", block_size=None, mla_decompressed=False,
        shards_heads=False, sliding_retained="window_minus_one", sliding_extra_pages=0,
        recurrent_state_fp32=True, default_utilization=None,
        source="transformers 5.x: cache_utils.py (DynamicCache), modeling_deepseek_v3.py, modeling_falcon.py",
        transformers=True, expands_grouped_kv=("falcon",), conv_state_full_kernel=True,
    ),
    # transformers 4.x: DeepseekV3Attention expanded the latent through kv_b_proj and cached
    # K [B, heads, S, qk_nope + qk_rope] and V [B, heads, S, v_head_dim] (ENGINES.md §4).
    "hf4": EngineProfile(
        name="hf4", budget="all_free", block_size=None, mla_decompressed=True,
        shards_heads=False, sliding_retained="window_minus_one", sliding_extra_pages=0,
        recurrent_state_fp32=True, default_utilization=None,
        source="transformers 4.x: models/deepseek_v3/modeling_deepseek_v3.py, cache_utils.py",
        transformers=True, expands_grouped_kv=("falcon",), conv_state_full_kernel=True,
    ),
    "ideal": EngineProfile(
        name="ideal", budget="fraction_of_total", block_size=None, mla_decompressed=False,
        shards_heads=True, sliding_retained="window", sliding_extra_pages=0,
        recurrent_state_fp32=False, default_utilization=0.9,
        source="kvplan: logical bytes, no paging, no engine overheads",
    ),
}

ENGINE_NAMES = tuple(PROFILES)

# vLLM V1 on a GPU with >= 70 GiB: max_num_batched_tokens defaults to 8192 for the OpenAI
# server (vllm/engine/arg_utils.py: _set_default_args). It bounds the sliding-window tokens in flight.
VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192

# vLLM V1's batch defaults for `vllm serve` (UsageContext.OPENAI_API_SERVER) when neither flag is given,
# vllm/engine/arg_utils.py (EngineArgs._set_default_args at commit 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b;
# the same figures in get_batch_defaults after its refactor): "if device_memory >= 70 * GiB_bytes and
# "a100" not in device_name" (PRs #17073, #17885) → OPENAI_API_SERVER: max_num_batched_tokens 8192,
# max_num_seqs 1024; else 2048 and 256; then max_num_seqs = min(max_num_seqs, max_num_batched_tokens).
VLLM_LARGE_GPU_BYTES = 70 * 2**30
VLLM_BATCH_DEFAULTS = {True: (1024, 8192), False: (256, 2048)}  # large GPU → (max_num_seqs, max_num_batched_tokens)
VLLM_BATCH_SOURCE = ("vllm/engine/arg_utils.py EngineArgs._set_default_args (commit 99d7eb5; get_batch_defaults "
                     "after the refactor), OPENAI_API_SERVER context")
# Engines without a device rule here keep kvplan's earlier fixed figures (vLLM's old 256, and 8,192 tokens).
OTHER_BATCH_DEFAULTS = (256, VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS)


# Host dispatch of a prefill. An engine that captures CUDA graphs for decode batches only runs a prefill (or mixed)
# forward of more tokens than it captured without a graph: one Python dispatch of each layer's kernels, a cost the
# per-kernel measurements do not hold. aiconfigurator calibrates it once per request, added to TTFT, and kvplan
# charges it so (kvplan.plans.sizing.dispatch); under --enforce-eager it is a term of every prefill / mixed forward.
@dataclass(frozen=True)
class PrefillDispatch:
    """Host time per decoder layer of a prefill (once per request, added to TTFT), and its source."""

    per_layer_s: float
    source: str


AIC_DISPATCH_SOURCE = (
    "NVIDIA aiconfigurator (ai-dynamo/aiconfigurator, Apache-2.0, commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce) "
    "aic-core/src/aiconfigurator_core/sdk/backends/vllm_backend.py _prefill_dispatch_overhead_ms = num_layers × 0.8: "
    "'CPU-side dispatch overhead scales with layer count and is not captured in silicon benchmarks. Recalibrated at "
    "~0.8ms/layer against the full silicon corpus across hardware platforms and model families'")
PREFILL_DISPATCH: dict[str, PrefillDispatch] = {
    "vllm": PrefillDispatch(0.8e-3, AIC_DISPATCH_SOURCE + "; vLLM V1 replays its piecewise CUDA graphs for "
                            "forwards up to its largest capture size (vllm/config/vllm.py _set_cudagraph_sizes) and "
                            "runs larger ones eagerly"),
    # SGLang: no SGLang figure is published (its piecewise-CUDA-graph PR #10062 says only that native prefill 'can
    # incur kernel launch overhead'); aiconfigurator's SGLang backend keeps the base class's 0 ('Default: 0.0 (no
    # correction)'), which is no measurement. Its extend forwards run eagerly: CUDA graphs are captured for decode
    # batch sizes (--cuda-graph-max-bs); piecewise graphs for prefill were opt-in (--enable-piecewise-cuda-graph,
    # PR #10062) until PR #16331 (2026-01) and stay off with DP attention, PP or an MoE all-to-all backend.
    "sglang": PrefillDispatch(0.8e-3, "vLLM's figure stands in (no SGLang figure is published; SGLang runs "
                              "extend forwards eagerly, its CUDA graphs captured for decode batch sizes, piecewise "
                              "prefill graphs opt-in before sgl-project/sglang PR #16331): " + AIC_DISPATCH_SOURCE),
    # TensorRT-LLM: aiconfigurator's TRT-LLM backend keeps the base class's 0.0 (its predictions for the engine it was
    # built around carry no dispatch term); the v0.9 TensorRT engines run from the C++ runtime. The 1.x PyTorch backend
    # runs its context phase without CUDA graphs unless prefill piecewise graphs are configured, and no figure is
    # published for it: none is charged, as aiconfigurator does.
    "trtllm": PrefillDispatch(0.0, "aiconfigurator's TensorRT-LLM backend adds no prefill "
                              "dispatch term (sdk/backends/base_backend.py _prefill_dispatch_overhead_ms returns 0.0, "
                              "trtllm_backend.py does not override it, commit 095f58a); no figure is published for "
                              "TensorRT-LLM's own eager context phase"),
}


def prefill_dispatch(engine: str) -> PrefillDispatch | None:
    """The engine's :class:`PrefillDispatch` (None for hf, hf4 and ideal: none modelled)."""
    return PREFILL_DISPATCH.get(canonical_engine(engine))


# An eager decode step (``--enforce-eager``: vLLM's --enforce-eager, SGLang's --disable-cuda-graph, TensorRT-LLM's
# PyTorch backend without use_cuda_graph). Kernel launches are asynchronous: the host dispatches each layer's kernels
# while the GPU runs the ones already queued, so a decode step whose dispatch takes longer than its GPU work waits on
# the host, step = max(GPU step, L × t_layer). t_layer is the engine's eager-forward figure; TensorRT-LLM publishes
# none (its prefill term is aiconfigurator's "no correction", 0), so vLLM's stands in there, and the note says so.
def eager_decode_dispatch(engine: str) -> tuple[float, str] | None:
    """(host dispatch per layer of an eager decode step in s, its source) for a serving engine; None for hf, hf4,
    ideal (no CUDA graphs modelled for them: there is nothing to turn off)."""
    profile = prefill_dispatch(engine)
    if profile is None:
        return None
    if profile.per_layer_s > 0:
        return profile.per_layer_s, profile.source
    vllm = PREFILL_DISPATCH["vllm"]
    return vllm.per_layer_s, ("vLLM's eager-forward figure standing in (no per-layer dispatch figure is published for "
                              f"{canonical_engine(engine)}'s eager decode): " + AIC_DISPATCH_SOURCE)


def batch_defaults(engine: str, gpu_memory_bytes: float, hardware_name: str) -> tuple[int, int, str | None]:
    """(max_num_seqs, max_num_batched_tokens, note) an engine starts with when neither is given.

    vLLM follows its own rule (:data:`VLLM_BATCH_DEFAULTS`): the device's total memory against
    70 GiB and "a100" in its name; the note names the rule and its source. Other engines: the
    fixed :data:`OTHER_BATCH_DEFAULTS`, no note.
    """
    if canonical_engine(engine) != "vllm":
        return (*OTHER_BATCH_DEFAULTS, None)
    large = gpu_memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in hardware_name.lower()
    seqs, tokens = VLLM_BATCH_DEFAULTS[large]
    seqs = min(seqs, tokens)
    rule = (f"a GPU with >= 70 GiB not named A100 ({hardware_name}: {gpu_memory_bytes / 2**30:.2f} GiB)" if large
            else f"{hardware_name} ({gpu_memory_bytes / 2**30:.2f} GiB): " + (
                "an A100, which vLLM keeps on the small defaults (PR #17885)" if "a100" in hardware_name.lower()
                else "below vLLM's 70 GiB threshold"))
    return seqs, tokens, (f"max_num_seqs {seqs:,}, max_num_batched_tokens {tokens:,}: vLLM V1's defaults for "
                          f"vllm serve on {rule}, {VLLM_BATCH_SOURCE}; --max-num-seqs / --max-num-batched-tokens "
                          "override them")


def serving_dtype(model_dtype: str, engine: EngineProfile) -> str:
    """The dtype an engine serves a checkpoint in: serving engines run fp32 checkpoints in 16-bit.

    vLLM ``dtype=auto`` casts float32 configs down to a 16-bit type (vllm/config/model.py:
    ``_get_and_verify_dtype``; bf16 where supported) and SGLang/TensorRT-LLM do the same;
    transformers loads the checkpoint's own dtype.
    """
    if model_dtype == "fp32" and not engine.transformers:
        return "bf16"
    return model_dtype


# Other spellings users write (the projects' own names), compared case-insensitively.
ENGINE_ALIASES = {
    "tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm", "tensorrtllm": "trtllm", "trt-llm": "trtllm",
    "trt_llm": "trtllm", "trt": "trtllm", "transformers": "hf", "huggingface": "hf",
}


def canonical_engine(name: str) -> str:
    """``name`` in kvplan's spelling: case-insensitive, with the aliases above (``vLLM`` -> ``vllm``)."""
    key = name.strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    if key not in PROFILES:
        raise InputError(f"unknown engine '{name}'",
                         f"choose one of: {', '.join(ENGINE_NAMES)} (or tensorrt-llm, trt-llm, transformers)")
    return key


def get_profile(name: str) -> EngineProfile:
    """The profile named ``name`` (any case, or an alias); an InputError listing the valid names otherwise."""
    return PROFILES[canonical_engine(name)]


def sglang_mem_fraction_static(
    gpu_memory_bytes: float, tp: int = 1, pp: int = 1,
    chunked_prefill_size: int = 8192, cuda_graph_max_bs: int | None = None,
) -> float:
    """SGLang's default ``mem_fraction_static`` (python/sglang/srt/server_args.py, v0.5.x).

    reserve_MiB = 512 + 1.5 × max(chunked_prefill_size, 2048) + 2 × cuda_graph_max_bs
                  + 1024 × tp × pp / 8, at least 10 GiB on GPUs above 60 GiB;
    fraction = round((gpu_MiB − reserve_MiB) / gpu_MiB, 3).
    ``cuda_graph_max_bs`` defaults to 256 below tp 4 and 512 from tp 4 (60–160 GiB class).
    """
    gpu_mib = gpu_memory_bytes / 2**20
    if cuda_graph_max_bs is None:
        cuda_graph_max_bs = 256 if tp < 4 else 512
    reserve_mib = 512 + 1.5 * max(chunked_prefill_size, 2048) + 2 * cuda_graph_max_bs + 1024 * tp * pp / 8
    if gpu_mib > 60 * 1024:
        reserve_mib = max(reserve_mib, 10 * 1024)
    return round((gpu_mib - reserve_mib) / gpu_mib, 3)

"""``kvplan fit``: does the KV cache fit, and how many blocks, tokens and sequences does one GPU hold.

Reproduces the engines' start-up arithmetic (ENGINES.md §1–§3):

    kv_cache_memory = the engine's budget rule (kvplan.calc.memory.kv_budget)
    block_bytes     = block_size × KV bytes per token on the rank (all its layers)
    num_blocks      = floor(kv_cache_memory / block_bytes)
    kv_cache_tokens = num_blocks × block_size
    max_concurrency = num_blocks × block_bytes / bytes one max_model_len request needs
                      (= num_blocks / cdiv(max_model_len, block_size) for full attention)
    max context at the requested concurrency: the largest L with batch × bytes(L) ≤ budget.

Every rank computes the same budget; the heaviest pipeline stage decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.calc.memory import (activation_peak_bytes, kv_budget, num_blocks, vllm_activation_peak_bytes,
                                 vllm_non_torch_bytes, weight_bytes)
from kvplan.cards.schema import ModelCard
from kvplan.engines import VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, get_profile, serving_dtype, sglang_mem_fraction_static
from kvplan.errors import InputError
from kvplan.plans.sizing.size import as_list, check_positive, size_rows
from kvplan.result import Result
from kvplan.units import format_bytes

if TYPE_CHECKING:
    from kvplan.plans.deployment import Deployment

FIT_COLUMNS = [
    "seq_len", "batch", "kv_dtype", "tp", "engine",
    "weights_bytes_per_gpu", "kv_cache_memory_bytes", "num_blocks", "kv_cache_tokens",
    "max_concurrency", "max_context_at_batch", "fits",
]


@dataclass(frozen=True)
class Overrides:
    """Figures an engine printed at start-up, to reproduce it exactly; None = kvplan's default."""

    gpu_memory_bytes: float | None = None
    weights_bytes: float | None = None
    activation_bytes: float | None = None
    non_torch_bytes: float | None = None
    cudagraph_bytes: float | None = None
    kv_cache_memory_bytes: float | None = None


def _utilization(engine: str, hw_bytes: float, tp: int, pp: int, given: float | None, notes: list) -> float:
    if given is not None:
        if not 0 < given <= 1:
            raise InputError(f"--gpu-memory-utilization must be in (0, 1] (got {given})", "vLLM's default is 0.9")
        return given
    profile = get_profile(engine)
    if engine == "sglang":
        fraction = sglang_mem_fraction_static(hw_bytes, tp, pp)
        notes.append(f"sglang mem_fraction_static {fraction} from its default reserve formula (server_args.py)")
        return fraction
    if profile.default_utilization is None:
        return 1.0
    return profile.default_utilization


@dataclass(frozen=True)
class EngineMemory:
    """One GPU's memory as the engine budgets it at start-up, and the KV pool it carves out (bytes)."""

    gpu_memory_bytes: float
    utilization: float
    weights_bytes_per_gpu: float
    activation_bytes: float
    non_torch_bytes: float
    cudagraph_bytes: float
    kv_cache_memory_bytes: float  # the budget rule's result (may be <= 0)
    rule: str
    block_size: int               # tokens per block (1 for an unpaged engine)
    block_bytes_per_gpu: float
    num_blocks: int

    @property
    def pool_bytes_per_gpu(self) -> float:
        """Bytes of whole blocks: ``num_blocks × block_bytes_per_gpu`` (what requests can hold)."""
        return self.num_blocks * self.block_bytes_per_gpu


def _reserve_terms(profile, tp: int, pp: int, uses_profiling: bool, overrides: Overrides,
                   notes: list) -> tuple[float, float]:
    """Non-torch and CUDA-graph memory: the given figures, else the engine's default, each said as a note.

    vLLM: non-torch ``vllm_non_torch_bytes`` (0.35 GiB on one GPU, 3.58 GiB per GPU with peers;
    sources at the constants in ``kvplan.calc.memory``); CUDA graphs 0, because graphs are captured
    after the cache is sized and live in the ``1 − util`` headroom unless the engine's own estimate
    is on (v0.21 to PR #45197: "Estimated CUDA graph memory" 0.36 GiB in gpustack/runner PR #251,
    4.30 GiB in vllm PR #37296). Other profiling engines: no sourced default, 0.
    """
    non_torch, cudagraph = overrides.non_torch_bytes, overrides.cudagraph_bytes
    if non_torch is None:
        non_torch = 0.0
        if profile.name == "vllm":
            non_torch = vllm_non_torch_bytes(tp, pp)
            notes.append(f"vllm tp={tp}: non-torch memory (NCCL, CUDA context) assumed {format_bytes(non_torch)} "
                         + ("(largest one-GPU figure of vLLM issues #10517, #12126, #12330)" if tp * pp == 1 else
                            "(vLLM PR #10511's tp 2 figure; no public log for more peers)")
                         + ": pass --non-torch-memory with the engine's logged figure")
        elif uses_profiling:
            notes.append(f"{profile.name} tp={tp}: non-torch memory assumed 0 (pass --non-torch-memory)")
    if cudagraph is None:
        cudagraph = 0.0
        if profile.name == "vllm":
            notes.append("vllm: CUDA-graph memory assumed 0: graphs live in the 1 − util headroom unless vLLM's "
                         "estimate is on (v0.21 until PR #45197: \"Estimated CUDA graph memory\" 0.36 GiB in "
                         "gpustack/runner PR #251, 4.30 GiB in vllm PR #37296): pass --cudagraph-memory")
    return non_torch, cudagraph


def engine_memory(card: ModelCard, profile, layout, gpu_bytes: float, utilization: float, *,
                  weights_dtype: str = "auto", max_num_batched_tokens: int = VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS,
                  max_num_seqs: int = 256, overrides: Overrides = Overrides(),
                  weights_bytes_per_gpu: float | None = None, notes: list | None = None) -> EngineMemory:
    """The KV budget of one GPU (``kv_budget``) and its blocks: ``floor(budget / (block_size × bytes/token))``.

    Weights per GPU default to all weights / (tp × pp); ``weights_bytes_per_gpu`` replaces that
    (expert parallelism splits experts differently), an ``overrides`` figure replaces both.
    """
    notes = [] if notes is None else notes
    eng, t, pp, mnbt = profile.name, layout.tp, layout.pp, max_num_batched_tokens
    weights = overrides.weights_bytes
    if weights is None:
        weights = weights_bytes_per_gpu
    if weights is None:
        weights = weight_bytes(card, weights_dtype, serving_dtype(card.dtype, profile)) / (t * pp)
    uses_profiling = profile.budget in ("fraction_of_total", "fraction_of_free", "all_free") and eng != "ideal"
    activation = overrides.activation_bytes
    if activation is None:
        activation = 0.0
        if uses_profiling:
            estimate = vllm_activation_peak_bytes if eng == "vllm" else activation_peak_bytes
            activation = estimate(card, mnbt, t, max_num_seqs, serving_dtype(card.dtype, profile))
        if uses_profiling and eng == "vllm":
            notes.append(f"{eng} tp={t}: activation peak estimated at {format_bytes(activation)} for {mnbt} batched "
                         f"tokens and {max_num_seqs} sequences (the larger of the forward and sampler transients, "
                         "fitted on vLLM PR #10511 and issue #10517; V0 v0.6 logged 9.37 GiB for Llama-3-8B in "
                         "issue #12330, where this gives 1.28): pass --activation-memory with the engine's logged "
                         "figure")
        elif uses_profiling:
            notes.append(f"{eng} tp={t}: activation peak estimated at {format_bytes(activation)} for "
                         f"{mnbt} batched tokens (pass --activation-memory with the engine's logged figure)")
    non_torch, cudagraph = _reserve_terms(profile, t, pp, uses_profiling, overrides, notes)
    if overrides.kv_cache_memory_bytes is not None:
        kv_bytes, rule = float(overrides.kv_cache_memory_bytes), "given (--kv-cache-memory)"
    else:
        budget = kv_budget(profile, gpu_bytes, utilization, weights, activation, non_torch, cudagraph)
        kv_bytes, rule = budget.kv_cache_bytes, budget.rule
    bs = layout.block_size or 1
    block_bytes = bs * layout.bytes_per_token_per_gpu
    if block_bytes <= 0:  # pure linear-state model: one state block per sequence
        block_bytes = layout.sequence_bytes(1, per_gpu=True).item()
    blocks = int(num_blocks(kv_bytes, block_bytes))
    return EngineMemory(gpu_bytes, utilization, weights, activation, non_torch, cudagraph, kv_bytes, rule, bs,
                        block_bytes, blocks)


def gpu_utilization(engine: str, gpu_bytes: float, tp: int, pp: int, given: float | None, notes: list) -> float:
    """The engine's memory fraction: the given one, SGLang's reserve formula, or the profile's default."""
    return _utilization(engine, gpu_bytes, tp, pp, given, notes)


def fit(deployments: Sequence[Deployment], seq: int | Sequence[int] | None = None, batch: int | Sequence[int] = 1,
        *, allow_long_context: bool = False, warn_concurrency: bool = False) -> Result:
    """Memory budget, blocks, tokens and concurrency of each deployment (one GPU's view) at every seq × batch.

    ``deployments``: one model on one hardware card, one per KV dtype × tp × engine, resolved once
    (:func:`kvplan.plans.deployment.fit_deployments`); each carries the engine's start-up budget
    and blocks (:func:`engine_memory`). ``seq`` None: the model's maximum context, as vLLM
    defaults ``max_model_len`` to the config's ``max_position_embeddings`` (vllm/config/model.py:
    ``_get_and_verify_max_len``). ``warn_concurrency``: a note when the deployments' ``max_num_seqs``
    (given by the user) exceeds the cache's max concurrency (``kvplan fit --max-num-seqs``).
    """
    if not deployments:
        raise InputError("no deployment to fit", "give at least one KV dtype, tp and engine")
    card, hw = deployments[0].model, deployments[0].hardware
    notes: list[str] = [card.resolution] if card.resolution else []
    if seq is None:
        seq = card.max_context
        notes.append(f"max_model_len {card.max_context:,}: {card.name}'s maximum context, vLLM's default "
                     "(pass --max-model-len to size a shorter one)")
    seqs_given = deployments[0].engine.max_num_seqs if warn_concurrency else None
    seqs, batches = as_list(seq), as_list(batch)
    check_positive("--max-model-len", seqs)
    check_positive("--batch", batches)
    if max(seqs) > card.max_context and not allow_long_context:
        raise InputError(
            f"--max-model-len {max(seqs):,} exceeds {card.name}'s max_position_embeddings ({card.max_context:,})",
            "lower it, or pass --allow-long-context if the deployment extends the context (RoPE scaling)",
        )
    rows, explain = [], []
    for dep in deployments:
        notes.extend(dep.notes)
        eng, layout, mem = dep.profile.name, dep.layout, dep.memory
        gpu_bytes, util = mem.gpu_memory_bytes, mem.utilization
        weights, activation, non_torch, cudagraph = (mem.weights_bytes_per_gpu, mem.activation_bytes,
                                                     mem.non_torch_bytes, mem.cudagraph_bytes)
        kv_bytes, rule, bs, block_bytes, blocks = (mem.kv_cache_memory_bytes, mem.rule, mem.block_size,
                                                   mem.block_bytes_per_gpu, float(mem.num_blocks))
        explain.append(
            f"{eng} ({rule}): {format_bytes(gpu_bytes)} × {util:g} − weights {format_bytes(weights)} "
            f"− activation {format_bytes(activation)} − non-torch {format_bytes(non_torch)} "
            f"− cudagraph {format_bytes(cudagraph)} → KV {format_bytes(kv_bytes)}; block {bs} tokens × "
            f"{layout.bytes_per_token_per_gpu:,.0f} B = {block_bytes:,.0f} B → {blocks:,.0f} blocks"
        )
        for row in size_rows(card, layout, eng, seqs, batches):
            s, b = row["seq_len"], row["batch"]
            per_request = float(layout.sequence_bytes(s, per_gpu=True))
            pool = blocks * block_bytes
            concurrency = pool / per_request if per_request > 0 else math.inf
            max_ctx = int(layout.max_sequence_len(pool, b, upper=max(card.max_context, s)))
            row.update({
                "hardware": hw.name, "gpu_memory_bytes": gpu_bytes, "gpu_memory_utilization": util,
                "weights_bytes_per_gpu": weights, "activation_bytes": activation,
                "non_torch_bytes": non_torch, "cudagraph_bytes": cudagraph,
                "kv_cache_memory_bytes": kv_bytes, "block_bytes_per_gpu": block_bytes,
                "num_blocks": int(blocks), "kv_cache_tokens": int(blocks * bs),
                "max_model_len": s, "max_concurrency": round(concurrency, 4),
                "max_context_at_batch": max_ctx,
                "fits": bool(kv_bytes > 0 and concurrency >= b),
            })
            rows.append(row)
    if seqs_given is not None and warn_concurrency:
        short = [r for r in rows if r["max_concurrency"] < seqs_given]
        if short:
            r = min(short, key=lambda r: r["max_concurrency"])
            notes.append(f"--max-num-seqs {seqs_given} exceeds the cache's max concurrency {r['max_concurrency']:.2f} "
                         f"at max_model_len {r['seq_len']:,} (tp={r['tp']}, {r['kv_dtype']}): the engine cannot hold "
                         "that many full-length sequences at once; requests queue or are preempted")
    failed = [r for r in rows if not r["fits"]]
    verdict = None
    if failed:
        r = failed[0]
        if r["kv_cache_memory_bytes"] <= 0:
            verdict = (f"does not fit: weights and reserves ({format_bytes(r['weights_bytes_per_gpu'])} weights) "
                       f"leave no KV memory on {hw.name} at tp={r['tp']}; raise --tp or quantise the weights")
        else:
            verdict = (f"does not fit: {r['batch']} × {r['seq_len']:,}-token sequences need "
                       f"{format_bytes(r['kv_bytes_total_per_gpu'])} per GPU, the cache holds "
                       f"{format_bytes(r['kv_cache_memory_bytes'])} (max concurrency {r['max_concurrency']:.2f}, "
                       f"max context at batch {r['batch']}: {r['max_context_at_batch']:,} tokens)")
    return Result(title=f"KV cache fit: {card.name} on {hw.name}", rows=rows, columns=FIT_COLUMNS,
                  explain=explain, assumptions=list(dict.fromkeys(notes)), verdict=verdict, failed=bool(failed))

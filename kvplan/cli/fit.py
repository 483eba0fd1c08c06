"""``kvplan fit MODEL HARDWARE``: the engine's KV budget, blocks, tokens and concurrency."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli.options import (BatchOpt, BlockOpt, CardsOpt, EngineOpt, ExplainOpt, FormatOpt, KVDtypeOpt,
                                OutputOpt, PPOpt, TPOpt, cards_dirs, emit, handle_errors)
from kvplan.cli.size import parse_ints, parse_names
from kvplan.plans.fit import Overrides, fit
from kvplan.units import parse_bytes


def _bytes(text: str | None) -> float | None:
    return None if text is None else float(parse_bytes(text))


ByteOpt = Optional[str]


@handle_errors
def fit_command(
    model: Annotated[str, typer.Argument(help="Card name, Hugging Face repo id, card file or config.json.")],
    hardware: Annotated[str, typer.Argument(help="Hardware card name or file.")],
    seq: Annotated[str, typer.Option("--max-model-len", "--seq", help="Tokens per request (list allowed).")] = "8k",
    batch: BatchOpt = "1",
    kv_dtype: KVDtypeOpt = "auto",
    tp: TPOpt = "1",
    pp: PPOpt = 1,
    engine: EngineOpt = "vllm",
    weights_dtype: Annotated[str, typer.Option("--weights-dtype", help="auto, bf16, fp8, int8, int4, mxfp4, fp4.")] = "auto",
    gpu_memory_utilization: Annotated[Optional[float], typer.Option(
        "--gpu-memory-utilization", "--mem-fraction-static",
        help="vLLM util / SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction.")] = None,
    kv_cache_memory: Annotated[ByteOpt, typer.Option("--kv-cache-memory", help="Fix the KV budget per GPU (e.g. 11.12GiB).")] = None,
    gpu_memory: Annotated[ByteOpt, typer.Option("--gpu-memory", help="Total GPU memory the runtime sees (overrides the card).")] = None,
    weights_memory: Annotated[ByteOpt, typer.Option("--weights-memory", help="Weights per GPU as the engine logged them.")] = None,
    activation_memory: Annotated[ByteOpt, typer.Option("--activation-memory", help="Activation peak as the engine logged it.")] = None,
    non_torch_memory: Annotated[ByteOpt, typer.Option("--non-torch-memory", help="Non-torch memory as the engine logged it.")] = None,
    cudagraph_memory: Annotated[ByteOpt, typer.Option("--cudagraph-memory", help="CUDA-graph reserve (vLLM versions that profile it).")] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option("--max-num-batched-tokens")] = None,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", help="Sequences in the profiling run (sampler logits).")] = 256,
    block_size: BlockOpt = None,
    allow_long_context: Annotated[bool, typer.Option("--allow-long-context", help="Allow --max-model-len beyond the card's max.")] = False,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Does the KV cache fit? Blocks, tokens and max concurrency as the engine computes them."""
    overrides = Overrides(
        gpu_memory_bytes=_bytes(gpu_memory), weights_bytes=_bytes(weights_memory),
        activation_bytes=_bytes(activation_memory), non_torch_bytes=_bytes(non_torch_memory),
        cudagraph_bytes=_bytes(cudagraph_memory), kv_cache_memory_bytes=_bytes(kv_cache_memory),
    )
    result = fit(
        model, hardware, parse_ints(seq, "--max-model-len"), parse_ints(batch, "--batch"),
        parse_names(kv_dtype), parse_ints(tp, "--tp"), pp, parse_names(engine),
        weights_dtype=weights_dtype, gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, overrides=overrides,
        allow_long_context=allow_long_context, cards=cards_dirs(cards),
    )
    emit(result, fmt, output, explain)

"""``kvplan fit MODEL HARDWARE``: the engine's KV budget, blocks, tokens and concurrency."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli.options import (AllowLongContextOpt, BatchOpt, BlockOpt, CardsOpt, DtypeOpt, EngineOpt, ExplainOpt,
                                FormatOpt, GpuUtilOpt, K_NOTE, MaxBatchedTokensOpt, MaxNumSeqsOptionalOpt, OutputOpt,
                                QuantizationOpt, TPListOpt, cards_dirs, emit, note, resolve_weights_dtype)
from kvplan.cli.size import parse_ints, parse_names
from kvplan.errors import InputError
from kvplan.plans.build import fit_from_names
from kvplan.plans.sizing.fit import Overrides
from kvplan.units import parse_bytes


def _bytes(text: str | None) -> float | None:
    return None if text is None else float(parse_bytes(text))


ByteOpt = Optional[str]


def fit_command(
    model: Annotated[Optional[str], typer.Argument(
        help="Card name, Hugging Face repo id, card file or config.json (omit with --from-vllm).")] = None,
    hardware: Annotated[Optional[str], typer.Argument(help="Hardware card name or file.")] = None,
    seq: Annotated[Optional[str], typer.Option("--max-model-len", "--seq", help="Tokens per request (list allowed); default: the model's max context, as vLLM. "
        f"{K_NOTE}.")] = None,
    batch: BatchOpt = "1",
    kv_dtype: Annotated[Optional[str], typer.Option(
        "--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp16, fp8, int8, int4, fp4, … (list allowed); default auto.")] = None,
    tp: TPListOpt = None,
    pp: Annotated[Optional[int], typer.Option("--pp", "-pp", "--pipeline-parallel-size", help="Pipeline-parallel size; default 1.")] = None,
    engine: EngineOpt = "vllm",
    weights_dtype: Annotated[Optional[str], typer.Option("--weights-dtype", help="auto, bf16, fp8, int8, int4, mxfp4, fp4; default auto.")] = None,
    quantization: QuantizationOpt = None,
    dtype: DtypeOpt = None,
    gpu_memory_utilization: GpuUtilOpt = None,
    kv_cache_memory: Annotated[ByteOpt, typer.Option("--kv-cache-memory", help="Fix the KV budget per GPU (e.g. 11.12GiB).")] = None,
    kv_cache_memory_bytes: Annotated[ByteOpt, typer.Option(
        "--kv-cache-memory-bytes", help="vLLM's spelling: bytes per GPU, vLLM's integer rule (8G = 8 GiB, 8g = 8e9).")] = None,
    gpu_memory: Annotated[ByteOpt, typer.Option("--gpu-memory", help="Total GPU memory the runtime sees (overrides the card).")] = None,
    weights_memory: Annotated[ByteOpt, typer.Option("--weights-memory", help="Weights per GPU as the engine logged them.")] = None,
    activation_memory: Annotated[ByteOpt, typer.Option("--activation-memory", help="Activation peak as the engine logged it.")] = None,
    non_torch_memory: Annotated[ByteOpt, typer.Option("--non-torch-memory", help="Non-torch memory as the engine logged it.")] = None,
    cudagraph_memory: Annotated[ByteOpt, typer.Option("--cudagraph-memory", help="CUDA-graph reserve (vLLM versions that profile it).")] = None,
    max_num_batched_tokens: MaxBatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOptionalOpt = None,
    block_size: BlockOpt = None,
    allow_long_context: AllowLongContextOpt = False,
    from_vllm: Annotated[Optional[str], typer.Option(
        "--from-vllm", help="Read model and settings from a 'vllm serve MODEL …' command line; kvplan flags given "
        "here override it.")] = None,
    hardware_opt: Annotated[Optional[str], typer.Option("--hardware", help="Hardware card (instead of the argument).")] = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Does the KV cache fit? Blocks, tokens and max concurrency as the engine computes them."""
    if kv_cache_memory is not None and kv_cache_memory_bytes is not None:
        raise InputError("--kv-cache-memory and --kv-cache-memory-bytes both given", "keep one")
    if kv_cache_memory_bytes is not None:
        from kvplan.plans.sizing.vllm_cmdline import human_int

        kv_cache_memory = f"{human_int(kv_cache_memory_bytes, '--kv-cache-memory-bytes')}B"
    weights_dtype = resolve_weights_dtype(weights_dtype, quantization, dtype)
    given = {"seq": seq, "kv_dtype": kv_dtype, "tp": tp, "pp": pp, "weights_dtype": weights_dtype,
             "gpu_memory_utilization": gpu_memory_utilization, "kv_cache_memory": kv_cache_memory,
             "max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs, "block_size": block_size}
    if from_vllm is not None:
        from kvplan.plans.sizing.vllm_cmdline import fit_inputs_from_serve

        model, hardware, given, notes = fit_inputs_from_serve(from_vllm, model, hardware, hardware_opt, engine, given)
        for text in notes:
            note(text)
    else:
        if hardware_opt is not None:
            if hardware is not None:
                raise InputError("HARDWARE given twice (argument and --hardware)", "keep one")
            hardware = hardware_opt
        if model is None or hardware is None:
            raise InputError("fit needs MODEL and HARDWARE", "kvplan fit llama-3.1-70b h100-sxm, or --from-vllm \"vllm serve …\"")
    overrides = Overrides(
        gpu_memory_bytes=_bytes(gpu_memory), weights_bytes=_bytes(weights_memory),
        activation_bytes=_bytes(activation_memory), non_torch_bytes=_bytes(non_torch_memory),
        cudagraph_bytes=_bytes(cudagraph_memory), kv_cache_memory_bytes=_bytes(given["kv_cache_memory"]),
    )
    seqs = None if given["seq"] is None else parse_ints(given["seq"], "--max-model-len")
    batches = parse_ints(batch, "--batch")
    result = fit_from_names(
        model, hardware, seqs, batches, parse_names(given["kv_dtype"] or "auto", "--kv-dtype"),
        parse_ints(given["tp"] or "1", "--tp"), given["pp"] or 1, parse_names(engine, "--engine"),
        allow_long_context=allow_long_context, warn_concurrency=given["max_num_seqs"] is not None,
        weights_dtype=given["weights_dtype"] or "auto", gpu_memory_utilization=given["gpu_memory_utilization"],
        block_size=given["block_size"], max_num_batched_tokens=given["max_num_batched_tokens"],
        max_num_seqs=given["max_num_seqs"], overrides=overrides, cards=cards_dirs(cards))
    emit(result, fmt, output, explain)


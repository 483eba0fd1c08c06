"""Read a real ``vllm serve`` command line into the settings ``kvplan fit`` takes.

Accepted shapes: ``vllm serve MODEL [flags]``, ``python -m vllm.entrypoints.openai.api_server
--model MODEL [flags]``, with leading ``VAR=value`` environment assignments, shell line
continuations (``\\`` + newline), ``--flag value`` and ``--flag=value``, underscores or dashes
(vLLM's FlexibleArgumentParser accepts both) and the short forms ``-tp``, ``-pp``, ``-q``.
Integers take vLLM's human-readable forms (``human_readable_int``, vllm/engine/arg_utils.py):
``128k`` = 128,000 (lowercase: decimal), ``128K`` = 131,072 (uppercase: binary), ``1Ki``.

Flags that size the KV cache are mapped; flags that do not (host, port, API keys, parsers…)
are dropped silently; every other flag is returned in ``unknown`` for the caller to report.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from kvplan.errors import InputError

# vLLM flag (dashes, no leading --) -> kvplan setting
VALUE_FLAGS = {
    "model": "model",
    "tensor-parallel-size": "tensor_parallel_size",
    "pipeline-parallel-size": "pipeline_parallel_size",
    "max-model-len": "max_model_len",
    "kv-cache-dtype": "kv_cache_dtype",
    "gpu-memory-utilization": "gpu_memory_utilization",
    "block-size": "block_size",
    "max-num-batched-tokens": "max_num_batched_tokens",
    "max-num-seqs": "max_num_seqs",
    "kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "kv-cache-memory": "kv_cache_memory_bytes",
    "dtype": "dtype",
    "quantization": "quantization",
}
SHORT_FLAGS = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "q": "quantization"}

# Known vLLM flags that do not change the KV arithmetic kvplan does: ignored without a note.
SILENT_VALUE_FLAGS = {
    "host", "port", "api-key", "served-model-name", "tokenizer", "tokenizer-mode", "revision",
    "tokenizer-revision", "download-dir", "load-format", "chat-template", "tool-call-parser",
    "reasoning-parser", "uvicorn-log-level", "root-path", "seed", "generation-config",
    "ssl-keyfile", "ssl-certfile", "allowed-origins", "response-role", "lora-modules",
    "max-log-len", "hf-token", "config-format", "distributed-executor-backend", "trust-request-chat-template",
}
SILENT_SWITCHES = {
    "trust-remote-code", "enable-prefix-caching", "no-enable-prefix-caching", "disable-log-requests",
    "enable-log-requests", "disable-log-stats", "enable-auto-tool-choice", "enable-chunked-prefill",
    "no-enable-chunked-prefill", "disable-frontend-multiprocessing", "disable-fastapi-docs",
    "enable-prompt-tokens-details", "disable-uvicorn-access-log", "disable-custom-all-reduce",
}
# Known switches that change memory in ways kvplan does not model: reported as notes.
NOTED_SWITCHES = {
    "enforce-eager": "no CUDA graphs: vLLM reserves no graph memory (kvplan's cudagraph term is 0 already)",
    "enable-expert-parallel": "expert parallelism spreads the experts; kvplan's weights per GPU assume TP sharding",
}

# vLLM --quantization -> kvplan weights dtype (the checkpoint's format decides for 'compressed-tensors')
QUANTIZATION = {
    "fp8": "fp8", "fbgemm_fp8": "fp8", "ptpc_fp8": "fp8", "modelopt": "fp8",
    "awq": "int4", "awq_marlin": "int4", "gptq": "int4", "gptq_marlin": "int4", "marlin": "int4",
    "mxfp4": "mxfp4", "modelopt_fp4": "fp4", "nvfp4": "fp4", "experts_int8": None,
    "bitsandbytes": "int4", "compressed-tensors": None, "compressed_tensors": None,
}
DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
          "float32": "fp32", "float": "fp32", "fp32": "fp32"}
KV_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|[kmgtKMGT])?")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_int(text: str, flag: str) -> int:
    """vLLM's ``human_readable_int``: ``25.6k`` = 25,600; ``16K`` = 16,384; ``1Gi`` = 2^30."""
    match = _HUMAN_INT.fullmatch(text.strip())
    if not match:
        raise InputError(f"--from-vllm: {flag} '{text}' is not an integer", "vLLM takes 131072, 128k or 128K")
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        raise InputError(f"--from-vllm: {flag} '{text}': decimals need a decimal suffix (k, m, g)", "write 25.6k")
    return int(number) * _BINARY.get(suffix, 1)


@dataclass
class VllmServe:
    """The KV-relevant settings of one ``vllm serve`` line (None: the line did not set it)."""

    model: str
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    kv_cache_memory_bytes: int | None = None
    weights_dtype: str | None = None
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _tokens(command: str) -> list[str]:
    text = command.replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as exc:
        raise InputError(f"--from-vllm: cannot split the command line ({exc})", "check the quotes") from None
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        tokens.pop(0)  # environment assignments
    for i, token in enumerate(tokens):
        if token == "serve" and i > 0 and tokens[i - 1].endswith("vllm"):
            return tokens[i + 1:]
        if token.startswith("vllm.entrypoints"):
            return tokens[i + 1:]
    raise InputError("--from-vllm: no 'vllm serve' (or vllm.entrypoints…api_server) in the command line",
                     "pass the whole line, e.g. \"vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4\"")


def parse_vllm_serve(command: str) -> VllmServe:
    """Parse the flags after ``vllm serve`` (see the module docstring)."""
    args = _tokens(command)
    values: dict[str, str] = {}
    positional: list[str] = []
    unknown: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-") or token == "-":
            positional.append(token)
            continue
        name, eq, inline = token.lstrip("-").partition("=")
        name = SHORT_FLAGS.get(name, name).replace("_", "-")
        takes_value = name in VALUE_FLAGS or name in SILENT_VALUE_FLAGS
        if takes_value:
            if eq:
                value = inline
            elif i < len(args):
                value, i = args[i], i + 1
            else:
                raise InputError(f"--from-vllm: --{name} needs a value", "complete the command line")
            if name in VALUE_FLAGS:
                values[VALUE_FLAGS[name]] = value
        elif name in SILENT_SWITCHES:
            continue
        elif name in NOTED_SWITCHES:
            notes.append(f"--{name}: {NOTED_SWITCHES[name]}")
        else:
            # unknown: take the next token as its value unless it is another flag
            shown = token
            if not eq and i < len(args) and not args[i].startswith("-"):
                shown, i = f"{token} {args[i]}", i + 1
            unknown.append(shown)
    model = values.pop("model", None)
    if positional:
        if model is not None and positional[0] != model:
            raise InputError(f"--from-vllm: two models ('{positional[0]}' and --model '{model}')", "keep one")
        model = positional[0]
        unknown.extend(positional[1:])
    if model is None:
        raise InputError("--from-vllm: the command line names no model", "vllm serve MODEL …")
    serve = VllmServe(model=model, unknown=unknown, notes=notes)
    _apply(serve, values)
    return serve


def _apply(serve: VllmServe, values: dict[str, str]) -> None:
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "block_size",
                "max_num_batched_tokens", "max_num_seqs", "kv_cache_memory_bytes"):
        if key in values:
            if key == "max_model_len" and values[key].strip() in ("-1", "auto"):
                serve.notes.append("--max-model-len auto-fit (-1) taken as the model's max context")
                continue
            setattr(serve, key, human_int(values[key], f"--{key.replace('_', '-')}"))
    if "gpu_memory_utilization" in values:
        try:
            serve.gpu_memory_utilization = float(values["gpu_memory_utilization"])
        except ValueError:
            raise InputError(f"--from-vllm: --gpu-memory-utilization '{values['gpu_memory_utilization']}' "
                             "is not a number", "vLLM takes a fraction such as 0.9") from None
    if "kv_cache_dtype" in values:
        dtype = values["kv_cache_dtype"]
        serve.kv_cache_dtype = KV_DTYPES.get(dtype, dtype)
    quantization = values.get("quantization")
    if quantization is not None:
        mapped = QUANTIZATION.get(quantization.lower(), "unknown")
        if mapped == "unknown":
            serve.notes.append(f"--quantization {quantization}: not known to kvplan; weights taken from the card "
                               "(pass --weights-dtype)")
        elif mapped is None:
            serve.notes.append(f"--quantization {quantization}: the format depends on the checkpoint; weights "
                               "taken from the card (pass --weights-dtype)")
        else:
            serve.weights_dtype = mapped
            if quantization.lower() in ("awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "bitsandbytes"):
                serve.notes.append(f"--quantization {quantization} taken as 4-bit weights (int4, group 128)")
    if "dtype" in values:
        dtype = DTYPES.get(values["dtype"].lower())
        if dtype is None:
            raise InputError(f"--from-vllm: --dtype '{values['dtype']}' is not a vLLM dtype",
                             "auto, bfloat16, float16, half, float32")
        if serve.weights_dtype is None and dtype != "auto":
            serve.weights_dtype = dtype


def fit_inputs_from_serve(command: str, model: str | None, hardware: str | None, hardware_opt: str | None,
                          engine: str, given: dict) -> tuple[str, str, dict, list[str]]:
    """Model, hardware and fit settings from a ``vllm serve`` line; values in ``given`` (not None) win.

    Returns ``(model, hardware, settings, notes)``: ``settings`` has the keys of ``given`` (seq,
    kv_dtype, tp, pp, weights_dtype, gpu_memory_utilization, kv_cache_memory, max_num_batched_tokens,
    max_num_seqs, block_size); ``notes`` say which of the line's values were overridden, what the
    line implied, and which of its flags kvplan does not model.
    """
    if engine != "vllm":
        raise InputError(f"--from-vllm reads a vLLM command line; --engine {engine} does not apply", "drop --engine")
    positional = [a for a in (model, hardware) if a is not None]
    if len(positional) == 2:
        raise InputError("with --from-vllm the model comes from the command line; give only HARDWARE",
                         "kvplan fit --from-vllm \"vllm serve MODEL …\" h100-sxm")
    if positional and hardware_opt is not None:
        raise InputError("HARDWARE given twice (argument and --hardware)", "keep one")
    hardware = positional[0] if positional else hardware_opt
    if hardware is None:
        raise InputError("--from-vllm needs the hardware the line runs on", "add HARDWARE, e.g. h100-sxm, or --hardware")
    serve = parse_vllm_serve(command)
    from_line = {
        "seq": serve.max_model_len, "kv_dtype": serve.kv_cache_dtype, "tp": serve.tensor_parallel_size,
        "pp": serve.pipeline_parallel_size, "weights_dtype": serve.weights_dtype,
        "gpu_memory_utilization": serve.gpu_memory_utilization, "kv_cache_memory": serve.kv_cache_memory_bytes,
        "max_num_batched_tokens": serve.max_num_batched_tokens, "max_num_seqs": serve.max_num_seqs,
        "block_size": serve.block_size,
    }
    merged, notes = {}, []
    for key, value in from_line.items():
        if given[key] is not None:
            if value is not None:
                notes.append(f"{key} {given[key]} given to kvplan overrides the vLLM line's {value}")
            merged[key] = given[key]
        else:
            merged[key] = str(value) if key in ("seq", "tp", "kv_cache_memory") and value is not None else value
    notes.extend(serve.notes)
    if serve.unknown:
        notes.append(f"ignored vLLM flags kvplan does not model: {' '.join(serve.unknown)}")
    return serve.model, hardware, merged, notes

"""Options shared by every command (defined once as ``Annotated`` aliases) and the output path.

Data goes to stdout (or ``-o FILE``, written whole or not at all); notes and errors go to
stderr. Errors a user can fix print ``Error: …`` and ``Hint: …`` and exit 2; a result that
answers "no" (does not fit, a failed check, an infeasible plan) exits 1. Both happen in one
place, the error boundary in ``kvplan.cli``: commands raise, they never exit themselves.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.errors import AnswerNo, InputError
from kvplan.report.render import FORMATS, render, terminal_width
from kvplan.result import Result
from kvplan.textsafe import one_line

FormatOpt = Annotated[Optional[str], typer.Option("--format", "-f", help=(
    f"Output format: {', '.join(FORMATS)} (default: from -o's extension .csv/.json/.md, else table)."))]
OutputOpt = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write to FILE (whole or not at all; /dev/stdout and devices are written through).")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="Print the formulas with the card's numbers.")]
CardsOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--cards", help="Extra card directory (repeatable); also KVPLAN_CARDS_PATH."),
]
# kvplan reads k as 1024 everywhere (32k = 32,768); vLLM's own parser (human_readable_int,
# vllm/engine/arg_utils.py) reads 32k as 32,000 and 32K as 32,768, and fit --from-vllm follows vLLM.
K_NOTE = "k=1024 (32k = 32,768); inside --from-vllm vLLM's rule applies: 32k = 32,000, 32K = 32,768"
SeqOpt = Annotated[str, typer.Option("--seq", "--max-model-len", help=f"Tokens per sequence; list: 4k,32k,128k; {K_NOTE}.")]
BatchOpt = Annotated[str, typer.Option("--batch", "-b", help="Concurrent sequences; list: 1,8,64.")]
KVDtypeOpt = Annotated[str, typer.Option("--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp16, fp8, int8, int4, fp4, … (list allowed).")]
TPOpt = Annotated[str, typer.Option("--tp", "-tp", "--tensor-parallel-size", help="Tensor-parallel size (list allowed).")]
TPOneOpt = Annotated[int, typer.Option(
    "--tp", "-tp", "--tensor-parallel-size", help="Tensor-parallel GPUs per instance (calibrate: of rows without a tp column).")]
PPOpt = Annotated[int, typer.Option("--pp", "-pp", "--pipeline-parallel-size", help="Pipeline-parallel size.")]

# the model and hardware arguments, dtypes and expert parallelism (size, fit, latency, plan, …)
ModelArg = Annotated[str, typer.Argument(help="Card name, Hugging Face repo id, card file or config.json.")]
HardwareArg = Annotated[str, typer.Argument(help="Hardware card name or file (e.g. one written by 'kvplan calibrate').")]
WeightsDtypeOpt = Annotated[str, typer.Option("--weights-dtype", help="auto, bf16, fp16, fp8, int8, int4, mxfp4, fp4.")]
ComputeDtypeOpt = Annotated[Optional[str], typer.Option(
    "--compute-dtype", help="Tensor-core dtype of the GEMMs (default: from the weights; int4/mxfp4 → model dtype).")]
EPOpt = Annotated[int, typer.Option("--ep", "--expert-parallel-size",
                                    help="Expert-parallel ranks (data-parallel attention, tp 1).")]
RedundantExpertsOpt = Annotated[Optional[int], typer.Option(
    "--ep-redundant-experts", "--num-redundant-experts",
    help="Redundant expert replicas (EPLB; default with EP: the fewest that let EP divide the experts).")]
# workloads: synthetic (--qps/--isl/--osl, sessions) or a trace file (workload, plan, pd, tier, route)
TraceFormatOpt = Annotated[str, typer.Option("--trace-format", help="auto, azure, mooncake or csv.")]
ColumnsOpt = Annotated[Optional[str], typer.Option(
    "--columns", help="Generic CSV columns: timestamp=COL,isl=COL,osl=COL.")]
TimestampUnitOpt = Annotated[Optional[str], typer.Option(
    "--timestamp-unit", help="Generic CSV timestamps: s, ms, us, ns or datetime (default s).")]
SkipBadRowsOpt = Annotated[bool, typer.Option(
    "--skip-bad-rows", help="Skip malformed rows (count and lines on stderr) instead of stopping.")]
CacheTokensOpt = Annotated[Optional[str], typer.Option(
    "--cache-tokens", help="Prefix-cache size in tokens (k = 1024, M = 1024²): workload: LRU sizes, e.g. 3M,10M,50M; "
                           "route: per instance (default with a deployment: its KV pool).")]
MaxUtilizationOpt = Annotated[float, typer.Option(
    "--max-utilization", help="Queue utilisation ceiling (plan: without a TTFT SLO; pd: the prefill pool, default 0.9).")]
RateOpt = Annotated[Optional[float], typer.Option(
    "--rate", "--qps", help="Request arrival rate, requests/s (plan with --trace: the trace is rescaled to it).")]
LENGTH_HELP = "2k (fixed), 1k:8k (lognormal mean:p99), mean=1k,p99=8k or p50=1k,p90=3k,p99=8k"
IslOpt = Annotated[Optional[str], typer.Option("--isl", help=f"Prompt tokens: {LENGTH_HELP}.")]
OslOpt = Annotated[Optional[str], typer.Option("--osl", help="Output tokens, written like --isl.")]
ArrivalCVOpt = Annotated[float, typer.Option("--arrival-cv", help="Inter-arrival CV (1 = Poisson).")]
TurnsOpt = Annotated[int, typer.Option("--turns", help="Requests per session (multi-turn).")]
ThinkTimeOpt = Annotated[str, typer.Option("--think-time", help="Mean time between a session's turns (30s).")]
SharedPrefixOpt = Annotated[str, typer.Option(
    "--shared-prefix", "--system-prompt-tokens", help="System-prompt tokens shared by all sessions.")]
TraceOpt = Annotated[Optional[Path], typer.Option(
    "--trace", help="Trace file: Azure CSV or Mooncake JSONL (hash_ids give prefix reuse; plan also reads a CSV with --columns).")]
SampleOpt = Annotated[int, typer.Option("--sample", help="Requests sampled from a flag workload (length statistics).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (sampled workloads, the random policy).")]
RagDocsOpt = Annotated[Optional[int], typer.Option(
    "--rag-docs", help="RAG: documents in the corpus; every prompt starts with one of them (a prefix group).")]
RagDocTokensOpt = Annotated[str, typer.Option("--rag-doc-tokens", help="RAG: tokens per document.")]
RagZipfOpt = Annotated[float, typer.Option("--rag-zipf", help="RAG: Zipf exponent of document popularity (0 = uniform).")]
# SLOs (the grammar of kvplan.workload.slo); pd gives its own defaults
TtftOpt = Annotated[Optional[str], typer.Option("--ttft", help="TTFT SLO, e.g. 'p99<=2s'.")]
TpotOpt = Annotated[Optional[str], typer.Option("--tpot", help="TPOT SLO, e.g. 'p90<=50ms'.")]
TtftDefaultOpt = Annotated[str, typer.Option("--ttft", help="TTFT SLO, e.g. 'p99<=2s'.")]
TpotDefaultOpt = Annotated[str, typer.Option("--tpot", help="TPOT SLO, e.g. 'p90<=50ms'.")]


def engine_names(text: str | None) -> str | None:
    """``--engine`` callback: each comma-separated name in its canonical spelling (vLLM, TRT-LLM, …).

    Unknown names pass through unchanged, for the command to refuse with its Error/Hint pair.
    """
    if text is None:
        return None
    from kvplan.engines import ENGINE_ALIASES, PROFILES

    def one(name: str) -> str:
        key = name.strip().lower()
        key = ENGINE_ALIASES.get(key, key)
        return key if key in PROFILES else name

    return ",".join(one(name) for name in text.split(","))


ENGINE_HELP = "vllm, sglang, trtllm (tensorrt-llm, trt-llm), hf or ideal; any case"
EngineOpt = Annotated[str, typer.Option("--engine", callback=engine_names, help=f"{ENGINE_HELP} (list allowed).")]
EngineOneOpt = Annotated[str, typer.Option("--engine", callback=engine_names, help=f"{ENGINE_HELP}.")]
QuantizationOpt = Annotated[Optional[str], typer.Option(
    "--quantization", "-q", help="vLLM's --quantization (fp8, awq, gptq, mxfp4, nvfp4, …): sets the weights dtype.")]
DtypeOpt = Annotated[Optional[str], typer.Option(
    "--dtype", help="vLLM's --dtype (auto, bfloat16, float16, half, float32): the weights dtype when not quantised.")]


def resolve_weights_dtype(weights_dtype: str | None, quantization: str | None, dtype: str | None) -> str | None:
    """``--weights-dtype`` if given, else what vLLM's ``--quantization``, else its ``--dtype``, implies.

    None when none of them is given (the caller's default applies).
    """
    from kvplan.errors import InputError
    from kvplan.plans.sizing.vllm_cmdline import DTYPES, QUANTIZATION

    if weights_dtype not in (None, "auto"):
        return weights_dtype
    if quantization is not None:
        mapped = QUANTIZATION.get(quantization.lower(), "unknown")
        if mapped == "unknown":
            raise InputError(f"--quantization '{quantization}' is not a vLLM quantization kvplan knows",
                             f"one of: {', '.join(sorted(QUANTIZATION))}; or give --weights-dtype")
        if mapped is None:
            raise InputError(f"--quantization {quantization}: the bit width depends on the checkpoint",
                             "give --weights-dtype (e.g. fp8 or int4), or the model's config.json")
        return mapped
    if dtype is not None:
        mapped = DTYPES.get(dtype.lower())
        if mapped is None:
            raise InputError(f"--dtype '{dtype}' is not a vLLM dtype", "auto, bfloat16, float16, half, float32")
        return None if mapped == "auto" else mapped
    return weights_dtype
BlockOpt = Annotated[Optional[int], typer.Option("--block-size", help="Tokens per KV block (engine default).")]
# engine settings under vLLM's names (size, fit, latency, plan, pd, tier, route)
KVDtypeOneOpt = Annotated[str, typer.Option(
    "--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp16, fp8, int8, int4, fp4, … (one value).")]
GpuUtilOpt = Annotated[Optional[float], typer.Option(
    "--gpu-memory-utilization", "--mem-fraction-static",
    help="vLLM util / SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction (default: the engine's).")]
MaxNumSeqsOpt = Annotated[int, typer.Option(  # default None in the commands: the engine's for the GPU
    "--max-num-seqs", help="The engine's cap on running sequences (default: the engine's for the GPU; vLLM: 1,024 on "
    "a GPU with >= 70 GiB other than A100, else 256).")]
MaxNumSeqsOptionalOpt = Annotated[Optional[int], typer.Option(
    "--max-num-seqs", help="vLLM's --max-num-seqs (fit: sequences in the profiling run; latency: caps --batch max "
    "per DP rank); default 256 where the engine's is sourced.")]
ChunkSizeOpt = Annotated[str, typer.Option(  # default None in the commands: the engine's for the GPU
    "--chunk-size", "--max-num-batched-tokens", help="Tokens per step (chunked prefill; k = 1024; default: the "
    "engine's for the GPU; vLLM: 8192 on a GPU with >= 70 GiB other than A100, else 2048).")]
MaxBatchedTokensOpt = Annotated[Optional[int], typer.Option(
    "--max-num-batched-tokens", help="vLLM: tokens per step; bounds the sliding-window tokens in flight (default 8192).")]
TPListOpt = Annotated[Optional[str], typer.Option(
    "--tp", "-tp", "--tensor-parallel-size",
    help="Tensor-parallel size; a list is allowed (fit: one row each, default 1; plan: one value pins it, a list is "
         "searched, default 1,2,4,8).")]
ExpertParallelOpt = Annotated[bool, typer.Option(
    "--enable-expert-parallel", help="MoE layers expert-parallel over EP = TP × DP GPUs (vLLM semantics).")]
OverlapCommOpt = Annotated[bool, typer.Option("--overlap-comm", help="Overlap TP/EP communication with compute.")]
AllowLongContextOpt = Annotated[bool, typer.Option(
    "--allow-long-context", help="Allow lengths beyond the card's max context (RoPE scaling).")]
GpuCostOpt = Annotated[Optional[str], typer.Option(
    "--gpu-cost", help="Prices per GPU-hour, any currency: h100-sxm=2.4,h20=1.0: cost per hour and per million output "
                       "tokens (plan: the search compares cost; report: replaces the plan file's gpu_cost).")]
ConcurrencyOpt = Annotated[Optional[str], typer.Option(
    "--concurrency", "--max-concurrency",
    help="Closed loop: requests in flight, each sent when one ends (vllm bench serve --max-concurrency); a list "
         "(1,8,32,128) gives the latency-throughput curve (report: default the plan file's report.concurrency).")]
ChartOpt = Annotated[Optional[Path], typer.Option(
    "--chart", help="Write the command's chart (PNG): plan's closed-loop curve, tier's hit-rate curve, route's "
                    "hit rates.")]
CardNameOpt = Annotated[Optional[str], typer.Option("--name", help="Name of the card written (calibrate: default HARDWARE-calibrated; cards import: from the path).")]
CheckFormatOpt = Annotated[Optional[str], typer.Option("--format", "-f", help=(
    "Output format: table, json, csv, markdown (default: from -o's extension, else table)."))]
SweepOutputOpt = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write FILE.csv or FILE.parquet (whole or not at all); CSV to stdout if absent.")]
EtaMemOpt = Annotated[Optional[float], typer.Option("--eta-mem", help="Memory-bandwidth efficiency (overrides the card).")]
# --perf-model reads like --engine: any case, and the spellings the help and docs use
PERF_MODEL_ALIASES = {"operators": "operators", "per-operator": "operators", "per_operator": "operators",
                      "roofline": "roofline"}


def perf_model_name(text: str | None) -> str | None:
    """``--perf-model`` callback: ``Roofline``, ``PER-OPERATOR`` … in kvplan's spelling (operators, roofline).

    An unknown name passes through unchanged, for the step-time model to refuse with its Error/Hint pair.
    """
    if text is None:
        return None
    return PERF_MODEL_ALIASES.get(text.strip().lower(), text)


DpImbalanceOpt = Annotated[Optional[float], typer.Option(
    "--dp-imbalance", help="Busiest attention-DP rank's step work over the mean, on dp > 1 (default: sourced, by dp).")]
PerfModelOpt = Annotated[str, typer.Option(
    "--perf-model", callback=perf_model_name,
    help="Step-time model: operators (per-operator efficiencies from measured kernel tables, default) "
         "or roofline (one η pair for every operator); any case, per-operator is operators.")]
EtaFlopsOpt = Annotated[Optional[float], typer.Option("--eta-flops", help="FLOPS efficiency (overrides the card).")]
SystemOpt = Annotated[Optional[str], typer.Option(
    "--system", help="System card around the hardware (node / supernode links, tiers), e.g. hgx-h100-8.")]
StepOverheadOpt = Annotated[Optional[str], typer.Option(
    "--step-overhead", help="Fixed time per forward pass, e.g. 300us (overrides the card).")]
PrefillOverheadOpt = Annotated[Optional[str], typer.Option(
    "--prefill-overhead", help="Host dispatch per layer of an eager forward (a prefill larger than the engine's "
    "CUDA graphs; a decode batch larger than its largest graph, or any with --enforce-eager), e.g. 0.8ms; 0 for "
    "none (overrides the engine's: vLLM and SGLang 0.8ms, TensorRT-LLM 0).")]

EnforceEagerOpt = Annotated[bool, typer.Option(
    "--enforce-eager", help="No CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph, TensorRT-LLM's "
    "PyTorch backend without use_cuda_graph): every forward is dispatched eagerly and a decode step takes "
    "max(GPU time, layers × the engine's per-layer dispatch, 0.8ms; --prefill-overhead sets it).")]


_QUIET = {"on": False}
_PRINTED: set[str] = set()


def set_quiet(quiet: bool) -> None:
    """``kvplan --quiet`` (or KVPLAN_QUIET=1): no Note lines; also starts a fresh set of printed notes."""
    _QUIET["on"] = quiet
    _PRINTED.clear()


NOTE_WIDTH = 300  # the longest line a note prints (a log or a file; a terminal: its width, if narrower)
NOTE_INDENT = "  "


def note(text: str) -> None:
    """One note on stderr (``Note: …``), printed once per command, none under --quiet.

    A note longer than a line (:data:`NOTE_WIDTH`, or the terminal's width) continues on
    indented lines, broken after its ``;`` (outside brackets), else at spaces: every figure and
    source is kept.
    """
    if _QUIET["on"] or os.environ.get("KVPLAN_QUIET") == "1" or text in _PRINTED:
        return
    _PRINTED.add(text)
    width = min(NOTE_WIDTH, terminal_width()) if sys.stderr.isatty() else NOTE_WIDTH
    typer.echo("\n".join(note_lines(one_line(text, 2000), width)), err=True)


def note_lines(text: str, width: int = NOTE_WIDTH) -> list[str]:
    """``Note: text`` as lines of at most ``width`` characters (a word longer than that stays whole).

    Breaks after a top-level ``"; "`` first (the clauses of a note), packing clauses while they
    fit; a clause still too long is wrapped at its spaces. Continuation lines start with
    :data:`NOTE_INDENT`.
    """
    import textwrap

    width = max(int(width), 40)
    head = "Note: "
    if len(head) + len(text) <= width:
        return [head + text]
    lines: list[str] = []
    current = ""
    for clause in _clauses(text):
        lead = head if not lines else NOTE_INDENT
        if current and len(lead) + len(current) + len(clause) > width:
            lines.append(current.rstrip())
            current = clause
        else:
            current += clause
    lines.append(current.rstrip())
    if len(lines) > 1 and len(lines[-1]) < 60:  # no stray clause: the last two lines are wrapped together
        lines[-2:] = [lines[-2] + " " + lines[-1]]
    out: list[str] = []
    for line in lines:
        lead = head if not out else NOTE_INDENT
        if len(lead) + len(line) <= width:
            out.append(lead + line)
            continue
        # balanced lines (two of ~165 characters, not 300 and a stray word), never wider than width
        count = -(-(len(lead) + len(line)) // width)
        wrapped = None
        for target in (min(width, -(-(len(lead) + len(line)) // count) + 12), width):
            wrapped = textwrap.wrap(line, width=target, initial_indent=lead, subsequent_indent=NOTE_INDENT,
                                    break_long_words=False, break_on_hyphens=False)
            if len(wrapped) <= count:
                break
        out.extend(wrapped or [lead + line])
    return out


def _clauses(text: str) -> list[str]:
    """``text`` cut after each ``"; "`` that is outside parentheses and brackets (the cut keeps the ``;``)."""
    clauses, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == ";" and depth == 0 and text[i + 1:i + 2] == " ":
            clauses.append(text[start:i + 2])
            start = i + 2
    clauses.append(text[start:])
    return [c for c in clauses if c]


# Ranges of the numeric options every command shares (by parameter name), checked before any work:
# (lowest, highest, lowest is allowed). Far beyond any real deployment; a value outside is a typo
# or an attack (--max-num-seqs -5000 gave negative KV, --turns 1e9 allocated without bound).
_OPEN, _CLOSED = False, True
# --sim-requests: the replay costs ~0.13 ms a request (kvplan plan llama-3.1-8b h100-sxm --qps 5 --isl 1k
# --osl 200 --simulate: 10,000 requests 2.2 s, 100,000 requests 14 s end to end with the scale-out rows,
# on 2 shared CPU cores); 1,000,000 took over 120 s. The bound keeps a run within about 15 s.
MAX_SIM_REQUESTS = 100_000
# an efficiency is a share of a peak: below 0.1% no device runs (--eta-mem 2e-320 made every time infinite, NaN TPOT)
MIN_EFFICIENCY = 0.001
OVER_LIMIT_HINTS = {
    "sim_requests": f"pass at most {MAX_SIM_REQUESTS:,}: the replay costs ~0.13 ms a request "
                    "(100,000 requests: 14 s measured with the scale-out rows; the default 10,000: 2 s)",
}
FLAG_RANGES: dict[str, tuple[float, float, bool]] = {
    "max_num_seqs": (1, 1 << 20, _CLOSED), "max_num_batched_tokens": (1, 1 << 32, _CLOSED),
    "block_size": (1, 1 << 20, _CLOSED), "pp": (1, 1024, _CLOSED), "ep": (1, 1 << 16, _CLOSED),
    "tp": (1, 1 << 16, _CLOSED), "seed": (0, 2**32 - 1, _CLOSED), "sample": (1, 10_000_000, _CLOSED),
    "sim_requests": (1, MAX_SIM_REQUESTS, _CLOSED), "warmup_requests": (0, MAX_SIM_REQUESTS, _CLOSED), "turns": (1, 10_000, _CLOSED), "spec_k": (1, 64, _CLOSED),
    "nodes": (1, 100_000, _CLOSED), "rag_docs": (1, 100_000_000, _CLOSED), "prefill_instances": (1, 100_000, _CLOSED),
    "decode_instances": (1, 100_000, _CLOSED), "max_gpus": (1, 10_000_000, _CLOSED), "hash_blocks": (1, 1 << 20, _CLOSED),
    "gpu_memory_utilization": (0, 1, _OPEN), "eta_mem": (MIN_EFFICIENCY, 1, _CLOSED),
    "eta_flops": (MIN_EFFICIENCY, 1, _CLOSED), "link_efficiency": (MIN_EFFICIENCY, 1, _CLOSED), "max_utilization": (0, 1, _OPEN), "spec_alpha": (0, 1, _CLOSED),
    "cached_prefix_fraction": (0, 1, _CLOSED), "arrival_cv": (0, 1000, _CLOSED), "rag_zipf": (0, 100, _CLOSED),
    "rate": (0, 1e9, _OPEN), "qps": (0, 1e9, _OPEN), "decode_batch": (0, 1 << 20, _OPEN),
    "spec_draft_layers": (0, 4096, _OPEN), "instances": (1, 100_000, _CLOSED),
}
# byte-size options where zero means nothing sensible (--gpu-memory 0 was silently ignored)
POSITIVE_SIZES = {"gpu_memory": "--gpu-memory", "kv_cache_memory": "--kv-cache-memory",
                  "weights_memory": "--weights-memory"}


def check_flag_values(kwargs: dict) -> None:
    """Refuse a numeric option outside its range (NaN and infinities included), before any work."""
    import math

    from kvplan.units import parse_bytes

    for name, value in kwargs.items():
        if name in FLAG_RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high, closed = FLAG_RANGES[name]
            flag = "--" + name.replace("_", "-")
            upper_ok = math.isfinite(value) and (value < high if name in _UPPER_OPEN else value <= high)
            if name in LOW_SIDE_CHECKED_LATER and upper_ok:
                continue  # the command's own check words this one
            if upper_ok and (value >= low if closed else value > low):
                continue
            raise InputError(*_range_message(name, flag, value, low, high, closed))
        elif name in POSITIVE_SIZES and isinstance(value, str) and parse_bytes(value) == 0:
            raise InputError(f"{POSITIVE_SIZES[name]} must be > 0 (got {value})",
                             f"give the size with its unit, e.g. {POSITIVE_SIZES[name]} 80GiB, or leave it out")


LOW_SIDE_CHECKED_LATER = {"rate"}  # --rate <= 0: the workload builder's own message
_UPPER_OPEN = {"cached_prefix_fraction"}


def _range_message(name: str, flag: str, value, low, high, closed) -> tuple[str, str]:
    if high == 1 and low == MIN_EFFICIENCY:
        return (f"{flag} must be in [{low:g}, 1] (got {value})",
                "an efficiency is the share of the peak reached, e.g. 0.8; below 0.001 nothing runs")
    if high == 1 and low == 0:
        interval = f"{'[' if closed else '('}0, 1{')' if name in _UPPER_OPEN else ']'}"
        return f"{flag} must be in {interval} (got {value})", f"pass a fraction in {interval}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{flag} must be a finite number (got {value})", f"pass a value between {low:g} and {high:,g}"
    if value > high:
        return (f"{flag} {value} is more than the {high:,g} kvplan accepts",
                OVER_LIMIT_HINTS.get(name, f"pass at most {high:,g}; a value this large is a typo or beyond any deployment"))
    if low == 1 and closed:
        return f"{flag} must be a positive integer (got {value})", f"pass a whole number >= 1, at most {high:,g}"
    if low == 0 and closed:
        return f"{flag} must be >= 0 (got {value})", f"pass a value between 0 and {high:,g}"
    return f"{flag} must be > {low:g} (got {value})", f"pass a value > {low:g}, at most {high:,g}"


EXTENSION_FORMATS = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown"}


def output_format(fmt: str | None, output: Path | None, formats=FORMATS) -> str:
    """``--format`` when given, else the format of ``-o``'s extension (.csv/.json/.md/.markdown), else table."""
    if fmt is None:
        fmt = EXTENSION_FORMATS.get(output.suffix.lower(), "table") if output is not None else "table"
    if fmt not in formats:
        raise InputError(f"unknown format '{fmt}'", f"choose one of: {', '.join(formats)}")
    return fmt


def emit_text(text: str, output: Path | None, extra: "OutputSet | None" = None) -> None:
    """``text`` to stdout, or to ``-o`` together with the command's other files (all or none)."""
    outputs = extra
    if output is not None:
        if outputs is None:
            from kvplan.outputs import OutputSet  # only when something is written

            outputs = OutputSet()
        outputs.add(output, text)
    written = outputs.commit() if outputs is not None and len(outputs) else []
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    for path in written:
        typer.echo(f"Wrote {one_line(path)}", err=True)


def emit(result: Result, fmt: str | None, output: Path | None, explain: bool = False,
         extra: "OutputSet | None" = None) -> None:
    """Render ``result`` and print or write it; exit 1 when the result answers 'no'."""
    fmt = output_format(fmt, output)
    emit_text(render(result, fmt, explain=explain, width=terminal_width() if output is None else None), output, extra)
    if fmt != "markdown":
        for text in result.assumptions:
            note(text)
        if explain and fmt in ("json", "csv"):
            typer.echo("\n".join(result.explain), err=True)
        if result.verdict and fmt in ("json", "csv"):
            typer.echo(f"Verdict: {one_line(result.verdict, 2000)}", err=True)
    if result.failed:
        raise AnswerNo()


def efficiencies(eta_mem: float | None, eta_flops: float | None, step_overhead: str | None = None,
                 prefill_overhead: str | None = None, enforce_eager: bool = False):
    """The ``--eta-mem/--eta-flops/--step-overhead/--prefill-overhead/--enforce-eager`` flags as latency
    Efficiencies (None = the card's, or for ``--prefill-overhead`` the engine's)."""
    from kvplan.plans.sizing.latency import Efficiencies
    from kvplan.units import parse_seconds

    overhead = None if step_overhead is None else parse_seconds(step_overhead)
    dispatch = None if prefill_overhead is None else parse_seconds(prefill_overhead)
    return Efficiencies(eta_mem=eta_mem, eta_flops=eta_flops, step_overhead_s=overhead, prefill_overhead_s=dispatch,
                        enforce_eager=bool(enforce_eager))


def cards_dirs(cards: list[Path] | None) -> tuple[Path, ...]:
    return tuple(cards or ())

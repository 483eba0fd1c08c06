"""``kvplan latency MODEL HARDWARE`` and ``kvplan calibrate MODEL HARDWARE MEASUREMENTS.csv``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import DpImbalanceOpt, PerfModelOpt
from kvplan.cli.options import (AllowLongContextOpt, BatchOpt, CardNameOpt, CardsOpt, ComputeDtypeOpt, EPOpt,
                                EngineOneOpt, EtaFlopsOpt, EtaMemOpt, ExpertParallelOpt, ExplainOpt, FormatOpt,
                                HardwareArg, KVDtypeOneOpt, KVDtypeOpt, MaxNumSeqsOptionalOpt, ModelArg, OutputOpt,
                                OverlapCommOpt, StepOverheadOpt, PrefillOverheadOpt, EnforceEagerOpt, SystemOpt, TPOneOpt, TPOpt, WeightsDtypeOpt,
                                cards_dirs, efficiencies, emit)
from kvplan.errors import InputError
from kvplan.plans.build import calibrate_from_names, latency_from_names
from kvplan.plans.sizing.latency import Speculation
from kvplan.outputs import OutputSet, check_target
from kvplan.units import parse_list, parse_tokens


def parse_counts(text: str, what: str) -> list[int]:
    """A list of token or batch counts; zero parses so that the plan can say which option is wrong."""
    return parse_list(text, lambda item: parse_tokens(item, allow_zero=True), what=what)


def latency_command(
    model: ModelArg,
    hardware: HardwareArg,
    isl: Annotated[str, typer.Option("--isl", "--input-len", help="Prompt tokens per request (list allowed, k=1024).")] = "2k",
    osl: Annotated[str, typer.Option("--osl", "--output-len", help="Output tokens per request (list allowed).")] = "256",
    batch: BatchOpt = "1",
    tp: TPOpt = "1",
    context: Annotated[Optional[str], typer.Option(
        "--context", help="Context of the reported decode step (default: ISL; list allowed).")] = None,
    ep: EPOpt = 1,
    kv_dtype: KVDtypeOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    compute_dtype: ComputeDtypeOpt = None,
    engine: EngineOneOpt = "vllm",
    chunk_size: Annotated[Optional[str], typer.Option(
        "--chunk-size", "--max-num-batched-tokens", help="Chunked prefill: tokens per step (e.g. 2k).")] = None,
    spec_k: Annotated[Optional[int], typer.Option("--spec-k", help="Speculative decoding: drafted tokens per step.")] = None,
    spec_alpha: Annotated[Optional[float], typer.Option("--spec-alpha", help="Per-token acceptance rate (0–1).")] = None,
    spec_draft: Annotated[Optional[str], typer.Option(
        "--spec-draft", help="Draft model card (default: MTP/EAGLE head = --spec-draft-layers target layers).")] = None,
    spec_draft_layers: Annotated[float, typer.Option("--spec-draft-layers", help="Layers of an MTP/EAGLE draft head.")] = 1.0,
    eta_mem: EtaMemOpt = None,
    eta_flops: EtaFlopsOpt = None,
    step_overhead: StepOverheadOpt = None,
    prefill_overhead: PrefillOverheadOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    overlap_comm: OverlapCommOpt = False,
    allow_long_context: AllowLongContextOpt = False,
    dp: Annotated[int, typer.Option("--dp", "--data-parallel-size",
                                    help="Attention data-parallel ranks (vLLM --data-parallel-size).")] = 1,
    enable_expert_parallel: ExpertParallelOpt = False,
    ep_redundant_experts: Annotated[int, typer.Option(
        "--ep-redundant-experts", help="Redundant expert replicas per MoE layer (EPLB); memory counted.")] = 0,
    expert_imbalance: Annotated[Optional[float], typer.Option(
        "--expert-imbalance", help="Hottest EP rank's routed tokens over the mean (default 1).")] = None,
    dp_imbalance: DpImbalanceOpt = None,
    two_batch_overlap: Annotated[Optional[bool], typer.Option(
        "--two-batch-overlap/--no-two-batch-overlap", help="Overlap EP communication with the other micro-batch.")] = None,
    disable_custom_all_reduce: Annotated[bool, typer.Option(
        "--disable-custom-all-reduce", help="TP all-reduce on NCCL, not the engine's custom kernel (vLLM's flag).")] = False,
    perf_model: PerfModelOpt = "operators",
    max_num_seqs: MaxNumSeqsOptionalOpt = None,
    system: SystemOpt = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """TTFT, decode step (with its physical floor), mean TPOT, end-to-end latency and throughput."""
    speculation = None
    if spec_k is not None or spec_alpha is not None:
        if spec_k is None or spec_alpha is None:
            raise InputError("--spec-k and --spec-alpha go together", "pass both, e.g. --spec-k 3 --spec-alpha 0.7")
        speculation = Speculation(k=spec_k, alpha=spec_alpha, draft_model=spec_draft, draft_layers=spec_draft_layers)
    result = latency_from_names(
        model, hardware, parse_counts(isl, "--isl"), parse_counts(osl, "--osl"),
        "max" if batch.strip().lower() == "max" else parse_counts(batch, "--batch"), parse_counts(tp, "--tp"),
        ep=ep, kv_dtype=kv_dtype, weights_dtype=weights_dtype, engine=engine,
        efficiencies=efficiencies(eta_mem, eta_flops, step_overhead, prefill_overhead, enforce_eager), dp=dp, expert_parallel=enable_expert_parallel,
        redundant_experts=ep_redundant_experts, perf_model=perf_model, system=system, cards=cards_dirs(cards),
        speculation=speculation, context=parse_counts(context, "--context") if context else None,
        compute_dtype=compute_dtype, chunk_size=parse_tokens(chunk_size, allow_zero=True) if chunk_size else None,
        overlap_comm=overlap_comm, allow_long_context=allow_long_context, expert_imbalance=expert_imbalance,
        two_batch_overlap=two_batch_overlap, max_num_seqs=max_num_seqs, dp_imbalance=dp_imbalance,
        custom_all_reduce=not disable_custom_all_reduce,
    )
    emit(result, fmt, output, explain)


def calibrate_command(
    model: ModelArg,
    hardware: HardwareArg,
    measurements: Annotated[Path, typer.Argument(
        help="CSV: batch, context, step_time_s (decode rows) and/or isl, ttft_s (prefill rows); optional tp.")],
    tp: TPOneOpt = 1,
    ep: EPOpt = 1,
    kv_dtype: KVDtypeOneOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    compute_dtype: ComputeDtypeOpt = None,
    engine: EngineOneOpt = "vllm",
    holdout: Annotated[float, typer.Option(
        "--holdout", help="Share of rows scored but not fitted (every ⌈1/f⌉-th row): in-sample and held-out error.")] = 0.0,
    card_out: Annotated[Optional[Path], typer.Option(
        "--card-out", help="Write the calibrated hardware card (YAML) here; pass it as HARDWARE later.")] = None,
    name: CardNameOpt = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Fit η_mem, η_flops and the per-step overhead to measured step times; print residuals; write an overlay card."""
    for path, what in ((card_out, "--card-out"), (output, "--output")):
        if path is not None:
            check_target(path, what)
    calibration = calibrate_from_names(
        model, hardware, measurements, tp, ep=ep, kv_dtype=kv_dtype, weights_dtype=weights_dtype, engine=engine,
        cards=cards_dirs(cards), compute_dtype=compute_dtype, name=name, holdout=holdout)
    extra = OutputSet()
    if card_out is not None:
        extra.add(card_out, calibration.card_yaml(), what="--card-out")
    else:
        typer.echo("Hint: pass --card-out FILE to write the calibrated hardware card", err=True)
    emit(calibration.result, fmt, output, explain, extra)

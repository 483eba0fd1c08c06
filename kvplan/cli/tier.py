"""``kvplan tier MODEL [HARDWARE] --system SYSTEM``: place the KV cache across HBM, DRAM, CXL, NVMe and a remote pool."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import PerfModelOpt
from kvplan.cli.options import (ArrivalCVOpt, CardsOpt, ChartOpt, EngineOneOpt, EtaFlopsOpt, EtaMemOpt, ExplainOpt,
                                FormatOpt, GpuUtilOpt, IslOpt, KVDtypeOpt, OslOpt, OutputOpt, OverlapCommOpt,
                                RagDocTokensOpt, RagDocsOpt, RagZipfOpt, RateOpt, SampleOpt, SeedOpt, SharedPrefixOpt,
                                SystemOpt, ThinkTimeOpt, TpotOpt, TraceFormatOpt, TraceOpt, TtftOpt, TurnsOpt,
                                WeightsDtypeOpt, cards_dirs, efficiencies, emit, output_format)
from kvplan.outputs import OutputSet, check_target
from kvplan.cli.workload import emit_tables
from kvplan.errors import AnswerNo, InputError
from kvplan.plans.tiers.inputs import CapacityOverrides
from kvplan.plans.tiers.reuse import reuse_input
from kvplan.plans.tiers.plan import tier_plan
from kvplan.report.tier_chart import hit_rate_chart
from kvplan.report.tier_tables import presentation
from kvplan.units import parse_bytes

SizeOpt = Optional[str]


def _bytes(text: str | None) -> float | None:
    return None if text is None else float(parse_bytes(text))


def tier_command(
    model: Annotated[str, typer.Argument(help="Card name, Hugging Face repo id, card file or config.json.")],
    hardware: Annotated[Optional[str], typer.Argument(help="Hardware card (or give --system).")] = None,
    system: SystemOpt = None,
    trace: TraceOpt = None,
    trace_format: TraceFormatOpt = "auto",
    rate: RateOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    turns: TurnsOpt = 1,
    think_time: ThinkTimeOpt = "0s",
    system_prompt: SharedPrefixOpt = "0",
    rag_docs: RagDocsOpt = None,
    rag_doc_tokens: RagDocTokensOpt = "4k",
    rag_zipf: RagZipfOpt = 1.0,
    arrival_cv: ArrivalCVOpt = 1.0,
    sample: SampleOpt = 50_000,
    seed: SeedOpt = 0,
    tiers: Annotated[Optional[Path], typer.Option("--tiers", help="YAML list of tiers replacing the card's.")] = None,
    dram_per_node: Annotated[SizeOpt, typer.Option("--dram-per-node", help="Host DRAM per node, e.g. 1TB.")] = None,
    cxl_per_node: Annotated[SizeOpt, typer.Option("--cxl-per-node", help="CXL memory per node.")] = None,
    nvme_per_node: Annotated[SizeOpt, typer.Option("--nvme-per-node", help="NVMe cache capacity per node.")] = None,
    remote_pool: Annotated[SizeOpt, typer.Option("--remote-pool", help="Remote pool capacity in total, e.g. 20TB.")] = None,
    nodes: Annotated[Optional[int], typer.Option("--nodes", help="Nodes (systems) in the fleet; default: fewest stable.")] = None,
    decode_batch: Annotated[Optional[float], typer.Option(
        "--decode-batch", help="Sequences decoding per instance (default: Little's law from the rate).")] = None,
    tp: Annotated[Optional[int], typer.Option("--tp", "-tp", "--tensor-parallel-size", help="GPUs per instance (default: a whole node).")] = None,
    kv_dtype: KVDtypeOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    engine: EngineOneOpt = "vllm",
    gpu_memory_utilization: GpuUtilOpt = None,
    eta_flops: EtaFlopsOpt = None,
    eta_mem: EtaMemOpt = None,
    perf_model: PerfModelOpt = "operators",
    overlap_comm: OverlapCommOpt = False,
    ttft_slo: TtftOpt = None,
    tpot_slo: TpotOpt = None,
    no_pd: Annotated[bool, typer.Option("--no-pd", help="Skip the PD feedback (plan_pd with and without the cache).")] = False,
    chart: ChartOpt = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Tier placement: capacity, content, hit rate, break-even and savings per tier, and the hot path's TPOT."""
    fmt = output_format(fmt, output)
    if chart is not None:
        check_target(chart, "--chart")
    if output is not None:
        check_target(output)
    reuse = reuse_input(trace=trace, trace_format=trace_format, rate_per_s=rate, isl=isl, osl=osl,
                        arrival_cv=arrival_cv, turns=turns, think_time=think_time, shared_prefix=system_prompt,
                        rag_docs=rag_docs, rag_doc_tokens=rag_doc_tokens, rag_zipf=rag_zipf,
                        sample_requests=sample, seed=seed)
    if chart is not None and chart.suffix.lower() != ".png":
        raise InputError(f"--chart {chart}: charts are PNG files", "name it e.g. tiers.png")
    overrides = CapacityOverrides(host_dram=_bytes(dram_per_node), cxl=_bytes(cxl_per_node),
                                  nvme=_bytes(nvme_per_node), remote=_bytes(remote_pool))
    plan = tier_plan(model, hardware, system=system, reuse=reuse, tp=tp, nodes=nodes,
                     decode_batch=decode_batch, kv_dtype=kv_dtype,
                     weights_dtype=weights_dtype, engine=engine, gpu_memory_utilization=gpu_memory_utilization,
                     tiers_file=tiers, overrides=overrides,
                     efficiencies=efficiencies(eta_mem, eta_flops), overlap_comm=overlap_comm,
                     seed=seed, pd=not no_pd, ttft_slo=ttft_slo, tpot_slo=tpot_slo, cards=cards_dirs(cards),
                     perf_model=perf_model)
    extra = OutputSet()
    if chart is not None:
        extra.add(chart, hit_rate_chart(plan.curve_tokens, plan.curve_hit_rate, plan.boundaries,
                                        plan.unlimited_hit_rate, plan.result.title), what="--chart")
    result = plan.result
    if fmt in ("table", "markdown"):
        emit_tables(result, presentation(result), fmt, output, explain, extra)
        if result.failed:
            raise AnswerNo()
    else:
        emit(result, fmt, output, explain, extra)

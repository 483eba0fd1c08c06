"""``kvplan route [TRACE] [MODEL HARDWARE]``: N instances behind a router — hit rates, balance, savings, TTFT."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import (ArrivalCVOpt, BlockOpt, CacheTokensOpt, CardsOpt, ChartOpt, ChunkSizeOpt,
                                EngineOneOpt, EtaFlopsOpt, EtaMemOpt, ExplainOpt, FormatOpt, GpuUtilOpt, IslOpt,
                                KVDtypeOneOpt, MaxNumSeqsOpt, OslOpt, OutputOpt, RagDocTokensOpt, RagDocsOpt,
                                RagZipfOpt, RateOpt, SampleOpt, SeedOpt, SharedPrefixOpt, StepOverheadOpt, PrefillOverheadOpt, EnforceEagerOpt, SystemOpt,
                                TPOneOpt, ThinkTimeOpt, TpotOpt, TraceFormatOpt, TraceOpt, TtftOpt, TurnsOpt,
                                WeightsDtypeOpt, cards_dirs, efficiencies, emit, output_format)
from kvplan.cli.workload import emit_tables
from kvplan.errors import InputError
from kvplan.outputs import OutputSet, check_target
from kvplan.units import parse_list, parse_tokens

POLICY_HELP = "round-robin, random, least-loaded, prefix-aware, consistent-hash (list allowed; default: all)."


def _instances(text: str) -> list[int]:
    def one(item: str) -> int:
        try:
            return int(item)
        except ValueError:
            raise InputError(f"--instances: cannot read {ascii(item)}", "write whole numbers, e.g. --instances 1,2,4,8,16") from None
    return parse_list(text, one, what="--instances")


def route_command(
    args: Annotated[Optional[list[str]], typer.Argument(
        help="TRACE (Mooncake JSONL with hash_ids), then optionally MODEL HARDWARE for a deployment; "
             "with --rate/--isl/--osl, only MODEL HARDWARE.", show_default=False)] = None,
    instances: Annotated[str, typer.Option("--instances", "-n", help="Instances behind the router (list: 1,2,4,8,16).")] = "1,2,4,8,16",
    policy: Annotated[Optional[str], typer.Option("--policy", help=POLICY_HELP)] = None,
    cache_tokens: CacheTokensOpt = None,
    service_time: Annotated[Optional[str], typer.Option(
        "--service-time", help="Without a deployment: every request's time in system (for load-aware policies).")] = None,
    seed: SeedOpt = 0,
    cache_threshold: Annotated[float, typer.Option("--cache-threshold", help="prefix-aware: match rate above which the holder is chosen (SGLang 0.3).")] = 0.3,
    balance_threshold: Annotated[float, typer.Option(
        "--balance-threshold", "--balance-rel-threshold", help="prefix-aware: imbalanced when max load > this × min load (SGLang 1.5) ...")] = 1.5,
    balance_abs_threshold: Annotated[float, typer.Option(
        "--balance-abs-threshold", help="... and max − min load > this (SGLang 64).")] = 64,
    hash_blocks: Annotated[int, typer.Option("--hash-blocks", help="consistent-hash: blocks of the prompt hashed (K).")] = 4,
    hash_balance_factor: Annotated[float, typer.Option(
        "--hash-balance-factor", help="consistent-hash: load bound c × mean in flight (1.25).")] = 1.25,
    trace_opt: TraceOpt = None,
    trace_format: TraceFormatOpt = "auto",
    rate: RateOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    arrival_cv: ArrivalCVOpt = 1.0,
    turns: TurnsOpt = 1,
    think_time: ThinkTimeOpt = "0s",
    shared_prefix: SharedPrefixOpt = "0",
    sample: SampleOpt = 20_000,
    rag_docs: RagDocsOpt = None,
    rag_doc_tokens: RagDocTokensOpt = "4k",
    rag_zipf: RagZipfOpt = 1.0,
    ttft: TtftOpt = None,
    tpot: TpotOpt = None,
    tp: TPOneOpt = 1,
    engine: EngineOneOpt = "vllm",
    kv_dtype: KVDtypeOneOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    gpu_memory_utilization: GpuUtilOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    chunk_size: ChunkSizeOpt = None,
    block_size: BlockOpt = None,
    eta_mem: EtaMemOpt = None,
    eta_flops: EtaFlopsOpt = None,
    step_overhead: StepOverheadOpt = None,
    prefill_overhead: PrefillOverheadOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    system: SystemOpt = None,
    link_system: Annotated[Optional[list[str]], typer.Option(
        "--link-system", help="Also price KV migration over this system's scale-up fabric (repeatable, e.g. cloudmatrix-384).")] = None,
    chart: ChartOpt = None,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Cache-aware routing: per policy and N, hit rates, load imbalance, prefill saved; TTFT, GPUs, KV migration."""
    from kvplan.plans.route.plan import RouterSettings, check_instances, check_policies, presentation
    from kvplan.plans.route.request import route_answer, route_service, route_workload
    from kvplan.report.route_chart import route_chart

    args = list(args or [])
    flags = any(v is not None for v in (rate, isl, osl))
    trace_path = trace_opt
    if trace_path is None and not flags and args:
        trace_path = Path(args.pop(0))
    if trace_path is not None and flags:
        raise InputError("give a TRACE or workload flags (--rate/--isl/--osl), not both")
    if trace_path is not None and rag_docs is not None:
        raise InputError("--rag-docs describes a flag workload; a trace carries its own reuse")
    if len(args) not in (0, 2):
        raise InputError(f"expected MODEL HARDWARE after the workload (got {len(args)} more argument"
                         f"{'s' if len(args) != 1 else ''})", "e.g. kvplan route trace.jsonl llama-3.1-8b h100-sxm")
    if chart is not None and chart.suffix.lower() != ".png":
        raise InputError(f"--chart {ascii(str(chart))}: charts are PNG files", "name it e.g. route.png")
    fmt = output_format(fmt, output)  # -o x.json writes JSON, as every command (the extension's format)
    extra = OutputSet()  # --chart and -o are written together, all or none (targets checked before any work)
    if chart is not None:
        check_target(chart, "--chart")
    if output is not None:
        check_target(output)
    counts = check_instances(_instances(instances))
    names = check_policies(parse_list(policy, str, what="--policy")) if policy is not None else None
    router = RouterSettings(seed=seed, cache_threshold=cache_threshold, balance_abs_threshold=balance_abs_threshold,
                            balance_rel_threshold=balance_threshold, hash_blocks=hash_blocks,
                            hash_balance_factor=hash_balance_factor)
    trace = route_workload(trace_path, trace_format=trace_format, rate=rate, isl=isl, osl=osl,
                           arrival_cv=arrival_cv, turns=turns, think_time=think_time, shared_prefix=shared_prefix,
                           sample=sample, seed=seed, rag_docs=rag_docs, rag_doc_tokens=rag_doc_tokens,
                           rag_zipf=rag_zipf)
    service = None
    if args:
        from kvplan.plans.fleet.aggregated import EngineSettings, parse_slo

        slos = {kind: parse_slo(kind, text) for kind, text in (("ttft", ttft), ("tpot", tpot)) if text is not None}
        settings = EngineSettings(engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype,
                                  gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                                  chunk_tokens=parse_tokens(chunk_size) if chunk_size is not None else None, block_size=block_size,
                                  efficiencies=efficiencies(eta_mem, eta_flops, step_overhead, prefill_overhead, enforce_eager))
        service = route_service(args[0], args[1], trace, slos=slos, tp=tp, settings=settings,
                                system=system, link_system=link_system or (), cards=cards_dirs(cards))
    elif ttft is not None or tpot is not None or system is not None or link_system:
        raise InputError("--ttft, --tpot, --system and --link-system need a deployment", "add MODEL HARDWARE")
    result = route_answer(trace, counts, names, cache_tokens=cache_tokens, service_time=service_time,
                          service=service, router=router)
    if chart is not None:
        extra.add(chart, route_chart([r for r in result.rows if r.get("kind") == "route"], result.title), what="--chart")
    if fmt in ("table", "markdown"):
        emit_tables(result, presentation(result), fmt, output, explain, extra)
    else:
        emit(result, fmt, output, explain, extra)

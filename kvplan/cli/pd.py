"""``kvplan pd MODEL HARDWARE``: prefill/decode disaggregation (xPyD) with the KV transfer on the real link."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kvplan.cli.options import PerfModelOpt
from kvplan.cli.options import (AllowLongContextOpt, CardsOpt, ChunkSizeOpt, EngineOneOpt, EtaFlopsOpt, EtaMemOpt,
                                ExpertParallelOpt, MaxUtilizationOpt, ExplainOpt, FormatOpt, GpuCostOpt, GpuUtilOpt, IslOpt, KVDtypeOneOpt,
                                MaxNumSeqsOpt, OslOpt, OutputOpt, RateOpt, RedundantExpertsOpt, StepOverheadOpt, PrefillOverheadOpt, EnforceEagerOpt, SystemOpt, TpotDefaultOpt,
                                TraceFormatOpt, TraceOpt, TtftDefaultOpt, WeightsDtypeOpt, cards_dirs, efficiencies,
                                emit, output_format)
from kvplan.plans.fleet.cost import parse_gpu_cost
from kvplan.errors import InfeasibleError, InputError
from kvplan.plans.pd.plan import PDSettings, plan_pd
from kvplan.plans.pd.link import PLACEMENTS
from kvplan.plans.pd.report import pd_hint
from kvplan.units import parse_bandwidth, parse_list, parse_seconds, parse_tokens



EP_DPS = (8, 16, 32, 64, 128)  # searched attention-DP sizes with --enable-expert-parallel and no --*-dp


def _tps(text: str, flag: str) -> list[int]:
    def one(item: str) -> int:
        if not item.isdigit() or int(item) < 1:
            raise InputError(f"{flag} values must be whole numbers >= 1 (got '{item}')", f"e.g. {flag} 1,2,4,8")
        return int(item)

    return parse_list(text, one, what=flag)


def _refuse_dense_dp(model: str, prefill_dps: list[int], decode_dps: list[int], expert_parallel: bool, cards) -> None:
    """``--prefill-dp``/``--decode-dp`` above 1 on a dense model: refused as ``kvplan plan --dp`` refuses it.

    A dense model's attention DP ranks share no experts: DP ranks in lock step are independent
    instances, which pd already counts (``--prefill-instances``). With ``--enable-expert-parallel``
    the deployment itself refuses a dense model.
    """
    flag = "--prefill-dp" if any(d != 1 for d in prefill_dps) else "--decode-dp" if any(d != 1 for d in decode_dps) \
        else None
    if flag is None or expert_parallel:
        return
    from kvplan.cards.loader import load_model

    card = load_model(model, cards_dirs(cards))
    if card.moe is None:  # the wording of kvplan plan's --dp (plans/fleet/search.py)
        raise InputError(f"{flag}: {card.name} is a dense model (no routed experts to split over DP ranks)",
                         "drop it: a dense model's data parallelism is independent instances, which pd counts")


def pd_command(
    model: Annotated[str, typer.Argument(help="Card name, Hugging Face repo id, card file or config.json.")],
    hardware: Annotated[str, typer.Argument(help="Prefill hardware card (or a system card, e.g. hgx-h100-8).")],
    decode_hardware: Annotated[Optional[str], typer.Option(
        "--decode-hardware", help="Decode hardware when it differs (e.g. h20); default: HARDWARE.")] = None,
    system: SystemOpt = None,
    decode_system: Annotated[Optional[str], typer.Option(
        "--decode-system", help="System card of the decode pool (default: --system for the same hardware).")] = None,
    placement: Annotated[str, typer.Option(
        "--placement", help=f"P↔D placement: {', '.join(PLACEMENTS)} (auto: scale-up if one xPyD unit fits its "
                            "domain, else NIC).")] = "auto",
    qps: RateOpt = None,
    isl: IslOpt = None,
    osl: OslOpt = None,
    arrival_cv: Annotated[Optional[float], typer.Option(
        "--arrival-cv", help="Inter-arrival CV (1 = Poisson; default 1, or from the trace).")] = None,
    trace: TraceOpt = None,
    trace_format: TraceFormatOpt = "auto",
    ttft: TtftDefaultOpt = "p99<=4s",
    tpot: TpotDefaultOpt = "p99<=100ms",
    max_utilization: MaxUtilizationOpt = 0.9,
    prefill_tp: Annotated[Optional[str], typer.Option(
        "--prefill-tp", help="Prefill TP sizes to search (one value fixes it; default 1,2,4,8, with EP 1).")] = None,
    decode_tp: Annotated[Optional[str], typer.Option(
        "--decode-tp", help="Decode TP sizes to search (one value fixes it; default 1,2,4,8, with EP 1).")] = None,
    prefill_dp: Annotated[Optional[str], typer.Option(
        "--prefill-dp", help="Prefill attention data-parallel sizes per instance (default 1; with EP "
                             f"{','.join(map(str, EP_DPS))}).")] = None,
    decode_dp: Annotated[Optional[str], typer.Option(
        "--decode-dp", help="Decode attention data-parallel sizes per instance (DeepSeek decode: 144).")] = None,
    enable_expert_parallel: ExpertParallelOpt = False,
    ep_redundant_experts: RedundantExpertsOpt = None,
    placements: Annotated[bool, typer.Option(
        "--placements", help="Plan the chosen shapes in one scale-up domain, in separate partitions and across "
                             "domains (rows 'placement: …'), and say which the planner picks.")] = False,
    checklist: Annotated[bool, typer.Option(
        "--checklist", help="The engineering checklist: where the KV lives, decode's read per step, swapping, "
                            "migration, remote-KV tail, does it need a supernode (implies --placements).")] = False,
    two_batch_overlap: Annotated[bool, typer.Option(
        "--two-batch-overlap", help="Two micro-batches, one's communication beside the other's compute "
        "(DeepSeek's dual micro-batch overlap; each re-reads the weights).")] = False,
    prefill_instances: Annotated[Optional[int], typer.Option(
        "--prefill-instances", help="Evaluate this many prefill instances (with --decode-instances) instead of searching.")] = None,
    decode_instances: Annotated[Optional[int], typer.Option("--decode-instances", help="Decode instances to evaluate.")] = None,
    cached_prefix_fraction: Annotated[float, typer.Option(
        "--cached-prefix-fraction", help="Share of prompt tokens served from a KV cache tier (prefill computes the rest; "
                                         "the transfer moves all).")] = 0.0,
    link_bandwidth: Annotated[Optional[str], typer.Option(
        "--link-bandwidth", help="P→D line rate per GPU per direction, e.g. 50GB/s or 400Gbps (replaces the card's).")] = None,
    link_efficiency: Annotated[Optional[float], typer.Option(
        "--link-efficiency", help="Share of line rate reached (Mooncake RoCE: 0.87).")] = None,
    link_latency: Annotated[Optional[str], typer.Option("--link-latency", help="Fixed latency per transfer, e.g. 20us.")] = None,
    prefix_cache_tokens: Annotated[Optional[str], typer.Option(
        "--prefix-cache-tokens", help="Capacity of the prefix-cache tier in tokens (e.g. 50M): the cached prefix "
                                      "fraction is the trace's LRU prefix hit rate there (--trace with hash_ids).")] = None,
    prefix_read_bandwidth: Annotated[Optional[str], typer.Option(
        "--prefix-read-bandwidth", help="Read rate per GPU of the tier serving the cached prefix (DRAM, SSD/3FS, "
                                        "remote pool), e.g. 6.25GB/s: its load is timed into prefill.")] = None,
    engine: EngineOneOpt = "vllm",
    kv_dtype: KVDtypeOneOpt = "auto",
    weights_dtype: WeightsDtypeOpt = "auto",
    gpu_memory_utilization: GpuUtilOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    chunk_size: ChunkSizeOpt = None,
    eta_mem: EtaMemOpt = None,
    eta_flops: EtaFlopsOpt = None,
    step_overhead: StepOverheadOpt = None,
    prefill_overhead: PrefillOverheadOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    perf_model: PerfModelOpt = "operators",
    gpu_cost: GpuCostOpt = None,
    no_aggregated: Annotated[bool, typer.Option("--no-aggregated", help="Skip the aggregated alternative.")] = False,
    no_sensitivity: Annotated[bool, typer.Option("--no-sensitivity", help="Skip the sensitivity rows.")] = False,
    allow_long_context: AllowLongContextOpt = False,
    fmt: FormatOpt = None,
    output: OutputOpt = None,
    explain: ExplainOpt = False,
    cards: CardsOpt = None,
) -> None:
    """Recommend xPyD (counts and TP per pool) for percentile SLOs, beside the aggregated plan, with sensitivity rows."""
    if trace is not None and any(v is not None for v in (isl, osl)):
        raise InputError("give --trace or --isl/--osl, not both", "a trace carries its own lengths (--qps rescales its rate)")
    default_tp = "1" if enable_expert_parallel else "1,2,4,8"
    default_dp = ",".join(map(str, EP_DPS)) if enable_expert_parallel else "1"
    prefill_dps, decode_dps = _tps(prefill_dp or default_dp, "--prefill-dp"), _tps(decode_dp or default_dp, "--decode-dp")
    _refuse_dense_dp(model, prefill_dps, decode_dps, enable_expert_parallel, cards)
    settings = PDSettings(
        engine=engine, kv_dtype=kv_dtype, weights_dtype=weights_dtype, gpu_memory_utilization=gpu_memory_utilization,
        max_num_seqs=max_num_seqs, chunk_tokens=parse_tokens(chunk_size) if chunk_size is not None else None,
        efficiencies=efficiencies(eta_mem, eta_flops, step_overhead, prefill_overhead, enforce_eager), perf_model=perf_model,
    )
    result = plan_pd(
        model, hardware, decode_hardware=decode_hardware, system=system, decode_system=decode_system,
        placement=placement, qps=qps, isl=isl, osl=osl, trace=trace, trace_format=trace_format, arrival_cv=arrival_cv,
        ttft=ttft, tpot=tpot, prefill_tp=_tps(prefill_tp or default_tp, "--prefill-tp"),
        decode_tp=_tps(decode_tp or default_tp, "--decode-tp"), prefill_instances=prefill_instances,
        prefill_dp=prefill_dps, decode_dp=decode_dps,
        expert_parallel=enable_expert_parallel, redundant_experts=ep_redundant_experts, overlap_comm=two_batch_overlap,
        placements=placements, checklist=checklist,
        prefix_read_bandwidth_bytes_per_s=parse_bandwidth(prefix_read_bandwidth) if prefix_read_bandwidth else None,
        prefix_cache_tokens=parse_tokens(prefix_cache_tokens) if prefix_cache_tokens else None,
        decode_instances=decode_instances, cached_prefix_fraction=cached_prefix_fraction,
        link_bandwidth_bytes_per_s=parse_bandwidth(link_bandwidth) if link_bandwidth else None,
        link_efficiency=link_efficiency, link_latency_s=parse_seconds(link_latency) if link_latency else None,
        settings=settings, aggregated=not no_aggregated, sensitivity=not no_sensitivity,
        gpu_cost=parse_gpu_cost(gpu_cost, cards_dirs(cards)) or None,
        allow_long_context=allow_long_context, cards=cards_dirs(cards), max_utilization=max_utilization,
    )
    fmt = output_format(fmt, output)
    explain = explain or checklist
    if not result.failed:
        emit(result.result(), fmt, output, explain)
        return
    # the infeasible verdict is said once, as the Error line (not also under the table)
    emit(result.result(with_verdict=False), fmt, output, explain)
    raise InfeasibleError(result.verdict, pd_hint(result.plan))

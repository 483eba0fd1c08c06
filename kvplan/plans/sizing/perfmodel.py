"""Resolve the per-operator model for one deployment: efficiencies, engine behaviour, parallelism.

Precedence for each operator's efficiency (every default taken is named in the notes):

1. ``--eta-mem`` / ``--eta-flops`` given: every operator runs at those (flat, as the roofline).
2. A per-kernel table row for this GPU and dtype (:mod:`kvplan.calc.perfdb`, measured
   latencies of NVIDIA's aiconfigurator database; on MI300X AMD's aiter tuned-kernel timings):
   η(size) = SOL / measured, interpolated.
3. On an H800 SXM card (no aiconfigurator tables): DeepSeek's own published H800 kernel figures
   (DeepGEMM's GEMMs, FlashMLA's decode kernel; :mod:`kvplan.plans.sizing.deepseek_profile`) for the
   operators they measure.
4. Otherwise the hardware card's η_mem / η_flops (its ``efficiency.flops_by_dtype`` for the
   compute dtype where present), else kvplan's defaults, flat.

Engine profiles (:mod:`kvplan.plans.sizing.engineperf`) carry what differs between vLLM, SGLang and
TensorRT-LLM in the step: the CUDA-graph sizes, which steps replay a graph, the per-step host overhead.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from kvplan.calc.efficiency import Flat
from kvplan.calc.operators import OperatorEfficiencies, Parallel, Shapes, operator_pass, padded_batch
from kvplan.calc.overlap import two_batch_pass
from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.errors import InputError
from kvplan.plans.sizing.dispatch import check_enforce_eager, with_prefill_dispatch
from kvplan.plans.sizing.engineperf import ENGINE_PERF, EnginePerf, engine_perf  # noqa: F401  (re-exported)


@lru_cache(maxsize=1)
def load_tables():
    """The shipped per-kernel tables (kvplan/data/perf), parsed once per process; None where none ship."""
    try:
        from kvplan.calc.perfdb import load_default
    except ImportError:
        return None
    return load_default()


def check_parallelism(card: ModelCard, hw: HardwareCard, tps, dp: int, expert_parallel: bool,
                      redundant_experts: int, imbalance: float | None) -> None:
    """Impossible parallelism is one InputError (Error:/Hint:, exit 2)."""
    if dp < 1:
        raise InputError(f"--dp must be >= 1 (got {dp})", "the number of attention data-parallel ranks")
    if redundant_experts < 0:
        raise InputError(f"--ep-redundant-experts must be >= 0 (got {redundant_experts})",
                         "extra expert replicas per layer (EPLB), e.g. 32 for EP72 on 256 experts")
    if imbalance is not None and not (1.0 <= imbalance < math.inf):
        raise InputError(f"--expert-imbalance must be >= 1 (got {imbalance})",
                         "hottest rank's routed tokens over the mean; 1 = perfectly balanced")
    if (expert_parallel or redundant_experts) and card.moe is None:
        raise InputError(f"--enable-expert-parallel: {card.name} has no routed experts (a dense model)",
                         "drop --enable-expert-parallel / --ep-redundant-experts for dense models")
    if redundant_experts and not expert_parallel:
        raise InputError("--ep-redundant-experts needs --enable-expert-parallel",
                         "add --enable-expert-parallel (EP size = TP × DP)")
    domain = hw.scale_up_domain or 1
    for tp in tps:
        gpus = tp * dp
        if gpus > domain and hw.nic is None:
            raise InputError(
                f"--tp {tp} × --dp {dp} = {gpus} GPUs exceed {hw.name}'s {domain} GPUs per node and the card has no NIC",
                "stay within one node, or pass a system card with a NIC as --system ('kvplan cards list' shows the "
                "system cards; those with a nic link) or add the NIC with its source to the card")
        if expert_parallel:
            slots = card.moe.num_experts + redundant_experts
            if redundant_experts > card.moe.num_experts * (gpus - 1):
                raise InputError(f"--ep-redundant-experts {redundant_experts}: EP size {gpus} holds at most "
                                 f"{card.moe.num_experts * (gpus - 1)} replicas of {card.name}'s "
                                 f"{card.moe.num_experts} experts (every expert on every rank)",
                                 "EPLB adds a few replicas of the hottest experts, e.g. 32 over EP144 for 256 experts")
            if imbalance is not None and imbalance > gpus:
                raise InputError(f"--expert-imbalance {imbalance:g} exceeds EP size {gpus} (TP {tp} × DP {dp})",
                                 "the hottest rank gets at most every routed token: 1 <= λ <= TP × DP")
            if slots % gpus:
                need = (-card.moe.num_experts) % gpus
                raise InputError(
                    f"EP size {gpus} (TP {tp} × DP {dp}) does not divide {card.name}'s {card.moe.num_experts} experts"
                    + (f" + {redundant_experts} redundant" if redundant_experts else ""),
                    f"add --ep-redundant-experts {need} (EPLB replicas), or pick TP × DP dividing the expert count")


# Expert load imbalance λ (the hottest EP rank's routed tokens over the mean). On a GPU with per-kernel
# tables the MoE curve is read from aiconfigurator's power-law rows, which already time the most-loaded
# rank: its collector draws expert loads from a power law (exponent 1.01, "estimated for DeepSeek-V3-R1
# ... by latency matching"; 1.2 for Qwen3-235B) and swaps the heaviest expert group onto the measured
# rank (ai-dynamo/aiconfigurator docs/POWER_LAW_DISTRIBUTION.md). λ on top of that is 1 by default; on a GPU
# without tables (flat η) λ = 1 means balanced. --expert-imbalance charges more.
DEFAULT_IMBALANCE = 1.0
DEFAULT_IMBALANCE_NOTE = ("expert load imbalance λ = 1 on top of the MoE kernel table, whose power-law rows (exponent "
                          "1.01, aiconfigurator docs/POWER_LAW_DISTRIBUTION.md: latency-matched for DeepSeek-V3/R1) already time the most-"
                          "loaded EP rank; without a table (flat η) λ = 1 is a balanced router. Pass --expert-imbalance "
                          "to charge the hottest rank's share (the step waits for it)")


# Attention-DP imbalance λ_dp: the busiest attention-DP rank's step work over the mean. TensorRT-LLM tech blog 10
# (docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md, "Performance Summary"): DeepSeek-V3, attention DP 8 +
# EP 8 on 8×GB200, in-flight batching with the ADP balance strategy (attention_dp_config enable_balance, as
# perf-overview's DeepSeek-R1 llm_options set it) runs at 34,140 tok/s of a perfectly balanced 37,912 ("SOL TPS":
# each iteration's time × avg tokens / max tokens), so λ_dp(8) = 37,912 / 34,140. Other DP sizes are not published:
# the figure is read as one rank carrying (1 + w) × the work of the others (a context chunk where they only decode),
# λ_dp(N) = max / mean = (1 + w) / (1 + w / N), with w solved from λ_dp(8) (w = 0.128; λ_dp(2) = 1.060,
# λ_dp(4) = 1.093, λ_dp(∞) = 1.128).
ADP_BLOG_SOL_TPS, ADP_BLOG_ACTUAL_TPS, ADP_BLOG_DP = 37_912.0, 34_140.0, 8
ADP_SOURCE = ("TensorRT-LLM tech blog 10, ADP Balance Strategy: DeepSeek-V3 DP8 + EP8 on 8×GB200 with enable_balance, "
              "34,140 of a balanced 37,912 tok/s")


def attention_dp_imbalance(dp) -> np.ndarray:
    """λ_dp(N) = (1 + w) / (1 + w / N), w = (λ8 − 1) / (1 − λ8 / 8), λ8 = 37,912 / 34,140; 1 at N = 1."""
    lam8 = ADP_BLOG_SOL_TPS / ADP_BLOG_ACTUAL_TPS
    w = (lam8 - 1.0) / (1.0 - lam8 / ADP_BLOG_DP)
    n = np.asarray(dp, dtype=np.float64)
    return np.where(n > 1, (1.0 + w) / (1.0 + w / np.maximum(n, 1.0)), 1.0)


def check_dp_imbalance(given: float, dp: int | None, ranks: str | None = None) -> None:
    """1 <= λ <= ``dp`` (None: no upper bound; ``ranks`` names it in the message), else one InputError."""
    if not (1.0 <= given < math.inf):
        raise InputError(f"--dp-imbalance must be >= 1 (got {given})",
                         "busiest attention-DP rank's step work over the mean; 1 = perfectly balanced")
    if dp is not None and given > max(dp, 1):
        raise InputError(f"--dp-imbalance {given:g} exceeds {ranks or f'--dp {dp}'}",
                         "the busiest rank does at most all of the step's work: 1 <= λ_dp <= DP")


def resolve_dp_imbalance(dp: int, given: float | None, notes: list[str]) -> float:
    """``--dp-imbalance`` where given (≥ 1), else the sourced λ_dp(dp); 1 for one rank. Named in the notes."""
    if given is not None:
        check_dp_imbalance(given, dp)
        return float(given)
    if dp <= 1:
        return 1.0
    lam = float(attention_dp_imbalance(dp))
    notes.append(f"attention-DP imbalance λ_dp = {lam:.3f} at dp {dp}: the lock step waits for the busiest rank "
                 f"({ADP_SOURCE}; λ_dp(N) = (1 + w) / (1 + w / N) through that DP8 figure; no figure is published for "
                 "other DP sizes or engines). Pass --dp-imbalance 1 for a perfectly balanced static batch")
    return lam


def flat_efficiencies(eta_mem: float, eta_flops: float, source: str, overhead_base_s: float,
                      overhead_per_seq_s: float = 0.0, notes: tuple[str, ...] = ()) -> OperatorEfficiencies:
    flat = Flat(eta_mem, eta_flops, source)
    return OperatorEfficiencies(flat, flat, flat, flat, flat, flat, overhead_base_s, overhead_per_seq_s, {}, notes)


def make_pass(shapes: Shapes, effs: OperatorEfficiencies, par: Parallel, graph_sizes: tuple[int, ...] = (),
              clamped: set | None = None, mixed_graphs: bool = True):
    """A ``pass_fn`` for :func:`kvplan.calc.roofline.decode_step` / ``prefill`` (their ``ep`` = dp here).

    ``graph_sizes`` pad a decode step's batch, and a mixed step's tokens where ``mixed_graphs`` (the engine replays
    a graph for a step that carries prompt tokens: vLLM's piecewise graphs, not TensorRT-LLM's, :class:`EnginePerf`)."""
    padded_phases = ("decode", "mixed") if mixed_graphs else ("decode",)

    def one(cost, machine, effs_here, *, tp, ep, tokens, phase, batch, overlap_comm=False, **kw):
        par_here = dataclasses.replace(par, tp=tp, dp=ep, overlap_comm=par.overlap_comm or bool(overlap_comm))
        priced = two_batch_pass if par_here.overlap_comm else operator_pass    # overlap: two micro-batches
        return priced(cost, machine, shapes=shapes, effs=effs_here, par=par_here, tokens=tokens,
                      batch=batch, phase=phase, clamped=clamped,
                      graph_sizes=graph_sizes if phase in padded_phases else (), **kw)

    def fn(cost, machine, *, tp, ep, tokens, phase="decode", batch=None, **kw):
        batch = tokens if batch is None else batch
        return one(cost, machine, effs, tp=tp, ep=ep, tokens=tokens, phase=phase, batch=batch, **kw)

    fn.parts, fn.mixed_graphs = (shapes, effs, par, graph_sizes, clamped), mixed_graphs
    # the same pass with another attention-DP lock-step factor (a PD pool's balanced steps: λ_dp = 1)
    fn.with_dp_imbalance = lambda lam: make_pass(shapes, effs, dataclasses.replace(par, dp_imbalance=float(lam)),
                                                 graph_sizes, clamped, mixed_graphs)
    return fn


def operator_model(card: ModelCard, hw: HardwareCard, cost, machine, engine: str, explicit_eta: bool,
                   explicit_overhead: bool, par: Parallel, notes: list[str], tables=None, tps=None,
                   prefill_overhead_s: float | None = None, enforce_eager: bool = False):
    """(pass_fn, OperatorEfficiencies, clamped set) for the per-operator model of one deployment.

    ``tables`` is a :class:`kvplan.calc.perfdb.PerfTables` (or None); an explicit η bypasses it.
    ``prefill_overhead_s``: ``--prefill-overhead`` per layer (None: the engine's, :mod:`.dispatch`).
    ``enforce_eager``: no CUDA graphs (``--enforce-eager``): no decode padding, every forward dispatched eagerly.
    """
    from kvplan.calc.operators import model_shapes

    shapes = model_shapes(card, cost)
    perf = engine_perf(engine)
    base = machine.step_overhead_s
    per_seq = 0.0
    if perf is not None and perf.overhead_per_seq_s is not None and not explicit_overhead:
        per_seq = perf.overhead_per_seq_s
        notes.append(f"host overhead {per_seq * 1e6:.3g} µs per sequence per step ({perf.overhead_source})")
    effs = None
    if tables is not None and not explicit_eta:
        by_tp = {}
        for t in sorted({int(x) for x in (tps or [int(np.max(np.asarray(par.tp)))])}):
            found = efficiencies_from_tables(tables, card, hw, machine, cost, shapes, t, par, engine, base, per_seq,
                                             cost.weights_dtype, notes)
            if found is None:
                break
            by_tp[t] = found
        effs = merge_by_tp(by_tp) if by_tp else None
    deepseek = False
    if effs is None and not explicit_eta:     # H800: DeepSeek's own published kernel figures (calc/deepseek_kernels)
        from kvplan.plans.sizing import deepseek_profile

        by_tp = {}
        for t in sorted({int(x) for x in (tps or [int(np.max(np.asarray(par.tp)))])}):
            found = deepseek_profile.efficiencies(
                card, hw, machine, cost, t, par.expert_parallel, par.alltoall, float(par.redundant_experts),
                table_dtype(machine.compute_dtype, cost.weights_dtype, card.weights_dtype),
                table_dtype(machine.compute_dtype, cost.weights_dtype, card.weights_dtype, moe=True), base, per_seq,
                notes)
            if found is None:
                break
            by_tp[t] = found
        effs = merge_by_tp(by_tp) if by_tp else None
        deepseek = effs is not None
    if effs is None:
        source = "--eta-mem/--eta-flops" if explicit_eta else f"{hw.name} card / kvplan defaults"
        effs = flat_efficiencies(machine.eta_mem, machine.eta_flops, source, base, per_seq)
        if not explicit_eta:
            from kvplan.calc.perfdb import coverage

            notes.append(f"no per-kernel table for {hw.name} {machine.compute_dtype}: every operator at the card's "
                         f"η_mem {machine.eta_mem:g}, η_flops {machine.eta_flops:g}" + coverage(tables, hw.name))
    attention_dtype = "fp8" if next(iter(cost.layouts.values())).kv_dtype == "fp8" else "bf16"
    attention_peak = hw.peak_flops_per_s.get(attention_dtype) or hw.peak_flops_per_s.get("fp16")
    if attention_peak and attention_peak != machine.peak_flops_per_s and not (deepseek and effs.attention_peak_flops_per_s):
        effs = dataclasses.replace(effs, attention_peak_flops_per_s=attention_peak)
        notes.append(f"attention runs in {attention_dtype} (the KV cache's dtype class): its FLOPs at "
                     f"{hw.name}'s {attention_dtype} peak {attention_peak / 1e12:g} TFLOPS")
    graph_sizes = perf.cuda_graph_sizes if perf is not None and not enforce_eager else ()
    if perf is not None and perf.host_work and not explicit_overhead:
        notes.append(f"{engine} host work per step: {perf.host_work}")
    if perf is not None:
        notes.append(f"{engine} CUDA graphs: " + ("none (--enforce-eager): decode batches run at their own size"
                     if enforce_eager else f"decode GEMMs run at the captured batch size at or above the batch per "
                     f"rank ({perf.graph_source})" + ("" if perf.mixed_graphs else f"; decode-only steps: "
                                                      f"{perf.mixed_graphs_source}") if graph_sizes
                     else perf.graph_source))
    effs = with_prefill_dispatch(effs, engine, graph_sizes, prefill_overhead_s, cost.layers, notes, enforce_eager)
    clamped: set = set()
    mixed_graphs = perf.mixed_graphs if perf is not None else True
    return make_pass(shapes, effs, par, graph_sizes, clamped, mixed_graphs), effs, clamped


def step_times(card: ModelCard, hw: HardwareCard, cost, machine, engine: str, efficiencies, perf_model: str,
               tp: int, dp: int = 1, expert_parallel: bool = False, redundant_experts: int = 0,
               overlap_comm: bool = False, dp_imbalance: float | None = None):
    """The :class:`kvplan.calc.steptime.StepTimes` of one deployment, resolved once.

    ``perf_model`` ``"operators"`` (default): the per-operator pass of :func:`operator_model` at the deployment's
    TP (the shipped per-kernel tables, parsed once per process; the card's η where no table covers an operator or
    ``--eta-mem``/``--eta-flops`` is given), the engine's CUDA-graph padding and host overhead (none of the graphs
    with ``efficiencies.enforce_eager``), expert load imbalance λ = 1 (:data:`DEFAULT_IMBALANCE`) and, for ``dp`` > 1,
    the attention-DP lock-step factor λ_dp(dp) of :func:`attention_dp_imbalance` on the step's kernels, as ``kvplan
    latency`` charges it (``dp_imbalance`` overrides; the steps are an aggregated instance's, whose in-flight
    batching hands some ranks a context chunk while the others decode; a PD pool takes :meth:`kvplan.calc.steptime.
    StepTimes.with_dp_imbalance` ``(1.0)``). ``"roofline"``: :func:`kvplan.calc.roofline.forward_pass`, one η pair.
    """
    from kvplan.calc.steptime import PERF_MODELS, StepTimes

    if perf_model not in PERF_MODELS:
        raise InputError(f"--perf-model must be operators or roofline (got {ascii(perf_model)})",
                         "operators: per-operator efficiencies; roofline: one η pair for every operator")
    check_enforce_eager(efficiencies.enforce_eager, engine, perf_model)
    if perf_model == "roofline":
        return StepTimes(cost, machine, tp, dp, None, "roofline", overlap_comm,
                         ("step times: the roofline (--perf-model roofline): every byte at η_mem "
                          f"{machine.eta_mem:g}, every FLOP at η_flops {machine.eta_flops:g}; no eager-prefill "
                          "dispatch (--prefill-overhead applies to --perf-model operators)",))
    notes: list[str] = []
    if cost.is_moe and expert_parallel:
        notes.append(DEFAULT_IMBALANCE_NOTE)
    dp_notes: list[str] = []
    lam_dp = resolve_dp_imbalance(dp, dp_imbalance, dp_notes)
    par = Parallel(tp=tp, dp=dp, expert_parallel=expert_parallel, redundant_experts=redundant_experts,
                   imbalance=DEFAULT_IMBALANCE, overlap_comm=overlap_comm,
                   alltoall="generic" if str(engine).lower() == "trtllm" else "deepep", dp_imbalance=lam_dp)
    explicit_eta = efficiencies.eta_mem is not None or efficiencies.eta_flops is not None
    pass_fn, _effs, _clamped = operator_model(card, hw, cost, machine, engine, explicit_eta,
                                              efficiencies.step_overhead_s is not None, par, notes, load_tables(),
                                              tps=[tp], prefill_overhead_s=efficiencies.prefill_overhead_s,
                                              enforce_eager=efficiencies.enforce_eager)
    head = ("step times: the per-operator model (--perf-model operators, the default; --perf-model roofline for "
            "one η pair): ")
    dp_note = (dp_notes[0] + " (aggregated serving; a PD pool's steps take λ_dp = 1)") if dp_notes else ""
    return StepTimes(cost, machine, tp, dp, pass_fn, "operators", overlap_comm,
                     (head + "; ".join(dict.fromkeys(notes)),) + ((dp_note,) if dp_note else ()),
                     dp_imbalance=lam_dp, dp_note=dp_note)


def merge_by_tp(by_tp: dict) -> OperatorEfficiencies:
    """One OperatorEfficiencies whose per-operator entries pick the curve of each point's TP."""
    import dataclasses

    from kvplan.calc.operators import ByTP

    first = next(iter(by_tp.values()))
    if len(by_tp) == 1:
        return first
    fields = ("attention_gemms", "mlp_gemms", "lm_head", "expert_gemms", "attention_decode", "attention_prefill")
    merged = {f: ByTP({t: getattr(e, f) for t, e in by_tp.items()}) for f in fields}
    if any(e.expert_gemms_prefill is not None for e in by_tp.values()):   # a TP without its own: its expert_gemms
        merged["expert_gemms_prefill"] = ByTP({t: e.expert_gemms_prefill if e.expert_gemms_prefill is not None
                                               else e.expert_gemms for t, e in by_tp.items()})
    return dataclasses.replace(first, **merged)


def weights_per_gpu(card: ModelCard, cost, tp, dp, expert_parallel: bool, redundant_experts: int = 0):
    """Weight bytes one GPU holds: dense (+ untied input embedding) ÷ tp; routed experts
    (E + R)/(tp dp) whole experts with EP, else all E ÷ (tp dp) (tensor-parallel experts)."""
    tp = np.asarray(tp, dtype=np.float64)
    gpus = tp * dp
    embedding = 0.0 if card.tie_word_embeddings else cost.lm_head_weight_bytes
    experts = 0.0
    if cost.is_moe:
        slots = cost.num_experts + (redundant_experts if expert_parallel else 0)
        experts = cost.moe_layers * slots * cost.expert_weight_bytes / gpus
    return (cost.dense_weight_bytes + embedding) / tp + experts


def max_batch(card: ModelCard, hw: HardwareCard, cost, engine: str, kv_dtype: str, tp: int, dp: int,
              seq_tokens: int, expert_parallel: bool, redundant_experts: int, max_num_seqs: int | None,
              notes: list[str]) -> int:
    """The largest batch the instance's KV pool holds at ``seq_tokens`` per sequence (and max_num_seqs per rank).

    Per GPU: pool = the engine's KV budget (``kvplan.calc.memory.kv_budget``: utilisation, weights,
    activation estimate); one sequence takes its paged KV at ``seq_tokens``; each attention-DP rank
    holds ⌊pool / sequence bytes⌋ sequences (MLA latents are stored once per DP rank, not
    replicated across DP), capped by max_num_seqs; the instance holds dp × that.
    """
    from kvplan.calc.kv import kv_layout
    from kvplan.calc.memory import activation_peak_bytes, kv_budget, vllm_activation_peak_bytes, vllm_non_torch_bytes
    from kvplan.engines import VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, get_profile, serving_dtype
    from kvplan.plans.sizing.fit import _utilization

    profile = get_profile(engine)
    util = _utilization(engine, hw.hbm_capacity_bytes, tp, 1, None, notes)
    weights = float(weights_per_gpu(card, cost, tp, dp, expert_parallel, redundant_experts))
    perf = engine_perf(engine)
    cap = max_num_seqs if max_num_seqs is not None else (perf.max_num_seqs if perf else None)
    activation = non_torch = 0.0
    if engine in ("vllm", "trtllm"):      # engines that profile a forward pass before sizing the cache
        estimate = vllm_activation_peak_bytes if engine == "vllm" else activation_peak_bytes
        activation = estimate(card, VLLM_DEFAULT_MAX_NUM_BATCHED_TOKENS, tp, cap or 256, serving_dtype(card.dtype, profile))
    if engine == "vllm":                  # the same default terms as kvplan fit (plans/sizing/fit.py)
        non_torch = vllm_non_torch_bytes(tp)
    budget = kv_budget(profile, hw.hbm_capacity_bytes, util, weights, activation, non_torch)
    seq_bytes = kv_layout(card, profile, kv_dtype, tp).sequence_bytes(seq_tokens, per_gpu=True)
    per_rank = int(max(budget.kv_cache_bytes, 0.0) // seq_bytes) if seq_bytes > 0 else 0
    if cap is not None:
        per_rank = min(per_rank, cap)
    notes.append(f"--batch max: tp {tp} × dp {dp}: KV pool {budget.kv_cache_bytes / 2**30:.2f} GiB per GPU "
                 f"({budget.rule}, utilisation {util:g}) / {seq_bytes / 2**20:.3g} MiB per {seq_tokens:,}-token "
                 f"sequence = {per_rank:,} sequences per DP rank" + (f" (max_num_seqs {cap})" if cap else "")
                 + (f"; cap: {perf.max_num_seqs_source}" if perf and max_num_seqs is None and perf.max_num_seqs else ""))
    return per_rank * dp


__all__ = ["operator_model", "step_times", "weights_per_gpu", "max_batch", "ENGINE_PERF", "EnginePerf", "engine_perf", "padded_batch", "check_parallelism", "make_pass",
           "flat_efficiencies", "DEFAULT_IMBALANCE", "DEFAULT_IMBALANCE_NOTE"]


def table_dtype(compute_dtype: str, weights_dtype: str, native_weights: str | None, moe: bool = False,
                engine: str | None = None, fp4_cores: bool = False) -> str:
    """The per-kernel table's dtype for a GEMM: a native FP8 checkpoint (DeepSeek, Qwen3-FP8) is
    128-block scaled (``fp8_block``), an FP8 quantisation by the engine per-tensor (``fp8``), on TensorRT-LLM
    with static activation scales (``fp8_static``: a ModelOpt FP8 checkpoint, the form TensorRT-LLM loads);
    fp4 → ``nvfp4``; MXFP4 experts run W4A16 (``w4a16_mxfp4``), except TensorRT-LLM's on a GPU with FP4
    tensor cores (Blackwell), which take MXFP8 activations, its only activation there
    (examples/models/core/gpt_oss/README.md, "MoE Support Matrix": Hopper bf16 × mxfp4, Blackwell mxfp8 × mxfp4;
    aiconfigurator's ``w4a8_mxfp4_mxfp8`` table on B200). vLLM's and SGLang's Blackwell defaults are not
    established, so they keep W4A16."""
    if weights_dtype == "mxfp4" and moe:
        return "w4a8_mxfp4_mxfp8" if engine == "trtllm" and fp4_cores else "w4a16_mxfp4"
    if compute_dtype == "fp8":
        if native_weights == "fp8":
            return "fp8_block"
        # TensorRT-LLM runs per-tensor FP8 from a pre-quantised (ModelOpt) checkpoint, whose activation scales are
        # static: its GEMMs read without the dynamic quantisation kernels (kvplan.calc.perfdb.STATIC_FP8)
        return "fp8_static" if engine == "trtllm" and not moe else "fp8"
    if compute_dtype == "fp4":
        return "nvfp4"
    if compute_dtype == "int8":
        return "sq"
    return "bf16" if compute_dtype in ("bf16", "fp16", "fp32") else compute_dtype


def efficiencies_from_tables(tables, card: ModelCard, hw: HardwareCard, machine, cost, shapes: Shapes, tp: int,
                             par: Parallel, engine: str, base_s: float, per_seq_s: float, weights_dtype: str,
                             notes: list[str]) -> OperatorEfficiencies | None:
    """Each operator's η curve from the per-kernel tables for ``hw`` at attention TP ``tp``; the card's
    flat η for an operator no table covers (named in the notes). None when the GPU has no tables."""
    from kvplan.calc import perfdb

    gpu = tables.gpu_name(hw.name)
    if gpu is None:
        return None
    if hw.name in perfdb.STAND_INS:
        other, why = perfdb.STAND_INS[hw.name]
        notes.append(f"{hw.name} has no per-kernel tables of its own: {other}'s measured efficiencies stand in ({why})")
    bw = hw.hbm_bandwidth_bytes_per_s
    flat = Flat(machine.eta_mem, machine.eta_flops, f"{hw.name} card")
    used, missing = [], []

    def peak_of(dtype: str) -> float:
        return hw.peak_flops_per_s.get(perfdb.PEAK_DTYPE.get(dtype, dtype)) or machine.peak_flops_per_s

    def pick(what, curve):
        if curve is None:
            missing.append(what)
            return flat
        used.append(f"{what}: {curve.source}")
        return curve

    gemm_dtype = table_dtype(machine.compute_dtype, cost.weights_dtype, card.weights_dtype, engine=engine)
    effs = {}
    for kind in ("attention", "mlp"):
        effs[f"{kind}_gemms"] = pick(f"{kind} GEMMs", perfdb.group_gemm_curve(    # each GEMM at its own (n, k)
            tables, gpu, engine, gemm_dtype, shapes.gemm_list(kind, tp), bw, peak_of(gemm_dtype)))
    effs["lm_head"] = pick("LM head", perfdb.gemm_curve(tables, gpu, engine, "bf16", card.vocab_size / tp,
                                                        card.hidden_size, bw, peak_of("bf16")))
    routers = shapes.gemm_list("router", tp)      # replicated, bf16 (kvplan.calc.shapes.ROUTER_SOURCE)
    effs["router_gemms"] = pick("router GEMMs", perfdb.group_gemm_curve(
        tables, gpu, engine, "bf16", routers, bw, peak_of("bf16"))) if routers else None
    if cost.is_moe:
        moe_dtype = table_dtype(machine.compute_dtype, cost.weights_dtype, card.weights_dtype, moe=True,
                                engine=engine, fp4_cores=bool(hw.peak_flops_per_s.get("fp4")))
        inter = card.moe.expert_params / (3 * card.hidden_size)
        gpus = tp * float(np.max(np.asarray(par.dp)))
        moe_tp, moe_ep = (1.0, gpus) if par.expert_parallel else (gpus, 1.0)
        moe_args = (tables, gpu, engine, moe_dtype, card.hidden_size, inter, cost.experts_per_token, cost.num_experts,
                    moe_tp, moe_ep, bw, peak_of(moe_dtype))
        moe_kw = dict(dispatch=par.alltoall if par.expert_parallel else "table", redundant=float(par.redundant_experts))
        effs["expert_gemms"] = pick("expert GEMMs", perfdb.moe_curve(*moe_args, **moe_kw))
        if perfdb.deepep_beyond_node(moe_kw["dispatch"], moe_tp, moe_ep):      # prefill: DeepEP's normal mode
            prefill = perfdb.moe_curve(*moe_args, **moe_kw, phase="prefill")
            if prefill is not None and prefill.source != effs["expert_gemms"].source:
                effs["expert_gemms_prefill"] = pick("prefill expert GEMMs", prefill)
    else:
        effs["expert_gemms"] = flat
    group = card.layer_groups[0]
    mla = group.kind == "mla"
    heads = (group.num_heads or card.num_attention_heads) / tp
    kv_heads = max((group.num_kv_heads or heads * tp) / tp, 1.0)
    head_dim = group.head_dim or card.hidden_size // card.num_attention_heads
    kv_dtype = next(iter(cost.layouts.values())).kv_dtype
    kv_table = "fp8" if kv_dtype == "fp8" else "bf16"
    attn_peak = peak_of(kv_table)
    effs["attention_decode"] = pick("decode attention", perfdb.decode_attention_grid(
        tables, gpu, engine, kv_table, mla, heads, kv_heads, head_dim or 128, bw, attn_peak))
    effs["attention_prefill"] = pick("prefill attention", perfdb.prefill_attention_curve(
        tables, gpu, engine, kv_table, mla, heads, kv_heads, head_dim or 128, bw, attn_peak))
    collectives = perfdb.collective_curves(tables, gpu, engine if par.custom_all_reduce else "nccl")
    if not used and (not collectives or perfdb.origin(tables, gpu)[1]):  # MI300X bf16: no GEMM row, flat throughout
        return None                       # no row for this GPU's dtypes: the card's η, said as for a GPU without tables
    label, source_note = perfdb.origin(tables, gpu)
    if used:
        notes.append(f"per-kernel tables ({label}) for {hw.name}, tp {tp}: " + "; ".join(used))
        if gemm_dtype == "fp8_static":
            notes.append(perfdb.STATIC_FP8_NOTE)
        notes.extend([source_note] if source_note else [])
    if collectives:
        notes.append(f"collectives on ≤ 8 GPUs of one node: measured latency vs message size ({hw.name}: " + "; ".join(sorted(
            {c.source.rsplit(" on ", 1)[0] for c in collectives.values()})) + "); beyond one node: α + bytes / (NIC bandwidth × η)")
    if missing:
        notes.append(f"no per-kernel table row for {', '.join(missing)} on {hw.name}: the card's η_mem "
                     f"{machine.eta_mem:g}, η_flops {machine.eta_flops:g} (flat)")
    return OperatorEfficiencies(effs["attention_gemms"], effs["mlp_gemms"], effs["lm_head"], effs["expert_gemms"],
                                effs["attention_decode"], effs["attention_prefill"], base_s, per_seq_s,
                                collectives, attention_peak_flops_per_s=attn_peak, router_gemms=effs["router_gemms"],
                                expert_gemms_prefill=effs.get("expert_gemms_prefill"))

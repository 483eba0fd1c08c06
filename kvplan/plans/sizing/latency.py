"""``kvplan latency``: roofline prefill and decode estimates for whole requests (DESIGN.md §2.3).

One row per point of isl × osl × batch × tp (× context). A row is a static batch: ``batch``
requests of ISL prompt tokens arrive together (as in ``vllm bench latency`` and TensorRT-LLM's
gptSessionBenchmark), are prefilled together (in chunks when ``chunk_size`` is set), and decode
OSL tokens each. The math is :mod:`kvplan.calc.roofline`; every row's terms are printed by
``--explain``.

- ``prefill_s``: the batch's prompts, B × ISL tokens.
- ``ttft_s = prefill_s + one decode step at context ISL`` (DESIGN.md §2.3; queueing and PD
  transfer come with the workload and PD plans). TensorRT-LLM's published batch-1 first-token
  latencies behave this way: at ISL 128, where prefill and a decode step are of the same size,
  they match prefill + one step and are about twice prefill alone (docs/validation.md). An
  engine that samples the first token straight from the prefill logits is one step faster.
- ``decode_step_s``: one step of the batch at ``context`` (default ISL) and its physical floor.
- ``tpot_s``: the mean of the OSL − 1 later steps, at contexts ISL+1 … ISL+OSL−1, integrated
  over the growing context (not every step at the final length).
- ``e2e_s = ttft_s + (OSL − 1) × tpot_s``; ``tokens_per_s = batch × OSL / e2e_s`` (TensorRT-LLM's
  ``out_tps = output_seqlen × batch_size / total_latency``, per GPU divided by the GPUs).

Efficiencies come from the hardware card where it has them, else from kvplan's documented
defaults (below), and are overridden by arguments; each default taken is listed in
``Result.assumptions``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kvplan.calc.roofline import (Machine, ModelCost, compute_dtype_for, decode_step, mean_over_output,  # noqa: F401
                                  mixed_chunk_step, model_cost, prefill, speculative_tokens_per_step)
from kvplan.cards.schema import HardwareCard, ModelCard
from kvplan.errors import InfeasibleError, InputError, MissingFigureError
from kvplan.plans.overlap import check_two_batch_overlap
from kvplan.plans.sizing.dispatch import check_enforce_eager
from kvplan.plans.sizing.efficiency import Efficiencies, check_efficiencies
from kvplan.plans.sizing.size import as_list, check_positive
from kvplan.result import Result
from kvplan.calc.operators import Parallel, op_times
from kvplan.plans.sizing.perfmodel import (DEFAULT_IMBALANCE, DEFAULT_IMBALANCE_NOTE, check_parallelism, engine_perf,
                                    max_batch, operator_model, resolve_dp_imbalance)
from kvplan.plans.sizing.latency_ops import (band_columns, draft_pass, explain_operators, explain_roofline, load_tables,
                                            memory_notes)
from kvplan.plans.sizing.kernels import (ELEMENTWISE_LATENCY_S, KERNELS_SOURCE, attention_kernels, attention_sources,
                                         elementwise_kernels, kernels_note)
from kvplan.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from kvplan.plans.deployment import Deployment

# kvplan-wide defaults, used only where the hardware card has no figure (printed as assumptions).
DEFAULT_ETA_MEM = 0.8
DEFAULT_ETA_MEM_SOURCE = ("ai-dynamo/aiconfigurator systems/*.yaml mem_bw_empirical_scaling_factor: 0.8 "
                          "(\"some nonofficial correction based on observations\")")
DEFAULT_ETA_FLOPS = 0.75
DEFAULT_ETA_FLOPS_SOURCE = ("FlashAttention-3 (Shah et al., arXiv:2407.08608) reaches 740 of 989 TFLOPS "
                            "(75% utilization) in BF16 on H100")
DEFAULT_OP_LATENCY_S = ELEMENTWISE_LATENCY_S   # per element-wise kernel; the count per layer kind: .kernels
DEFAULT_OVERHEAD_SOURCE = KERNELS_SOURCE
DEFAULT_LINK_LATENCY_S = 10e-6
DEFAULT_LINK_LATENCY_SOURCE = "aiconfigurator systems/*.yaml p2p_latency: 10 µs (\"nonofficial correction\")"

LATENCY_COLUMNS = [
    "model", "hardware", "tp", "batch", "isl", "osl", "prefill_s", "ttft_s", "decode_step_s",
    "floor_decode_step_s", "tpot_s", "e2e_s", "tokens_per_s", "tokens_per_s_per_gpu", "bound",
]


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding / MTP: ``k`` drafted tokens per step, per-token acceptance ``alpha``.

    ``draft_model`` (a model card) is a separate draft model; without one the draft is
    ``draft_layers`` decoder layers of the target plus its LM head (MTP, EAGLE).
    """

    k: int
    alpha: float
    draft_model: ModelCard | None = None
    draft_layers: float = 1.0


def peak_flops(hw: HardwareCard, compute_dtype: str, weights_dtype: str) -> float:
    """The card's dense peak for ``compute_dtype``; a missing figure is an error, never a guess."""
    value = hw.peak_flops_per_s.get(compute_dtype)
    if value is None:
        have = ", ".join(hw.peak_flops_per_s) or "none"
        raise MissingFigureError(
            f"hardware card '{hw.name}' has no peak_flops_per_s.{compute_dtype} "
            f"(needed: {weights_dtype} weights compute in {compute_dtype})",
            f"add the figure with its source to the card, or pick a dtype it has ({have}) "
            "with --weights-dtype / --compute-dtype",
        )
    return value


def resolve_machine(
    hw: HardwareCard, compute_dtype: str, weights_dtype: str, layers: float, eff: Efficiencies,
    max_gpus: int, moe_layers: float = 0.0, attention: tuple = (),
) -> tuple[Machine, list[str]]:
    """Card figures + efficiencies (argument > card > kvplan default) for one compute dtype.

    The default step overhead counts ``layers`` of which ``moe_layers`` are MoE layers, and the engine's
    ``attention`` kernels ((layers, kernels each, label) per layer kind: :func:`.kernels.attention_kernels`).
    """
    check_efficiencies(eff)
    notes: list[str] = []
    peak = peak_flops(hw, compute_dtype, weights_dtype)

    def pick(given, card_value, default, what, card_field, source):
        if given is not None:
            return given
        if card_value is not None:
            return card_value
        notes.append(f"{what} = {default:g}: kvplan default, {hw.name} has no {card_field} ({source})")
        return default

    eta_mem = pick(eff.eta_mem, hw.efficiency.memory_bandwidth, DEFAULT_ETA_MEM, "η_mem",
                   "efficiency.memory_bandwidth", DEFAULT_ETA_MEM_SOURCE)
    by_dtype = (hw.efficiency.flops_by_dtype or {}).get(compute_dtype)
    eta_flops = pick(eff.eta_flops, by_dtype if by_dtype is not None else hw.efficiency.flops, DEFAULT_ETA_FLOPS,
                     "η_flops", "efficiency.flops", DEFAULT_ETA_FLOPS_SOURCE)
    overhead = eff.step_overhead_s if eff.step_overhead_s is not None else hw.efficiency.step_overhead_s
    if overhead is None:
        overhead = DEFAULT_OP_LATENCY_S * elementwise_kernels(layers, moe_layers, attention)
        sources = attention_sources(attention)
        extra = f"; {sources}" if sources else ""
        notes.append(f"step overhead = {format_seconds(overhead)} per forward pass: kvplan default "
                     f"3 µs × ({kernels_note(layers, moe_layers, attention)}), {hw.name} has no "
                     f"efficiency.step_overhead_s ({DEFAULT_OVERHEAD_SOURCE}{extra})")
    kwargs = {}
    if max_gpus > 1:
        if hw.scale_up is None and hw.nic is None:
            raise MissingFigureError(
                f"hardware card '{hw.name}' has no scale_up link or nic (needed for {max_gpus} GPUs per instance)",
                "add the link with its source to the card, or use --tp 1",
            )
        for prefix, link, count in (("scale_up", hw.scale_up, 1), ("nic", hw.nic, None)):
            if link is None:
                continue
            kwargs[f"{prefix}_bytes_per_s"] = link.bandwidth_bytes_per_s * (count or link.count) * (link.efficiency or 1.0)
            kwargs[f"{prefix}_latency_s"] = link.latency_s if link.latency_s is not None else DEFAULT_LINK_LATENCY_S
            if link.latency_s is None:
                notes.append(f"{prefix} latency {format_seconds(DEFAULT_LINK_LATENCY_S)} per collective: kvplan "
                             f"default, {hw.name}'s {link.name} has no latency_s ({DEFAULT_LINK_LATENCY_SOURCE})")
            if link.efficiency is None:
                notes.append(f"{prefix} bandwidth at line rate ({link.bandwidth_bytes_per_s / 1e9:g} GB/s per "
                             f"direction): {hw.name}'s {link.name} has no efficiency figure")
        if hw.scale_up is not None:
            kwargs["scale_up_domain"] = float(hw.scale_up_domain or math.inf)
        else:
            kwargs["scale_up_domain"] = 0.0
        if hw.scale_up_domain is not None and max_gpus > hw.scale_up_domain and hw.nic is None:
            raise MissingFigureError(
                f"{max_gpus} GPUs exceed {hw.name}'s scale-up domain ({hw.scale_up_domain}) and the card has no nic",
                "lower --tp, pass a system card with a NIC as --system ('kvplan cards list' shows the system "
                "cards), or add the NIC with its source to the card",
            )
    machine = Machine(name=hw.name, compute_dtype=compute_dtype, bandwidth_bytes_per_s=hw.hbm_bandwidth_bytes_per_s,
                      peak_flops_per_s=peak, eta_mem=eta_mem, eta_flops=eta_flops, step_overhead_s=overhead, **kwargs)
    return machine, notes


def check_parallel_modes(card: ModelCard, tps: Sequence[int], ep: int) -> None:
    if ep < 1:
        raise InputError(f"--ep must be >= 1 (got {ep})", "1 disables expert parallelism")
    if ep == 1:
        return
    if card.moe is None:
        raise InputError(f"--ep {ep}: {card.name} has no routed experts", "drop --ep for dense models")
    if any(t != 1 for t in tps):
        raise InputError(
            f"--ep {ep} with --tp {','.join(map(str, tps))}: kvplan models expert parallelism with "
            "data-parallel attention (tp = 1 per rank)", "use --tp 1 --ep N (N GPUs per instance)")
    if card.moe.num_experts % ep:
        raise InputError(f"--ep {ep} does not divide {card.name}'s {card.moe.num_experts} experts",
                         "choose an ep that divides the expert count")


def parallel_layout(card: ModelCard, hw: HardwareCard, tps: Sequence[int], *, ep: int = 1, dp: int = 1,
                    expert_parallel: bool = False, redundant_experts: int = 0, perf_model: str = "operators",
                    expert_imbalance: float | None = None) -> tuple[int, bool, int]:
    """latency's parallel inputs checked: ``(dp, expert_parallel, ep)`` of the instance.

    Under the per-operator model the legacy ``--ep N`` is ``--tp 1 --dp N --enable-expert-parallel``
    (``ep`` becomes 1); the roofline keeps its own ``ep``. ``hw`` carries the system's links.
    """
    if perf_model not in ("operators", "roofline"):
        raise InputError(f"--perf-model must be operators or roofline (got {perf_model!r})",
                         "operators: per-operator efficiencies; roofline: one η pair for every operator")
    check_positive("--tp", tps)
    if ep > 1 and perf_model == "operators":
        if dp != 1 or expert_parallel:
            raise InputError("--ep N is --tp 1 --dp N --enable-expert-parallel; do not combine it with --dp",
                             "use --tp, --dp and --enable-expert-parallel (EP size = TP × DP)")
        check_parallel_modes(card, tps, ep)
        dp, expert_parallel, ep = ep, True, 1
    check_parallel_modes(card, tps, ep)
    if perf_model == "operators":
        check_parallelism(card, hw, tps, dp, expert_parallel, redundant_experts, expert_imbalance)
    return dp, expert_parallel, ep


def check_context(card: ModelCard, isl: list[int], osl: list[int], contexts: list[int] | None,
                  allow_long_context: bool) -> None:
    longest = max(isl) + max(osl)
    if longest > card.max_context and not allow_long_context:
        raise InputError(
            f"--isl {max(isl):,} + --osl {max(osl):,} = {longest:,} tokens exceeds {card.name}'s "
            f"max_context ({card.max_context:,})",
            "lower them, or pass --allow-long-context if the deployment extends the context (RoPE scaling)",
        )
    if contexts and max(contexts) > card.max_context and not allow_long_context:
        raise InputError(f"--context {max(contexts):,} exceeds {card.name}'s max_context ({card.max_context:,})",
                         "lower it, or pass --allow-long-context")


def latency(
    deployments: Sequence[Deployment], isl: int | Sequence[int] = 2048, osl: int | Sequence[int] = 256,
    batch: int | Sequence[int] | str = 1, *, context: int | Sequence[int] | None = None, ep: int = 1,
    compute_dtype: str | None = None, chunk_size: int | None = None, speculation: Speculation | None = None,
    overlap_comm: bool = False, allow_long_context: bool = False, expert_imbalance: float | None = None,
    two_batch_overlap: bool | None = None, perf_model: str = "operators", max_num_seqs: int | None = None,
    dp_imbalance: float | None = None, custom_all_reduce: bool = True,
) -> Result:
    """TTFT, decode step, mean TPOT, end-to-end latency and throughput for every combination.

    ``deployments``: one per TP (:func:`kvplan.plans.build.step_deployments`), sharing the model,
    hardware in its system (``node_hardware``: the links TP and EP traffic use), engine settings
    (dtypes, efficiencies), attention DP and expert parallelism. ``perf_model``: ``"operators"``
    (default; :mod:`kvplan.calc.operators`, vLLM's ``--tp``/``--dp``/``--enable-expert-parallel``)
    or ``"roofline"`` (three operator classes at one η pair, :func:`kvplan.calc.roofline.forward_pass`).
    ``batch="max"``: the largest batch the KV pool holds. ``ep`` (legacy) is ``--tp 1 --dp ep
    --enable-expert-parallel``: under the per-operator model the deployments carry it. ``dp_imbalance``:
    the busiest attention-DP rank's work over the mean (default: the sourced λ_dp(dp) of ``perfmodel``).
    ``custom_all_reduce=False`` (vLLM's ``--disable-custom-all-reduce``): the TP all-reduce at NCCL's measured
    latency instead of the engine's custom kernel.
    """
    if not deployments:
        raise InputError("no deployment to time", "give at least one --tp")
    first = deployments[0]
    card, hw, settings, par = first.model, first.node_hardware, first.engine, first.parallel
    kv_dtype, weights_dtype, engine, efficiencies = (settings.kv_dtype, settings.weights_dtype, settings.engine,
                                                     settings.efficiencies)
    dp, expert_parallel, redundant_experts = par.dp, par.expert_parallel, par.redundant_experts
    tp = [d.tp for d in deployments]
    if perf_model not in ("operators", "roofline"):
        raise InputError(f"--perf-model must be operators or roofline (got {perf_model!r})",
                         "operators: per-operator efficiencies; roofline: one η pair for every operator")
    batch_max = isinstance(batch, str) or (isinstance(batch, (list, tuple)) and "max" in batch)
    if isinstance(batch, str) and batch != "max":
        raise InputError(f"--batch must be whole numbers or max (got {batch!r})", "e.g. --batch 1,8,64 or --batch max")
    isls, osls, tps = as_list(isl), as_list(osl), as_list(tp)
    batches = [1] if batch_max else as_list(batch)
    contexts = as_list(context) if context is not None else None
    for name, values in (("--isl", isls), ("--osl", osls), ("--batch", batches), ("--tp", tps)):
        check_positive(name, values)
    if max_num_seqs is not None:
        check_positive("--max-num-seqs", [max_num_seqs])
    if ep > 1 and perf_model == "operators":
        if not (expert_parallel and dp == ep and set(tps) == {1}):  # the deployments carry it (step_deployments)
            raise InputError("--ep N is --tp 1 --dp N --enable-expert-parallel; do not combine it with --dp",
                             "use --tp, --dp and --enable-expert-parallel (EP size = TP × DP)")
        ep = 1
    if contexts:
        check_positive("--context", contexts)
    if chunk_size is not None:
        check_positive("--chunk-size", [chunk_size])
    check_parallel_modes(card, tps, ep)
    if two_batch_overlap:
        check_two_batch_overlap(card)
    check_context(card, isls, osls, contexts, allow_long_context)
    profile = first.profile
    shared = set(first.cost.layouts) >= set(tps)
    cost = first.cost if shared else model_cost(card, profile, weights_dtype, kv_dtype, tps=tps)
    dtype = compute_dtype or compute_dtype_for(cost.weights_dtype, card.dtype)
    pass_fn, clamped, attn_dp, lam_dp, op_effs = None, set(), ep, 1.0, None
    if perf_model == "operators":
        check_parallelism(card, hw, tps, dp, expert_parallel, redundant_experts, expert_imbalance)
        attn_dp = dp
    machine, notes = resolve_machine(hw, dtype, cost.weights_dtype, cost.layers, efficiencies, max(tps) * attn_dp,
                                     moe_layers=cost.moe_layers,
                                     attention=attention_kernels(card, engine, weights_dtype=cost.weights_dtype,
                                                                 kv_dtype=first.kv_dtype, hardware=hw,
                                                                 perf_model=perf_model))
    check_enforce_eager(efficiencies.enforce_eager, engine, perf_model)
    if perf_model == "operators":
        perf = engine_perf(engine)
        tbo = two_batch_overlap if two_batch_overlap is not None else bool(perf and perf.two_batch_overlap)
        imbalance = expert_imbalance if expert_imbalance is not None else DEFAULT_IMBALANCE
        if cost.is_moe and expert_parallel and expert_imbalance is None:
            notes.append(DEFAULT_IMBALANCE_NOTE)
        lam_dp = resolve_dp_imbalance(dp, dp_imbalance, notes)
        par = Parallel(tp=1, dp=dp, expert_parallel=expert_parallel, redundant_experts=redundant_experts,
                       imbalance=imbalance, overlap_comm=overlap_comm or tbo, dp_imbalance=lam_dp,
                       alltoall="generic" if str(engine).lower() == "trtllm" else "deepep",
                       custom_all_reduce=bool(custom_all_reduce))
        if not custom_all_reduce:
            notes.append("TP all-reduce: NCCL (--disable-custom-all-reduce), its measured latency per message size "
                         "where a table holds one")
        explicit_eta = efficiencies.eta_mem is not None or efficiencies.eta_flops is not None
        pass_fn, op_effs, clamped = operator_model(card, hw, cost, machine, engine, explicit_eta,
                                                 efficiencies.step_overhead_s is not None, par, notes,
                                                 load_tables(), tps=tps,
                                                 prefill_overhead_s=efficiencies.prefill_overhead_s,
                                                 enforce_eager=efficiencies.enforce_eager)
        if tbo:
            notes.append("two-batch overlap: two micro-batches of half the batch, each re-reading the weights; one's "
                         "communication beside the other's compute as DeepSeek's day-6 figures schedule it "
                         "(kvplan.calc.overlap)")
    if batch_max:
        batches = sorted({max_batch(card, hw, cost, engine, kv_dtype, t_, attn_dp, s_ + o_,
                                    expert_parallel or attn_dp > 1 and perf_model == "roofline", redundant_experts,
                                    max_num_seqs, notes)
                          for t_ in tps for s_ in isls for o_ in osls})
        if not batches or min(batches) < 1:
            raise InfeasibleError(f"--batch max: {card.name} leaves no KV room for one {max(isls) + max(osls):,}-token "
                                  f"sequence on {hw.name} at these parallel sizes",
                                  "add GPUs (--tp/--dp), quantise (--weights-dtype/--kv-dtype), or shorten the lengths")

    grid = list(itertools.product(isls, osls, batches, tps, contexts or [None]))
    s, o, b, t = (np.array([g[i] for g in grid], dtype=np.float64) for i in range(4))
    ctx = np.array([g[4] if g[4] is not None else g[0] for g in grid], dtype=np.float64)
    gpus = t * attn_dp
    kw = dict(overlap_comm=overlap_comm, pass_fn=pass_fn)
    pre = prefill(cost, machine, b, s, tp=t, ep=attn_dp, chunk_tokens=chunk_size, **kw)
    step = decode_step(cost, machine, b, ctx, tp=t, ep=attn_dp, **kw)
    first = decode_step(cost, machine, b, s, tp=t, ep=attn_dp, **kw).time_s
    request_d = float(op_effs.request_dispatch_s) if op_effs is not None else 0.0   # once per request (dispatch.py)
    ttft = pre.time_s + first + request_d

    def plain(c):
        return decode_step(cost, machine, b[:, None], c, tp=t[:, None], ep=attn_dp, **kw).time_s

    tpot_plain = mean_over_output(plain, s, o)
    spec_cols: dict[str, np.ndarray] = {}
    tpot = tpot_plain
    if speculation is not None:
        tpot, spec_cols, spec_notes = _speculative(card, cost, machine, speculation, b, s, o, ctx, t, attn_dp,
                                                   kv_dtype, profile, overlap_comm, tpot_plain, pass_fn)
        notes.extend(spec_notes)
    e2e = ttft + (o - 1) * tpot
    chunk_cols: dict[str, np.ndarray] = {}
    if chunk_size is not None:
        mean_mixed, total_mixed = mixed_chunk_step(cost, machine, b, ctx, s, chunk_size, tp=t, ep=attn_dp, **kw)
        chunk_cols = {"decode_step_with_chunk_s": mean_mixed, "prefill_alongside_decode_s": total_mixed}

    def ep_size(i):
        if perf_model == "operators":
            return int(gpus[i]) if expert_parallel else 1
        return ep

    rows, explain = [], []
    for i, point in enumerate(grid):
        row = {
            "model": card.name, "hardware": hw.name, "tp": int(t[i]), "ep": ep_size(i), "gpus": int(gpus[i]),
            "dp": int(attn_dp) if perf_model == "operators" else 1, "perf_model": perf_model,
            "batch": int(b[i]), "isl": int(s[i]), "osl": int(o[i]), "context": int(ctx[i]),
            "weights_dtype": cost.weights_dtype, "kv_dtype": cost.layout(int(t[i])).kv_dtype,
            "compute_dtype": dtype, "engine": engine, "chunk_size": chunk_size,
            "prefill_s": float(pre.time_s[i]), "prefill_passes": int(pre.passes[i]),
            "prefill_bound": str(pre.bound[i]), "prefill_dispatch_s": float(np.asarray(pre.dispatch_s)[i]
                                                                           if np.ndim(pre.dispatch_s) else 0.0),
            "first_decode_step_s": float(first[i]), "ttft_s": float(ttft[i]),
            "decode_step_s": float(step.time_s[i]), "floor_decode_step_s": float(step.floor_s[i]),
            "decode_memory_s": float(step.memory_s[i]), "decode_compute_s": float(step.compute_s[i]),
            "decode_comm_s": float(step.comm_s[i]), "step_overhead_s": float(step.overhead_s[i]),
            "decode_weight_bytes_per_gpu": float(step.weight_bytes[i]),
            "decode_kv_bytes_per_gpu": float(step.kv_bytes[i]), "decode_flops_per_gpu": float(step.flops[i]),
            "arithmetic_intensity_flop_per_byte": float(step.intensity_flop_per_byte[i]),
            "ridge_point_flop_per_byte": machine.ridge_flop_per_byte,
            "tpot_s": float(tpot[i]), "e2e_s": float(e2e[i]),
            "tokens_per_s": float(b[i] * o[i] / e2e[i]), "tokens_per_s_per_gpu": float(b[i] * o[i] / e2e[i] / gpus[i]),
            "decode_tokens_per_s": float(b[i] / tpot[i]), "decode_tokens_per_s_per_gpu": float(b[i] / tpot[i] / gpus[i]),
            "bound": str(step.bound[i]),
            "eta_mem": machine.eta_mem, "eta_flops": machine.eta_flops, "dp_imbalance": lam_dp,
        }
        if cost.is_moe:
            row["experts_touched_per_layer"] = float(step.experts_touched[i] * (ep if perf_model == "roofline" else 1))
        if perf_model == "operators":
            row.update({f"decode_{name}_s": float(v[i]) for name, v in op_times(step).items()})
            row["batch_max"] = bool(batch_max)
            row["prefill_dispatch_per_layer_s"] = float(op_effs.dispatch_per_layer_s
                                                        or op_effs.request_dispatch_s / max(cost.layers, 1))
            row["request_dispatch_s"] = request_d
            row["enforce_eager"] = bool(efficiencies.enforce_eager)
            row["decode_eager"] = bool(op_effs.decode_dispatch_per_layer_s > 0)
            row["decode_dispatch_per_layer_s"] = float(op_effs.decode_dispatch_per_layer_s)
            row["decode_dispatch_s"] = float(np.asarray(step.dispatch_s)[i] if np.ndim(step.dispatch_s) else 0.0)
            row.update(band_columns(cost.is_moe, int(b[i])))
        row.update({k: float(v[i]) for k, v in spec_cols.items()})
        row.update({k: float(v[i]) for k, v in chunk_cols.items()})
        rows.append(row)
        if i < 24:
            explain.extend(explain_roofline(card, cost, machine, row, pre, step, i) if perf_model == "roofline"
                           else explain_operators(card, cost, machine, row, pre, step, i))
    if len(grid) > 24:
        explain.append(f"… {len(grid) - 24} more rows: rerun with fewer values to see their terms")
    if perf_model == "operators":
        notes.extend(memory_notes(card, hw, cost, b, s + o, t, attn_dp, expert_parallel, redundant_experts))
        if clamped:
            notes.append("outside the measured table (efficiency clamped to the nearest measured size): "
                         + ", ".join(sorted(clamped)))
    else:
        notes.extend(_memory_notes(card, hw, cost, b, s + o, t, ep))
        notes.append("no eager-prefill dispatch on the roofline (--prefill-overhead applies to --perf-model operators)")
    notes.extend(_standard_notes(card, cost, tps, max(ep, attn_dp), overlap_comm, chunk_size))
    columns = list(LATENCY_COLUMNS)
    if speculation is not None:
        columns[columns.index("tpot_s") + 1:columns.index("tpot_s") + 1] = ["spec_tokens_per_step", "spec_speedup"]
    return Result(title=f"Latency: {card.name} on {hw.name}", rows=rows, columns=columns, explain=explain,
                  assumptions=list(dict.fromkeys(notes)))


def _speculative(card, cost, machine, spec: Speculation, b, s, o, ctx, t, ep, kv_dtype, profile, overlap_comm,
                 tpot_plain, pass_fn=None):
    if spec.k < 1:
        raise InputError(f"--spec-k must be >= 1 (got {spec.k})", "the number of drafted tokens per step")
    if not 0 <= spec.alpha <= 1:
        raise InputError(f"--spec-alpha must be in [0, 1] (got {spec.alpha})", "per-token acceptance rate")
    if spec.draft_model is not None:
        draft_card = spec.draft_model
        if not isinstance(draft_card, ModelCard):
            raise InputError("--spec-draft: the draft model's card is resolved before planning",
                             "pass the card (kvplan.plans.build.model_card) as Speculation.draft_model")
        draft = model_cost(draft_card, profile, "auto", kv_dtype, tps=sorted({int(x) for x in t}))
        notes = [f"speculative draft: {draft_card.name}, same tp as the target"]
    else:
        if spec.draft_layers <= 0:
            raise InputError(f"--spec-draft-layers must be > 0 (got {spec.draft_layers})", "MTP uses 1")
        draft = cost.draft_layers(spec.draft_layers)
        notes = [f"speculative draft: {spec.draft_layers:g} decoder layer(s) of {card.name} + its LM head "
                 "(MTP / EAGLE head; aiconfigurator charges MTP the same (nextn + L)/L)"]
    k = spec.k
    per_step = float(speculative_tokens_per_step(k, spec.alpha))
    draft_fn = pass_fn
    if pass_fn is not None:
        draft_fn = draft_pass(pass_fn, card if spec.draft_model is None else draft_card, draft)

    def spec_step(c, batch, tp):
        verify = decode_step(cost, machine, batch, c, tp=tp, ep=ep, query_tokens=k + 1, overlap_comm=overlap_comm,
                             pass_fn=pass_fn)
        drafts = sum(decode_step(draft, machine, batch, c + j, tp=tp, ep=ep, overlap_comm=overlap_comm,
                                 pass_fn=draft_fn).time_s for j in range(k))
        return verify.time_s + drafts

    tpot = mean_over_output(lambda c: spec_step(c, b[:, None], t[:, None]), s, o) / per_step
    at_context = spec_step(ctx, b, t)
    notes.append(f"speculative decoding: k = {k}, α = {spec.alpha:g} → (1 − α^(k+1))/(1 − α) = {per_step:.3f} "
                 "tokens per verification step (Leviathan et al. 2023); acceptance taken as i.i.d. per token")
    cols = {"spec_tokens_per_step": np.full_like(b, per_step), "spec_step_s": at_context,
            "tpot_without_spec_s": tpot_plain, "spec_speedup": tpot_plain / tpot}
    return tpot, cols, notes


def _memory_notes(card, hw, cost, batch, final_context, tp, ep) -> list[str]:
    """Say so when a row's weights and KV at the final length exceed one GPU's HBM (latency does not gate on it)."""
    embedding = 0.0 if card.tie_word_embeddings else cost.lm_head_weight_bytes
    experts = cost.moe_layers * cost.num_experts * cost.expert_weight_bytes
    weights = (cost.dense_weight_bytes + embedding) / tp + experts / (tp * ep)
    kv = batch / ep * cost.kv_sequence_bytes(final_context, tp if ep == 1 else 1)
    over = np.flatnonzero(weights + kv > hw.hbm_capacity_bytes)
    if not over.size:
        return []
    i = over[0]
    return [f"{over.size} row(s) do not fit in {hw.name}'s {format_bytes(hw.hbm_capacity_bytes)}, e.g. tp={int(tp[i])}, "
            f"batch {int(batch[i])} at {int(final_context[i]):,} tokens needs {format_bytes(weights[i])} of weights + "
            f"{format_bytes(kv[i])} of KV per GPU; the latency is shown anyway (check with kvplan fit)"]


def _standard_notes(card, cost, tps, ep, overlap_comm, chunk_size) -> list[str]:
    notes = ["static batch: the batch's prompts are prefilled together; TTFT = that prefill + one decode step "
             "at context ISL (+ the engine's prefill dispatch, once per request; no queueing); TPOT averages the OSL − 1 later steps at contexts ISL+1 … ISL+OSL−1"]
    if (max(tps) > 1 or ep > 1) and not overlap_comm:
        notes.append("communication is not overlapped with compute (pass --overlap-comm to overlap it)")
    if cost.is_moe:
        notes.append(f"MoE routing taken as uniform: E(1 − (1 − k/E)^B) = touched experts per layer "
                     f"(E = {cost.num_experts}, k = {cost.experts_per_token}); a skewed router reads fewer at mid batch")
    if cost.weights_dtype in ("int4", "mxfp4"):
        notes.append(f"{cost.weights_dtype} weights dequantise to {card.dtype} GEMMs (W4A16); pass --compute-dtype "
                     "to change")
    if chunk_size is not None:
        notes.append(f"chunked prefill: at most {chunk_size:,} tokens per step; decode_step_with_chunk_s is a "
                     "step of the running batch fused with one chunk of a new ISL prompt (mean over its chunks)")
    return notes


__all__ = ["Efficiencies", "Speculation", "latency", "resolve_machine", "peak_flops", "LATENCY_COLUMNS"]

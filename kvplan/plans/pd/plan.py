"""``kvplan pd``: prefill/decode disaggregation (xPyD) sized for percentile SLOs, the KV transfer on the real link.

For a workload (rate, ISL/OSL or a trace) and SLOs on TTFT and TPOT, :func:`plan_pd` searches
prefill TP × decode TP (default {1, 2, 4, 8} each, up to the scale-up domain; prefill and decode
hardware may differ) and, for each pair, the fewest decode and prefill instances
(:mod:`kvplan.plans.pd.search`):

    TTFT = prefill queue wait (M/G/c) + prefill + exposed KV transfer + first decode step (+ link wait)
    TPOT = decode step at the batch a request sees (Little's law occupancy, its percentile)

over the link that joins the pools (:mod:`kvplan.plans.pd.link`), with decode-side staging memory
for KV in flight and the link's utilisation. The plan with the fewest GPUs meeting both SLOs wins;
ties go to the higher capacity (largest rate it serves within the SLOs, per GPU).

Beside it: the aggregated alternative (continuous batching with chunked prefill on the prefill
hardware, prefill chunks interfering with decode) from :func:`kvplan.plans.fleet.aggregated.plan_aggregated`,
searched over the same TPs, and the verdict; then a sensitivity table (ISL × 2, OSL × 2, rate × 2,
link bandwidth ÷ 4) of re-planned PD rows, marked by ``scenario``.

``goodput_per_gpu`` = requests/s meeting the SLOs per GPU = qps / total GPUs for a feasible plan,
0 otherwise. ``prefill_goodput_per_gpu`` and ``decode_goodput_per_gpu`` are what one instance of
each pool serves alone (DistServe's per-phase figures) per GPU; ``rate_matched_xpyd`` the smallest
unit they imply (:func:`kvplan.calc.disagg.rate_matched_xpyd`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kvplan.cards.loader import load_model
from kvplan.cards.schema import HardwareCard, ModelCard, SystemCard
from kvplan.errors import InfeasibleError, InputError, MissingFigureError
from kvplan.plans import deployment
from kvplan.plans.deployment import Deployment, EngineSettings
from kvplan.plans.fleet.aggregated import FleetWorkload, parse_slo
from kvplan.plans.links import Side, load_side
from kvplan.plans.overlap import check_two_batch_overlap
from kvplan.plans.pd.link import PLACEMENTS, LinkOverride, PathLink, path_kind, resolve_link, same_place
from kvplan.plans.pd.model import (PDWorkload, as_length, pool_models, trace_hit_fraction, transfer_model,
                                   workload_from_inputs)
from kvplan.plans.pd.pools import Shape, node_size, pool_shapes
from kvplan.plans.pd.report import (aggregated_alternative, explain_plan, infeasible_plan, pd_columns, pd_plan,
                                    price_plans, pricing, verdict)
from kvplan.plans.pd.result import PdAnswer, PdPlan
from kvplan.plans.pd.search import DEFAULT_MAX_UTILIZATION, PairModel, Point, utilization_note
from kvplan.units import format_bytes
from kvplan.workload.synthetic import Workload
from kvplan.workload.traces import Trace, read_trace

TPS = (1, 2, 4, 8)
SCENARIOS = (("isl×2", {"isl": 2.0}), ("osl×2", {"osl": 2.0}), ("rate×2", {"rate": 2.0}),
             ("link bandwidth ÷4", {"link": 0.25}))


# Both pools run one engine with the same settings as the aggregated fleet (vLLM's names).
PDSettings = EngineSettings


@dataclass
class Pool:
    """One side: its cards and one resolved :class:`Deployment` per usable shape (TP × DP; KV pool, cost, machine)."""

    side: Side
    shapes: list[Shape]
    deployments: dict[Shape, Deployment]

    @property
    def tps(self) -> list[int]:
        return sorted({s.tp for s in self.shapes})

    @property
    def node(self) -> int:
        return node_size(self.side)


@dataclass
class Setup:
    card: ModelCard
    prefill: Pool
    decode: Pool
    ttft: object
    tpot: object
    settings: PDSettings
    placement: str
    override: LinkOverride
    cached_fraction: float
    notes: list[str] = field(default_factory=list)
    overlap_comm: bool = False
    prefix_read_bytes_per_s: float | None = None
    max_utilization: float = DEFAULT_MAX_UTILIZATION
    gpu_cost: dict | None = None  # {hardware: price per GPU-hour}: candidates and the verdict compare cost


@dataclass
class Candidate:
    shape_p: Shape
    shape_d: Shape
    link: PathLink
    pair: PairModel
    point: Point
    capacity_per_s: float = math.nan

    @property
    def tp_p(self) -> int:
        return self.shape_p.tp

    @property
    def tp_d(self) -> int:
        return self.shape_d.tp

    @property
    def gpus_p(self) -> int:
        return self.shape_p.gpus

    @property
    def gpus_d(self) -> int:
        return self.shape_d.gpus

    @property
    def total_gpus(self) -> int:
        return self.point.x * self.gpus_p + self.point.y * self.gpus_d


@dataclass
class Outcome:
    """One planning run: the chosen candidate (None when nothing meets the SLOs) and why not."""

    best: Candidate | None
    binding: str | None = None
    best_ttft_s: float = math.inf
    best_tpot_s: float = math.inf
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def plan_pd(
    model: str | ModelCard, hardware: str | HardwareCard, *, decode_hardware: str | HardwareCard | None = None,
    system: str | SystemCard | None = None, decode_system: str | SystemCard | None = None, placement: str = "auto",
    qps: float | None = None, isl=None, osl=None, trace: str | Path | Trace | None = None, trace_format: str = "auto",
    arrival_cv: float | None = None, ttft: str = "p99<=4s", tpot: str = "p99<=100ms",
    prefill_tp: Sequence[int] = TPS, decode_tp: Sequence[int] = TPS, prefill_instances: int | None = None,
    decode_instances: int | None = None, cached_prefix_fraction: float = 0.0,
    link_bandwidth_bytes_per_s: float | None = None, link_efficiency: float | None = None,
    link_latency_s: float | None = None, settings: PDSettings = PDSettings(), aggregated: bool = True,
    sensitivity: bool = True, allow_long_context: bool = False, cards: tuple[Path, ...] = (),
    prefill_dp: Sequence[int] = (1,), decode_dp: Sequence[int] = (1,), expert_parallel: bool = False,
    redundant_experts: int | None = None, overlap_comm: bool = False, placements: bool = False, checklist: bool = False,
    prefix_read_bandwidth_bytes_per_s: float | None = None, prefix_cache_tokens: float | None = None,
    max_utilization: float = DEFAULT_MAX_UTILIZATION, gpu_cost: dict[str, float] | None = None,
) -> PdAnswer:
    """The xPyD recommendation, the aggregated alternative and the sensitivity plans (see the module docstring).

    Returns a typed :class:`~kvplan.plans.pd.result.PdAnswer`; its ``rows`` (:mod:`kvplan.plans.pd.rows`) are
    what ``--format json`` prints.
    """
    if isinstance(trace, (str, Path)):
        trace = read_trace(trace, trace_format=trace_format)
    workload = workload_from_inputs(qps, isl, osl, arrival_cv, trace)
    hit_note = None
    if prefix_cache_tokens is not None:
        cached_prefix_fraction, hit_note = trace_hit_fraction(trace, prefix_cache_tokens, cached_prefix_fraction)
    layout = (list(prefill_dp), list(decode_dp), bool(expert_parallel), redundant_experts)
    setup = _setup(model, hardware, decode_hardware, system, decode_system, placement, ttft, tpot, prefill_tp,
                   decode_tp, cached_prefix_fraction, LinkOverride(link_bandwidth_bytes_per_s, link_efficiency,
                                                                  link_latency_s), settings, workload,
                   allow_long_context, cards, layout)
    if overlap_comm:
        check_two_batch_overlap(setup.card)
    setup.overlap_comm = bool(overlap_comm)
    setup.notes.append(utilization_note(max_utilization))
    setup.max_utilization, setup.gpu_cost = float(max_utilization), (dict(gpu_cost) if gpu_cost else None)
    if hit_note:
        setup.notes.append(hit_note)
    if prefix_read_bandwidth_bytes_per_s is not None:
        if not prefix_read_bandwidth_bytes_per_s > 0:
            raise InputError(f"--prefix-read-bandwidth must be > 0 (got {prefix_read_bandwidth_bytes_per_s})",
                             "the cache tier's read rate per GPU, e.g. 6.25GB/s")
        setup.prefix_read_bytes_per_s = float(prefix_read_bandwidth_bytes_per_s)
        setup.notes.append(f"cached prefix loaded from its tier at {prefix_read_bandwidth_bytes_per_s / 1e9:g} GB/s per "
                           "GPU, layer by layer ahead of the suffix prefill: the part not hidden behind it is added "
                           "to the prefill service time")
    if overlap_comm:
        setup.notes.append("two-batch overlap: each pass is two micro-batches of half the tokens (their GEMMs at half "
                           "M, each re-reading the weights); one's EP dispatch/combine runs beside the other's compute as "
                           "DeepSeek's day-6 figures schedule it (prefill: compute on 108 of 132 SMs; decode: 5 stages, "
                           "nothing beside the routed experts); the roofline (--perf-model roofline) keeps "
                           "max(kernels, comm) + overhead, the bound (kvplan.calc.overlap)")
    fixed = _fixed(prefill_instances, decode_instances, setup)
    base = _plan(setup, workload, setup.override, fixed)
    plans = [_plan_of(setup, workload, base, "base")]
    if (placements or checklist) and base.best is not None:
        from kvplan.plans.pd.placement import placement_plans

        extra, placement_notes = placement_plans(setup, workload, base.best, pool_models, Candidate, pd_plan, _unit)
        setup.notes.extend(placement_notes)
    else:
        extra = []
    agg = aggregated_alternative(setup, workload, _fleet_workload(trace, qps, isl, osl, arrival_cv),
                                 allow_long_context, setup.gpu_cost) if aggregated else None
    if agg is not None:
        plans.append(agg.plan)
    if sensitivity:
        for name, change in SCENARIOS:
            scaled = workload.scaled(isl=change.get("isl", 1.0), osl=change.get("osl", 1.0),
                                     rate=change.get("rate", 1.0))
            override = replace(setup.override, bandwidth_scale=change.get("link", 1.0))
            plans.append(_plan_of(setup, scaled, _plan(setup, scaled, override, fixed), name))
            if scaled.isl_max + scaled.osl_max > setup.card.max_context >= workload.isl_max + workload.osl_max:
                setup.notes.append(f"sensitivity {name}: the longest request ({scaled.isl_max + scaled.osl_max:,.0f} "
                                   f"tokens) exceeds {setup.card.name}'s max_context; planned as if it were extended")
    plans.extend(extra)
    notes = list(dict.fromkeys([*workload.notes, *setup.notes, *base.notes, *(agg.notes if agg else ())]))
    explain = explain_plan(setup, workload, base, plans[0])
    if checklist:
        from kvplan.plans.pd.checklist import checklist as answer

        lines, figures = answer(setup, workload, base, plans, pool_models)
        explain += ["checklist (seed §10):", *lines]
        plans[0] = replace(plans[0], checklist=figures)
    plans, cost_notes = price_plans(plans, setup)
    notes += cost_notes
    agg_plan = next((p for p in plans if p.mode == "aggregated"), None) if agg else None
    text, failed = verdict(setup, plans[0], agg_plan, base, fixed=fixed is not None)
    title = (f"PD disaggregation: {setup.card.name}, prefill on {setup.prefill.side.name}, decode on "
             f"{setup.decode.side.name}")
    return PdAnswer(title=title, plans=tuple(plans), columns=tuple(pd_columns(setup)), notes=tuple(notes),
                    explain=tuple(explain), verdict=text, failed=failed, aggregated=agg_plan)


def _fleet_workload(trace: Trace | None, qps, isl, osl, arrival_cv) -> FleetWorkload:
    """``kvplan plan``'s workload for the same inputs (the aggregated alternative plans on it)."""
    if trace is not None:
        return FleetWorkload.from_trace(trace, qps)
    spec = Workload(rate_per_s=qps, isl=as_length(isl), osl=as_length(osl), arrival_cv=arrival_cv or 1.0)
    return FleetWorkload.from_spec(spec)


# --------------------------------------------------------------------------- set-up


def _setup(model, hardware, decode_hardware, system, decode_system, placement, ttft, tpot, prefill_tp, decode_tp,
           cached_fraction, override, settings, workload: PDWorkload, allow_long_context, cards,
           layout=([1], [1], False, None)) -> Setup:
    card = model if isinstance(model, ModelCard) else load_model(model, cards)
    if placement not in PLACEMENTS:
        raise InputError(f"unknown placement '{placement}'", f"choose one of: {', '.join(PLACEMENTS)}")
    if not 0 <= cached_fraction < 1:
        raise InputError(f"--cached-prefix-fraction must be in [0, 1) (got {cached_fraction})",
                         "the share of prompt tokens served from a KV cache tier, e.g. 0.5")
    if settings.max_num_seqs is not None and settings.max_num_seqs < 1:
        raise InputError(f"--max-num-seqs must be >= 1 (got {settings.max_num_seqs})", "leave it out for the engine's default")
    longest = workload.isl_max + workload.osl_max
    p99 = workload.isl_quantile(0.99) + workload.osl_p99
    if p99 > card.max_context and not allow_long_context:
        raise InputError(f"the p99 request (ISL {workload.isl_quantile(0.99):,.0f} + OSL {workload.osl_p99:,.0f} = "
                         f"{p99:,.0f} tokens) exceeds {card.name}'s max_context ({card.max_context:,})",
                         "lower --isl/--osl, or pass --allow-long-context if the deployment extends the context")
    late_notes = []
    if longest > card.max_context:
        late_notes.append(f"the longest requests (up to {longest:,.0f} tokens) exceed {card.name}'s max_context "
                          f"({card.max_context:,}); planned as given")
    p_side = load_side(hardware, system, cards, default_system=True)
    d_side = load_side(decode_hardware, decode_system or (system if decode_hardware is None else None), cards,
                       default_system=True) \
        if decode_hardware is not None or decode_system is not None else p_side
    notes: list[str] = list(dict.fromkeys(side.assumed for side in (p_side, d_side) if side.assumed))
    pools, resolved = [], {}  # resolved: (side, tp) -> Deployment, shared by both pools on one side
    dps_p, dps_d, ep, redundant = layout
    for side, tps, dps, what in ((p_side, prefill_tp, dps_p, "prefill"), (d_side, decode_tp, dps_d, "decode")):
        pools.append(_pool(card, side, list(tps), list(dps), ep, redundant, settings, what, notes, resolved))
    for i, note in enumerate(notes):  # a shape both pools skip for the same reason: one note
        if note.startswith("prefill ") and (twin := "decode " + note[len("prefill "):]) in notes:
            notes[i] = "prefill and decode " + note[len("prefill "):]
            notes.remove(twin)
    setup = Setup(card, pools[0], pools[1], parse_slo("ttft", ttft), parse_slo("tpot", tpot), settings, placement,
                  override, cached_fraction, notes + late_notes)
    notes.extend(_standard_notes(setup))
    return setup


def _pool(card, side: Side, tps: list[int], dps: list[int], expert_parallel: bool, redundant, s: PDSettings,
          what: str, notes: list, cache: dict) -> Pool:
    for t in tps:
        if not isinstance(t, int) or t < 1:
            raise InputError(f"--{what}-tp values must be whole numbers >= 1 (got {t})", "e.g. --prefill-tp 1,2,4,8")
    shapes, dropped = pool_shapes(card, side, tps, dps, expert_parallel, redundant, what)
    notes.extend(dropped)
    if not shapes:
        raise InputError(f"no usable {what} TP among {tps} for {card.name} on {side.name}",
                         "; ".join(dropped) or "pass other --tp values")
    ok = shapes
    where = (side.hardware.name, side.name)
    for t in ok:
        if (where, t) not in cache:
            cache[where, t] = deployment.resolve(card, side.hardware, system=side.system, engine=s,
                                                 parallel=t.parallelism())
    resolved = {t: cache[where, t] for t in ok}
    for dep in resolved.values():
        notes.extend(dep.notes)
    deps = {t: dep for t, dep in resolved.items() if not dep.pool.empty}
    if not deps:
        worst = resolved[ok[-1]]
        ok_tps = {t.tp for t in ok}
        moe = card.moe is not None and not expert_parallel
        wider = (f"TP {', '.join(str(t) for t in tps if t not in ok_tps)} exceed(s) {side.name}'s scale-up domain "
                 f"({side.scale_up_domain:g}): give a --{'decode-' if what == 'decode' else ''}system card with a "
                 "larger domain, " if len(ok_tps) < len(tps) else "use larger TPs (a scale-up domain that holds them), ")
        if moe:
            wider += "split the experts (--enable-expert-parallel with --prefill-dp/--decode-dp), "
        at = f"at {worst.parallel.tp}×{worst.parallel.dp}" if worst.parallel.dp > 1 else f"at tp={worst.tp}"
        raise InfeasibleError(
            f"{card.name} does not fit the {what} hardware {side.hardware.name} at any "
            f"{'shape in ' + str([x.label() for x in ok]) if any(x.dp > 1 for x in ok) else 'TP in ' + str(sorted(ok_tps))}"
            f": {at} the weights take {format_bytes(worst.memory.weights_bytes_per_gpu)} per GPU of "
            f"{format_bytes(worst.memory.gpu_memory_bytes)}" + _reserves(worst.memory) + " and leave no KV memory",
            f"{wider}quantise the weights (--weights-dtype fp8), or choose a GPU with more memory")
    for t, dep in resolved.items():
        if t not in deps:
            notes.append(f"{what} {t.label() if t.dp > 1 or t.expert_parallel else f'tp={t.tp}'} skipped: the weights "
                         f"({format_bytes(dep.memory.weights_bytes_per_gpu)} per GPU) leave no KV memory on "
                         f"{side.hardware.name}")
    ok_shapes = sorted(deps)
    widest = deps[max(ok_shapes)]
    notes.extend(n for n in widest.step_notes if not (widest.steps.dp_note and n == widest.steps.dp_note))
    if any(t.dp > 1 for t in ok_shapes):
        notes.append(PD_DP_NOTE.format(what=what))
    return Pool(side, ok_shapes, {t: deps[t] for t in ok_shapes})


def _fixed(prefill_instances, decode_instances, setup: Setup) -> tuple[int, int] | None:
    if prefill_instances is None and decode_instances is None:
        return None
    if prefill_instances is None or decode_instances is None:
        raise InputError("--prefill-instances and --decode-instances go together",
                         "give both to evaluate one xPyD, or neither to search")
    if prefill_instances < 1 or decode_instances < 1:
        raise InputError(f"instance counts must be >= 1 (got {prefill_instances}P{decode_instances}D)")
    if len(setup.prefill.shapes) != 1 or len(setup.decode.shapes) != 1:
        raise InputError("evaluating a fixed xPyD needs one --prefill-tp and one --decode-tp (and one DP each)",
                         "e.g. --prefill-tp 4 --decode-tp 8 --prefill-instances 3 --decode-instances 1")
    return int(prefill_instances), int(decode_instances)


# λ_dp (the attention-DP lock step, kvplan.plans.sizing.perfmodel.attention_dp_imbalance) is in-flight batching
# handing some ranks a context chunk while the others decode (TensorRT-LLM tech blog 10); a pool of one phase does not.
PD_DP_NOTE = ("{what} pool with attention DP: its ranks step balanced (λ_dp = 1). The default λ_dp of aggregated "
              "serving (TensorRT-LLM tech blog 10, ADP balance) comes from in-flight batching that hands some ranks a "
              "context chunk while the others decode; a decode-only pool mixes no context chunks and a prefill pool's "
              "ranks each run their own prompts (M/G/c); the aggregated alternative charges it")


def _standard_notes(setup: Setup) -> list[str]:
    notes = [
        "prefill instances run one prompt at a time, unchunked (M/G/c over prompts); TTFT = queue wait + prefill + "
        "exposed KV transfer + first decode step (+ link wait); percentiles of independent terms are added",
        "P→D transfer: the decode instance's KV of all ISL tokens (engine layout, paged); min(prefill TP, decode TP) "
        "links in parallel; layer-wise overlap with prefill; the prefill GPU is free once its last layer is sent",
        "decode: continuous batching at the mean decode context ISL + OSL/2; batch percentile from M/G/∞ occupancy "
        "(normal approximation, peakedness (1 + ca²)/2); KV of transfers in flight (Little's law) held on the "
        "decode GPUs",
    ]
    if setup.cached_fraction:
        notes.append(f"cached prefix: prefill computes (1 − {setup.cached_fraction:g}) of each prompt (the rest is "
                     "served from a KV cache tier; loading it is not timed here), the transfer still moves all ISL "
                     "tokens")
    return notes


# --------------------------------------------------------------------------- the search


def _kinds(setup: Setup, fixed, tp_p: int, tp_d: int) -> list[str]:
    """Paths to try for a pair (``tp_p``/``tp_d``: GPUs per prefill / decode instance)."""
    p, d = setup.prefill.side, setup.decode.side
    if setup.placement != "auto":
        return [path_kind(setup.placement, p, d, 0)]
    if fixed is not None:
        return [path_kind("auto", p, d, _unit(fixed[0], fixed[1], tp_p, tp_d))]
    if not same_place(p, d):
        return ["nic"]
    return [k for k in ("scale_up", "host_link", "nic") if k == "nic" or p.link(k) is not None]


def _unit(x: int, y: int, tp_p: int, tp_d: int) -> int:
    g = math.gcd(x, y)
    return x // g * tp_p + y // g * tp_d


def _in_scope(kind: str, unit: int, side: Side) -> bool:
    """Whether an xPyD unit of ``unit`` GPUs fits where path ``kind`` reaches (domain, node, anywhere)."""
    if kind == "scale_up":
        return unit <= side.scale_up_domain
    if kind == "host_link":
        return unit <= side.node_accelerators
    return True


def _plan(setup: Setup, workload: PDWorkload, override: LinkOverride, fixed) -> Outcome:
    prefill, decode = pool_models(setup, workload)
    candidates, failures, link_errors = [], [], []
    layers = setup.card.num_layers
    for shape_p, shape_d in itertools.product(setup.prefill.shapes, setup.decode.shapes):
        tp_p, tp_d = shape_p.gpus, shape_d.gpus
        for kind in _kinds(setup, fixed, tp_p, tp_d):
            try:
                link = resolve_link(kind, setup.prefill.side, setup.decode.side, override)
            except MissingFigureError as exc:
                if setup.placement != "auto" or fixed is not None:
                    raise
                link_errors.append(exc)
                continue
            pm, dm = prefill[shape_p], decode[shape_d]
            transfer = transfer_model(dm.receive_bytes_per_gpu, shape_d.tp, shape_p.tp, pm.service_s, layers,
                                      link.bandwidth_bytes_per_s, link.latency_s)
            pair = PairModel(workload, pm, dm, transfer, setup.ttft, setup.tpot,
                             max_utilization=setup.max_utilization)
            if fixed is not None:
                candidates.append(Candidate(shape_p, shape_d, link, pair, pair.evaluate(*fixed)))
                break
            point, reason = pair.search()
            if point is None:
                failures.append((reason, pair, link, tp_p, tp_d))
                break
            if setup.placement == "auto" and not _in_scope(kind, _unit(point.x, point.y, tp_p, tp_d),
                                                           setup.prefill.side):
                continue  # the xPyD unit does not fit this path's scope: plan again over the slower path
            candidates.append(Candidate(shape_p, shape_d, link, pair, point))
            break
    if not candidates and not failures and link_errors:
        raise link_errors[0]
    notes = [n for f in failures for n in f[2].notes]
    if fixed is not None:
        c = candidates[0]
        c.capacity_per_s = c.pair.capacity_per_s(c.point.x, c.point.y)
        return Outcome(c, None if c.point.ok else c.point.failures[0], notes=list(c.link.notes))
    ok = [c for c in candidates if c.point.ok]
    if ok:
        price = pricing(setup)
        fewest = min(price(c) for c in ok)
        tied = [c for c in ok if price(c) <= fewest * (1 + 1e-12)]
        for c in tied:
            c.capacity_per_s = c.pair.capacity_per_s(c.point.x, c.point.y)
        best = max(tied, key=lambda c: (c.capacity_per_s, -c.gpus_p - c.gpus_d))
        notes = list(best.link.notes)
        unit = _unit(best.point.x, best.point.y, best.gpus_p, best.gpus_d)
        if setup.placement != "auto" and not _in_scope(best.link.kind, unit, setup.prefill.side):
            notes.append(f"--placement {setup.placement}: one {best.point.x}P{best.point.y}D unit needs {unit} GPUs, "
                         f"more than {setup.prefill.side.name} joins over its {best.link.kind} link; planned as asked")
        return Outcome(best, notes=notes)
    return _infeasible(setup, failures, notes)


def _infeasible(setup: Setup, failures, notes) -> Outcome:
    reasons = [f[0] for f in failures]
    best_tpot = min((f[1].tpot_floor_s() for f in failures), default=math.inf)
    best_ttft = min((f[1].ttft_floor_s() for f in failures if f[0] not in ("prefill_kv_capacity",
                                                                             "decode_kv_capacity")),
                    default=math.inf)
    if all(r == "prefill_kv_capacity" for r in reasons):
        binding = "prefill_kv_capacity"
    elif all(r in ("prefill_kv_capacity", "decode_kv_capacity") for r in reasons):
        binding = "decode_kv_capacity"
    elif best_tpot > setup.tpot.limit_s:
        binding = "tpot_slo"
    elif best_ttft > setup.ttft.limit_s:
        binding = "ttft_slo"
    else:
        binding = max(set(reasons), key=reasons.count)
    return Outcome(None, binding, best_ttft, best_tpot, notes=notes)


def _plan_of(setup: Setup, workload: PDWorkload, outcome: Outcome, scenario: str) -> PdPlan:
    if outcome.best is None:
        return infeasible_plan(setup, workload, outcome, scenario)
    return pd_plan(setup, workload, outcome.best, scenario)


__all__ = ["PDSettings", "plan_pd", "TPS", "SCENARIOS"]


def _reserves(memory) -> str:
    """', the engine's reserves (activation …) take X': named when they, not the weights, fill the GPU."""
    reserves = memory.activation_bytes + memory.non_torch_bytes + memory.cudagraph_bytes
    if memory.weights_bytes_per_gpu >= memory.utilization * memory.gpu_memory_bytes:
        return ""  # the weights alone fill the engine's share of the GPU
    return (f", the engine's reserves take {format_bytes(reserves)} (activation peak "
            f"{format_bytes(memory.activation_bytes)}: --chunk-size / --max-num-batched-tokens, --max-num-seqs)")

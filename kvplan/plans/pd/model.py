"""The PD planner's inputs, resolved once: workload bins, prefill and decode models, the transfer.

Workload. ISL is kept as a discrete distribution of at most ``BINS`` values with weights: a fixed
ISL is one value; otherwise half of the bins cover the shortest 95% of prompts and half the longest
5% (where the p99 TTFT is decided): a lognormal at the probability midpoints of its bins, a trace's
sorted prompts averaged in equal-count groups (the mean is kept exactly). OSL enters
through its mean (decode time, Little's law) and its largest value (the longest request must fit).
Arrival burstiness ca²: flags give ``arrival_cv²``; a trace gives the SCV of its inter-arrival
gaps, :func:`kvplan.workload.summary.arrival_scv` — the one estimator ``kvplan plan``, ``tier``,
``check`` and ``workload`` use too, picked against the replay (docs/closed-form-vs-replay.md;
the index of dispersion of 60-s counts it replaced read the Azure conversation trace's
minute-scale drift as ca² = 16 and put TTFT p99 at 4.5× the replay's).

Prefill service of one prompt of S tokens with a cached prefix of n = ⌊F·S⌋ tokens (``F`` =
``cached_prefix_fraction``): one forward pass over the S − n new tokens that reads the prefix KV
once and attends causally over positions n+1 … S (the deployment's step-time model: the
per-operator pass by default, :func:`kvplan.calc.roofline.forward_pass` with ``--perf-model
roofline``); F = 0 is :func:`kvplan.calc.roofline.prefill` unchunked. The transfer still moves all S tokens.

Decode step of a batch b: the step-time model's ``decode_step`` at the mean context over a
request's decode life, E[ISL] + E[OSL]/2, tabulated for b = 1 … the engine cap; KV per request
(per GPU, paged as the engine stores it) at that context; the budget per GPU from
:func:`kvplan.plans.sizing.fit.fit` (the engine's start-up rule).

Transfer of one request P→D: bytes = the decode instance's KV of its S tokens
(per-GPU bytes × decode TP: with head replication every receiving rank needs its copy);
links in parallel n = min(prefill TP, decode TP) (each sending rank drives its own link, each
receiving rank takes one); time = latency + bytes / (n × effective bandwidth per GPU), and the
part TTFT sees is :func:`kvplan.calc.transfer.exposed_transfer_s` (layer-wise overlap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kvplan.calc.kv import check_parallel, kv_layout
from kvplan.calc.roofline import ModelCost, decode_step
from kvplan.calc.steptime import StepTimes
from kvplan.calc.tiering import suffix_prefill_s
from kvplan.calc.transfer import exposed_transfer_s
from kvplan.errors import InputError, KvplanError
from kvplan.workload.summary import arrival_scv, tied_share
from kvplan.workload.synthetic import Fixed, LogNormal, parse_length
from kvplan.workload.traces import Trace

BINS = 200
TAIL = 0.05  # the longest 5% of prompts get half of the bins: the p99 TTFT lives there


@dataclass(frozen=True)
class PDWorkload:
    """Arrival rate and burstiness, ISL bins with weights, OSL mean and maximum."""

    rate_per_s: float
    arrival_scv: float
    isl: np.ndarray
    weights: np.ndarray
    osl_mean: float
    osl_max: float
    isl_max: float
    source: str
    notes: tuple[str, ...] = ()
    osl_p99: float = 0.0

    @property
    def isl_mean(self) -> float:
        return float((self.isl * self.weights).sum())

    def isl_quantile(self, q: float) -> float:
        order = np.argsort(self.isl)
        cdf = np.cumsum(self.weights[order])
        return float(self.isl[order][min(int(np.searchsorted(cdf, q - 1e-12)), self.isl.size - 1)])

    def scaled(self, *, isl: float = 1.0, osl: float = 1.0, rate: float = 1.0) -> PDWorkload:
        return PDWorkload(self.rate_per_s * rate, self.arrival_scv, np.maximum(1.0, np.round(self.isl * isl)),
                          self.weights, self.osl_mean * osl, self.osl_max * osl, self.isl_max * isl,
                          self.source, self.notes, self.osl_p99 * osl)


def workload_from_inputs(qps: float | None, isl, osl, arrival_cv: float | None, trace: Trace | None) -> PDWorkload:
    """Flags (``qps``, ISL/OSL as ``8k`` or ``mean=…,p99=…``) or a trace, as a :class:`PDWorkload`."""
    if trace is not None:
        return _from_trace(trace, qps, arrival_cv)
    if qps is None or isl is None or osl is None:
        raise InputError("no workload: give --qps, --isl and --osl, or --trace FILE",
                         "e.g. --qps 10 --isl 8k --osl 256")
    if not qps > 0 or not math.isfinite(qps):
        raise InputError(f"--qps must be > 0 (got {qps})", "requests per second, e.g. --qps 10")
    cv = 1.0 if arrival_cv is None else arrival_cv
    if not cv > 0:
        raise InputError(f"--arrival-cv must be > 0 (got {cv})", "1 is Poisson")
    isl_dist, osl_dist = as_length(isl), as_length(osl)
    if isinstance(isl_dist, Fixed):
        values, weights = np.array([isl_dist.value]), np.array([1.0])
    else:
        half = BINS // 2
        mid = (np.arange(half) + 0.5) / half
        probs = np.concatenate([(1 - TAIL) * mid, 1 - TAIL + TAIL * mid])
        values = np.array([isl_dist.quantile(float(q)) for q in probs])
        weights = np.concatenate([np.full(half, (1 - TAIL) / half), np.full(half, TAIL / half)])
    values = np.maximum(1.0, np.round(values))
    osl_max = osl_dist.value if isinstance(osl_dist, Fixed) else osl_dist.quantile(0.999)
    return PDWorkload(float(qps), cv * cv, values, weights, float(osl_dist.mean), float(round(osl_max)),
                      float(values.max()), "flags", (), float(round(osl_dist.quantile(0.99))))


def as_length(value):
    """A length distribution from a token count, a distribution, or text in :func:`parse_length`'s grammar."""
    if isinstance(value, (Fixed, LogNormal)):
        return value
    if isinstance(value, (int, np.integer)):
        if value < 1:
            raise InputError(f"token count must be > 0 (got {value})", "write tokens as 8192 or 8k")
        return Fixed(value=float(value))
    return parse_length(str(value))


def _from_trace(trace: Trace, qps: float | None, arrival_cv: float | None) -> PDWorkload:
    if trace.requests < 2:
        raise InputError(f"trace '{trace.source}' has {trace.requests} request(s); a rate needs at least 2",
                         "point --trace at a trace with requests")
    span = float(trace.arrival_s[-1] - trace.arrival_s[0])
    if span <= 0:
        raise InputError(f"trace '{trace.source}': every request arrives at once, so it has no rate",
                         "pass --qps to give the rate")
    rate = qps if qps is not None else (trace.requests - 1) / span
    notes = [f"workload from {trace.source}: {trace.requests:,} requests over {span:,.0f} s"]
    if arrival_cv is not None:
        scv = arrival_cv**2
    else:
        scv = arrival_scv(trace.arrival_s)
        tied = tied_share(trace.arrival_s)
        notes.append(f"arrival burstiness ca² = {scv:.2f} from the inter-arrival gaps (pass --arrival-cv to override)"
                     + (f"; {tied:.0%} of requests share the timestamp of the one before (counted as arriving "
                        "together, as a replay of the trace has them)" if tied >= 0.05 else ""))
    if qps is not None:
        notes.append(f"rate {qps:g} req/s given (--qps); the trace's lengths are used")
    isl = np.sort(trace.isl.astype(np.float64))
    if np.unique(isl).size <= BINS:
        values, counts = np.unique(isl, return_counts=True)
        weights = counts / counts.sum()
    else:
        tail = max(BINS // 2, math.ceil(TAIL * isl.size))
        groups = np.array_split(isl[:-tail], BINS // 2) + np.array_split(isl[-tail:], BINS // 2)
        values = np.array([g.mean() for g in groups])
        weights = np.array([g.size for g in groups], dtype=np.float64) / isl.size
    return PDWorkload(float(rate), scv, values, weights, float(trace.osl.mean()), float(trace.osl.max()),
                      float(isl.max()), str(trace.source), tuple(notes), float(np.percentile(trace.osl, 99)))


def trace_hit_fraction(trace, cache_tokens: float, given: float) -> tuple[float, str]:
    """The cached-prefix share from a block trace's LRU prefix hit curve at a cache of ``cache_tokens``.

    :func:`kvplan.workload.reuse.reuse_profile`: the share of prompt blocks that hit with every earlier
    block of their request (vLLM / SGLang prefix semantics) in an LRU cache of ⌊C / block⌋ blocks.
    """
    if trace is None:
        raise InputError("--prefix-cache-tokens reads the hit curve of a trace", "give --trace FILE with hash_ids, "
                         "or --cached-prefix-fraction for a share you know")
    if given:
        raise InputError("give --cached-prefix-fraction or --prefix-cache-tokens, not both",
                         "--prefix-cache-tokens derives the fraction from the trace")
    if not cache_tokens > 0:
        raise InputError(f"--prefix-cache-tokens must be > 0 (got {cache_tokens})", "e.g. 100M tokens")
    from kvplan.workload.reuse import capacity_blocks, reuse_profile

    profile = reuse_profile(trace)
    rate = float(profile.prefix_hit_rate(capacity_blocks(cache_tokens, profile.block_tokens)))
    fraction = min(rate, 0.999)
    return fraction, (f"cached prefix fraction {fraction:.3g}: the trace's LRU prefix hit rate at a cache of "
                      f"{cache_tokens:,.0f} tokens ({profile.block_tokens}-token blocks, {profile.unique_blocks:,} "
                      "distinct)")


# --------------------------------------------------------------------------- per-side models


@dataclass
class PrefillModel:
    """One prefill instance of ``tp × dp`` GPUs: service time per ISL bin and its KV budget per GPU.

    With attention data parallelism each of the ``dp`` ranks runs its own prompt: the instance
    is ``dp`` servers of the prefill queue (``servers``), each with the service time ``service_s``.
    """

    tp: int
    service_s: np.ndarray
    weights: np.ndarray
    kv_budget_bytes_per_gpu: float
    weights_bytes_per_gpu: float
    prompt_fits: bool
    dp: int = 1
    request_dispatch_s: float = 0.0   # the engine's prefill dispatch once per request: in TTFT, not in service_s

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def mean_s(self) -> float:
        return float((self.service_s * self.weights).sum())

    @property
    def scv(self) -> float:
        second = float((self.service_s**2 * self.weights).sum())
        return max(second / self.mean_s**2 - 1.0, 0.0)


@dataclass
class DecodeModel:
    """One decode instance of ``tp × dp`` GPUs: step time per batch, KV per request, KV budget per GPU.

    ``batch`` counts the instance's sequences (spread evenly over its ``dp`` attention ranks, so
    per-GPU KV figures are a rank's share: ``kv_request_bytes_per_gpu`` and the staging figure are
    per request ÷ dp); ``max_num_seqs`` is the engine cap × dp (one engine core per DP rank).
    """

    tp: int
    batch: np.ndarray          # dp, 2 dp, … batch cap (one sequence per rank and up)
    step_s: np.ndarray
    kv_budget_bytes_per_gpu: float
    weights_bytes_per_gpu: float
    kv_request_bytes_per_gpu: float     # mean over a request's decode life, a rank's share
    kv_longest_bytes_per_gpu: float     # the longest request at its last token, on its rank
    receive_bytes_per_gpu: np.ndarray   # per ISL bin: what one request lands on each GPU of its rank
    context: float
    max_num_seqs: int
    dp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    def step_at(self, b) -> np.ndarray:
        """Step time at a (continuous) batch b: linear between the tabulated integers, T(1) below 1."""
        return np.interp(np.maximum(b, 1.0), self.batch, self.step_s)

    @property
    def batch_cap(self) -> float:
        return float(self.batch[-1])


@dataclass
class TransferModel:
    """P→D transfer per ISL bin for one (prefill TP, decode TP) pair over one path."""

    bytes: np.ndarray          # per request, into the decode instance (all its GPUs)
    links: int                 # n = min(tp_p, tp_d)
    link_bytes_per_s: float    # effective, per GPU
    latency_s: float
    transfer_s: np.ndarray     # latency + bytes / (n × bandwidth)
    exposed_s: np.ndarray      # not hidden behind prefill
    notes: tuple[str, ...] = field(default=())


def prefill_service_s(cost: ModelCost, machine, isl, cached_fraction: float, tp: int, dp: int = 1,
                      overlap_comm: bool = False, steps: StepTimes | None = None) -> np.ndarray:
    """Prefill of prompts of ``isl`` tokens whose first ⌊F·isl⌋ tokens are cached (one pass each, one per DP rank).

    ``steps``: the deployment's step-time model (per-operator by default); None is the roofline.
    """
    s = np.asarray(isl, dtype=np.float64)
    if steps is not None:
        return steps.suffix_prefill_s(np.floor(cached_fraction * s), s)
    return suffix_prefill_s(cost, machine, np.floor(cached_fraction * s), s, tp=tp, dp=dp, overlap_comm=overlap_comm)


def decode_table(cost: ModelCost, machine, tp: int, context: float, batch_cap: int, dp: int = 1,
                 overlap_comm: bool = False, steps: StepTimes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Step time at instance batches ``dp × j``, j = 1 … ⌈cap/dp⌉ (j sequences on every attention rank).

    dp = 1 is every batch 1 … cap. The roofline runs the ``dp`` ranks as ``ep = dp`` (attention data
    parallel, experts over the instance; :func:`kvplan.calc.roofline.decode_step`); ``steps`` (the
    deployment's step-time model, per-operator by default) replaces it.
    """
    per_rank = max(math.ceil(max(batch_cap, 1) / dp), 1)
    batch = dp * np.arange(1, per_rank + 1, dtype=np.float64)
    if steps is not None:
        return batch, steps.decode_s(batch, context)
    return batch, decode_step(cost, machine, batch, context, tp=tp, ep=dp, overlap_comm=overlap_comm).time_s


def pool_models(setup, workload: PDWorkload, machine_of=None, only: tuple | None = None):
    """Prefill and decode models per shape of ``setup``'s pools (:mod:`kvplan.plans.pd.plan`), each timed by its
    deployment's step-time model (``Deployment.steps``); ``machine_of(dep)`` replaces the deployment's machine
    (placements: other links); ``only`` = (prefill shape, decode shape) restricts to one pair."""
    machine_of = machine_of or (lambda dep: dep.machine)
    prefill = {}
    ov = setup.overlap_comm
    for shape, dep in setup.prefill.deployments.items():
        if only is not None and shape != only[0]:
            continue
        pool, tp, dp = dep.pool.bytes_per_gpu, shape.tp, shape.dp
        service = prefill_service_s(dep.cost, machine_of(dep), workload.isl, setup.cached_fraction, tp, dp, ov,
                                    steps=dep.steps.with_machine(machine_of(dep), ov or dep.steps.overlap_comm)
                                    .with_dp_imbalance(1.0))
        if setup.prefix_read_bytes_per_s and setup.cached_fraction:
            load = np.floor(setup.cached_fraction * workload.isl) * dep.layout.bytes_per_token_per_gpu \
                / setup.prefix_read_bytes_per_s
            service = service + exposed_transfer_s(load, service, setup.card.num_layers)
        fits = float(dep.layout.sequence_bytes(workload.isl_max, per_gpu=True)) <= pool
        prefill[shape] = PrefillModel(tp, service, workload.weights, pool, dep.memory.weights_bytes_per_gpu, fits,
                                      dp, dep.steps.request_dispatch_s)
    decode = {}
    context = workload.isl_mean + workload.osl_mean / 2
    for shape, dep in setup.decode.deployments.items():
        if only is not None and shape != only[1]:
            continue
        pool, layout, tp, dp = dep.pool.bytes_per_gpu, dep.layout, shape.tp, shape.dp
        per_request = float((layout.sequence_bytes(workload.isl + workload.osl_mean / 2, per_gpu=True)
                             * workload.weights).sum())
        longest = float(layout.sequence_bytes(workload.isl_max + workload.osl_max, per_gpu=True))
        seqs = dep.engine.max_num_seqs  # the engine's cap on this side's GPU (its default where none was given)
        cap = int(min(seqs, pool // per_request)) if per_request > 0 else seqs
        batch, step = decode_table(dep.cost, machine_of(dep), tp, context, max(cap, 1) * dp, dp, ov,
                                   steps=dep.steps.with_machine(machine_of(dep), ov or dep.steps.overlap_comm)
                                    .with_dp_imbalance(1.0))
        decode[shape] = DecodeModel(tp, batch, step, pool, dep.memory.weights_bytes_per_gpu, per_request / dp,
                                    longest, layout.sequence_bytes(workload.isl, per_gpu=True), context,
                                    seqs * dp, dp)
    return prefill, decode


def transfer_model(receive_bytes_per_gpu: np.ndarray, decode_tp: int, prefill_tp: int, prefill_s: np.ndarray,
                   layers: float, link_bytes_per_s: float, latency_s: float) -> TransferModel:
    """Bytes, time and exposed time of one P→D transfer per ISL bin (see the module docstring)."""
    total = receive_bytes_per_gpu * decode_tp
    links = min(prefill_tp, decode_tp)
    moving = total / (links * link_bytes_per_s)
    exposed = exposed_transfer_s(moving, prefill_s, layers, latency_s)
    return TransferModel(total, links, link_bytes_per_s, latency_s, latency_s + moving, exposed)


def valid_tps(card, tps, domain: float, side: str) -> tuple[list[int], list[str]]:
    """TP sizes the model's heads allow and the scale-up domain holds; the rest are dropped with a note."""
    ok, notes = [], []
    for t in tps:
        try:
            check_parallel(card, int(t), 1)
        except KvplanError as exc:
            notes.append(f"{side} tp={t} skipped: {exc.message}")
            continue
        if t > domain:
            notes.append(f"{side} tp={t} skipped: larger than the scale-up domain ({domain:g} GPUs)")
            continue
        ok.append(int(t))
    return ok, notes


def receive_bytes(card, engine, kv_dtype: str, tp: int, isl) -> np.ndarray:
    """KV of ``isl`` tokens on one decode GPU, as the engine stores it (paged)."""
    return kv_layout(card, engine, kv_dtype, tp).sequence_bytes(isl, per_gpu=True)

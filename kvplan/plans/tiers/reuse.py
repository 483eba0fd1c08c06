"""Where a tier plan's reuse comes from: a trace with ``hash_ids``, or a flag-defined workload.

A trace gives the requests as they came. Flags (rate, ISL/OSL, turns, think time, shared system
prompt) give a :class:`kvplan.workload.synthetic.Workload`, sampled into a trace with Mooncake-style
block ids (:mod:`kvplan.workload.sampling`), so both paths share the exact LRU machinery of
:mod:`kvplan.workload.reuse`.

Little's law for the capacity that holds reusable KV until it is reused (L = λW):

- trace: every reuse of a block ``b`` at time ``t`` after its previous use at ``p`` kept ``b`` for
  ``t − p``; the mean number of blocks waiting for their next use is ``Σ (t − p) / duration``, and
  the tokens are that × block size (the capacity an oracle would need; LRU needs somewhat more).
- flags: shared prefix ``S`` (held once) + sessions between turns × their history:
  ``S + λ_sessions (T − 1) θ × T/2 (μN + μO)`` (:meth:`Workload.session_cache_tokens_mean`).
- RAG documents (single-turn requests): each request carries one of ``D`` documents of ``T_doc``
  tokens after the shared prefix, document ``d`` with Zipf popularity ``p_d ∝ d^(−s)``. Document d is
  reused at rate ``λ p_d`` and waits ``1 / (λ p_d)`` for it, so Little's law holds ``T_doc`` tokens of
  every document: ``S + D × T_doc`` (what an oracle keeps; LRU keeps the popular ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvplan.errors import InputError
from kvplan.workload.reuse import ReuseProfile, reuse_profile
from kvplan.workload.summary import interarrival_stats
from kvplan.workload.synthetic import Workload
from kvplan.workload.traces import Trace, make_trace, read_trace


@dataclass(frozen=True, eq=False)
class ReuseInput:
    """Requests with prompt blocks, their arrival rate, and the reuse profile over them."""

    trace: Trace
    profile: ReuseProfile
    rate_per_s: float
    label: str
    littles_law_tokens: float
    littles_law_basis: str
    spec: Workload | None = None
    lengths_are_spec: bool = True  # False once RAG documents lengthen the sampled prompts

    @property
    def fleet_spec(self) -> Workload | None:
        """The flag workload ``kvplan plan`` would sample for the same flags (None for a trace or RAG prompts)."""
        return self.spec if self.lengths_are_spec else None

    @property
    def block_tokens(self) -> int:
        return self.trace.block_tokens

    @property
    def block_access_rate_per_s(self) -> float:
        return self.rate_per_s * self.trace.block_ids.size / max(self.trace.requests, 1)


def from_trace(trace: str | Path | Trace, *, trace_format: str = "auto") -> ReuseInput:
    """A Mooncake-style trace; without ``hash_ids`` reuse cannot be measured (one clear error)."""
    if not isinstance(trace, Trace):
        trace = read_trace(trace, trace_format=trace_format)
    name = Path(trace.source).name or trace.source
    if not trace.has_blocks:
        raise InputError(
            f"{name}: reuse needs hash_ids (ids of each prompt's 512-token blocks), and this "
            f"{trace.trace_format or 'trace'} trace has none (its rows carry lengths only)",
            "give a Mooncake-style JSONL trace with hash_ids, or describe the reuse with flags: "
            "--qps --isl --osl --turns --think-time --system-prompt-tokens")
    if trace.requests < 2:
        raise InputError(f"{name}: a tier plan needs at least 2 requests to measure a rate (got {trace.requests})")
    rate, _ = interarrival_stats(trace.arrival_s)
    if rate is None:
        raise InputError(f"{name}: every request has the same timestamp, so the arrival rate is undefined",
                         "use a trace with arrival times")
    profile = reuse_profile(trace)
    duration = float(trace.arrival_s[-1] - trace.arrival_s[0])
    held = reuse_holding_blocks(trace) * trace.block_tokens if duration > 0 else 0.0
    return ReuseInput(trace, profile, rate, f"{name} ({trace.requests:,} requests)", held,
                      "Σ reuse intervals / duration × block tokens (from the trace)")


def from_workload(spec: Workload, *, sample_requests: int = 50_000, seed: int = 0) -> ReuseInput:
    """A flag-defined workload, sampled (seeded) into a trace with block ids."""
    if sample_requests < 2:
        raise InputError(f"--sample must be >= 2 (got {sample_requests})")
    trace = spec.sample(sample_requests, seed)
    held = spec.shared_prefix_tokens + spec.session_cache_tokens_mean()
    label = (f"flags: {spec.rate_per_s:g} req/s, {spec.turns} turn(s), think {spec.think_time_s:g} s, "
             f"shared prefix {spec.shared_prefix_tokens:,} tokens ({sample_requests:,} sampled requests, seed {seed})")
    return ReuseInput(trace, reuse_profile(trace), spec.rate_per_s, label, float(held),
                      "S + λ_sessions (T − 1) θ × T/2 (μN + μO) (closed form)", spec)


def with_rag_documents(reuse: ReuseInput, documents: int, document_tokens: int, zipf_s: float = 1.0,
                       seed: int = 0) -> ReuseInput:
    """Insert one of ``documents`` RAG documents (Zipf popularity) after the shared prefix of every request.

    Block ids follow the Mooncake rule (equal id = equal prefix up to that block): the shared prefix's
    full blocks keep their ids, blocks that end inside ``shared + document`` are named by (document,
    block index), and the blocks after them (the user's own tokens) are new in every request.
    """
    spec = reuse.spec
    if spec is None or spec.turns != 1:
        raise InputError("RAG documents are modelled for single-turn requests (--turns 1)",
                         "drop --turns, or describe sessions without --rag-docs")
    if documents < 1 or document_tokens < 1 or zipf_s < 0:
        raise InputError(f"--rag-docs and --rag-doc-tokens must be >= 1 and --rag-zipf >= 0 "
                         f"(got {documents}, {document_tokens}, {zipf_s:g})")
    trace, bt, shared = reuse.trace, reuse.block_tokens, spec.shared_prefix_tokens
    rng = np.random.default_rng(seed)
    weights = np.arange(1, documents + 1, dtype=np.float64) ** -zipf_s
    doc = rng.choice(documents, size=trace.requests, p=weights / weights.sum())
    isl = trace.isl + document_tokens
    shared_full, doc_end = shared // bt, (shared + document_tokens) // bt
    total = -(-isl // bt)
    offsets = np.concatenate(([0], np.cumsum(total))).astype(np.int64)
    request = np.repeat(np.arange(trace.requests), total)
    index = np.arange(offsets[-1]) - offsets[:-1][request]
    per_doc = max(doc_end - shared_full, 0)
    fresh_start = shared_full + documents * per_doc
    ids = np.where(index < shared_full, index,
                   np.where(index < doc_end, shared_full + doc[request] * per_doc + (index - shared_full),
                            fresh_start + np.arange(offsets[-1])))
    rag = make_trace(trace.arrival_s, isl, trace.osl, block_offsets=offsets, block_ids=ids, block_tokens=bt,
                     source="synthetic+rag", trace_format="synthetic")
    label = f"{reuse.label}; RAG: {documents:,} documents × {document_tokens:,} tokens, Zipf s = {zipf_s:g}"
    held = shared + documents * document_tokens
    return ReuseInput(rag, reuse_profile(rag), reuse.rate_per_s, label, float(held),
                      "S + D × T_doc (Little's law: each document held until its reuse)", spec, False)


def reuse_holding_blocks(trace: Trace) -> float:
    """Little's law over block reuses: ``Σ (t_next − t) / duration`` blocks held until their next use."""
    ids, offsets = trace.block_ids, trace.block_offsets
    if ids.size < 2:
        return 0.0
    times = np.repeat(trace.arrival_s, np.diff(offsets))
    order = np.argsort(ids, kind="stable")
    same = ids[order[1:]] == ids[order[:-1]]
    gaps = times[order[1:]][same] - times[order[:-1]][same]
    duration = float(trace.arrival_s[-1] - trace.arrival_s[0])
    return float(gaps.sum() / duration) if duration > 0 else 0.0


def request_hit_blocks(reuse: ReuseInput, capacity_blocks) -> np.ndarray:
    """Prefix-hit blocks of every request for each LRU capacity: shape (capacities, requests)."""
    trace, profile = reuse.trace, reuse.profile
    caps = np.minimum(np.asarray(capacity_blocks, dtype=np.int64), profile.accesses)  # first touches never hit
    request = np.repeat(np.arange(trace.requests), np.diff(trace.block_offsets))
    out = np.empty((caps.size, trace.requests))
    for i, c in enumerate(caps):
        out[i] = np.bincount(request, weights=profile.prefix_distance < c, minlength=trace.requests)
    return out


def reuse_input(*, trace: str | Path | None = None, trace_format: str = "auto", rate_per_s: float | None = None,
                isl: str | None = None, osl: str | None = None, arrival_cv: float = 1.0, turns: int = 1,
                think_time: str = "0s", shared_prefix: str = "0", rag_docs: int | None = None,
                rag_doc_tokens: str = "4k", rag_zipf: float = 1.0, sample_requests: int = 50_000,
                seed: int = 0) -> ReuseInput:
    """The tier planner's workload: a trace with ``hash_ids``, or the flag workload (and its RAG corpus).

    Exactly one of ``trace`` or (``rate_per_s``, ``isl``, ``osl``); ``rag_docs`` only with the flags.
    Durations and token counts are read here (``think_time`` "30s", ``rag_doc_tokens`` "4k"),
    and only when the workload they belong to is the one given.
    """
    flags = any(v is not None for v in (rate_per_s, isl, osl))
    if rag_docs is not None and trace is not None:
        raise InputError("--rag-docs describes a flag workload; a trace carries its own reuse")
    if trace is not None and flags:
        raise InputError("give --trace or workload flags (--qps/--isl/--osl), not both")
    if trace is not None:
        return from_trace(trace, trace_format=trace_format)
    if rate_per_s is None or isl is None or osl is None:
        raise InputError("no workload: give --trace FILE, or --qps, --isl and --osl",
                         "e.g. kvplan tier llama-3.1-70b --system hgx-h100-8 --trace conversation_trace.jsonl")
    from kvplan.units import parse_tokens
    from kvplan.workload.synthetic import workload_from_flags

    spec = workload_from_flags(rate_per_s=rate_per_s, isl=isl, osl=osl, arrival_cv=arrival_cv, turns=turns,
                               think_time=think_time, shared_prefix=shared_prefix)
    reuse = from_workload(spec, sample_requests=sample_requests, seed=seed)
    if rag_docs is not None:
        reuse = with_rag_documents(reuse, rag_docs, parse_tokens(rag_doc_tokens), rag_zipf, seed)
    return reuse

"""``kvplan route``'s inputs and its one library call: the workload, the deployment, the answer.

- ``route_workload``: a trace file, or the flag workload sampled into one (with a RAG corpus
  when ``rag_docs`` is given, ``tiers.reuse.with_rag_documents``);
- ``route_service``: the deployment behind the router (``service.ServiceModel``) with its SLOs
  and the links KV migration is priced over (``migration.links_for``);
- ``route_answer``: the policies to compare (all of them, less those the trace or the missing
  service times cannot run, each said in a note), then ``plan.route``.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import InputError
from kvplan.result import Result
from kvplan.units import parse_seconds, parse_tokens
from kvplan.workload.traces import Trace


def route_workload(trace_path: Path | None, *, trace_format: str = "auto", rate: float | None = None,
                   isl: str | None = None, osl: str | None = None, arrival_cv: float = 1.0, turns: int = 1,
                   think_time: str = "0s", shared_prefix: str = "0", sample: int = 10_000, seed: int = 0,
                   rag_docs: int | None = None, rag_doc_tokens: str = "4k", rag_zipf: float = 1.0) -> Trace:
    """The trace the router replays: ``trace_path`` read, or the flag workload sampled (seeded)."""
    if trace_path is not None:
        from kvplan.workload.traces import read_trace

        return read_trace(trace_path, trace_format=trace_format)
    if rate is None or isl is None or osl is None:
        raise InputError("no workload: give a TRACE file, or --rate, --isl and --osl (with --turns for sessions)",
                         "e.g. kvplan route conversation_trace.jsonl --cache-tokens 3M --service-time 20s")
    from kvplan.workload.synthetic import workload_from_flags

    spec = workload_from_flags(rate_per_s=rate, isl=isl, osl=osl, arrival_cv=arrival_cv, turns=turns,
                               think_time=think_time, shared_prefix=shared_prefix)
    if sample < 2:
        raise InputError(f"--sample must be >= 2 (got {sample})")
    if rag_docs is not None:
        from kvplan.plans.tiers.reuse import from_workload, with_rag_documents

        return with_rag_documents(from_workload(spec, sample_requests=sample, seed=seed), rag_docs,
                                  parse_tokens(rag_doc_tokens), rag_zipf, seed).trace
    return spec.sample(sample, seed)


def route_service(model: str, hardware: str, trace: Trace, *, slos: dict, tp: int, settings,
                  system: str | None = None, link_system=(), cards: tuple = ()):
    """The deployment behind the router over ``trace`` (``slos`` by kind; ``settings``: ``EngineSettings``)."""
    from kvplan.plans.fleet.aggregated import Shape
    from kvplan.plans.route.migration import links_for
    from kvplan.plans.route.service import ServiceModel

    links = links_for(hardware, system, link_system or (), cards)
    return ServiceModel(model, hardware, trace, slos, Shape(tp, 1), settings, system=system, links=links, cards=cards)


def route_answer(trace: Trace, counts, names: list[str] | None, *, cache_tokens: str | None = None,
                 service_time: str | None = None, service=None, router=None) -> Result:
    """Every policy (``names``, default: all the trace and service times allow) at every N in ``counts``."""
    from kvplan.plans.route.plan import RouterSettings, route
    from kvplan.plans.route.policies import LOAD_POLICIES, POLICIES, PREFIX_POLICIES

    skipped: list[str] = []
    if names is None:
        no_blocks = [] if trace.has_blocks else list(PREFIX_POLICIES)
        no_loads = [] if service is not None or service_time is not None else [
            p for p in LOAD_POLICIES if p not in no_blocks]
        names = [p for p in POLICIES if p not in no_blocks + no_loads]
        if no_blocks:
            skipped.append(f"{', '.join(no_blocks)} left out: the trace has no hash_ids")
        if no_loads:
            skipped.append(f"{', '.join(no_loads)} left out: no service times (give a deployment MODEL HARDWARE "
                           "or --service-time)")
    size = parse_tokens(cache_tokens, allow_zero=True) if cache_tokens is not None else None
    if service is not None and size is not None:
        service.cache_tokens = size
    result = route(trace, counts, names, cache_tokens=size,
                   service_time_s=parse_seconds(service_time) if service_time is not None else None,
                   service=service, router=router or RouterSettings())
    result.assumptions += skipped
    return result

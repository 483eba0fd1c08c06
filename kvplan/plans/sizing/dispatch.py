"""The engine's host dispatch of an eager prefill forward, resolved for one deployment's per-operator pass.

An engine that captures CUDA graphs for decode batches runs a prefill (or mixed) forward of more tokens
than it captured eagerly: one Python dispatch of each layer's kernels, once per forward. kvplan charges

    dispatch = L × t_layer   per prefill / mixed forward of n tokens per attention rank, when
               n > the engine's largest captured size (vLLM V1: its piecewise graphs cover smaller
               forwards) or always (SGLang: graphs for decode batches only); 0 on decode steps

with t_layer from the engine profile (:data:`kvplan.engines.PREFILL_DISPATCH`: vLLM 0.8 ms, NVIDIA
aiconfigurator's figure; SGLang the same figure standing in; TensorRT-LLM 0) or ``--prefill-overhead``.
aiconfigurator adds its term once per request to TTFT; kvplan charges it on each eager forward, so a
prompt chunked into several forwards pays it once per chunk and a mixed step once.
"""

from __future__ import annotations

import dataclasses
import math

from kvplan.engines import prefill_dispatch
from kvplan.errors import InputError


def check_prefill_overhead(value: float | None) -> None:
    """``--prefill-overhead`` is a duration per layer, 0 … 1 h as a card's latencies (one InputError otherwise)."""
    from kvplan.cards.schema import MAX_LATENCY_S

    if value is not None and (not math.isfinite(value) or value < 0 or value > MAX_LATENCY_S):
        raise InputError(f"--prefill-overhead must be >= 0 and at most 1 h (got {value:g} s)",
                         "host dispatch per layer of an eager prefill forward, e.g. 0.8ms; 0 charges none")


def with_prefill_dispatch(effs, engine: str, graph_sizes: tuple[int, ...], given_s: float | None, layers: float,
                          notes: list[str]):
    """``effs`` (an :class:`kvplan.calc.operators.OperatorEfficiencies`) with the engine's eager-prefill dispatch
    (``given_s`` per layer where given); the note says which figure, which forwards and the source, once."""
    check_prefill_overhead(given_s)
    profile = prefill_dispatch(engine) if engine else None
    per_layer = given_s if given_s is not None else (profile.per_layer_s if profile else 0.0)
    covered = bool(profile and profile.graphs_cover_prefill and graph_sizes)
    above = float(max(graph_sizes)) if covered else 0.0
    which = (f"prefill and mixed forwards of more than {above:,.0f} tokens per rank (the largest CUDA-graph size; "
             "smaller ones replay the graphs)" if covered else "every prefill and mixed forward (CUDA graphs for "
             "decode batches only)")
    if given_s is not None:
        notes.append(f"prefill dispatch: --prefill-overhead {given_s * 1e3:g} ms per layer × {layers:g} layers = "
                     f"{per_layer * layers * 1e3:.4g} ms on {which}, once per forward; decode steps none")
    elif profile is not None and per_layer > 0:
        notes.append(f"{engine} prefill dispatch: {layers:g} layers × {per_layer * 1e3:g} ms = "
                     f"{per_layer * layers * 1e3:.4g} ms on {which}, once per forward; decode steps none "
                     f"({profile.source}); --prefill-overhead overrides (0 for none)")
    elif profile is not None:
        notes.append(f"{engine} prefill dispatch: none ({profile.source}); --prefill-overhead charges one")
    return dataclasses.replace(effs, dispatch_per_layer_s=float(per_layer), eager_above_tokens=above)


__all__ = ["with_prefill_dispatch", "check_prefill_overhead"]

"""The engine's host dispatch of an eager prefill forward, resolved for one deployment's per-operator pass.

An engine that captures CUDA graphs for decode batches runs a prefill (or mixed) forward of more tokens
than it captured eagerly: one Python dispatch of each layer's kernels, once per forward. kvplan charges

    dispatch = L × t_layer   per prefill / mixed forward of n tokens per attention rank, when
               n > the engine's largest captured size (vLLM V1: its piecewise graphs cover smaller
               forwards) or always (SGLang: graphs for decode batches only); 0 on decode steps the
               graphs hold. A decode batch of more sequences per rank than the largest captured size (vLLM:
               512, "larger batches run without a graph") runs eagerly too: max(GPU step, L × t_layer), below

with t_layer from the engine profile (:data:`kvplan.engines.PREFILL_DISPATCH`: vLLM 0.8 ms, NVIDIA
aiconfigurator's figure; SGLang the same figure standing in; TensorRT-LLM 0) or ``--prefill-overhead``.
aiconfigurator adds its term once per request to TTFT; kvplan charges it on each eager forward, so a
prompt chunked into several forwards pays it once per chunk and a mixed step once.

``--enforce-eager`` (vLLM's ``--enforce-eager``, SGLang's ``--disable-cuda-graph``, TensorRT-LLM's PyTorch backend
without ``use_cuda_graph``): no CUDA graphs at all. Every prefill and mixed forward pays the dispatch above (none is
covered by a graph), decode batches run unpadded, and each decode step is host-bound below the dispatch:

    eager decode step = max(GPU step, L × t_layer)

because kernel launches are asynchronous: the GPU runs each kernel as soon as the host has queued it, so the
step takes the longer of the two, not their sum (the additive prefill term is aiconfigurator's calibrated TTFT
correction, kept as it is). t_layer: ``--prefill-overhead`` where given (one per-layer figure for every eager
forward), else the engine's (:func:`kvplan.engines.eager_decode_dispatch`: vLLM's 0.8 ms, standing in for
SGLang and TensorRT-LLM, which publish none).
"""

from __future__ import annotations

import dataclasses
import math

from kvplan.engines import eager_decode_dispatch, prefill_dispatch
from kvplan.errors import InputError


def check_prefill_overhead(value: float | None) -> None:
    """``--prefill-overhead`` is a duration per layer, 0 … 1 h as a card's latencies (one InputError otherwise)."""
    from kvplan.cards.schema import MAX_LATENCY_S

    if value is not None and (not math.isfinite(value) or value < 0 or value > MAX_LATENCY_S):
        raise InputError(f"--prefill-overhead must be >= 0 and at most 1 h (got {value:g} s)",
                         "host dispatch per layer of an eager prefill forward, e.g. 0.8ms; 0 charges none")


def check_enforce_eager(enforce_eager: bool, engine: str | None, perf_model: str = "operators") -> None:
    """``--enforce-eager`` needs a serving engine's profile and the per-operator model (one InputError otherwise)."""
    if not enforce_eager:
        return
    if perf_model != "operators":
        raise InputError("--enforce-eager applies to the per-operator step model (got --perf-model roofline)",
                         "drop --perf-model roofline, or drop --enforce-eager: the roofline charges no host dispatch")
    if not engine or eager_decode_dispatch(engine) is None:
        raise InputError(f"--enforce-eager needs a serving engine (got --engine {ascii(engine or '')})",
                         "use --engine vllm, sglang or trtllm: hf and ideal model no CUDA graphs to turn off")


def with_prefill_dispatch(effs, engine: str, graph_sizes: tuple[int, ...], given_s: float | None, layers: float,
                          notes: list[str], enforce_eager: bool = False):
    """``effs`` (an :class:`kvplan.calc.operators.OperatorEfficiencies`) with the engine's eager-prefill dispatch
    (``given_s`` per layer where given); the note says which figure, which forwards and the source, once.
    ``enforce_eager``: no CUDA graphs (pass ``graph_sizes`` ``()``): decode steps pay ``max(GPU, L × t_layer)`` too."""
    check_prefill_overhead(given_s)
    check_enforce_eager(enforce_eager, engine)
    profile = prefill_dispatch(engine) if engine else None
    per_layer = given_s if given_s is not None else (profile.per_layer_s if profile else 0.0)
    covered = bool(profile and profile.graphs_cover_prefill and graph_sizes)
    above = float(max(graph_sizes)) if covered else 0.0
    which = (f"prefill and mixed forwards of more than {above:,.0f} tokens per rank (the largest CUDA-graph size; "
             "smaller ones replay the graphs)" if covered else "every prefill and mixed forward (" + (
                 "--enforce-eager: no CUDA graphs)" if enforce_eager else "CUDA graphs for decode batches only)"))
    # decode batches beyond the largest captured one run without a graph too (vLLM: "larger batches run without a
    # graph", vllm/config/vllm.py _set_cudagraph_sizes): the same per-layer figure, in the eager decode form
    decode_above = float(max(graph_sizes)) if graph_sizes and per_layer > 0 and not enforce_eager else 0.0
    decode = (f"decode batches of more than {decode_above:,.0f} sequences per rank (no CUDA graph that large) take "
              f"max(GPU step, {per_layer * layers * 1e3:.4g} ms), smaller ones none" if decode_above else
              "decode steps none")
    if given_s is not None:
        notes.append(f"prefill dispatch: --prefill-overhead {given_s * 1e3:g} ms per layer × {layers:g} layers = "
                     f"{per_layer * layers * 1e3:.4g} ms on {which}, once per forward; {decode}")
    elif profile is not None and per_layer > 0:
        notes.append(f"{engine} prefill dispatch: {layers:g} layers × {per_layer * 1e3:g} ms = "
                     f"{per_layer * layers * 1e3:.4g} ms on {which}, once per forward; {decode} "
                     f"({profile.source}); --prefill-overhead overrides (0 for none)")
    elif profile is not None:
        notes.append(f"{engine} prefill dispatch: none ({profile.source}); --prefill-overhead charges one")
    decode_per_layer = per_layer if decode_above else 0.0
    if enforce_eager:
        figure, source = eager_decode_dispatch(engine)
        decode_per_layer = given_s if given_s is not None else figure
        where = f"--prefill-overhead {given_s * 1e3:g} ms per layer" if given_s is not None else source
        notes.append(f"eager decode (--enforce-eager: no CUDA graphs, decode batches unpadded): each decode step = "
                     f"max(GPU step, {layers:g} layers × {decode_per_layer * 1e3:g} ms = "
                     f"{decode_per_layer * layers * 1e3:.4g} ms of host dispatch): launches are asynchronous, so "
                     f"the step waits on the host only where dispatch outlasts the GPU work ({where})")
    return dataclasses.replace(effs, dispatch_per_layer_s=float(per_layer), eager_above_tokens=above,
                               decode_dispatch_per_layer_s=float(decode_per_layer), eager_decode_above=decode_above)


__all__ = ["with_prefill_dispatch", "check_prefill_overhead", "check_enforce_eager"]

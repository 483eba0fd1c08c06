"""The engine's host dispatch of a prefill, resolved for one deployment's per-operator pass.

An engine that captures CUDA graphs for decode batches runs a prefill (or mixed) forward of more tokens than
it captured without a graph: one Python dispatch of each layer's kernels. NVIDIA aiconfigurator charges that
as ``L × t_layer`` once per request, added to its TTFT and to no step time (``sdk/backends/base_backend.py`` at
095f58a: ``_ttft_per_request = _prefill_step_ms × ⌈ISL / ctx_tokens⌉ + _prefill_dispatch_overhead_ms``; the mix
steps and TPOT do not carry it), and kvplan follows that form:

    TTFT += d = L × t_layer   once per request (a host delay before the engine schedules its prompt: the GPU
                               runs other requests meanwhile, the decoders sharing its steps do not wait)

with t_layer from the engine profile (:data:`kvplan.engines.PREFILL_DISPATCH`: vLLM 0.8 ms, NVIDIA
aiconfigurator's figure; SGLang the same figure standing in; TensorRT-LLM 0) or ``--prefill-overhead``. Every
TTFT kvplan derives carries it: ``latency``, the fleet closed form, the replay (open and closed loop), ``pd``'s
prefill pools and ``route``; no step time does (``OperatorEfficiencies.request_dispatch_s``).

Charging it instead on every eager forward, as kvplan did before, put 64 ms (Llama-3.1-70B) into every mixed
step of more than 512 tokens per rank: the decoders of those steps paid it, a plan's batch stopped where a step
of decoders and one prompt still fit vLLM's largest CUDA graph, and the README's 400-QPS Llama-3.1-70B fleet
needed 144 H100s instead of 112 at a TPOT p90 of 21 ms against a 50 ms SLO; no measured figure puts that
cost on the decoders' steps.

With CUDA graphs, vLLM runs a decode batch of more sequences per rank than its largest graph (512) without one
("larger batches run without a graph", vllm/config/vllm.py ``_set_cudagraph_sizes``), piecewise-compiled
(torch.compile's fused kernels, launched one by one). No figure is published for the host time of such a step; the
0.8 ms per layer is aiconfigurator's per-request TTFT calibration, not a launch cost per step, so kvplan charges
such a step its GPU time and says so (a step host-bound at L × 0.8 ms would cap every vLLM batch at 512 sequences
per rank, against vLLM's own ``max_num_seqs`` default of 1,024 on these GPUs).

``--enforce-eager`` (vLLM's ``--enforce-eager``, SGLang's ``--disable-cuda-graph``, TensorRT-LLM's PyTorch backend
without ``use_cuda_graph``): no CUDA graphs at all. Every prefill and mixed forward pays the dispatch as a step
term, once per forward (none is covered by a graph; the per-request TTFT term is then not added: the forwards
carry it), decode batches run unpadded, and each decode step is host-bound below the dispatch:

    eager decode step = max(GPU step, L × t_layer)

because kernel launches are asynchronous: the GPU runs each kernel as soon as the host has queued it, so the
step takes the longer of the two, not their sum. t_layer: ``--prefill-overhead`` where given (one per-layer
figure for every eager forward), else the engine's (:func:`kvplan.engines.eager_decode_dispatch`: vLLM's
0.8 ms, standing in for SGLang and TensorRT-LLM, which publish none).
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
    """``effs`` (an :class:`kvplan.calc.operators.OperatorEfficiencies`) with the engine's prefill dispatch
    (``given_s`` per layer where given) as a per-request TTFT term (``request_dispatch_s``); the note says which
    figure, where it is charged and the source, once. ``enforce_eager``: no CUDA graphs (pass ``graph_sizes``
    ``()``): every prefill / mixed forward pays it instead and decode steps pay ``max(GPU, L × t_layer)``.
    ``graph_sizes`` only name, in a note, the decode batches that run without a graph (the per-request term
    does not depend on them)."""
    check_prefill_overhead(given_s)
    check_enforce_eager(enforce_eager, engine)
    profile = prefill_dispatch(engine) if engine else None
    per_layer = given_s if given_s is not None else (profile.per_layer_s if profile else 0.0)
    where = (f"--prefill-overhead {given_s * 1e3:g} ms per layer" if given_s is not None
             else profile.source if profile is not None else "")
    decode_per_layer = 0.0
    if enforce_eager:
        if per_layer > 0:
            notes.append(f"prefill dispatch (--enforce-eager: no CUDA graphs): {layers:g} layers × "
                         f"{per_layer * 1e3:g} ms = {per_layer * layers * 1e3:.4g} ms on every prefill and mixed "
                         f"forward, once per forward ({where})")
        figure, source = eager_decode_dispatch(engine)
        decode_per_layer = given_s if given_s is not None else figure
        where = f"--prefill-overhead {given_s * 1e3:g} ms per layer" if given_s is not None else source
        notes.append(f"eager decode (--enforce-eager: no CUDA graphs, decode batches unpadded): each decode step = "
                     f"max(GPU step, {layers:g} layers × {decode_per_layer * 1e3:g} ms = "
                     f"{decode_per_layer * layers * 1e3:.4g} ms of host dispatch): launches are asynchronous, so "
                     f"the step waits on the host only where dispatch outlasts the GPU work ({where})")
        return dataclasses.replace(effs, dispatch_per_layer_s=float(per_layer),
                                   decode_dispatch_per_layer_s=float(decode_per_layer), request_dispatch_s=0.0)
    if per_layer > 0:
        label = "prefill dispatch" if given_s is not None else f"{engine} prefill dispatch"
        notes.append(f"{label}: {layers:g} layers × {per_layer * 1e3:g} ms = {per_layer * layers * 1e3:.4g} ms once "
                     f"per request, added to its TTFT (the host dispatch of a prefill no CUDA graph covers; no step "
                     f"time carries it, as in NVIDIA aiconfigurator's TTFT; {where})"
                     + ("" if given_s is not None else "; --prefill-overhead overrides (0 for none)"))
    elif profile is not None:
        notes.append(f"{engine} prefill dispatch: none ({profile.source}); --prefill-overhead charges one")
    if graph_sizes and per_layer > 0:
        notes.append(f"{engine} decode batches of more than {max(graph_sizes):,} sequences per rank run without a CUDA "
                     "graph (piecewise-compiled); no figure sizes their host time, so they take their GPU time "
                     "(--enforce-eager: every step max(GPU step, the per-layer dispatch))")
    return dataclasses.replace(effs, dispatch_per_layer_s=0.0, decode_dispatch_per_layer_s=0.0,
                               request_dispatch_s=float(per_layer * layers))


__all__ = ["with_prefill_dispatch", "check_prefill_overhead", "check_enforce_eager"]

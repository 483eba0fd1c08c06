"""Engine performance profiles: what differs between vLLM, SGLang and TensorRT-LLM in a step.

Each profile (:data:`ENGINE_PERF`) carries, with its source, the CUDA-graph sizes a decode batch is padded up
to, whether a step that carries prompt tokens replays a graph too (its tokens padded), the engine's
``max_num_seqs`` default and what the engine publishes of its per-step host work. A figure no engine
publishes is left out, and the notes say which default was used.
"""

from __future__ import annotations

from dataclasses import dataclass


def _vllm_graph_sizes(max_num_seqs: int = 256) -> tuple[int, ...]:
    top = min(max_num_seqs * 2, 512)
    return tuple([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, top + 1, 16)))


@dataclass(frozen=True)
class EnginePerf:
    """What an engine adds to a step: CUDA-graph padding of decode batches and its host overhead."""

    name: str
    cuda_graph_sizes: tuple[int, ...]
    graph_source: str
    max_num_seqs: int | None
    max_num_seqs_source: str
    overhead_per_seq_s: float | None = None
    overhead_source: str | None = None
    two_batch_overlap: bool = False
    host_work: str = ""           # what the engine's own documents say of its per-step CPU work (sourced), or that none is published
    mixed_graphs: bool = True     # a step carrying prompt tokens replays a (piecewise) graph, its tokens padded to a size
    mixed_graphs_source: str = ""


ENGINE_PERF: dict[str, EnginePerf] = {
    "vllm": EnginePerf(
        "vllm", _vllm_graph_sizes(256),
        "vllm/config/vllm.py _set_cudagraph_sizes: [1, 2, 4] + range(8, 256, 8) + range(256, min(2 × max_num_seqs, "
        "512) + 1, 16); larger batches run without a graph",
        None, "vLLM's max_num_seqs default depends on version, entry point and GPU; pass --max-num-seqs",
        host_work="vLLM publishes no per-step host time for its V1 engine (the v0.6.0 performance post gives "
        "shares of the run, not times): none is charged beyond the kernel-launch floor, and the batch-1 "
        "validation rows leave 0.5–1.4 ms per step unexplained (docs/validation.md §e); pass --step-overhead",
        mixed_graphs_source="vLLM V1 replays its piecewise CUDA graphs for any forward of up to its largest capture "
        "size in tokens, prompt chunks included, padded to the next captured size (vllm/v1/worker/gpu_model_runner.py: "
        "num_input_tokens = pad_for_cudagraph(num_scheduled_tokens))"),
    "sglang": EnginePerf(
        "sglang", (), "SGLang's captured batch sizes depend on the GPU and version (--cuda-graph-bs, "
        "--cuda-graph-max-bs); not modelled: decode batches run unpadded",
        None, "SGLang derives max_running_requests from the KV pool; no fixed cap",
        host_work="SGLang's zero-overhead batch scheduler runs the CPU work one batch ahead of the GPU (LMSYS "
        "SGLang v0.4 post, 2024-12-04: an Nsight profile of 5 consecutive decode batches shows no GPU idle time): "
        "no host time is charged beyond the kernel-launch floor"),
    "trtllm": EnginePerf(
        "trtllm", (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192),
        "TensorRT-LLM docs/source/performance/perf-overview.md llm_options.yml: cuda_graph_config enable_padding, "
        "batch_sizes 1 … 8192",
        2048, "TensorRT-LLM max_batch_size default 2048 (public start-up log in ai-dynamo/dynamo "
        "examples/python_rs/llm/tensorrt_llm/README.md: max_num_requests=2048, max_num_tokens=8192)",
        host_work="TensorRT-LLM's overlap scheduler, enabled by default, launches step n+1 while the CPU "
        "processes step n (docs features/overlap-scheduler.md: 'the scheduler overlaps CPU tasks ... with GPU "
        "computation'): no host time is charged beyond the kernel-launch floor",
        mixed_graphs=False,
        mixed_graphs_source="TensorRT-LLM's PyTorch executor replays a CUDA graph only for a step without context "
        "requests (tensorrt_llm/_torch/pyexecutor/scheduler.py ScheduledRequests.can_run_cuda_graph: "
        "'return (not self.context_requests)'): a step carrying a prompt runs its own token count, unpadded"),
}


def engine_perf(engine: str) -> EnginePerf | None:
    return ENGINE_PERF.get(engine)


__all__ = ["ENGINE_PERF", "EnginePerf", "engine_perf"]

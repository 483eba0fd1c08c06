"""The replay's settings, its result, and the engines' KV policies (admission and preemption).

A request's KV (bytes per GPU) grows linearly from its prompt's, ``kv_p``, to its final context's,
``kv``: after ``g`` emitted tokens it holds ``kv_p + g·(kv − kv_p)/OSL``. The pool is
``kv_pool_bytes``. Policies (``SimConfig.kv_policy``; :data:`ENGINE_KV_POLICY` maps each engine to its
default, with the source of each rule beside it):

- ``reserve`` (TensorRT-LLM's GUARANTEED_NO_EVICT): admitted when the final context ``kv`` fits; no
  preemption.
- ``recompute`` (vLLM V1): a prompt chunk is admitted when its share of the prompt's KV fits beside
  the decoders' next token; before each step the decoders' next token must fit, else the running
  list's last request (prefilling or decoding) is preempted until it does: its KV freed, queued at
  the front, prefilled again over prompt + emitted tokens (its TTFT stands; its TPOT takes the
  stall); no new prompt is admitted in a step that preempted.
- ``recompute_v0`` (vLLM V0): the same preemption; admission needs the whole prompt's KV with 1% of
  the pool kept free (the block manager's watermark).
- ``retract`` (SGLang): a prompt is admitted while ``kv_p + min(OSL, 4096)·g`` fits in the free
  KV less the decoders' remaining tokens × ``new_token_ratio`` (0.7 × ``schedule_conservativeness``,
  decaying linearly over 600 decode steps to 0.14 of that); a prompt that does not fit sets
  ``batch_is_full``, and no new prompt is tried until the running batch shrinks (a request ends or is
  retracted); when a decode step does not fit, decoders are retracted (fewest emitted tokens first,
  then the longest prompt) until 20 steps of the rest fit, they join the queue's end, and the ratio
  becomes (Σ emitted + 20·n)/Σ OSL of those left, at most 1. ``--enable-dp-attention`` multiplies
  the conservativeness by 0.3 (``server_args.py``).

Prefix caching's reuse of a preempted request's freed blocks is not modelled (it is prefilled in full).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)
KV_POLICIES = ("reserve", "recompute", "recompute_v0", "retract")
V0_WATERMARK = 0.01          # vllm/core/block_manager.py: watermark=0.01 of the GPU blocks kept free at admission
SGLANG_INIT_RATIO = 0.7      # python/sglang/global_config.py default_init_new_token_ratio (× schedule_conservativeness)
SGLANG_MIN_FACTOR = 0.14     # … default_min_new_token_ratio_factor: the floor is init × 0.14
SGLANG_DECAY_STEPS = 600     # … default_new_token_ratio_decay_steps: init → floor over 600 decode steps
SGLANG_RETRACT_STEPS = 20    # global_config.retract_decode_steps
SGLANG_CLIP = 4096           # schedule_policy.py CLIP_MAX_NEW_TOKENS_ESTIMATION
SGLANG_DP_CONSERVATIVENESS = 0.3  # server_args.py: --enable-dp-attention multiplies schedule_conservativeness by 0.3
# engine -> its KV policy (KV_POLICIES): how the engine admits and preempts
ENGINE_KV_POLICY = {
    # vllm/v1/core/sched/scheduler.py schedule(): allocate_slots per step (prompt chunks, one decode token); when it
    # fails, preempted_req = self.running.pop() (FCFS: the last admitted), its blocks freed, num_computed_tokens = 0,
    # waiting.prepend_request; no waiting request is admitted in a step that preempted ("if not preempted_reqs")
    "vllm": "recompute",
    # python/sglang/srt/managers/scheduler.py update_running_batch: check_decode_mem, else retract_decode (fewest
    # output tokens first) and waiting_queue.extend; schedule_policy.py PrefillAdder admits a prompt while
    # prompt + min(max_new_tokens, 4096) fits beside the running requests' remaining tokens × new_token_ratio
    "sglang": "retract",
    # tensorrt_llm/llmapi/llm_args.py SchedulerConfig: capacity_scheduler_policy GUARANTEED_NO_EVICT by default,
    # a request is scheduled only when its prompt + max new tokens fit (no eviction)
    "trtllm": "reserve",
}


def schedule_conservativeness(engine: str, dp: int) -> float:
    """SGLang's effective ``--schedule-conservativeness``: 1.0, × 0.3 under ``--enable-dp-attention`` (dp > 1)."""
    return SGLANG_DP_CONSERVATIVENESS if engine == "sglang" and dp > 1 else 1.0


def engine_kv_policy(engine: str) -> str:
    """The engine's KV policy in the replay (:data:`ENGINE_KV_POLICY`; an unknown engine is taken as vLLM)."""
    return ENGINE_KV_POLICY.get(engine, "recompute")


@dataclass(frozen=True)
class SimConfig:
    instances: int
    max_batch: int
    chunk_tokens: int
    kv_pool_bytes: float            # per GPU
    warmup_fraction: float = 0.05   # measured: requests arriving after this share …
    cooldown_fraction: float = 0.0  # … and before the last share (the system fills up and drains)
    concurrency: int | None = None  # closed loop: this many requests in flight, the next sent when one ends
    closed_spread_s: float = 0.0    # closed loop: the first C sent evenly over this span, not all at t = 0
    prefill_first: bool = False     # a step with prompt tokens carries no decodes (SGLang; vLLM V0 unchunked)
    split_prompts: bool = True      # prompts chunked across steps (chunked prefill); else whole prompts only
    kv_policy: str = "reserve"      # KV admission and preemption (:data:`KV_POLICIES`, module docstring)
    schedule_conservativeness: float = 1.0  # SGLang's --schedule-conservativeness (``retract``: the ratio's start)


@dataclass
class SimResult:
    requests: int
    measured: int
    rejected: int
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    mean_batch: float
    max_batch_seen: int
    steps: int
    mixed_steps: int
    makespan_s: float
    wall_s: float
    preemptions: int = 0            # running requests preempted (vLLM) or retracted (SGLang)
    recomputed_tokens: int = 0      # tokens whose KV those preemptions threw away (prefilled again)
    itl_p50_s: float | None = None  # median inter-token gap over every emitted token after a first (all requests)

    def stats(self) -> dict:
        """``sim_ttft_mean_s``, ``sim_ttft_p50_s`` … ``sim_tpot_p99_s`` and counts (JSON-ready)."""
        out: dict = {}
        for kind, values in (("ttft", self.ttft_s), ("tpot", self.tpot_s)):
            out[f"sim_{kind}_mean_s"] = float(values.mean()) if values.size else None
            for p in PERCENTILES:
                out[f"sim_{kind}_p{p}_s"] = float(np.percentile(values, p)) if values.size else None
        out.update({"sim_requests": self.requests, "sim_measured": self.measured, "sim_rejected": self.rejected,
                    "sim_batch_mean": self.mean_batch, "sim_steps": self.steps, "sim_mixed_steps": self.mixed_steps,
                    "sim_preemptions": self.preemptions, "sim_recomputed_tokens": self.recomputed_tokens})
        return out

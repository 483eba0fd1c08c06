"""A discrete-event model of an aggregated fleet: continuous batching, chunked prefill, a JSQ router.

What it models (per instance, as vLLM V1's scheduler does):

- Every step runs every decoding sequence for one token, then fills the rest of the token budget
  (``chunk_tokens``) with prompt chunks: first the prompts already being prefilled, then new ones
  from the instance's FCFS queue, several per step if they fit. A request is admitted when a slot
  is free (decoding + prefilling < ``max_batch``) and the KV pool can hold its final context
  (ISL + OSL, reserved at admission: no preemption is modelled).
- The step that processes a prompt's last chunk emits its first token (TTFT); each later step
  emits one more; TPOT = (finish − first token) / (OSL − 1) for OSL >= 2.
- Step times come from :class:`kvplan.sim.steps.StepModel` (``forward_pass`` exactly) or
  :class:`kvplan.sim.opsteps.OperatorStepModel` (the per-operator pass exactly). A run of
  decode-only steps between two events is advanced in closed form: step i of a run takes
  ``D[b] + γ[b] (T + i·b)``, so j steps take ``j (D + γT) + γ b j (j − 1)/2``; an arrival cuts the
  run at the end of the step in progress.
- Router: each arrival goes to the instance with the fewest prompts waiting for or in prefill,
  then the fewest decoding sequences, then the lowest index (join-shortest-queue, least loaded).

Deterministic: no randomness inside; the workload (a trace, or a seeded sample) is the input.
The first ``warmup_fraction`` and last ``cooldown_fraction`` of requests (by arrival) are simulated
but left out of the statistics: the fleet starts empty and drains at the end.

Closed loop (``SimConfig.concurrency`` = C, as ``vllm bench serve --max-concurrency C``): the given
arrival times are ignored; C requests are sent at t = 0 and each later one the moment an earlier
one ends (no think time), so C are in flight until the last C drain.

Prefill-first scheduling (``SimConfig.prefill_first``, SGLang's default and vLLM V0 without chunked
prefill): while an admitted prompt is waiting, a step carries prompt tokens only (up to
``chunk_tokens``) and the decoders wait; decode steps run when no prompt can be admitted. With
``split_prompts`` off (vLLM V0 without chunked prefill, TensorRT-LLM without chunked context) a
prompt joins a step only whole. On fixed-length closed-loop runs this keeps a wave's C requests
together: they are prefilled back to back, decode in lock step and finish in the same step.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from kvplan.sim.steps import StepModel

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class SimConfig:
    instances: int
    max_batch: int
    chunk_tokens: int
    kv_pool_bytes: float            # per GPU
    warmup_fraction: float = 0.05   # measured: requests arriving after this share …
    cooldown_fraction: float = 0.0  # … and before the last share (the system fills up and drains)
    concurrency: int | None = None  # closed loop: this many requests in flight, the next sent when one ends
    prefill_first: bool = False     # a step with prompt tokens carries no decodes (SGLang; vLLM V0 unchunked)
    split_prompts: bool = True      # prompts chunked across steps (chunked prefill); else whole prompts only


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

    def stats(self) -> dict:
        """``sim_ttft_mean_s``, ``sim_ttft_p50_s`` … ``sim_tpot_p99_s`` and counts (JSON-ready)."""
        out: dict = {}
        for kind, values in (("ttft", self.ttft_s), ("tpot", self.tpot_s)):
            out[f"sim_{kind}_mean_s"] = float(values.mean()) if values.size else None
            for p in PERCENTILES:
                out[f"sim_{kind}_p{p}_s"] = float(np.percentile(values, p)) if values.size else None
        out.update({"sim_requests": self.requests, "sim_measured": self.measured, "sim_rejected": self.rejected,
                    "sim_batch_mean": self.mean_batch, "sim_steps": self.steps, "sim_mixed_steps": self.mixed_steps})
        return out


def simulate(arrival_s, isl, osl, kv_bytes, steps: StepModel, config: SimConfig) -> SimResult:
    """Replay requests (arrival order) through ``config.instances`` instances; see the module docstring."""
    start_wall = time.perf_counter()
    arrival = np.array(arrival_s, dtype=np.float64)
    closed = config.concurrency
    if closed is not None:  # closed loop (vllm bench serve --max-concurrency): the first C at t = 0, the rest on finishes
        arrival[:] = math.inf
        arrival[:min(closed, arrival.size)] = 0.0
    sent = [min(closed or 0, arrival.size)]
    prompt = np.maximum(np.asarray(isl, dtype=np.int64), 1).tolist()
    output = np.maximum(np.asarray(osl, dtype=np.int64), 1).tolist()
    need = np.asarray(kv_bytes, dtype=np.float64).tolist()
    n = arrival.size
    n_inst, cap, budget_total, pool = config.instances, config.max_batch, config.chunk_tokens, config.kv_pool_bytes
    prefill_first, split = config.prefill_first, config.split_prompts
    if steps.max_tokens < budget_total + cap:
        raise ValueError("step model tabulated for fewer tokens than a step can carry")
    first = [math.nan] * n
    finish = [math.nan] * n
    rejected = 0

    # per-instance state
    mode = [0] * n_inst                 # 0 idle, 1 step with prefill, 2 run of decode-only steps, 3 prefill-only step
    version = [0] * n_inst
    k = [0] * n_inst                    # steps completed
    b = [0] * n_inst                    # decoding sequences
    T = [0.0] * n_inst                  # tokens the decoders read in their next step
    kv_used = [0.0] * n_inst
    finishing = [[] for _ in range(n_inst)]   # heap of (last step, request)
    queue = [deque() for _ in range(n_inst)]
    prefilling = [[] for _ in range(n_inst)]  # [request, tokens done]
    current = [None] * n_inst           # step: list of (entry, tokens); run: (t0, D, gamma, b, T, planned)
    busy_time_batch = [0.0] * n_inst
    pending = np.zeros(n_inst, dtype=np.int64)   # prompts queued or being prefilled (router key)
    running = np.zeros(n_inst, dtype=np.int64)   # decoding sequences
    events: list = []
    counter = 0
    total_steps = mixed_steps = 0
    max_seen = 0
    base = [steps.decode_base_s(j) for j in range(cap + 1)]
    gammas = [steps.decode_gamma_s(j) for j in range(cap + 1)]

    def schedule(i: int, when: float) -> None:
        nonlocal counter
        version[i] += 1
        counter += 1
        heapq.heappush(events, (when, counter, i, version[i]))

    def run_length(t0: float, d: float, bb: int, tt: float, j: int) -> float:
        gamma = gammas[bb]
        return j * (d + gamma * tt) + gamma * bb * j * (j - 1) / 2

    def ended(now: float) -> None:
        """Closed loop: a request has ended, so the client sends the next one now."""
        if closed is not None and sent[0] < n:
            arrival[sent[0]] = now
            sent[0] += 1

    def retire(i: int, now: float) -> None:
        heap = finishing[i]
        while heap and heap[0][0] <= k[i]:
            _, r = heapq.heappop(heap)
            finish[r] = now
            ended(now)
            b[i] -= 1
            T[i] -= prompt[r] + output[r]
            kv_used[i] -= need[r]
            running[i] -= 1

    def start(i: int, now: float) -> None:
        nonlocal rejected, total_steps, mixed_steps
        budget = budget_total - (0 if prefill_first else b[i])
        chunks = []
        for entry in prefilling[i]:
            if budget <= 0:
                break
            p = min(prompt[entry[0]] - entry[1], budget)
            chunks.append((entry, p))
            budget -= p
        q = queue[i]
        while q and budget > 0 and b[i] + len(prefilling[i]) < cap:
            r = q[0]
            if need[r] > pool:               # can never fit: the engine would reject it
                q.popleft()
                pending[i] -= 1
                rejected += 1
                ended(now)
                continue
            if kv_used[i] + need[r] > pool or (not split and chunks and prompt[r] > budget):
                break
            q.popleft()
            kv_used[i] += need[r]
            entry = [r, 0]
            prefilling[i].append(entry)
            p = min(prompt[r], budget)
            chunks.append((entry, p))
            budget -= p
        if chunks:
            starts = np.array([e[1] for e, _ in chunks], dtype=np.float64)
            ends = starts + np.array([p for _, p in chunks], dtype=np.float64)
            done = sum(1 for e, p in chunks if e[1] + p >= prompt[e[0]])
            nb, nt = (0, 0.0) if prefill_first else (b[i], T[i])  # prefill-first: the decoders sit this step out
            tokens = nb + int(ends.sum() - starts.sum())
            dt = steps.chunk_step_s(tokens, nb + done, nt, starts, ends, [prompt[e[0]] for e, _ in chunks],
                                    nb + len(chunks))
            mode[i], current[i] = (3 if prefill_first else 1), chunks
            busy_time_batch[i] += nb * dt
            total_steps += 1
            mixed_steps += 1
            schedule(i, now + dt)
        elif b[i] > 0:
            planned = finishing[i][0][0] - k[i]
            d = base[b[i]]
            mode[i], current[i] = 2, (now, d, b[i], T[i], planned)
            schedule(i, now + run_length(now, d, b[i], T[i], planned))
        else:
            mode[i], current[i] = 0, None

    def end(i: int, now: float) -> None:
        nonlocal total_steps, max_seen
        if mode[i] in (1, 3):
            if mode[i] == 1:  # a mixed step also ran every decoder one token
                k[i] += 1
                T[i] += b[i]
            for entry, p in current[i]:
                entry[1] += p
                r = entry[0]
                if entry[1] >= prompt[r]:
                    prefilling[i].remove(entry)
                    pending[i] -= 1
                    first[r] = now
                    if output[r] == 1:
                        finish[r] = now
                        ended(now)
                        kv_used[i] -= need[r]
                    else:
                        running[i] += 1
                        b[i] += 1
                        T[i] += prompt[r] + 1
                        heapq.heappush(finishing[i], (k[i] + output[r] - 1, r))
        else:
            t0, d, bb, tt, planned = current[i]
            busy_time_batch[i] += bb * (now - t0)
            total_steps += planned
            k[i] += planned
            T[i] += bb * planned
        max_seen = max(max_seen, b[i] + len(prefilling[i]))
        retire(i, now)
        start(i, now)  # the engine's next step is under way before a closed loop's replacements reach it …
        admit(now)     # … which join the step after it, or start together on an idle instance
        wake(now)

    def cut(i: int, now: float) -> None:
        t0, d, bb, tt, planned = current[i]
        x = now - t0
        gamma = gammas[bb]
        a2, a1 = gamma * bb / 2, d + gamma * tt - gamma * bb / 2
        j = x / a1 if a2 <= 0 else (-a1 + math.sqrt(a1 * a1 + 4 * a2 * x)) / (2 * a2)
        steps_now = min(int(math.floor(j + 1e-12)) + 1, planned)
        if steps_now < planned:
            current[i] = (t0, d, bb, tt, steps_now)
            schedule(i, t0 + run_length(t0, d, bb, tt, steps_now))

    def admit(now: float) -> None:
        """Route every request sent by ``now`` (JSQ); requests sent at one instant reach one step together."""
        nonlocal ai
        while ai < n and arrival[ai] <= now:
            i = int(np.argmin(pending * weight + running))
            queue[i].append(ai)
            pending[i] += 1
            touched.append(i)
            ai += 1

    def wake(now: float) -> None:
        """Start an idle instance that was sent work; cut a decode run at the end of its step in progress."""
        while touched:
            i = touched.pop()
            if mode[i] == 0:
                start(i, now)
            elif mode[i] == 2:
                cut(i, now)

    ai = 0
    weight = cap + 1
    touched: list[int] = []
    while ai < n or events:
        next_arrival = arrival[ai] if ai < n else math.inf
        if not events and next_arrival == math.inf:
            break  # closed loop with nothing in flight (every request rejected)
        if events and events[0][0] <= next_arrival:
            when, _, i, ver = heapq.heappop(events)
            if ver == version[i]:
                end(i, when)
            continue
        admit(next_arrival)
        wake(next_arrival)

    first_a, finish_a = np.asarray(first), np.asarray(finish)
    index = np.arange(n)
    keep = (index >= int(config.warmup_fraction * n)) & (index < n - int(config.cooldown_fraction * n))
    done = keep & np.isfinite(finish_a)
    out = np.asarray(output)
    ttft = first_a[done] - arrival[done]
    decoding = done & (out >= 2)
    tpot = (finish_a[decoding] - first_a[decoding]) / (out[decoding] - 1)
    makespan = float(np.nanmax(finish_a) - arrival[0]) if n and np.isfinite(finish_a).any() else 0.0
    mean_batch = sum(busy_time_batch) / (makespan * n_inst) if makespan > 0 else 0.0
    return SimResult(requests=n, measured=int(done.sum()), rejected=rejected, ttft_s=ttft, tpot_s=tpot,
                     e2e_s=finish_a[done] - arrival[done], mean_batch=mean_batch, max_batch_seen=max_seen,
                     steps=total_steps, mixed_steps=mixed_steps, makespan_s=makespan,
                     wall_s=time.perf_counter() - start_wall)

"""A discrete-event model of an aggregated fleet: continuous batching, chunked prefill, a JSQ router.

What it models (per instance, as vLLM V1's scheduler does):

- Every step runs every decoding sequence for one token, then fills the rest of the token budget
  (``chunk_tokens``) with prompt chunks: first the prompts already being prefilled, then new ones
  from the instance's FCFS queue, several per step if they fit. A request is admitted when a slot
  is free (decoding + prefilling < ``max_batch``) and the KV pool admits it under the engine's KV
  policy (:mod:`kvplan.sim.config`): TensorRT-LLM reserves the final context (ISL + OSL); vLLM
  allocates as the request grows and, when the decoders' next token does not fit, preempts the
  last admitted request (recompute: its KV freed, queued first, prefilled again over prompt +
  emitted tokens); SGLang admits under its ``new_token_ratio`` estimate and retracts decoders.
  A request's KV grows linearly from its prompt's to its final context's, so the KV of a run of
  decode steps is ``U + j·G`` and the step at which it fills the pool is found in closed form.
- The step that processes a prompt's last chunk emits its first token (TTFT); each later step
  emits one more; TPOT = (finish − first token) / (OSL − 1) for OSL >= 2; ITL p50 = the median gap between a
  request's consecutive tokens over every token (a stall behind prefill-only steps is one long gap).
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
arrival times are ignored; C requests are sent at t = 0 (or, with ``SimConfig.closed_spread_s`` > 0, the k-th of
them at k × spread / C: the steady state of a mixed-step engine, :func:`kvplan.plans.fleet.closed.closed_loop`) and
each later one the moment an earlier one ends (no think time), so C are in flight until the last C drain.

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

import numpy as np

from kvplan.sim.config import (KV_POLICIES, SGLANG_CLIP, SGLANG_DECAY_STEPS, SGLANG_INIT_RATIO, SGLANG_MIN_FACTOR,
                               SGLANG_RETRACT_STEPS, V0_WATERMARK, SimConfig, SimResult)
from kvplan.sim.runs import run_length_s, steps_begun
from kvplan.sim.steps import StepModel

def simulate(arrival_s, isl, osl, kv_bytes, steps: StepModel, config: SimConfig, prompt_kv_bytes=None) -> SimResult:
    """Replay requests (arrival order) through ``config.instances`` instances; see the module docstring.

    ``kv_bytes``: each request's KV at its final context (ISL + OSL), per GPU; ``prompt_kv_bytes``: at its prompt
    (default: the ISL / (ISL + OSL) share of it). A decoding request's KV grows linearly between the two.
    """
    start_wall = time.perf_counter()
    # d, the engine's prefill dispatch once per request (kvplan.plans.sizing.dispatch): a request reaches the
    # scheduler d after it is sent (the host prepares it while the GPU runs the others); TTFT and E2E run from
    # the send, so both carry d and no step does
    entry_delay = float(getattr(steps, "request_dispatch_s", 0.0) or 0.0)
    arrival = np.array(arrival_s, dtype=np.float64) + entry_delay
    closed = config.concurrency
    if closed is not None:  # closed loop (vllm bench serve --max-concurrency): the first C at t = 0, the rest on finishes
        arrival[:] = math.inf
        first = min(closed, arrival.size)
        arrival[:first] = entry_delay + np.arange(first) * (float(config.closed_spread_s) / max(first, 1))
    sent = [min(closed or 0, arrival.size)]
    prompt_a = np.maximum(np.asarray(isl, dtype=np.int64), 1)
    output_a = np.maximum(np.asarray(osl, dtype=np.int64), 1)
    need_a = np.asarray(kv_bytes, dtype=np.float64)
    kvp_a = (need_a * prompt_a / (prompt_a + output_a) if prompt_kv_bytes is None
             else np.minimum(np.asarray(prompt_kv_bytes, dtype=np.float64), need_a))
    policy = config.kv_policy
    if policy not in KV_POLICIES:
        raise ValueError(f"kv_policy must be one of {KV_POLICIES}")
    grow_a = (need_a - kvp_a) / output_a if policy != "reserve" else np.zeros_like(need_a)
    prompt, output, need = prompt_a.tolist(), output_a.tolist(), need_a.tolist()
    kvp, grow = kvp_a.tolist(), grow_a.tolist()
    clip_needed = policy == "retract" and bool(output_a.size) and int(output_a.max()) > SGLANG_CLIP
    n = arrival.size
    n_inst, cap, budget_total, pool = config.instances, config.max_batch, config.chunk_tokens, config.kv_pool_bytes
    prefill_first, split = config.prefill_first, config.split_prompts
    watermark = V0_WATERMARK * pool if policy == "recompute_v0" else 0.0
    if steps.max_tokens < budget_total + cap:
        raise ValueError("step model tabulated for fewer tokens than a step can carry")
    first = [math.nan] * n
    finish = [math.nan] * n
    rejected = preemptions = recomputed = 0
    # per-request state: tokens emitted, the current prefill's length (prompt, or prompt + emitted on a recompute),
    # the current decode stint (start step, KV and context at its start, finish step) and an admission number
    gen = [0] * n
    plen = list(prompt)
    st_k, st_kv, st_ctx, fin = [0] * n, [0.0] * n, [0] * n, [-1] * n
    seq = [0] * n
    state = [0] * n                     # 0 queued (or not sent), 1 prefilling, 2 decoding, 3 done
    entry_of = [None] * n

    # per-instance state
    mode = [0] * n_inst                 # 0 idle, 1 step with prefill, 2 run of decode-only steps, 3 prefill-only step
    version = [0] * n_inst
    k = [0] * n_inst                    # steps completed (steps in which the decoders advanced)
    b = [0] * n_inst                    # decoding sequences
    T = [0.0] * n_inst                  # tokens the decoders read in their next step
    G = [0.0] * n_inst                  # KV bytes the decoders add per step
    kv_used = [0.0] * n_inst
    init_ratio = min(SGLANG_INIT_RATIO * config.schedule_conservativeness, 1.0)  # scheduler.py Scheduler.__init__
    min_ratio = min(init_ratio * SGLANG_MIN_FACTOR, 1.0)
    decay = (init_ratio - min_ratio) / SGLANG_DECAY_STEPS
    ratio = [init_ratio] * n_inst       # SGLang's new_token_ratio
    full = [False] * n_inst             # SGLang's running_batch.batch_is_full
    finishing = [[] for _ in range(n_inst)]   # heap of (last step, request, admission number)
    order = [[] for _ in range(n_inst)]       # (request, admission number), oldest first: vLLM's running list
    decoders = [set() for _ in range(n_inst)]
    queue = [deque() for _ in range(n_inst)]
    prefilling = [[] for _ in range(n_inst)]  # [request, tokens done, KV bytes charged, KV bytes when done]
    current = [None] * n_inst           # step: (list of (entry, tokens), G); run: (t0, D, b, T, planned, G)
    # inter-token gaps: the decoders' last emission per instance; decoders whose previous token came apart from it
    # (a prompt finished in a prefill-only step: (request, time)); the gaps as (length, how many tokens) pairs
    last_emit = [0.0] * n_inst
    fresh: list[list] = [[] for _ in range(n_inst)]
    gap_s: list[float] = []
    gap_n: list[float] = []
    busy_time_batch = [0.0] * n_inst
    pending = np.zeros(n_inst, dtype=np.int64)   # prompts queued or being prefilled (router key)
    running = np.zeros(n_inst, dtype=np.int64)   # decoding sequences
    events: list = []
    counter = admitted = 0
    total_steps = mixed_steps = 0
    max_seen = 0
    base = [steps.decode_base_s(j) for j in range(cap + 1)]
    gammas = [steps.decode_gamma_s(j) for j in range(cap + 1)]

    def schedule(i: int, when: float) -> None:
        nonlocal counter
        version[i] += 1
        counter += 1
        heapq.heappush(events, (when, counter, i, version[i]))

    eager = float(getattr(steps, "eager_decode_s", 0.0) or 0.0)   # an eager decode step is max(GPU step, eager)

    def run_length(d: float, bb: int, tt: float, j: int) -> float:
        return run_length_s(d, gammas[bb], bb, tt, j, eager)

    def ended(now: float) -> None:
        """Closed loop: a request has ended, so the client sends the next one now."""
        if closed is not None and sent[0] < n:
            arrival[sent[0]] = now + entry_delay
            sent[0] += 1

    def held(i: int, r: int) -> tuple[float, int]:
        """(KV bytes, context tokens) decoder ``r`` holds now."""
        d = k[i] - st_k[r]
        return st_kv[r] + grow[r] * d, st_ctx[r] + d

    def leave(i: int, r: int) -> None:
        kv, ctx = held(i, r)
        b[i] -= 1
        T[i] -= ctx
        G[i] -= grow[r]
        kv_used[i] -= kv
        running[i] -= 1
        decoders[i].discard(r)

    def top(i: int):
        """The finishing heap's first live entry (stale ones, of preempted stints, are dropped)."""
        heap = finishing[i]
        while heap and (state[heap[0][1]] != 2 or seq[heap[0][1]] != heap[0][2] or fin[heap[0][1]] != heap[0][0]):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def retire(i: int, now: float) -> None:
        while (head := top(i)) is not None and head[0] <= k[i]:
            r = heapq.heappop(finishing[i])[1]
            leave(i, r)
            state[r] = 3
            finish[r] = now
            ended(now)
            full[i] = False  # update_running_batch: the batch shrank, so prefill is tried again

    def preempt(i: int, r: int) -> None:
        """Free ``r``'s KV and queue it again to be prefilled from scratch (prompt + the tokens it has emitted)."""
        nonlocal preemptions, recomputed
        preemptions += 1
        if state[r] == 2:
            _, ctx = held(i, r)
            recomputed += ctx - 1
            leave(i, r)
            gen[r] = ctx - prompt[r]
            pending[i] += 1
        else:
            entry = entry_of[r]
            prefilling[i].remove(entry)
            kv_used[i] -= entry[2]
            recomputed += entry[1]
        state[r] = 0
        plen[r] = prompt[r] + gen[r]
        if policy == "retract":   # scheduler.py update_running_batch: waiting_queue.extend(retracted_reqs)
            queue[i].append(r)
        else:                     # vLLM: waiting.prepend_request / waiting.appendleft (front of the queue)
            queue[i].appendleft(r)

    def victim(i: int) -> int | None:
        """vLLM: the running list's last (most recently admitted) request, prefilling or decoding."""
        stack = order[i]
        while stack:
            r, s = stack[-1]
            if state[r] in (1, 2) and seq[r] == s:
                return r
            stack.pop()
        return None

    def make_room(i: int, extra: float, keep: int | None = None) -> bool:
        """Preempt (vLLM, LIFO) until the decoders' next step and ``extra`` bytes fit; False when ``keep`` itself goes."""
        while kv_used[i] + G[i] + extra > pool * (1 + 1e-12):
            r = victim(i)
            if r is None:
                return False
            preempt(i, r)
            if r == keep:
                return False
        return True

    def retract(i: int) -> None:
        """SGLang retract_decode: fewest tokens emitted first (then longest prompt) until 20 steps of the rest fit."""
        live = sorted(decoders[i], key=lambda r: seq[r])  # batch order; ties keep it (a stable sort)
        live.sort(key=lambda r: (held(i, r)[1] - prompt[r], -prompt[r]), reverse=True)
        first_iter = True
        full[i] = False
        while len(live) > 1 and (first_iter or pool - kv_used[i] < SGLANG_RETRACT_STEPS * G[i]):
            first_iter = False
            preempt(i, live.pop())
        if live:  # new_estimate_ratio = (decoded + retract_decode_steps × reqs) / Σ max_new_tokens, at most 1
            decoded = sum(held(i, r)[1] - prompt[r] for r in live)
            ratio[i] = min(1.0, (decoded + SGLANG_RETRACT_STEPS * len(live)) / sum(output[r] for r in live))

    def sglang_room(i: int) -> float:
        """PrefillAdder's rem_total_tokens in bytes: free KV less the decoders' (and prompts') expected growth."""
        if clip_needed:
            future = sum(grow[r] * min(fin[r] - k[i], SGLANG_CLIP) for r in decoders[i])
        else:
            future = sum(grow[r] * (fin[r] - k[i]) for r in decoders[i])
        reserved = sum(e[3] - e[2] + grow[e[0]] * min(output[e[0]] - gen[e[0]], SGLANG_CLIP) for e in prefilling[i])
        return pool - kv_used[i] - ratio[i] * future - reserved

    def admit_kv(i: int, r: int, p: int, room: list) -> float | None:
        """KV bytes to charge ``r``'s admission with its first chunk of ``p`` tokens, or None when it must wait."""
        total = kvp[r] + grow[r] * gen[r]
        if policy == "reserve":        # TensorRT-LLM GUARANTEED_NO_EVICT: the whole final context up front
            charge = need[r]
        elif policy == "recompute_v0":  # vLLM V0 block manager can_allocate: the whole prompt, 1% watermark free
            charge = total
        else:                          # vLLM V1 allocate_slots / SGLang: the chunk's blocks
            charge = total * p / plen[r]
        if policy == "retract":
            estimate = total + grow[r] * min(output[r], SGLANG_CLIP)
            if estimate > room[0] and (b[i] or prefilling[i]):  # an idle engine runs it (else it never would)
                full[i] = True  # PrefillAdder NO_TOKEN: batch_is_full until the running batch shrinks
                return None
            room[0] -= estimate
        elif kv_used[i] + G[i] * (not prefill_first) + charge > pool - watermark:
            return None
        return charge

    def start(i: int, now: float) -> None:
        nonlocal rejected, total_steps, mixed_steps, admitted
        budget = budget_total - (0 if prefill_first else b[i])
        chunks = []
        preempted = False
        if policy in ("recompute", "recompute_v0") and not prefill_first and b[i]:
            before = preemptions
            make_room(i, 0.0)  # the decoders' next token first (vLLM: running requests are scheduled first)
            preempted = preemptions > before
            budget = budget_total - b[i]
        for entry in list(prefilling[i]):
            if budget <= 0:
                break
            if state[entry[0]] != 1:
                continue
            r = entry[0]
            p = min(plen[r] - entry[1], budget)
            if policy in ("recompute", "retract"):  # a continuing prompt allocates its next chunk
                charge = entry[3] - entry[2] if entry[1] + p >= plen[r] else entry[3] * p / plen[r]
                if policy == "recompute":
                    before = preemptions
                    if not make_room(i, charge - (G[i] if prefill_first else 0.0), keep=r):
                        preempted = True
                        break
                    preempted = preempted or preemptions > before
                elif kv_used[i] + charge > pool * (1 + 1e-12):
                    break
                entry[2] += charge
                kv_used[i] += charge
            chunks.append((entry, p))
            budget -= p
        chunks = [(e, p) for e, p in chunks if state[e[0]] == 1 and entry_of[e[0]] is e]  # drop the preempted
        budget = budget_total - (0 if prefill_first else b[i]) - sum(p for _, p in chunks)
        q = queue[i]
        room = [sglang_room(i)] if policy == "retract" and q else [0.0]
        if policy == "retract" and q and b[i] + len(prefilling[i]) >= cap:
            full[i] = True
        latched = policy == "retract" and full[i] and not prefilling[i]  # get_new_batch_prefill returns None
        while (q and budget > 0 and b[i] + len(prefilling[i]) < cap and not (preempted and policy == "recompute")
               and not latched):
            r = q[0]
            if need[r] > pool:               # can never fit: the engine would reject it
                q.popleft()
                pending[i] -= 1
                rejected += 1
                ended(now)
                continue
            if not split and chunks and plen[r] > budget:
                break
            p = min(plen[r], budget)
            charge = admit_kv(i, r, p, room)
            if charge is None:
                break
            q.popleft()
            kv_used[i] += charge
            admitted += 1
            seq[r], state[r] = admitted, 1
            order[i].append((r, admitted))
            entry = [r, 0, charge, need[r] if policy == "reserve" else kvp[r] + grow[r] * gen[r]]
            entry_of[r] = entry
            prefilling[i].append(entry)
            chunks.append((entry, p))
            budget -= p
        if chunks:
            starts = np.array([e[1] for e, _ in chunks], dtype=np.float64)
            ends = starts + np.array([p for _, p in chunks], dtype=np.float64)
            done = sum(1 for e, p in chunks if e[1] + p >= plen[e[0]])
            nb, nt = (0, 0.0) if prefill_first else (b[i], T[i])  # prefill-first: the decoders sit this step out
            tokens = nb + int(ends.sum() - starts.sum())
            dt = steps.chunk_step_s(tokens, nb + done, nt, starts, ends, [plen[e[0]] for e, _ in chunks],
                                    nb + len(chunks))
            mode[i], current[i] = (3 if prefill_first else 1), (chunks, G[i])
            busy_time_batch[i] += nb * dt
            total_steps += 1
            mixed_steps += 1
            schedule(i, now + dt)
            return
        if b[i] > 0 and kv_used[i] + G[i] > pool * (1 + 1e-12) and policy != "reserve":
            if policy == "retract":
                retract(i)  # scheduler.py update_running_batch: check_decode_mem, else retract_decode
            else:
                make_room(i, 0.0)
            if b[i] == 0 and (q or prefilling[i]):
                return start(i, now)  # every decoder went: the queue's first prompt runs next
        if b[i] > 0:
            planned = top(i)[0] - k[i]
            if G[i] > 0:  # the steps whose KV still fits: Σ held + j × G <= pool
                planned = max(1, min(planned, int(math.floor((pool - kv_used[i]) / G[i] * (1 + 1e-12)))))
            d = base[b[i]]
            mode[i], current[i] = 2, (now, d, b[i], T[i], planned, G[i])
            schedule(i, now + run_length(d, b[i], T[i], planned))
        else:
            mode[i], current[i] = 0, None

    def gaps(i: int, start: float, step: float, steps_run: int) -> None:
        """Record the gaps of the tokens the decoders emit in ``steps_run`` steps of ``step`` each from ``start``:
        the first step's from each decoder's previous token, the rest one step each."""
        live = [t for r, t in fresh[i] if r in decoders[i]]
        for t in live:
            gap_s.append(start - t + step)
            gap_n.append(1.0)
        if b[i] > len(live):
            gap_s.append(start - last_emit[i] + step)
            gap_n.append(float(b[i] - len(live)))
        if steps_run > 1:
            gap_s.append(step)
            gap_n.append(float(b[i] * (steps_run - 1)))
        fresh[i].clear()

    def end(i: int, now: float) -> None:
        nonlocal total_steps, max_seen
        if mode[i] in (1, 3):
            chunks, grown = current[i]
            if mode[i] == 1 and b[i]:
                gaps(i, now, 0.0, 1)
                last_emit[i] = now
            if mode[i] == 1:  # a mixed step also ran every decoder one token
                k[i] += 1
                T[i] += b[i]
                kv_used[i] += grown
            for entry, p in chunks:
                r = entry[0]
                if state[r] != 1 or entry_of[r] is not entry:
                    continue
                entry[1] += p
                if entry[1] >= plen[r]:
                    prefilling[i].remove(entry)
                    pending[i] -= 1
                    if math.isnan(first[r]):
                        first[r] = now
                    gen[r] += 1   # the step that computes a prompt's last token samples the next one
                    if gen[r] >= output[r]:
                        state[r] = 3
                        finish[r] = now
                        ended(now)
                        kv_used[i] -= entry[2]
                    else:
                        state[r] = 2
                        running[i] += 1
                        b[i] += 1
                        st_k[r], st_kv[r], st_ctx[r] = k[i], entry[2], plen[r] + 1
                        T[i] += plen[r] + 1
                        G[i] += grow[r]
                        decoders[i].add(r)
                        if mode[i] == 3:  # its first token now, apart from the decoders' last emission
                            fresh[i].append((r, now))
                        fin[r] = k[i] + output[r] - gen[r]
                        heapq.heappush(finishing[i], (fin[r], r, seq[r]))
        else:
            t0, d, bb, tt, planned, grown = current[i]
            gaps(i, t0, (now - t0) / planned, planned)
            last_emit[i] = now
            busy_time_batch[i] += bb * (now - t0)
            total_steps += planned
            k[i] += planned
            T[i] += bb * planned
            kv_used[i] += grown * planned
            if policy == "retract":
                ratio[i] = max(ratio[i] - decay * planned, min_ratio)
        max_seen = max(max_seen, b[i] + len(prefilling[i]))
        retire(i, now)
        start(i, now)  # the engine's next step is under way before a closed loop's replacements reach it …
        admit(now)     # … which join the step after it, or start together on an idle instance
        wake(now)

    def cut(i: int, now: float) -> None:
        t0, d, bb, tt, planned, grown = current[i]
        steps_now = steps_begun(d, gammas[bb], bb, tt, planned, now - t0, eager)
        if steps_now < planned:
            current[i] = (t0, d, bb, tt, steps_now, grown)
            schedule(i, t0 + run_length(d, bb, tt, steps_now))

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
    out = output_a
    sent_at = arrival - entry_delay
    ttft = first_a[done] - sent_at[done]
    decoding = done & (out >= 2)
    tpot = (finish_a[decoding] - first_a[decoding]) / (out[decoding] - 1)
    makespan = float(np.nanmax(finish_a) - sent_at[0]) if n and np.isfinite(finish_a).any() else 0.0
    mean_batch = sum(busy_time_batch) / (makespan * n_inst) if makespan > 0 else 0.0
    itl_p50 = weighted_median(np.asarray(gap_s), np.asarray(gap_n)) if gap_s else None
    return SimResult(requests=n, measured=int(done.sum()), rejected=rejected, ttft_s=ttft, tpot_s=tpot,
                     e2e_s=finish_a[done] - sent_at[done], mean_batch=mean_batch, max_batch_seen=max_seen,
                     steps=total_steps, mixed_steps=mixed_steps, makespan_s=makespan,
                     wall_s=time.perf_counter() - start_wall, preemptions=preemptions, recomputed_tokens=recomputed,
                     itl_p50_s=itl_p50)


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The value below which half the weight lies (the lower median of the weighted sample)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return float(values[order][int(np.searchsorted(cum, cum[-1] / 2))])

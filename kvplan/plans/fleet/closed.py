"""Closed-loop mode (``kvplan plan --concurrency N``): a fixed number of requests in flight, as benchmarks run.

``vllm bench serve --max-concurrency C``, genai-perf / AIPerf concurrency sweeps and NIM's tables
keep C requests in flight: each new request is sent the moment one finishes. kvplan replays that
through the discrete-event simulator in closed mode (:mod:`kvplan.sim.engine`, ``concurrency``):
N instances of the deployment (JSQ router), continuous batching up to ``max_num_seqs``, chunked
prefill at ``max_num_batched_tokens`` interleaved with the decoders (the interference a running
batch feels when a new prompt is admitted), step times from the deployment's step-time model
(the per-operator pass by default, the roofline's :func:`kvplan.calc.roofline.forward_pass` with
``--perf-model roofline``; tabulated by :mod:`kvplan.sim.opsteps` / :mod:`kvplan.sim.steps`).

Per C it reports what a benchmark prints:

    TTFT p50 / p90 / p99          first token − send time
    TPOT p50 / p90 / p99          (finish − first token) / (OSL − 1) per request (OSL >= 2)
    ITL mean                      token-weighted mean gap between output tokens = Σ (finish − first) / Σ (OSL − 1)
    output_tokens_per_s           Σ output tokens / duration (first send to last finish), as bench serve
                                  (warm-up requests are counted: ``warmup`` leaves them out of TTFT and TPOT)
    output_tokens_per_s_per_gpu   … / (N × GPUs per instance)
    request_throughput_per_s      requests / duration

Scheduling (:data:`SCHEDULES`, the engine's default; ``prefill_first`` / ``split_prompts`` override it,
e.g. for vLLM V0): vLLM V1 runs the decoders first in every step and fills the rest of
``max_num_batched_tokens`` with prompt chunks; SGLang runs a prefill batch (chunked at
``chunked_prefill_size``) on its own whenever one can be formed and decodes otherwise; TensorRT-LLM's
in-flight batching mixes prompts with the decoders (taken as chunked; its chunked context is off
by default, ``split_prompts=False``). On a
fixed-length run (a random dataset with range ratio 1) a prefill-first engine keeps each wave of C
requests together: they are sent together, prefilled back to back while no one decodes, and finish
in the same step, so the median TTFT is about half a wave's prefill and grows with C. vLLM's runs do not
keep their waves (:data:`SPREAD_PHASES`): its replay sends the first C spread evenly over one request's
lifetime, so each prompt meets C − 1 decoders and the TTFT is about one prompt's step; the send offsets
stand for the steady state, so the duration leaves out their mean (a real run keeps its engine full from t = 0).

A closed loop is its own Little's law: C = X × (E[TTFT] + E[decode time]), X the request
throughput; the rows carry ``littles_law_concurrency`` = X × mean time in system as a check.
Prompt and output lengths are the workload's (flags: sampled; a benchmark's random dataset with
range ratio 1 is fixed lengths). Percentiles of ITL per token are not modelled (a request's
tokens are taken as evenly spaced between its first and last).
"""

from __future__ import annotations

import numpy as np

from kvplan.errors import InputError

STATS = ("p50", "p90", "p99")
MAX_CONCURRENCY = 1_000_000  # requests in flight: far above any engine's admission (max_num_seqs × instances)
MAX_LEVELS = 64              # --concurrency values in one sweep (each is one replay)

# engine -> (prefill_first, split_prompts): the engine's default step composition (module docstring)
SCHEDULES = {
    # vllm/v1/core/sched/scheduler.py: running requests first, then waiting ones, within the token budget
    "vllm": (False, True),
    # python/sglang/srt/managers/scheduler.py get_next_batch_to_run: a new prefill batch when one can be
    # formed (PrefillAdder, chunked at chunked_prefill_size), else decode; mixing only with --enable-mixed-chunk
    "sglang": (True, True),
    # in-flight batching mixes context and generation requests; prompts taken as chunked at max_num_tokens
    # (tensorrt_llm/llmapi/llm_args.py enable_chunked_prefill is False by default: a run with the
    # default passes split_prompts=False, as the scoring rows of trtllm-serve do)
    "trtllm": (False, True),
}

# Whether a fixed-length closed loop settles into waves (the C requests prefilled together, decoding in lock step,
# finishing in the same step) or into requests spread evenly over their lifetime. A prefill-first engine gathers
# the prompts that arrive while a wave prefills into that wave, and holds its decoders until they are done, so a
# wave absorbs a request that arrives a little late. A mixed-step engine admits each arrival into the next step
# whatever the others do, so one that misses a step stays a step apart for good, and the client's and server's
# per-request handling (the responses of a wave stream out, and their successors are tokenised, one after
# another) gives it that lag. vLLM's closed-loop runs in NVIDIA aiconfigurator's measured corpus (20 rounds of C
# after a 2C warm-up, fixed lengths) show it: TTFT rises slowly with C (Qwen3-32B, TP2 H100, ISL 1,024:
# 154 ms at C = 8, 188 at 16, 250 at 32), well under the one-wave prefill of 8 × 1,024 tokens. Its SGLang and
# TensorRT-LLM runs agree with waves (docs/closed-loop.md, "aiconfigurator's measured runs").
SPREAD_PHASES = {"vllm": True, "sglang": False, "trtllm": False}
PHASES = {None: None, "auto": None, "waves": False, "spread": True}  # kvplan plan --phases


def closed_loop_check(concurrency) -> None:
    """Raise the InputError ``closed_loop`` gives for a concurrency outside 1 … :data:`MAX_CONCURRENCY`."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InputError(f"--concurrency values must be whole numbers >= 1 (got {concurrency})", "e.g. 1,8,32,128")
    if concurrency > MAX_CONCURRENCY:
        raise InputError(f"--concurrency {concurrency:,} is more than {MAX_CONCURRENCY:,} requests in flight",
                         "more in flight than requests sent is one burst of them all; e.g. --concurrency 1,8,32,128")


def closed_loop(dep, isl, osl, concurrency: int, instances: int = 1, requests: int | None = None,
                steps=None, prefill_first: bool | None = None, split_prompts: bool | None = None,
                kv_policy: str | None = None, kv_pool_bytes: float | None = None, warmup: int = 0,
                spread: bool | None = None) -> dict:
    """One closed-loop run of ``concurrency`` requests in flight over ``instances`` instances (module docstring).

    ``steps``: a step table (:class:`kvplan.sim.steps.StepModel` or :class:`kvplan.sim.opsteps.OperatorStepModel`,
    one DP rank's) to replay with instead of the deployment's own (``dep.steps``).
    ``prefill_first`` / ``split_prompts``: the engine's step composition, default :data:`SCHEDULES`'s;
    ``kv_pool_bytes``: the KV pool per GPU in place of the deployment's (a what-if, e.g. an engine's logged size).
    ``kv_policy``: its KV admission and preemption, default :data:`kvplan.sim.engine.ENGINE_KV_POLICY`'s
    (``recompute_v0`` for vLLM V0).
    ``warmup``: the first ``warmup`` of the ``requests`` run but are left out of the TTFT and TPOT figures, as a
    client's warm-up requests (AIPerf ``--warmup-request-count``); the throughput and the median ITL count the whole run.
    ``spread``: the first C sent evenly over one request's lifetime (measured on a pilot run of 2C requests sent at
    once: its second C's mean E2E) rather than all at t = 0, the steady state of a mixed-step engine
    (by default where :data:`SPREAD_PHASES` says so for the engine, its steps mix prompts with decodes, and more
    requests are sent than are in flight); off, a fixed-length run keeps its waves.
    """
    from kvplan.sim import SimConfig, build_step_model, engine_kv_policy, schedule_conservativeness, simulate

    closed_loop_check(concurrency)
    if not isinstance(instances, int) or instances < 1:
        raise InputError(f"--instances must be a whole number >= 1 (got {instances})", "instances of the deployment")
    if dep.pool.empty:
        raise InputError(f"{dep.model.name} leaves no KV memory on {dep.hardware.name} at tp={dep.tp}, pp={dep.pp}",
                         "raise --tp or --pp, or quantise the weights (--weights-dtype fp8)")
    n = requests_sent(concurrency, requests)
    isl = np.asarray(isl, dtype=np.int64)[:n]
    osl = np.asarray(osl, dtype=np.int64)[:n]
    n = isl.size
    warmup_check(warmup, n)
    s = dep.engine
    cap = s.max_num_seqs
    context = np.maximum(isl, 1) + np.maximum(osl, 1)
    dp = dep.parallel.dp  # attention-DP ranks are the simulator's engines (kvplan.plans.fleet.model)
    if steps is None:     # the deployment's step-time model, tabulated for one DP rank
        steps = build_step_model(dep.cost, dep.machine, dep.tp, s.chunk_tokens + cap,
                                 float(np.mean(isl + osl / 2)), dp=dp, steps=dep.steps)
    kv = dep.layout.sequence_bytes(context, per_gpu=True)
    kv_prompt = dep.layout.sequence_bytes(np.maximum(isl, 1), per_gpu=True)
    policy = kv_policy or engine_kv_policy(s.engine)
    first, split = SCHEDULES.get(s.engine, SCHEDULES["vllm"])
    first = first if prefill_first is None else bool(prefill_first)
    split = split if split_prompts is None else bool(split_prompts)
    config = SimConfig(instances=instances * dp, max_batch=cap, chunk_tokens=s.chunk_tokens,
                       kv_pool_bytes=dep.pool.bytes_per_gpu if kv_pool_bytes is None else float(kv_pool_bytes),
                       warmup_fraction=(warmup + 0.5) / n if warmup else 0.0, cooldown_fraction=0.0,
                       concurrency=concurrency, prefill_first=first, split_prompts=split, kv_policy=policy,
                       schedule_conservativeness=schedule_conservativeness(s.engine, dp))
    if spread is None:  # a burst (every request sent at once) has no steady state to spread into
        spread = SPREAD_PHASES.get(s.engine, False) and not first and n > concurrency * instances
    if spread:
        config = spread_config(config, isl, osl, kv, kv_prompt, steps, concurrency)
    sim = simulate(np.zeros(n), isl, osl, kv, steps, config, prompt_kv_bytes=kv_prompt)
    gpus = instances * dep.gpus
    # the spread's send offsets stand for the steady state, not for a client that waits: a real run sends its
    # first C at t = 0 and keeps the engine full, so the mean offset (spread × (C − 1) / 2C) leaves the window
    first_sent = min(concurrency, n)
    ramp = config.closed_spread_s * (first_sent - 1) / (2 * first_sent) if first_sent else 0.0
    duration = sim.makespan_s - ramp
    done_osl = osl[: sim.measured] if sim.measured == n else osl
    tokens = float(np.maximum(done_osl, 1).sum())
    measured_osl = np.maximum(osl[warmup:], 1)  # the requests the latency figures count
    gaps = measured_osl[measured_osl >= 2] - 1
    itl = (float(np.sum(sim.tpot_s * gaps) / np.sum(gaps))
           if sim.tpot_s.size and sim.tpot_s.size == gaps.size else None)
    row = {"kind": "closed_loop", "concurrency": concurrency, "instances": instances, "tp": dep.tp, "pp": dep.pp,
           "dp": dp, "ep": dep.parallel.ep,
           "gpus": gpus, "requests": n, "rejected": sim.rejected,
           "scheduler": ("prefill-first" if first else "mixed") + ("" if split else ", whole prompts")}
    for kind, values in (("ttft", sim.ttft_s), ("tpot", sim.tpot_s)):
        row[f"{kind}_mean_s"] = float(values.mean()) if values.size else None
        for stat in STATS:
            row[f"{kind}_{stat}_s"] = float(np.percentile(values, float(stat[1:]))) if values.size else None
    row["itl_mean_s"] = itl
    row["itl_p50_s"] = sim.itl_p50_s   # the median gap between consecutive tokens (benchmarks' median ITL)
    row["output_tokens_per_s"] = tokens / duration if duration > 0 else None
    row["output_tokens_per_s_per_gpu"] = row["output_tokens_per_s"] / gpus if row["output_tokens_per_s"] else None
    row["request_throughput_per_s"] = sim.measured / duration if duration > 0 else None
    row["littles_law_concurrency"] = (row["request_throughput_per_s"] * float(sim.e2e_s.mean())
                                      if sim.e2e_s.size and row["request_throughput_per_s"] else None)
    row["sim_batch_mean"] = float(sim.mean_batch)
    row.update({"kv_policy": policy, "preemptions": sim.preemptions, "recomputed_tokens": sim.recomputed_tokens})
    row["phases"] = "spread" if spread else "waves"
    row["warmup_requests"] = warmup
    return row


def _phases_note(used: str, asked: str | None, engine: str) -> str:
    what = ("the first C sent evenly over one request's lifetime, each prompt meeting C − 1 decoders"
            if used == "spread" else "all C sent at t = 0, so a fixed-length run keeps its waves")
    if PHASES.get(asked) is not None:
        return f"{what} (--phases {asked})"
    return (f"{what}: {engine}'s default, as its measured closed loops settle (docs/closed-loop.md); "
            "--phases waves|spread to compare")


def requests_sent(concurrency: int, requests: int | None) -> int:
    """The requests a closed loop sends: ``requests``, else 10 C within 500 … 5,000."""
    return requests or int(min(max(10 * concurrency, 500), 5000))


def warmup_check(warmup, n: int) -> None:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < n:
        raise InputError(f"warm-up requests must be a whole number from 0 to {n - 1:,} (got {warmup}): the run "
                         f"sends {n:,} requests", "pass fewer --warmup-requests, or more --sim-requests")


def spread_config(config, isl, osl, kv, kv_prompt, steps, in_flight: int):
    """``config`` with its first requests sent evenly over one request's lifetime: the mean E2E of the second
    wave of a pilot run that sends ``2 × in_flight`` at once (the first wave fills an empty engine)."""
    from dataclasses import replace

    from kvplan.sim import simulate

    m = min(2 * in_flight, isl.size)
    pilot = simulate(np.zeros(m), isl[:m], osl[:m], kv[:m], steps,
                     replace(config, warmup_fraction=(m - min(in_flight, m) + 0.5) / m if m > in_flight else 0.0),
                     prompt_kv_bytes=kv_prompt[:m])
    life = float(pilot.e2e_s.mean()) if pilot.e2e_s.size else 0.0
    return replace(config, closed_spread_s=life if np.isfinite(life) else 0.0)


CLOSED_COLUMNS = ["concurrency", "instances", "tp", "gpus", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
                  "tpot_p90_s", "tpot_p99_s", "itl_mean_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                  "request_throughput_per_s", "preemptions"]

KV_NOTES = {  # the closed loop's note on its KV policy (kvplan.sim.config)
    "recompute": "KV allocated as requests grow; when the pool runs out the last admitted request is preempted and "
                 "prefilled again (vLLM V1 recompute)",
    "recompute_v0": "KV of the whole prompt at admission (1% watermark); when the pool runs out the last admitted "
                    "request is preempted and prefilled again (vLLM V0 recompute)",
    "retract": "prompts admitted under SGLang's new_token_ratio estimate; decoders retracted when the pool runs out",
    "reserve": "each request's whole context reserved at admission, no preemption (TensorRT-LLM GUARANTEED_NO_EVICT)",
}


def closed_loop_result(model, hardware, workload, concurrency, *, instances: int = 1, tps=None, pps=None,
                       engine=None, system=None, requests: int | None = None, seed: int = 0, cards=(), dps=None,
                       expert_parallel: bool | None = None, redundant_experts: int | None = None,
                       warmup: int = 0, phases: str | None = None):
    """``kvplan plan --concurrency C1,C2,…``: one closed-loop row per C (module docstring) as a Result.

    The deployment is the given TP (one value), else the smallest TP in {1, 2, 4, 8} (within the
    scale-up domain) whose KV pool holds the workload's longest request. ``dps`` (one value) and
    ``expert_parallel`` set attention DP and EP (``-dp D --enable-expert-parallel``; a MoE model
    with D > 1 runs EP), with the fewest redundant experts that let EP divide the experts.
    """
    from kvplan.plans.deployment import EngineSettings, resolve
    from kvplan.result import Result

    engine = engine or EngineSettings()
    concurrency = list(concurrency)
    if len(concurrency) > MAX_LEVELS:
        raise InputError(f"--concurrency lists {len(concurrency)} values; at most {MAX_LEVELS} (each is one replay)",
                         "e.g. --concurrency 1,2,4,8,16,32,64,128")
    if phases not in PHASES:
        raise InputError(f"--phases {ascii(phases)} is not one of {', '.join(k for k in PHASES if k)}",
                         "auto (the engine's default), waves or spread")
    for c in concurrency:  # every value checked before the first replay runs
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CONCURRENCY:
            closed_loop_check(c)
        warmup_check(warmup, requests_sent(c, requests))
    pp = int(pps[0]) if pps else 1
    if dps is not None and len(dps) > 1:
        raise InputError("--concurrency takes one --dp value", "run one closed loop per DP size")
    dp = int(dps[0]) if dps else 1
    choices = list(tps) if tps else [1, 2, 4, 8]
    notes, dep = [], None
    longest = float(workload.lengths.context_max)
    for tp in choices:
        try:
            candidate = resolve(model, hardware, system=system, engine=engine, cards=cards,
                                parallel=_parallel(model, int(tp), pp, dp, expert_parallel, redundant_experts, cards))
        except InputError:
            if len(choices) == 1:
                raise
            continue
        fits = not candidate.pool.empty and float(candidate.layout.sequence_bytes(longest, per_gpu=True)) <= \
            candidate.pool.bytes_per_gpu
        if fits or tp == choices[-1]:
            dep = candidate
            if len(choices) > 1:
                notes.append(f"closed loop on tp={tp}: the smallest of {', '.join(map(str, choices))} whose KV pool "
                             "holds the longest request (pass --tp to choose)")
            break
    if dep is None:
        raise InputError(f"no usable TP among {', '.join(map(str, choices))}", "pass --tp")
    sample = workload.replay(requests or 5000, seed)
    rows = [closed_loop(dep, sample.isl, sample.osl, int(c), instances, requests, warmup=warmup,
                        spread=PHASES[phases]) for c in concurrency]
    notes = [*dep.notes, *dep.step_notes, *notes,
             f"closed loop: C requests in flight, the next sent when one ends (vllm bench serve --max-concurrency); "
             f"{instances} instance(s) of tp={dep.tp}" + (f" pp={dep.pp}" if dep.pp > 1 else "")
             + (f" dp={dp}" if dp > 1 else "") + (f" ep={dep.parallel.ep}" if dep.parallel.expert_parallel else "")
             + ", JSQ router; "
             "the arrival rate is not used",
             f"closed-loop scheduler: {rows[0]['scheduler']} ({engine.engine}'s default: "
             + ("a prompt batch runs on its own, decoders wait" if rows[0]["scheduler"].startswith("prefill-first")
                else "decoders and prompt chunks share each step") + f", {dep.engine.chunk_tokens:,} tokens a step)",
             "closed-loop phases: " + _phases_note(rows[0]["phases"], phases, engine.engine),
             f"closed-loop KV ({rows[0]['kv_policy']}): {KV_NOTES[rows[0]['kv_policy']]}; "
             + (f"preemptions per level: {', '.join(str(r['preemptions']) for r in rows)}"
                if any(r["preemptions"] for r in rows) else "the pool never ran out"),
             f"workload: {workload.description}"]
    if warmup:
        notes.insert(-1, f"closed-loop warm-up: the first {warmup:,} requests left out of TTFT and TPOT (as AIPerf's "
                         "--warmup-request-count); throughput counts the whole run")
    title = f"Closed loop: {dep.model.name} on {dep.name}, tp={dep.tp}, {engine.engine}, {instances} instance(s)"
    return Result(title=title, rows=rows, columns=CLOSED_COLUMNS, assumptions=list(dict.fromkeys(notes)))


def _parallel(model, tp: int, pp: int, dp: int, expert_parallel, redundant_experts, cards):
    """vLLM's layout: ``-tp -pp -dp`` with ``--enable-expert-parallel`` (on for a MoE model at dp > 1)."""
    from kvplan.cards.loader import load_model
    from kvplan.plans.deployment import Parallelism, fewest_redundant_experts

    card = model if hasattr(model, "layer_groups") else load_model(model, cards)
    ep = bool(expert_parallel) or (dp > 1 and card.moe is not None)
    r = redundant_experts if redundant_experts is not None else (fewest_redundant_experts(card, tp * dp) if ep else 0)
    return Parallelism(tp, pp, dp, ep, r)

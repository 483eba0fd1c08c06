"""Draw requests from a flag-defined ``Workload`` as a ``Trace``, prompt blocks included.

Block ids follow the Mooncake convention (equal id = identical prefix up to that block), so
the reuse curves of ``kvplan.workload.reuse`` apply to synthetic sessions as to real traces:

- a full block inside the shared system prompt (``(i + 1) · B <= S``) has id ``i`` in every session;
- a session's full block ``i`` keeps one id across its turns (each prompt extends the previous
  turn's prompt and output, so a full block's content never changes);
- a partial last block is new in every request (the next turn fills it with other tokens).
"""

from __future__ import annotations

import math

import numpy as np

from kvplan.errors import InputError
from kvplan.workload.traces import Trace, make_trace

# prompt block ids a sampled workload may hold: 32M int64 ids (256 MiB; ~1.4 GB at the peak of
# prompt_blocks' index arrays), above 100,000 requests of a 128k-token prompt in 512-token blocks (25.6M)
MAX_PROMPT_BLOCKS = 32 * 2**20
# turn arrivals drawn for the stationary window (sessions × turns): 16.8M float64 draws are ~134 MB an
# array (~0.7 GB at the peak of the delays, their cumsum and the arrival matrix); --turns 10000
# --think-time 1e9s at --qps 1 asked for 1.3e13 and reached 19.5 GB before anything was refused
MAX_TURN_DRAWS = 1 << 24


def sample_workload(workload: "Workload", n_requests: int, rng: np.random.Generator | int | None = 0) -> Trace:
    """The first ``n_requests`` requests at or after time 0 of a stationary session process.

    Sessions start from ``−warm-up`` (long enough that a session begun earlier has ended:
    ``think × (T − 1 + 6 √(T − 1))``), so the window sees sessions in every phase, as a real trace
    would, instead of a start-up ramp and a drain. Turns before 0 are dropped (their blocks are
    then first touches: a cold cache, as at the start of any trace).
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    turns, think_s = workload.turns, workload.think_time_s
    warmup_s = think_s * (turns - 1 + 6 * math.sqrt(turns - 1)) if turns > 1 else 0.0
    batch = math.ceil((n_requests / workload.rate_per_s + warmup_s) * workload.session_rate_per_s * 1.2) + 16
    mean_gap_s = 1.0 / workload.session_rate_per_s
    _check_draws(batch, workload)
    starts = -warmup_s + np.cumsum(_gamma_gaps(rng, batch, mean_gap_s, workload.arrival_cv))
    while True:
        _check_draws(starts.size, workload)
        delays = rng.exponential(think_s, (starts.size, turns - 1)) if think_s > 0 and turns > 1 \
            else np.zeros((starts.size, turns - 1))
        arrival = starts[:, None] + np.concatenate((np.zeros((starts.size, 1)), np.cumsum(delays, axis=1)), axis=1)
        kept = np.sort(arrival[arrival >= 0])
        if kept.size >= n_requests and starts[-1] > kept[n_requests - 1]:
            break  # every request up to the n-th comes from a session already drawn
        more = _gamma_gaps(rng, max(batch // 2, 16), mean_gap_s, workload.arrival_cv)
        starts = np.concatenate((starts, starts[-1] + np.cumsum(more)))
    sessions = starts.size
    new_tokens = workload.isl.sample(rng, sessions * turns).reshape(sessions, turns)
    output = workload.osl.sample(rng, sessions * turns).reshape(sessions, turns)
    history_output = np.concatenate((np.zeros((sessions, 1), np.int64), np.cumsum(output[:, :-1], axis=1)), axis=1)
    prompt = workload.shared_prefix_tokens + np.cumsum(new_tokens, axis=1) + history_output
    session = np.repeat(np.arange(sessions), turns)
    flat = arrival.ravel()
    order = np.flatnonzero(flat >= 0)
    order = order[np.argsort(flat[order], kind="stable")][:n_requests]
    blocks = float(np.ceil(prompt.ravel()[order] / workload.block_tokens).sum())
    if blocks > MAX_PROMPT_BLOCKS:  # a 1M-token --shared-prefix × 100k requests held 195M block ids (7.9 GB)
        raise InputError(f"{n_requests:,} sampled requests hold {blocks:,.0f} prompt blocks of "
                         f"{workload.block_tokens} tokens, more than the {MAX_PROMPT_BLOCKS:,} kvplan keeps in memory",
                         "lower --sample, or shorten --isl / --shared-prefix (a prompt longer than the model's "
                         "context is refused anyway)")
    offsets, ids = prompt_blocks(prompt.ravel()[order], session[order], workload.shared_prefix_tokens,
                                 workload.block_tokens)
    return make_trace(flat[order], prompt.ravel()[order], output.ravel()[order],
                      block_offsets=offsets, block_ids=ids, block_tokens=workload.block_tokens,
                      source="synthetic", trace_format="synthetic")


def _check_draws(sessions: int, workload: "Workload") -> None:
    """Refuse a window that needs more than MAX_TURN_DRAWS turn arrivals (before allocating them)."""
    draws = float(sessions) * workload.turns
    if draws > MAX_TURN_DRAWS:
        raise InputError(f"sampling this workload's stationary window needs {sessions:,} sessions of "
                         f"{workload.turns:,} turns ({draws:.3g} turn arrivals), more than the "
                         f"{MAX_TURN_DRAWS:,} kvplan draws",
                         "lower --think-time or --turns (sessions idle between turns = rate × think time), "
                         "or --sample")


def _gamma_gaps(rng: np.random.Generator, n: int, mean_s: float, cv: float) -> np.ndarray:
    """Gamma inter-arrival gaps: shape ``1/cv²``, scale ``mean · cv²`` (cv = 1: exponential)."""
    shape = 1.0 / cv**2
    return rng.gamma(shape, mean_s / shape, n)


def prompt_blocks(prompt_tokens: np.ndarray, session: np.ndarray, shared_tokens: int,
                  block_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, ids) of each request's prompt blocks under the id rules in the module docstring."""
    full = prompt_tokens // block_tokens
    total = -(-prompt_tokens // block_tokens)
    offsets = np.concatenate(([0], np.cumsum(total))).astype(np.int64)
    ids = np.empty(int(offsets[-1]), dtype=np.int64)
    shared_full = shared_tokens // block_tokens
    stride = int(full.max()) + 1 if full.size else 1
    request = np.repeat(np.arange(full.size), full)
    index = np.arange(request.size) - np.repeat(np.cumsum(full) - full, full)
    positions = offsets[:-1][request] + index
    ids[positions] = np.where(index < shared_full, index, shared_full + session[request] * stride + index)
    partial = np.flatnonzero(total > full)
    first_fresh = shared_full + (int(session.max()) + 1) * stride if session.size else shared_full
    ids[offsets[1:][partial] - 1] = first_fresh + np.arange(partial.size)
    return offsets, ids

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

from kvplan.workload.synthetic import Workload
from kvplan.workload.traces import Trace, make_trace


def sample_workload(workload: Workload, n_requests: int, rng: np.random.Generator | int | None = 0) -> Trace:
    """``n_requests`` requests: the earliest arrivals of ``ceil(n / T)`` sessions, sorted by arrival."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    turns = workload.turns
    sessions = max(1, math.ceil(n_requests / turns))
    starts = np.cumsum(_gamma_gaps(rng, sessions, 1.0 / workload.session_rate_per_s, workload.arrival_cv))
    think = rng.exponential(workload.think_time_s, (sessions, turns - 1)) if workload.think_time_s > 0 \
        else np.zeros((sessions, turns - 1))
    arrival = starts[:, None] + np.concatenate((np.zeros((sessions, 1)), np.cumsum(think, axis=1)), axis=1)
    new_tokens = workload.isl.sample(rng, sessions * turns).reshape(sessions, turns)
    output = workload.osl.sample(rng, sessions * turns).reshape(sessions, turns)
    history_output = np.concatenate((np.zeros((sessions, 1), np.int64), np.cumsum(output[:, :-1], axis=1)), axis=1)
    prompt = workload.shared_prefix_tokens + np.cumsum(new_tokens, axis=1) + history_output
    session = np.repeat(np.arange(sessions), turns)
    order = np.argsort(arrival.ravel(), kind="stable")[:n_requests]
    offsets, ids = prompt_blocks(prompt.ravel()[order], session[order], workload.shared_prefix_tokens,
                                 workload.block_tokens)
    return make_trace(arrival.ravel()[order], prompt.ravel()[order], output.ravel()[order],
                      block_offsets=offsets, block_ids=ids, block_tokens=workload.block_tokens,
                      source="synthetic", trace_format="synthetic")


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

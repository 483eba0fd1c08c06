"""The curves a capacity report draws for a plan's deployment: KV vs context by dtype, context vs concurrency.

Both read the plan's :class:`~kvplan.plans.deployment.Deployment` (its layout and KV pool):

- KV of one sequence of C tokens on one GPU, per KV dtype (``KVLayout.sequence_bytes``, block
  rounding and TP replication included); max concurrency = the dtype's pool / that, where the
  dtype's pool is ``floor(budget / block bytes) × block bytes`` of the same engine budget.
- the longest context every one of B sequences can have in the pool (``KVLayout.max_sequence_len``).
"""

from __future__ import annotations

import math

import numpy as np

from kvplan.calc.kv import kv_layout
from kvplan.errors import InputError

KV_DTYPES = ("bf16", "fp8", "int4", "fp4")
CONTEXT_POINTS = 96
CONTEXT_LANDMARKS = (4096, 8192, 32768, 131072)
CONCURRENCY_LANDMARKS = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}


def contexts(top: int, must: int) -> np.ndarray:
    """About CONTEXT_POINTS geometric context lengths from 1k to ``top``, with ``must`` among them."""
    points = np.unique(np.rint(np.geomspace(1024, max(top, 2048), CONTEXT_POINTS)).astype(np.int64))
    return np.unique(np.append(points, must))


def kv_vs_context(dep, max_model_len: int, kv_dtype: str) -> tuple[list[dict], list[dict], dict]:
    """(rows, landmark rows, {dtype: (contexts, bytes per GPU)}) for every KV dtype the model can use."""
    card, s = dep.model, dep.engine
    points = contexts(max(card.max_context, max_model_len), max_model_len)
    series, rows, shown = {}, [], []
    landmarks = {c for c in (*CONTEXT_LANDMARKS, max_model_len) if c <= points.max()}
    budget = max(dep.memory.kv_cache_memory_bytes, 0)
    for dtype in dict.fromkeys([*KV_DTYPES, kv_dtype]):
        try:
            layout = kv_layout(card, dep.profile, dtype, dep.tp, dep.pp, block_size=s.block_size,
                               max_num_batched_tokens=s.chunk_tokens)
        except InputError:
            continue
        per_gpu = layout.sequence_bytes(points, per_gpu=True)
        series[dtype] = (points.tolist(), per_gpu.tolist())
        block_bytes = (layout.block_size or 1) * layout.bytes_per_token_per_gpu
        pool = math.floor(budget / block_bytes) * block_bytes if block_bytes else dep.pool.bytes_per_gpu
        for c, b in zip(points.tolist(), per_gpu.tolist()):
            item = {"kv_dtype": dtype, "context_tokens": c, "kv_bytes_per_sequence_per_gpu": b,
                    "max_concurrency": round(pool / b, 4) if b else math.inf}
            rows.append(item)
            if c in landmarks:
                shown.append(item)
    return rows, shown, series


def context_vs_concurrency(dep, max_model_len: int, max_concurrency: float) -> tuple[list[dict], list[dict]]:
    """(rows, landmark rows): for B = 1 … max(max_num_seqs, 2 × max concurrency), the longest context of B sequences."""
    layout, pool = dep.layout, dep.pool.bytes_per_gpu
    top = max(dep.engine.max_num_seqs, 2 * math.ceil(max_concurrency) if math.isfinite(max_concurrency) else 1, 2)
    powers = 2 ** np.arange(int(math.log2(top)) + 1)
    batches = np.unique(np.concatenate([np.rint(np.geomspace(1, top, 64)).astype(np.int64), powers]))
    longest = layout.max_sequence_len(pool, batches, upper=max(dep.model.max_context, max_model_len))
    rows = [{"concurrency": int(b), "max_context_tokens": int(m), "kv_bytes_per_gpu_at_max_context":
             float(b * layout.sequence_bytes(m, per_gpu=True))} for b, m in zip(batches.tolist(), longest.tolist())]
    return rows, [r for r in rows if r["concurrency"] in CONCURRENCY_LANDMARKS]

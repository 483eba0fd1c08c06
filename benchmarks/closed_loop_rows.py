"""The rows of tests/data/measurements/closed_loop.csv as kvplan replays them (shared by the closed-loop scripts).

Each row carries its deployment (model and hardware cards, TP, attention DP, weights and KV dtypes,
engine) and, where the source's engine version fixes them, its scheduling: ``scheduler``
(``mixed`` or ``prefill-first``, ``, whole prompts`` when prompts are not chunked),
``max_num_batched_tokens`` and ``max_num_seqs``, each with its source in ``scheduler_source``
(blank: the engine's current default, :data:`kvplan.plans.fleet.closed.SCHEDULES`). The token
budget also sets the engine's activation reserve, so it changes the KV pool as it does in the engine.
``cuda_graphs`` says what the row's engine version ran, from that version's source (``cuda_graphs_source``):
``decode`` (decode batches replay CUDA graphs, kvplan's default), ``none`` (no CUDA graphs: replayed with
``--enforce-eager``, each decode step max(GPU step, L × t_layer)), blank (not established: the default).
``length_spread`` r: the source's lengths vary ±r around the stated ISL / OSL (vLLM's ``--random-range-ratio``
semantics: integers uniform in [L(1 − r), L(1 + r)]); the replay draws them so, seeded (numpy default_rng(0),
input lengths then output lengths, as vLLM's RandomDataset draws them, though not its exact sequence);
blank: every request at the stated lengths (dstack's ``--random-range-ratio 1``, fixed lengths).
"""

from __future__ import annotations

import csv
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from kvplan.plans.deployment import EngineSettings, Parallelism, resolve
from kvplan.plans.fleet.closed import closed_loop
from kvplan.plans.sizing.efficiency import Efficiencies

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "measurements" / "closed_loop.csv"
ENGINES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "nvidia-nim": "trtllm"}


def rows() -> list[dict]:
    with DATA.open(newline="") as fh:
        return list(csv.DictReader(fh))


def engine(r: dict) -> str:
    return ENGINES.get(r["engine"].split(" ")[0].lower(), "vllm")


def kv_dtype(r: dict) -> str:
    text = (r["kv_dtype"] or "").strip().lower()
    return "fp8" if text.startswith("fp8") else ("bf16" if text.startswith("bf16") else "auto")


CUDA_GRAPHS = ("", "decode", "none")


def enforce_eager(r: dict) -> bool:
    """Whether the row's engine version ran without CUDA graphs (its ``cuda_graphs`` column, sourced)."""
    value = (r.get("cuda_graphs") or "").strip()
    if value not in CUDA_GRAPHS:
        raise ValueError(f"cuda_graphs must be one of {CUDA_GRAPHS} (got {value!r})")
    return value == "none"


def settings(r: dict, perf_model: str = "operators") -> EngineSettings:
    """The row's engine settings: its engine and dtypes, the token budget / sequence cap its source fixes and, where
    its version ran without CUDA graphs, ``--enforce-eager`` (``perf_model``: the step-time model, the per-operator
    default or ``roofline``, which charges no dispatch and so replays every row with its graphs)."""
    extra = {}
    if enforce_eager(r) and perf_model == "operators":
        extra["efficiencies"] = Efficiencies(enforce_eager=True)
    if r.get("max_num_batched_tokens"):
        extra["chunk_tokens"] = int(r["max_num_batched_tokens"])
    if r.get("max_num_seqs"):
        extra["max_num_seqs"] = int(r["max_num_seqs"])
    return EngineSettings(engine=engine(r), kv_dtype=kv_dtype(r), weights_dtype=r["weights_dtype"],
                          perf_model=perf_model, **extra)


def deployment(r: dict, perf_model: str = "operators"):
    """The row's deployment; SGLang's ``--enable-dp-attention`` rows (``attention_dp`` 8) as attention DP over the
    8 GPUs with the experts split over them."""
    dp = int(r["attention_dp"] or 1)
    return resolve(r["model_card"], r["hardware_card"], engine=settings(r, perf_model),
                   parallel=Parallelism(tp=int(r["tp"]) // dp, dp=dp, expert_parallel=dp > 1))


def schedule(r: dict) -> dict:
    """``closed_loop`` keywords for the row's scheduler (empty: the engine's default)."""
    text = (r.get("scheduler") or "").strip()
    if not text:
        return {}
    return {"prefill_first": text.startswith("prefill-first"), "split_prompts": "whole prompts" not in text}


def kv_policy(r: dict) -> str | None:
    """The row's KV policy where its engine version fixes one other than the engine's default: vLLM before 0.8 runs
    V0 (``vllm/core/scheduler.py``: the whole prompt's blocks at admission with the block manager's 1% watermark,
    ``_preempt`` RECOMPUTE for a single-sequence group, ``running_queue.pop()`` the last admitted)."""
    version = (r.get("engine_version") or "").split(".")
    if engine(r) == "vllm" and len(version) > 1 and version[0] == "0" and version[1].isdigit() and int(version[1]) < 8:
        return "recompute_v0"
    return None


def lengths(r: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The row's n input and output lengths: the stated ones, or drawn ±``length_spread`` around them."""
    spread = float(r.get("length_spread") or 0.0)
    isl, osl = int(r["isl"]), int(r["osl"])
    if spread <= 0:
        return np.full(n, isl), np.full(n, osl)
    rng = np.random.default_rng(0)
    return tuple(rng.integers(int(length * (1 - spread)), int(length * (1 + spread)) + 1, size=n)
                 for length in (isl, osl))


def replay(r: dict, dep=None, steps=None) -> dict:
    """One closed-loop run of the row: its lengths (:func:`lengths`), concurrency and request count, one instance."""
    dep = dep if dep is not None else deployment(r)
    n = int(r["num_requests"] or 500)
    isl, osl = lengths(r, n)
    return closed_loop(dep, isl, osl, int(r["concurrency"]), 1, n, steps=steps, kv_policy=kv_policy(r),
                       **schedule(r))


def group(r: dict) -> str:
    """dense; MoE per GPU; bursts (all requests sent at once, C = N) apart."""
    name = "dense" if r["architecture"] == "dense" else f"MoE {r['hardware_card']}"
    return name + (" burst" if r.get("burst") else "")


def source(r: dict) -> str:
    """The row's publisher, from its URL: the site, or the owner of a GitHub repository (per-source scores, so that a
    median over all rows that moves because rows were added is not read as the model moving)."""
    url = urlparse(r["source_url"])
    return url.path.strip("/").split("/")[0] if url.netloc == "github.com" else url.netloc


def scored(r: dict, out: dict) -> list[tuple[str, float, float]]:
    """(metric, measured, predicted) of a replay ``out`` against its row, the metrics the row publishes; predicted
    times in ms. ITL p50 is the median gap between consecutive tokens over every token (what benchmark clients
    report as median ITL: a request stalled behind other prompts contributes one long gap and many short ones);
    a row that publishes no ITL is scored on its median TPOT against the replay's median TPOT, as before."""
    itl = (("ITL p50", r["itl_median_ms"], (out.get("itl_p50_s") or 0) * 1e3) if r["itl_median_ms"]
           else ("ITL p50", r["tpot_median_ms"], (out["tpot_p50_s"] or 0) * 1e3))
    pairs = (("output tok/s", r["output_tokens_per_s"], out["output_tokens_per_s"]),
             ("TTFT p50", r["ttft_median_ms"], (out["ttft_p50_s"] or 0) * 1e3),
             itl,
             ("TPOT p50", r["tpot_median_ms"], (out["tpot_p50_s"] or 0) * 1e3))
    return [(metric, float(measured), predicted) for metric, measured, predicted in pairs if measured and predicted]

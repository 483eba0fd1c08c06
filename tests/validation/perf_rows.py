"""kvplan's estimate for each published throughput row (fitting and scoring sets), and error statistics.

A row of ``tests/data/measurements/*.csv`` names the model card, hardware card, parallelism
(``tp``, ``ep``, ``attention_dp``: TensorRT-LLM's DEPn is attention data-parallel over n ranks
with expert parallelism n), dtypes, ISL/OSL and a maximum-throughput figure in output tokens/s
per GPU. kvplan's side: ``kvplan latency MODEL HW --isl I --osl O --batch max`` with the same
parallelism (vLLM semantics: ``--tp tp/attention_dp --dp attention_dp --enable-expert-parallel``
when ep > 1), engine ``trtllm``, and ``tokens_per_s_per_gpu``.

Groups: ``dense-batch1`` (batch-1 decode), ``dense-max`` (dense at maximum throughput), ``moe``
(every MoE row), ``prefill`` (first-token latency). Errors are (kvplan − measured) / measured
for throughput (positive: kvplan optimistic) and the same for latency (negative: optimistic).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = ROOT / "tests" / "data" / "measurements"


@dataclass(frozen=True)
class Row:
    source: str
    model: str
    hardware: str
    label: str
    tp: int
    dp: int
    expert_parallel: bool
    weights_dtype: str
    kv_dtype: str
    isl: int
    osl: int
    measured: float
    group: str
    set: str


def _int(text: str, default: int = 1) -> int:
    return int(float(text)) if text and text.strip() else default


def load_rows(path: Path = MEASUREMENTS / "trtllm_perf_overview.csv", set_name: str = "fitting",
              moe_models: frozenset[str] | None = None) -> list[Row]:
    """Rows with a shipped model and hardware card and a throughput value."""
    from kvplan.cards.loader import load_model

    out = []
    with open(path, encoding="utf-8") as handle:
        for r in csv.DictReader(handle):
            if not (r.get("model_card") and r.get("hardware_card") and r.get("value")):
                continue
            if r.get("metric") != "output_tokens_per_s_per_gpu":
                continue
            if _int(r.get("pp", ""), 1) != 1:
                continue
            tp, dp = _int(r["tp"]), _int(r.get("attention_dp", ""), 1)
            ep = _int(r.get("ep", ""), 1)
            is_moe = load_model(r["model_card"]).moe is not None
            out.append(Row(
                source=f"{r['source_version']}: {r['model']} {r['parallelism_label']} on {r['gpu']}",
                model=r["model_card"], hardware=r["hardware_card"], label=r["parallelism_label"],
                tp=max(tp // dp, 1), dp=dp, expert_parallel=is_moe and ep > 1,
                weights_dtype=r["weights_dtype"] or "auto", kv_dtype=r.get("kv_dtype") or "auto",
                isl=_int(r["isl"]), osl=_int(r["osl"]), measured=float(r["value"]),
                group="moe" if is_moe else "dense-max", set=set_name))
    return out


def estimate(row: Row, **overrides) -> float:
    """kvplan's output tokens/s per GPU at the largest batch the KV pool holds (NaN if it cannot run)."""
    from kvplan.errors import KvplanError
    from kvplan.plans.sizing.latency import latency

    kw = dict(isl=row.isl, osl=row.osl, batch="max", tp=row.tp, dp=row.dp, expert_parallel=row.expert_parallel,
              weights_dtype=row.weights_dtype, kv_dtype=row.kv_dtype, engine="trtllm", allow_long_context=True)
    kw.update(overrides)
    try:
        return float(latency(row.model, row.hardware, **kw).rows[0]["tokens_per_s_per_gpu"])
    except KvplanError:
        return float("nan")


def stats(errors) -> dict[str, float]:
    """median |error|, median signed error (bias), p90 |error| and the count (NaNs dropped)."""
    e = np.asarray([x for x in errors if np.isfinite(x)], dtype=np.float64)
    if e.size == 0:
        return {"n": 0, "median_abs": float("nan"), "bias": float("nan"), "p90_abs": float("nan")}
    return {"n": int(e.size), "median_abs": float(np.median(np.abs(e))), "bias": float(np.median(e)),
            "p90_abs": float(np.quantile(np.abs(e), 0.9))}

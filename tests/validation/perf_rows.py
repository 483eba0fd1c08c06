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
    max_num_seqs: int | None = None     # per attention-DP rank: the run's requests can hold no more
    reading: str = ""                   # how the row's configuration was read where the source is silent


def _int(text: str, default: int = 1) -> int:
    return int(float(text)) if text and text.strip() else default


# ModelOpt checkpoints (``nvidia/...-FP8``, ``-FP4``, ``-NVFP4``) ship ``kv_cache_quant_algo: FP8`` in
# hf_quant_config.json and TensorRT-LLM's KV dtype ``auto`` follows the checkpoint (the TensorRT-LLM
# DeepSeek-R1 best-practice blog: "the latest DeepSeek-R1-0528-FP4 checkpoint had enabled FP8 KV cache
# by-default"). Where perf-overview does not state the KV dtype for such a checkpoint, the row reads FP8.
MODELOPT_KV = "fp8"
MODELOPT_NOTE = "KV fp8: ModelOpt checkpoint (kv_cache_quant_algo FP8), the page states no KV dtype"
# gpt-oss on Hopper: the page's "(FP8)" column runs the released MXFP4 experts through TensorRT-LLM's
# Triton MoE backend (llm_options comment "# Hopper: use TRITON"), W4A16 (TensorRT-LLM tech blog 9, gpt-oss:
# "Default quantization for MXFP4 checkpoints on Hopper is W4A16_MXFP4"); attention stays BF16.
GPT_OSS_HOPPER_NOTE = "weights mxfp4: gpt-oss MXFP4 experts on Hopper (Triton MoE backend), the column says FP8"
HOPPER = frozenset({"h100-sxm", "h200", "h100-pcie", "h20", "h800-sxm"})


def load_rows(path: Path = MEASUREMENTS / "trtllm_perf_overview.csv", set_name: str = "fitting",
              moe_models: frozenset[str] | None = None) -> list[Row]:
    """Rows with a shipped model and hardware card and a throughput value.

    Where the page is silent the row is read as the checkpoint runs (``Row.reading`` says so):
    ModelOpt checkpoints (``nvidia/*``) keep their FP8 KV cache; gpt-oss on Hopper runs its
    MXFP4 experts; the batch per attention-DP rank is at most ``num_requests / dp`` (the run
    queues that many requests, no more).
    """
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
            kv = r.get("kv_dtype") or "auto"
            weights = r["weights_dtype"] or "auto"
            reading = []
            if kv == "auto" and r.get("checkpoint", "").startswith("nvidia/"):
                kv = MODELOPT_KV
                reading.append(MODELOPT_NOTE)
            if r["model_card"].startswith("gpt-oss") and r["hardware_card"] in HOPPER:
                weights = "mxfp4"
                reading.append(GPT_OSS_HOPPER_NOTE)
            requests = _int(r.get("num_requests", ""), 0)
            cap = min(2048, max(requests // dp, 1)) if requests else None
            out.append(Row(
                source=f"{r['source_version']}: {r['model']} {r['parallelism_label']} on {r['gpu']}",
                model=r["model_card"], hardware=r["hardware_card"], label=r["parallelism_label"],
                tp=max(tp // dp, 1), dp=dp, expert_parallel=is_moe and ep > 1,
                weights_dtype=weights, kv_dtype=kv,
                isl=_int(r["isl"]), osl=_int(r["osl"]), measured=float(r["value"]),
                group="moe" if is_moe else "dense-max", set=set_name, max_num_seqs=cap, reading="; ".join(reading)))
    return out


def estimate(row: Row, **overrides) -> float:
    """kvplan's output tokens/s per GPU at the largest batch the KV pool holds (NaN if it cannot run)."""
    from kvplan.errors import KvplanError
    from kvplan.plans.build import latency_from_names

    kw = dict(isl=row.isl, osl=row.osl, batch="max", tp=row.tp, dp=row.dp, expert_parallel=row.expert_parallel,
              weights_dtype=row.weights_dtype, kv_dtype=row.kv_dtype, engine="trtllm", allow_long_context=True,
              max_num_seqs=row.max_num_seqs)
    kw.update(overrides)
    try:
        return float(latency_from_names(row.model, row.hardware, **kw).rows[0]["tokens_per_s_per_gpu"])
    except KvplanError:
        return float("nan")


def stats(errors) -> dict[str, float]:
    """median |error|, median signed error (bias), p90 |error| and the count (NaNs dropped)."""
    e = np.asarray([x for x in errors if np.isfinite(x)], dtype=np.float64)
    if e.size == 0:
        return {"n": 0, "median_abs": float("nan"), "bias": float("nan"), "p90_abs": float("nan")}
    return {"n": int(e.size), "median_abs": float(np.median(np.abs(e))), "bias": float(np.median(e)),
            "p90_abs": float(np.quantile(np.abs(e), 0.9))}


# --------------------------------------------------------------------------- scoring set

SCORING = MEASUREMENTS / "scoring_set.csv"
ITL_CONTEXTS = (1024, 32_768, 100_000)   # inside the sweep the vLLM post fitted (256 … 125k)
# Programs whose TP all-reduce is torch.distributed on NCCL, no custom kernel: gpt-fast's tp.py
# (``dist.init_process_group(backend="nccl")``, ``funcol.all_reduce`` after each attention and MLP block).
NCCL_ENGINES = ("gpt-fast",)
NCCL_READING = "TP all-reduce on NCCL (gpt-fast tp.py: torch.distributed funcol.all_reduce, backend nccl)"
GROUP_OF = {"dense_decode_batch1": "dense-batch1", "dense_max_throughput": "dense-max", "moe": "moe",
            "prefill_ttft": "prefill", "dense_decode_batched": "dense-batched"}
# NVIDIA NIM 1.x picks a TensorRT-LLM profile where one is built for the GPUs ("The optimized TensorRT-LLM profiles
# are preferred over vLLM when available", docs.nvidia.com/nim/large-language-models/1.0.0/optimization.html, profile
# selection) and lists H100 SXM FP8 latency profiles for the Llama 3.x 70B NIMs (support matrix, "optimized using
# TRT-LLM"): the NIM 1.8.0 rows (2 × H100 FP8 TP2) are TensorRT-LLM's, as the closed-loop rows of the same page are
# read (tests/unit/test_closed_loop.py). An engine not named here is read as vLLM.
ENGINE_OF = {"vllm": "vllm", "vllm (ROCm)": "vllm", "tensorrt-llm": "trtllm", "sglang": "sglang",
             "nvidia-nim (llama-3.3-70b-instruct container)": "trtllm"}


@dataclass(frozen=True)
class Scored:
    row: Row
    metric: str        # what kvplan reads: tpot_s, ttft_s, e2e_s, tokens_per_s_per_gpu, decode_tokens_per_s
    kwargs: tuple      # latency_from_names() arguments
    scale: float       # kvplan value × scale = the measured unit


def load_scoring(path: Path = SCORING) -> list[Scored]:
    """Scoring rows kvplan can reproduce one-to-one (single-instance, stated lengths); others are left out.

    - ``itl_fit_intercept_ms`` + ``itl_fit_slope_ms_per_context_token`` (vLLM FP8-KV post): the
      published line ITL(c) = a + b c at c = 1k, 32k, 100k against the decode step at batch 1.
    - ``itl_ms`` / ``tpot_ms`` / ``ttft_ms`` at concurrency 1 (NVIDIA NIM tables, GPUStack's Qwen3-8B latency
      page): mean TPOT / TTFT.
    - ``output_tokens_per_s_per_user`` at batch 1 (gpt-fast): 1 / decode step at the prompt.
    - ``e2e_latency_s`` at batch b (vLLM ROCm tables): end-to-end latency of the static batch.
    - ``output_tokens_per_s_per_gpu`` with a stated batch (TensorRT-LLM H200 launch blog): throughput.
    - a disaggregated decode instance's tokens/s per node or GPU at a stated batch per GPU and KV length
      (LMSYS large-scale EP): the decode-only step of that instance (:func:`_pd_decode_row`).
    """
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as handle:
        raw = [r for r in csv.DictReader(handle) if r.get("model_card") and r.get("hardware_card")]
    out: list[Scored] = []

    def base(r, group, measured, isl, osl):
        dtype = r["weights_dtype"] if r["weights_dtype"] in ("bf16", "fp8", "fp16", "mxfp4", "fp4") else "auto"
        kv = r["kv_dtype"] if r["kv_dtype"] in ("bf16", "fp8") else "auto"
        return Row(source=f"{r['source'][:90]} ({r['metric']})", model=r["model_card"], hardware=r["hardware_card"],
                   label=f"TP{_int(r['tp'])}", tp=_int(r["tp"]), dp=1, expert_parallel=False, weights_dtype=dtype,
                   kv_dtype=kv, isl=isl, osl=osl, measured=measured, group=group, set="scoring")

    fits: dict[tuple, dict] = {}
    for r in raw:
        group = GROUP_OF.get(r["group"])
        engine = ENGINE_OF.get(r["engine"], "vllm")
        if group is None:
            continue
        metric = r["metric"]
        if _int(r.get("ep", ""), 1) > 1 or _int(r.get("attention_dp", ""), 1) > 1:
            scored = _pd_decode_row(r, group, engine) if r["phase"] == "decode" else _expert_parallel_row(r, group, engine)
            if scored is not None:
                out.append(scored)
            continue
        if metric.startswith("itl_fit_"):
            if r["kv_dtype"] not in ("", "auto", "bf16", "fp8"):
                continue        # a mixed KV cache (FP8 skip-SW: sliding-window layers bf16) kvplan cannot express
            key = (r["model_card"], r["hardware_card"], r["weights_dtype"], r["kv_dtype"], r["engine"])
            fits.setdefault(key, {"row": r})[metric] = float(r["value"])
        elif metric in ("itl_ms", "tpot_ms") and _int(r["concurrency"]) == 1:
            out.append(Scored(base(r, group, float(r["value"]), _int(r["isl"]), _int(r["osl"])), "tpot_s",
                              (("engine", engine), ("batch", 1)), 1e3))
        elif metric == "ttft_ms" and _int(r["concurrency"]) == 1:
            out.append(Scored(base(r, "prefill", float(r["value"]), _int(r["isl"]), _int(r["osl"])), "ttft_s",
                              (("engine", engine), ("batch", 1)), 1e3))
        elif metric == "output_tokens_per_s_per_user" and _int(r["batch"]) == 1:
            kwargs = (("engine", engine), ("batch", 1))
            row = base(r, group, float(r["value"]), _int(r["isl"]), 2)
            if r["engine"].startswith(NCCL_ENGINES):
                kwargs += (("custom_all_reduce", False),)
                row = Row(**{**row.__dict__, "reading": NCCL_READING})
            out.append(Scored(row, "decode_tokens_per_s", kwargs, 1.0))
        elif metric == "e2e_latency_s" and r["batch"]:
            out.append(Scored(base(r, group, float(r["value"]), _int(r["isl"]), _int(r["osl"])), "e2e_s",
                              (("engine", engine), ("batch", _int(r["batch"]))), 1.0))
        elif metric == "output_tokens_per_s_per_gpu" and r["batch"] and r["osl"]:
            out.append(Scored(base(r, group, float(r["value"]), _int(r["isl"]), _int(r["osl"])),
                              "tokens_per_s_per_gpu", (("engine", engine), ("batch", _int(r["batch"]))), 1.0))
    for key, fit in fits.items():
        if "itl_fit_intercept_ms" not in fit or "itl_fit_slope_ms_per_context_token" not in fit:
            continue
        r = fit["row"]
        group = GROUP_OF[r["group"]]
        for c in ITL_CONTEXTS:
            itl = fit["itl_fit_intercept_ms"] + fit["itl_fit_slope_ms_per_context_token"] * c
            row = base(r, group, itl, c, 2)
            out.append(Scored(Row(**{**row.__dict__, "source": f"{r['source'][:90]} (fitted ITL at {c:,} tokens)"}),
                              "decode_step_s", (("engine", ENGINE_OF.get(r["engine"], "vllm")), ("batch", 1)), 1e3))
    return out


def _expert_parallel_row(r: dict, group: str, engine: str) -> Scored | None:
    """An attention-DP / expert-parallel throughput row of one node at a stated whole-instance batch.

    ``tp`` is the source's TensorRT-LLM ``--tp`` (attention TP × attention DP), so kvplan's
    attention TP is ``tp / attention_dp`` with ``--dp attention_dp --enable-expert-parallel``.
    Multi-node, disaggregated and speculative (MTP) rows are left out: their step is not one
    instance's static batch.
    """
    if r["metric"] != "output_tokens_per_s_per_gpu" or not (r["batch"] and r["osl"] and r["isl"]):
        return None
    if _int(r.get("nodes", ""), 1) != 1 or "MTP" in r.get("notes", "").replace("No MTP", ""):
        return None
    dp = _int(r.get("attention_dp", ""), 1)
    tp = max(_int(r["tp"]) // dp, 1)
    row = Row(source=f"{r['source'][:90]} ({r['source_locator'][:60]})", model=r["model_card"],
              hardware=r["hardware_card"], label=f"DEP{dp}" if dp > 1 else f"TP{tp}EP", tp=tp, dp=dp,
              expert_parallel=_int(r.get("ep", ""), 1) > 1,
              weights_dtype=r["weights_dtype"] if r["weights_dtype"] in ("bf16", "fp8", "fp16", "mxfp4", "fp4") else "auto",
              kv_dtype=r["kv_dtype"] if r["kv_dtype"] in ("bf16", "fp8") else "auto", isl=_int(r["isl"]),
              osl=_int(r["osl"]), measured=float(r["value"]), group=group, set="scoring")
    return Scored(row, "tokens_per_s_per_gpu", (("engine", engine), ("batch", _int(r["batch"])), ("dp", dp),
                                                ("expert_parallel", row.expert_parallel)), 1.0)


# The node whose NIC a multi-node row's EP all-to-all crosses (system cards with the GPU's scale-up link and NIC).
NODE_SYSTEM = {"h100-sxm": "hgx-h100-8", "h200": "hgx-h200-8", "h800-sxm": "hgx-h800-8"}


def _pd_decode_row(r: dict, group: str, engine: str) -> Scored | None:
    """A disaggregated decode instance at a stated batch per GPU and KV length (no prefill on it, no MTP).

    tokens/s per node = GPUs per node × (instance batch / decode step at the KV length) / GPUs, the step of
    ``--tp 1 --dp N --enable-expert-parallel`` over N = the row's GPUs on the GPU's HGX system card (its NIC),
    with the fewest redundant experts that make the expert count divide by N (SGLang's EPLB replicas), two-batch
    overlap where the row says so, and a balanced lock step (λ_dp = 1: a decode-only instance mixes no context
    chunks into its steps).
    """
    metric = r["metric"]
    per = {"output_tokens_per_s_per_node": 8.0, "output_tokens_per_s_per_gpu": 1.0}.get(metric)
    system = NODE_SYSTEM.get(r["hardware_card"])
    gpus, dp, ep = _int(r.get("num_gpus", ""), 0), _int(r.get("attention_dp", ""), 1), _int(r.get("ep", ""), 1)
    if per is None or system is None or not (r["batch"] and r["isl"]) or not (gpus == dp == ep > 1):
        return None
    if "MTP" in r.get("notes", "").replace("No MTP", ""):
        return None
    from kvplan.cards.loader import load_model

    experts = load_model(r["model_card"]).moe.num_experts
    kv = _int(r["isl"])
    row = Row(source=f"{r['source'][:90]} ({r['source_locator'][:60]})", model=r["model_card"],
              hardware=r["hardware_card"], label=f"DEP{dp} decode", tp=1, dp=dp, expert_parallel=True,
              weights_dtype=r["weights_dtype"] if r["weights_dtype"] in ("bf16", "fp8", "fp4") else "auto",
              kv_dtype=r["kv_dtype"] if r["kv_dtype"] in ("bf16", "fp8") else "auto", isl=kv, osl=2,
              measured=float(r["value"]), group=group, set="scoring",
              reading=f"decode-only instance on {system}; batch {r['batch']} per GPU at KV length {kv:,}")
    kwargs = (("engine", engine), ("batch", dp * _int(r["batch"])), ("dp", dp), ("expert_parallel", True),
              ("redundant_experts", (-experts) % dp), ("system", system), ("context", kv), ("dp_imbalance", 1.0),
              ("two_batch_overlap", "two-batch overlap" in r.get("notes", "").lower()))
    return Scored(row, "decode_tokens_per_s_per_gpu", kwargs, per)


def estimate_scored(s: Scored) -> float:
    from kvplan.errors import KvplanError
    from kvplan.plans.build import latency_from_names

    r = s.row
    kw = dict(s.kwargs)
    try:
        result = latency_from_names(r.model, r.hardware, isl=r.isl, osl=r.osl, tp=r.tp, weights_dtype=r.weights_dtype,
                                    kv_dtype=r.kv_dtype, allow_long_context=True, **kw).rows[0]
    except KvplanError:
        return float("nan")
    return float(result[s.metric]) * s.scale

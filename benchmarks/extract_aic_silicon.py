"""Cut NVIDIA aiconfigurator's measured serving runs into ``tests/data/measurements/aic_silicon.csv``.

Usage (reads a checkout of github.com/ai-dynamo/aiconfigurator; writes the CSV)::

    python benchmarks/extract_aic_silicon.py --source /path/to/aiconfigurator --commit <sha>

aiconfigurator (Apache-2.0) ships ``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv``: end-to-end
serving runs on real GPUs (its ``silicon_data_source`` column: database dumps of its benchmark workflow with the
engine image and run id, or the per-model result files of its gap analyses) with the measured TTFT and TPOT at a
fixed number of requests in flight. Its own accuracy gate scores its predictions on them
(``tools/accuracy_regression_testing``). The rule, fixed before any row was scored: every aggregated (``agg``)
run whose model and GPU kvplan has cards for becomes a row, whatever its error. Left out, counted in the script's
summary: disaggregated runs (their prefill/decode worker split is a different replay), models and GPUs without a
card (MiniMax-M2.5, Qwen3.5-397B, Kimi-K2.5, GLM-5; B300, GB300), runs without a stated concurrency, runs whose
concurrency is not one instance's batch (``batch_size × attention_dp_size``: those ids count several replicas),
and a measurement the file lists again (the database dump and the dated result files carry the same runs, some
labelled DeepSeek-V3 in one and DeepSeek-R1 in another): the same card, engine version, layout, quantisation,
lengths, batch and concurrency with the same TTFT and TPOT to 6 significant digits, kept once (the first).

Copied as published, unrounded: lengths, parallel sizes, quantisation modes, batch, concurrency, TTFT and TPOT.
The only text not copied is the local path some gap-analysis rows carry in ``silicon_data_source`` (the file's
name is kept). The card names are kvplan's mapping, below.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "measurements" / "aic_silicon.csv"
PATH = "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv"
MODELS = {  # Hugging Face checkpoint -> (kvplan model card, architecture); R1 and V3 share one architecture
    "deepseek-ai/DeepSeek-R1": ("deepseek-v3", "moe"),
    "deepseek-ai/DeepSeek-V3": ("deepseek-v3", "moe"),
    "nvidia/DeepSeek-R1-NVFP4": ("deepseek-v3", "moe"),
    "openai/gpt-oss-120b": ("gpt-oss-120b", "moe"),
    "Qwen/Qwen3-235B-A22B-FP8": ("qwen3-235b-a22b", "moe"),
    "meta-llama/Llama-3.1-70B": ("llama-3.1-70b", "dense"),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", "dense"),
    "nvidia/Llama-3.1-8B-Instruct-FP8": ("llama-3.1-8b", "dense"),
    "Qwen/Qwen3-32B": ("qwen3-32b", "dense"),
    "nvidia/Qwen3-32B-NVFP4": ("qwen3-32b", "dense"),
}
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200"}
HEADER = ["row_id", "provenance", "engine", "engine_version", "checkpoint", "model_card", "architecture", "system",
          "hardware_card", "tp", "pp", "attention_dp", "moe_tp", "moe_ep", "gemm_quant_mode", "moe_quant_mode",
          "isl", "osl", "batch_size", "concurrency", "ttft_ms", "tpot_ms"]


def _number(text: str) -> str:
    """A whole number as aiconfigurator's float column prints it (``8.0`` -> ``8``), blank kept blank."""
    text = (text or "").strip()
    if not text:
        return ""
    value = float(text)
    return str(int(value)) if value.is_integer() else text


def _provenance(text: str) -> str:
    """``silicon_data_source`` without a local directory: a ``source_file=`` path keeps only its file name."""
    return "; ".join(re.sub(r"^source_file=.*/", "source_file=", part.strip()) for part in text.split(";"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="a checkout (or bare mirror) of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", required=True, help="the commit to read")
    args = parser.parse_args()
    git = Path(args.source)
    text = subprocess.run(["git", "-C", str(git), "show", f"{args.commit}:{PATH}"], check=True,
                          capture_output=True, text=True).stdout
    rows, dropped, seen = [], Counter(), set()
    for r in csv.DictReader(text.splitlines()):
        if r["mode"] != "agg":
            dropped["disaggregated run"] += 1
            continue
        if r["model_path"] not in MODELS:
            dropped[f"no kvplan card for {r['model_path']}"] += 1
            continue
        if r["system"] not in SYSTEMS:
            dropped[f"no kvplan card for {r['system']}"] += 1
            continue
        m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
        if not m:
            dropped["no stated concurrency"] += 1
            continue
        concurrency, batch = int(m.group(1)), float(r["batch_size"])
        if concurrency != batch * float(r["attention_dp_size"] or 1):
            dropped["concurrency is not one instance's batch"] += 1
            continue
        card, arch = MODELS[r["model_path"]]
        same = (card, r["backend"], r["backend_version"], r["system"], *(_number(r[k]) for k in (
            "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "batch_size")),
            r["gemm_quant_mode"], r["moe_quant_mode"], r["isl"], r["osl"], concurrency,
            f"{float(r['silicon_ttft_ms']):.6g}", f"{float(r['silicon_tpot_ms']):.6g}")
        if same in seen:
            dropped["the same measurement listed again"] += 1
            continue
        seen.add(same)
        rows.append({
            "row_id": r["id"], "provenance": _provenance(r["silicon_data_source"]), "engine": r["backend"],
            "engine_version": r["backend_version"], "checkpoint": r["model_path"], "model_card": card,
            "architecture": arch, "system": r["system"], "hardware_card": SYSTEMS[r["system"]],
            "tp": _number(r["tp_size"]), "pp": _number(r["pp_size"]), "attention_dp": _number(r["attention_dp_size"]),
            "moe_tp": _number(r["moe_tp_size"]), "moe_ep": _number(r["moe_ep_size"]),
            "gemm_quant_mode": r["gemm_quant_mode"], "moe_quant_mode": r["moe_quant_mode"],
            "isl": r["isl"], "osl": r["osl"], "batch_size": _number(r["batch_size"]), "concurrency": str(concurrency),
            "ttft_ms": r["silicon_ttft_ms"], "tpot_ms": r["silicon_tpot_ms"]})
    with OUT.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows -> {OUT.relative_to(ROOT)} (aiconfigurator {args.commit[:12]} {PATH})")
    for why, n in sorted(dropped.items(), key=lambda kv: -kv[1]):
        print(f"  left out {n:5d}: {why}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

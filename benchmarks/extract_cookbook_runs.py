"""Cut the SGLang cookbook's closed-loop speed benchmarks into ``tests/data/measurements/closed_loop.csv`` rows.

Usage (reads a checkout of github.com/sgl-project/sgl-cookbook; prints CSV rows, header first)::

    python benchmarks/extract_cookbook_runs.py --source /path/to/sgl-cookbook --commit <sha> > rows.csv

The rule, fixed before any row was scored: every ``sglang.bench_serving`` run of a page's "5.1 Speed Benchmark"
section that uses ``--dataset-name random`` (so each request's lengths are drawn as the client draws them) on a
model and GPU the scoring set already maps to kvplan cards (``tests/data/measurements/scoring_set.csv``, the same
pages' batch-1 rows) becomes a row, whatever its error. The pages' ShareGPT runs (gpt-oss-120b, Qwen3-Next,
Kimi-K2) are left out: their per-request lengths are not published. Every figure is copied from the run's printed
``Serving Benchmark Result`` block; the only derived ones are the mean lengths (the block's totals over its
requests) and the length spread (``sglang.bench_serving`` random dataset, ``--random-range-ratio`` 0.0 by default:
each length uniform in [1, L]; replayed as uniform around the run's own mean with the low end at 1).
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("Llama/Llama3.1.md", "DeepSeek/DeepSeek-R1.md", "DeepSeek/DeepSeek-V3_1.md", "Qwen/Qwen3.md")
# the chunked prefill budget and CUDA-graph cap SGLang 0.5.x sets by GPU memory (server_args.py
# _handle_gpu_memory_settings): >= 160 GiB (B200 183 GB, MI300X 192 GB) 16,384 tokens and 512 graphs; 60-90 GiB
# (A100 80 GB, H100) 8,192 tokens and 512 graphs at tp >= 4
CHUNK = {"b200": 16384, "mi300x": 16384, "a100-80gb": 8192}
HEADER = ["source", "source_url", "source_locator", "engine", "engine_version", "engine_config", "client", "model",
          "checkpoint", "model_card", "architecture", "gpu", "hardware_card", "num_gpus", "tp", "ep", "attention_dp",
          "weights_dtype", "kv_dtype", "isl", "osl", "concurrency", "num_requests", "ttft_mean_ms", "ttft_median_ms",
          "ttft_p99_ms", "tpot_mean_ms", "tpot_median_ms", "tpot_p99_ms", "itl_mean_ms", "itl_median_ms",
          "itl_p99_ms", "output_tokens_per_s", "request_throughput_per_s", "notes", "scheduler",
          "max_num_batched_tokens", "max_num_seqs", "scheduler_source", "burst", "cuda_graphs", "cuda_graphs_source",
          "length_spread"]
FIELDS = {"Total input tokens:": "in", "Total generated tokens:": "out", "Successful requests:": "n",
          "Output token throughput (tok/s):": "output_tokens_per_s", "Request throughput (req/s):": "rps",
          "Mean TTFT (ms):": "ttft_mean_ms", "Median TTFT (ms):": "ttft_median_ms", "P99 TTFT (ms):": "ttft_p99_ms",
          "Mean TPOT (ms):": "tpot_mean_ms", "Median TPOT (ms):": "tpot_median_ms", "P99 TPOT (ms):": "tpot_p99_ms",
          "Mean ITL (ms):": "itl_mean_ms", "Median ITL (ms):": "itl_median_ms", "P99 ITL (ms):": "itl_p99_ms",
          "Max request concurrency:": "concurrency"}


def _cards(page_url: str) -> dict:
    """The page's model and GPU as the scoring set maps them (its batch-1 rows of the same page)."""
    with open(ROOT / "tests" / "data" / "measurements" / "scoring_set.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["source_url"] == page_url:
                return r
    raise SystemExit(f"no scoring-set row for {page_url}")


def _block(text: str) -> dict:
    out = {}
    for label, key in FIELDS.items():
        m = re.search(re.escape(label) + r"\s+([\d.]+)", text)
        if m:
            out[key] = m.group(1)
    return out


def _command(before: str, name: str) -> str:
    """The last ``name`` command (a fenced shell block's text) before a result block, on one line."""
    i = before.rfind(name)
    if i < 0:
        return ""
    end = before.find("```", i)
    return " ".join(before[i:end].replace("\\\n", " ").split())


def _first(before: str, names: tuple[str, ...]) -> str:
    """The first of ``names`` (the spellings the pages use for one command) found before a result block."""
    return next((c for c in (_command(before, n) for n in names) if c), "")


def runs(root: Path, commit: str, page: str):
    text = (root / "docs" / "autoregressive" / page).read_text(encoding="utf-8")
    url = f"https://github.com/sgl-project/sgl-cookbook/blob/{commit}/docs/autoregressive/{page}"
    cards = _cards(url)
    env = text[text.find("### 5.1 Speed Benchmark"):]
    for m in re.finditer(r"=+ Serving Benchmark Result =+", text):
        before = text[:m.start()]
        client = _first(before, ("python -m sglang.bench_serving", "python3 -m sglang.bench_serving",
                                 "sglang serve \\\n  --backend"))
        if "--dataset-name random" not in client:
            continue
        serve = _first(before, ("python -m sglang.launch_server", "sglang serve \\\n  --model-path"))
        lengths = re.search(r"--random-input-len (\d+) --random-output-len (\d+)", client)
        prompts = re.search(r"--num-prompts (\d+)", client)
        b = _block(text[m.start():m.start() + 3000])
        n = int(b["n"])
        isl, osl = round(int(b["in"]) / n), round(int(b["out"]) / n)
        spread = round(1 - 1 / min(isl, osl), 4)
        hw = cards["hardware_card"]
        yield {
            "source": f"sgl-project/sgl-cookbook docs/autoregressive/{page} (commit {commit[:7]}); SGLang cookbook "
                      "'5.1 Speed Benchmark'",
            "source_url": url,
            "source_locator": (f"5.1 Speed Benchmark: random {lengths.group(1)} / {lengths.group(2)}, --max-concurrency "
                               f"{b['concurrency']}, --num-prompts {prompts.group(1)}"),
            "engine": "sglang (ROCm)" if hw == "mi300x" else "sglang", "engine_version": cards["engine_version"],
            "engine_config": serve, "client": client, "model": cards["model"], "checkpoint": cards["checkpoint"],
            "model_card": cards["model_card"], "architecture": cards["architecture"], "gpu": cards["gpu"],
            "hardware_card": hw, "num_gpus": cards["num_gpus"], "tp": cards["tp"], "ep": "", "attention_dp": "",
            "weights_dtype": cards["weights_dtype"], "kv_dtype": cards["kv_dtype"], "isl": isl, "osl": osl,
            "concurrency": b["concurrency"], "num_requests": n,
            **{k: b.get(k, "") for k in ("ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "tpot_mean_ms",
                                          "tpot_median_ms", "tpot_p99_ms", "itl_mean_ms", "itl_median_ms",
                                          "itl_p99_ms", "output_tokens_per_s")},
            "request_throughput_per_s": b.get("rps", ""),
            "notes": (f"'Total input tokens: {b['in']}', 'Total generated tokens: {b['out']}' over {n} requests: "
                      f"isl {isl}, osl {osl} (the means). sglang.bench_serving's random dataset draws each length "
                      "uniform in [1, --random-input-len / --random-output-len] (--random-range-ratio 0.0 by "
                      f"default): replayed uniform around the means with the low end at 1 (length_spread {spread}). "
                      f"Test environment: {cards['gpu']}, TP {cards['tp']}, SGLang {cards['engine_version']}, "
                      "the page's launch command (no other flag: the engine's defaults); KV dtype auto."),
            "scheduler": "prefill-first", "max_num_batched_tokens": CHUNK[hw], "max_num_seqs": "",
            "scheduler_source": ("SGLang 0.5 scheduler.py get_next_batch_to_run: a prefill batch runs on its own "
                                 "whenever one can be formed (no --enable-mixed-chunk); server_args.py "
                                 "_handle_gpu_memory_settings: chunked_prefill_size 16384 at >= 160 GiB (B200, MI300X), "
                                 "8192 at 60-90 GiB (A100 80GB)"),
            "burst": "", "cuda_graphs": "",
            "cuda_graphs_source": ("not established: SGLang 0.5.6 / 0.5.7 not read at their versions (a stored copy of "
                                   "SGLang 0.5.x server_args.py _handle_gpu_memory_settings gives cuda_graph_max_bs 512 "
                                   "on these GPUs at tp 8, above the runs' 100 requests); replayed with kvplan's "
                                   "defaults"),
            "length_spread": spread,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="checkout of github.com/sgl-project/sgl-cookbook")
    ap.add_argument("--commit", required=True, help="its commit (the rows' source URLs)")
    args = ap.parse_args()
    w = csv.DictWriter(sys.stdout, HEADER, lineterminator="\n")
    w.writeheader()
    for page in PAGES:
        for row in runs(Path(args.source), args.commit, page):
            w.writerow(row)


if __name__ == "__main__":
    main()

"""Cut ``kvplan/data/perf/rccl/`` (MI300X all-reduce latency) out of AMD's ROCm blog's rccl-tests output.

Source: the AMD ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X" (Jayacharan
Kolla, Pedram Alizadeh, Gilbert Lee, 2025-03-02, https://rocm.blogs.amd.com/software-tools-optimization/
mi300x-rccl-xgmi/README.html), whose markdown is ``blogs/software-tools-optimization/mi300x-rccl-xgmi/README.md``
in github.com/ROCm/rocm-blogs (commit c263176657bb16a54a709b3fe75144f603433a1a). It prints two ``all_reduce_perf``
runs of rccl-tests (develop 448c4c7, RCCL 2.22.3, ROCm 6.3) on one node of 8 GPUs that the log names ``AMD Instinct
MI300X``, one process per GPU, float sum, 8 B … 16 GiB in steps of 2x: the first without, the second with
``-G 1`` (the collective launched from a HIP graph). Usage::

    python benchmarks/compact_rccl_blog.py --readme path/to/mi300x-rccl-xgmi/README.md

Rules (kvplan/data/perf/rccl/README.md): the graph-mode run only (the decode steps kvplan prices run in HIP
graphs on the engines it scores), its out-of-place ``time`` column (µs -> s, as printed), message sizes from
1 KiB (every TP all-reduce kvplan prices is at least one token's hidden state, 2,048 x 2 B; the graph-mode rows at
8 and 16 B take 16 µs, 2.5x the 32 B row, launch effects no decode message sees). ``src_row`` is the 0-based data
row of that run's table. Nothing is interpolated.
"""

from __future__ import annotations

import argparse
import csv
from decimal import Decimal
from pathlib import Path

GPU, CARD, BACKEND = "mi300x", "mi300x", "rccl"
DEVICE = "AMD Instinct MI300X (rccl-tests prints the device name of all 8 ranks)"
REPO, COMMIT = "ROCm/rocm-blogs", "c263176657bb16a54a709b3fe75144f603433a1a"
PATH = "blogs/software-tools-optimization/mi300x-rccl-xgmi/README.md"
TABLE = "all_reduce_perf_graph"
MIN_BYTES = 1024
DTYPES = {"float": ("fp32", 4), "half": ("fp16", 2), "bfloat16": ("bf16", 2)}


def graph_run(text: str) -> tuple[str, list[list[str]]]:
    """(RCCL version, data rows) of the ``all_reduce_perf ... -G 1`` run in the blog's markdown."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "all_reduce_perf" in line and "-G 1" in line)
    version, rows = "", []
    for line in lines[start + 1:]:
        if line.startswith("RCCL version"):
            version = line.split(":", 1)[1].strip()
        if line.startswith("# Errors") or line.startswith("```"):
            break
        fields = line.split()
        if len(fields) >= 13 and fields[0].isdigit():
            rows.append(fields)
    if not version or not rows:
        raise SystemExit("no graph-mode all_reduce_perf table found")
    return version, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", required=True, help=f"{REPO}@{COMMIT[:7]}:{PATH}")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "kvplan" / "data" / "perf" / "rccl"))
    args = ap.parse_args()
    version, rows = graph_run(Path(args.readme).read_text(encoding="utf-8"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lead = ["gpu", "backend", "backend_version"]
    kept = []
    for i, f in enumerate(rows):
        size, count, dtype, op, time_us = int(f[0]), int(f[1]), f[2], f[3], f[5]
        if op != "sum" or size < MIN_BYTES:
            continue
        name, width = DTYPES[dtype]
        assert size == count * width, f
        kept.append([GPU, BACKEND, version, "rccl_graph", "all_reduce", name, 8, count, size,
                     f"{float(Decimal(time_us) / Decimal(10**6)):.6g}", i])
    with open(out / "comm.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(lead + ["library", "op", "dtype", "num_gpus", "message_elements", "message_bytes", "latency_s",
                           "src_row"])
        w.writerows(kept)
    with open(out / "sources.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(lead + ["source_table", "repo", "commit", "path"])
        w.writerow([GPU, BACKEND, version, TABLE, REPO, COMMIT, PATH])
    with open(out / "gpus.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["gpu", "card", "device"])
        w.writerow([GPU, CARD, DEVICE])
    print(f"comm.csv: {len(kept)} rows (RCCL {version})")


if __name__ == "__main__":
    main()

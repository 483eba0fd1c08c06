"""Cut the MI300X per-kernel tables in ``kvplan/data/perf/aiter/`` out of AMD's ROCm/aiter tuned-kernel CSVs.

Source: github.com/ROCm/aiter (MIT licence), ``aiter/configs/model_configs/*_tuned_*.csv``: each row is the
best kernel aiter's tuner found for one shape on one GPU, with its measured time ``us`` (microseconds;
``aiter/utility/mp_tuner.py`` worker: ``res, us = run_perftest(func, ...)``, ``aiter/test_common.py``
``perftest``: the kernels' device time from the torch profiler, inputs rotated beyond the L2 cache, warm-up
dropped, outliers outside 1.5 IQR removed) and the GPU's compute-unit count ``cu_num``
(``aiter/utility/base_tuner.py get_cu_num``: ``multi_processor_count``; ``aiter/jit/utils/chip_info.py``:
304 -> gfx942, i.e. MI300X or MI325X). Usage (reads a checkout or a bare clone through ``git show``)::

    python benchmarks/compact_aiter_data.py --source /path/to/aiter --commit <sha>

Rules (kvplan/data/perf/aiter/README.md): only rows with ``cu_num`` 304 (and ``gfx`` gfx942 where the file
has the column); every kept row is a copy of one source row; the only transformations are µs -> s (rounded
to 6 significant digits), aiter's quantisation names -> kvplan's dtypes (block-scaled FP8 -> ``fp8_block``,
unquantised bf16 -> ``bf16``, int8 W8A8 with per-token / per-channel scales -> ``sq``) and, for GEMMs, M kept at powers of two. Rows whose time is 0 (not run) are
left out. A shape measured in two files keeps the first file's row. ``src_row`` is the 0-based data row of
the source CSV named by the row's kernel id (``kernels.csv`` -> ``source_table`` -> ``sources.csv``).
Nothing is interpolated. ``PINNED_GEMM_FILES`` are read at their own commit (a pull request's head), named with
it in ``sources.csv`` and labelled with it in ``backend_version``.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
from decimal import Decimal
from pathlib import Path

GPU, CARD, BACKEND = "mi300x", "mi300x", "aiter"
DEVICE = "gfx942 with 304 CUs (aiter cu_num 304: MI300X or MI325X; the tuner records no product name)"
CU_NUM, GFX = "304", "gfx942"
CONFIGS = "aiter/configs/model_configs"
# GEMM files: 1x128 activation / 128x128 weight block-scaled FP8 (CK a8w8_blockscale tuner,
# csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py: block_shape = (128, 128)).
GEMM_FILES = (
    ("a8w8_blockscale_tuned_gemm_ds_v3", "fp8_block"),
    ("a8w8_blockscale_tuned_gemm_glm5_1", "fp8_block"),
    ("a8w8_blockscale_tuned_gemm_qwen36_27b", "fp8_block"),
    ("a8w8_blockscale_tuned_gemm_qwen3_vl_235b", "fp8_block"),
    ("a8w8_blockscale_tuned_gemm_qwen3_vl_32b", "fp8_block"),
)
# GEMM files read at a commit of their own (a pull request's head, not the --commit tree): (stem, path, commit,
# version label, dtype). ROCm/aiter PR #1092 "[MI300X] tune Gemm performance for llama 70b/405b" (2025-09-26,
# merged on GitHub; head 035725098d): the CK a8w8 rowwise tuner (csrc/ck_gemm_a8w8/gemm_a8w8_tune.py at that
# head: int8 x int8 operands, per-token x_scale [m, 1], per-channel w_scale [1, n], bf16 out) over Llama-3.1-70B
# and -405B's TP1/TP4/TP8 linear shapes, cu_num 304: kvplan's ``sq`` (W8A8 int8, per-token/per-channel scales).
PINNED_GEMM_FILES = (
    ("a8w8_tuned_gemm", "aiter/configs/a8w8_tuned_gemm.csv", "035725098db2d65f8d5757d6c8488c6176b00b93",
     "pr1092@035725098d", "sq"),
)
MOE_FILES = (
    "a8w8_blockscale_tuned_fmoe_ds_v3",
    "a8w8_blockscale_tuned_fmoe_glm5_1",
    "mimo_v2_5_pro_tuned_fmoe",
    "qwen3_235b_bf16_tuned_fmoe",
)
POW2_M = {2**i for i in range(16)}  # 1 .. 32768
# aiter's fused-MoE tuner (csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py generate_data) draws router scores
# with torch.randn over the `expert` experts and takes the top-k (TUNE_MOE_EXPERT_BALANCE unset, its default).
DISTRIBUTION = "random"


def moe_dtype(row: dict) -> str | None:
    """aiter (q_type, q_dtype_w) -> kvplan dtype: per_1x128 FP8 -> fp8_block, QuantType.No bf16 -> bf16."""
    if row["q_type"] == "QuantType.per_1x128" and "float8" in row["q_dtype_w"]:
        return "fp8_block"
    if row["q_type"] == "QuantType.No" and row["q_dtype_w"] == "torch.bfloat16":
        return "bf16"
    return None


def read_source(source: str, commit: str, stem: str, path: str | None = None) -> list[dict]:
    path = path or f"{CONFIGS}/{stem}.csv"
    text = subprocess.run(["git", "-C", source, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def on_mi300x(row: dict) -> bool:
    return row["cu_num"].strip() == CU_NUM and row.get("gfx", GFX).strip() == GFX


def seconds(us: str) -> str:
    """µs -> s, 6 significant digits (the source keeps 4 decimals of a µs)."""
    return f"{float(Decimal(us) / Decimal(10**6)):.6g}"


class Kernels:
    """kernel_id per (table, dtype, source file, kernel name): ``a0``, ``a1``, ..."""

    def __init__(self):
        self.ids: dict = {}

    def id(self, table: str, dtype: str, stem: str, name: str, version: str | None = None) -> str:
        key = (table, dtype, stem, name, version)
        if key not in self.ids:
            self.ids[key] = [f"a{len(self.ids)}", 0]
        self.ids[key][1] += 1
        return self.ids[key][0]


def gemm(source: str, commit: str, version: str, kernels: Kernels) -> list[list]:
    out, seen = [], set()
    for stem, dtype in GEMM_FILES:
        for i, r in enumerate(read_source(source, commit, stem)):
            m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
            if not on_mi300x(r) or m not in POW2_M or float(r["us"]) <= 0 or (dtype, m, n, k) in seen:
                continue
            seen.add((dtype, m, n, k))
            kid = kernels.id("gemm", dtype, stem, f"{r['libtype']}:{r['kernelName']}")
            out.append([GPU, BACKEND, version, dtype, kid, m, n, k, seconds(r["us"]), i])
    for stem, path, pinned, label, dtype in PINNED_GEMM_FILES:
        for i, r in enumerate(read_source(source, pinned, stem, path)):
            m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
            if not on_mi300x(r) or m not in POW2_M or float(r["us"]) <= 0 or (dtype, m, n, k) in seen:
                continue
            seen.add((dtype, m, n, k))
            kid = kernels.id("gemm", dtype, stem, f"{r.get('libtype', 'ck')}:{r['kernelName']}", label)
            out.append([GPU, BACKEND, label, dtype, kid, m, n, k, seconds(r["us"]), i])
    return sorted(out, key=lambda x: (x[3], x[6], x[7], x[5]))


def moe(source: str, commit: str, version: str, kernels: Kernels) -> list[list]:
    out, seen = [], set()
    for stem in MOE_FILES:
        for i, r in enumerate(read_source(source, commit, stem)):
            dtype = moe_dtype(r)
            if not on_mi300x(r) or dtype is None or float(r["us"]) <= 0:
                continue
            key = (dtype, int(r["token"]), int(r["model_dim"]), int(r["inter_dim"]), int(r["topk"]), int(r["expert"]))
            if key in seen:
                continue
            seen.add(key)
            name = r["kernelName1"] if r["run_1stage"] == "1" else f"{r['kernelName1']} + {r['kernelName2']}"
            kid = kernels.id("moe", dtype, stem, name)
            # the call as measured: `expert` experts all on this GPU (moe_tp = moe_ep = 1), `inter_dim` each
            out.append([GPU, BACKEND, version, dtype, kid, key[1], key[2], key[3], key[4], key[5], 1, 1, DISTRIBUTION,
                        seconds(r["us"]), i])
    return sorted(out, key=lambda x: (x[3], x[6], x[7], x[8], x[9], x[5]))


def write(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    print(f"{path.name}: {len(rows)} rows")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="checkout or bare clone of github.com/ROCm/aiter")
    ap.add_argument("--commit", required=True, help="the commit to read (recorded in sources.csv)")
    ap.add_argument("--version", default=None, help="backend_version label (default: git describe of the commit)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "kvplan" / "data" / "perf" / "aiter"))
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", args.source, "rev-parse", args.commit], check=True, capture_output=True,
                            text=True).stdout.strip()
    version = args.version or subprocess.run(["git", "-C", args.source, "describe", "--tags", commit], check=True,
                                             capture_output=True, text=True).stdout.strip()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kernels = Kernels()
    lead = ["gpu", "backend", "backend_version"]
    write(out / "gemm.csv", lead + ["dtype", "kernel_id", "m", "n", "k", "latency_s", "src_row"],
          gemm(args.source, commit, version, kernels))
    write(out / "moe.csv", lead + ["dtype", "kernel_id", "num_tokens", "hidden_size", "inter_size", "topk",
                                   "num_experts", "moe_tp", "moe_ep", "distribution", "latency_s", "src_row"],
          moe(args.source, commit, version, kernels))
    write(out / "kernels.csv", ["kernel_id", "table", "gpu", "backend", "backend_version", "dtype", "source_table",
                                "kernel", "rows"],
          [[kid, table, GPU, BACKEND, pinned or version, dtype, stem, name, n]
           for (table, dtype, stem, name, pinned), (kid, n) in kernels.ids.items()])
    stems = [s for s, _ in GEMM_FILES] + list(MOE_FILES)
    write(out / "sources.csv", lead + ["source_table", "repo", "commit", "path"],
          [[GPU, BACKEND, version, s, "ROCm/aiter", commit, f"{CONFIGS}/{s}.csv"] for s in stems]
          + [[GPU, BACKEND, label, s, "ROCm/aiter", pinned, path] for s, path, pinned, label, _ in PINNED_GEMM_FILES])
    write(out / "gpus.csv", ["gpu", "card", "device"], [[GPU, CARD, DEVICE]])


if __name__ == "__main__":
    main()

"""Cut the per-kernel tables in ``kvplan/data/perf/`` out of NVIDIA's aiconfigurator database.

Source: github.com/ai-dynamo/aiconfigurator (Apache-2.0), directory
``aic-core/src/aiconfigurator_core/systems/data/<system>/<op>/<backend>/<version>/*.parquet``.
Usage (needs pandas + pyarrow; reads a local checkout of that repository)::

    python benchmarks/compact_perf_data.py --source /path/to/aiconfigurator --commit <sha>

Rules (kvplan/data/perf/README.md): every kept row is a copy of one source row; the only
transformations are the unit change ms -> s (a decimal shift, rounded to 6 significant digits),
message elements -> bytes for collectives, dtype names to short lower-case names and
``context_tokens = isl + step`` for decode tables (aiconfigurator's own definition). Nothing is
interpolated. ``src_row`` is the 0-based row index in the source parquet file.
"""

from __future__ import annotations

import argparse
import csv
import os
from decimal import Decimal
from pathlib import Path

DATA_SUBDIR = "aic-core/src/aiconfigurator_core/systems/data"
GPUS = ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm")
# source system name -> kvplan hardware card (hardware_cards/<card>.yaml); device = the source's `device` column.
CARD = {"a100_sxm": "a100-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
DEVICES: dict = {}
# (source table, gpu, backend) left out whole, with the reason (README "Dropped").
EXCLUDE = {
    ("generation_attention_perf", "a100_sxm", "trtllm"):
        "TensorRT-LLM 1.0.0 A100 decode-attention rows imply up to 165% of the A100's 2.039 TB/s HBM bandwidth "
        "(21 kept-grid rows above 100%), which no kernel can do; the whole set is left out.",
}
# (source table, backend, dtype) left out on every GPU, with the reason (README "Dropped").
EXCLUDE_DTYPES = {
    ("gemm_perf", "vllm", "fp8_block"):
        "aiconfigurator's vLLM GEMM collector times fp8_block GEMMs without a CUDA graph (collector/vllm/collect_gemm.py "
        "at 095f58a, line 247: use_cuda_graph=gemm_type != 'fp8_block', since commit 4bed48d9), so each row holds the "
        "host's launch gaps: on B200 vLLM 0.24.0 they read 170-290 us at m = 1 from n x k = 1.8M to 470M weights "
        "(SGLang's graph-timed DeepGEMM rows: 16-122 us); vLLM replays its decode steps as CUDA graphs.",
}
BACKENDS = ("trtllm", "vllm", "sglang")
DTYPE = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}

POW2_M = [2**i for i in range(14)]  # 1 .. 8192
# (n, k) pairs of real models' linear layers, n = output features per GPU, k = input features.
GEMM_NK = {
    (6144, 4096): "Llama-3.1-8B qkv TP1",
    (4096, 4096): "Llama-3.1-8B o TP1",
    (1536, 4096): "Llama-3.1-8B qkv TP4",
    (4096, 1024): "Llama-3.1-8B o TP4",
    (7168, 4096): "Llama-3.1-8B gate_up TP4",
    (4096, 3584): "Llama-3.1-8B down TP4",
    (768, 4096): "Llama-3.1-8B qkv TP8",
    (4096, 512): "Llama-3.1-8B o TP8",
    (3584, 4096): "Llama-3.1-8B gate_up TP8",
    (10240, 8192): "Llama-3.1-70B qkv TP1",
    (8192, 8192): "Llama-3.1-70B o TP1",
    (2560, 8192): "Llama-3.1-70B qkv TP4",
    (8192, 2048): "Llama-3.1-70B o TP4",
    (8192, 7168): "Llama-3.1-70B down TP4",
    (8192, 1024): "Llama-3.1-70B o TP8",
    (7168, 8192): "Llama-3.1-70B gate_up TP8",
    (8192, 3584): "Llama-3.1-70B down TP8",
    (1536, 7168): "DeepSeek-V3 q_a (any TP)",
    (7168, 16384): "DeepSeek-V3 o TP1",
    (7168, 2048): "DeepSeek-V3 o TP8 / shared-expert down TP1",
    (3072, 1536): "DeepSeek-V3 q_b TP8",
    (10240, 5120): "Qwen3-32B qkv TP1",
    (5120, 1024): "Qwen3-32B o TP8",
}
# vLLM and SGLang keep the common subset below (TensorRT-LLM, the engine of the fitting set, keeps all). Every
# backend also keeps the source grid points that bracket each shipped card's GEMMs (card_gemm_shapes), the
# corners the reader interpolates between (kvplan/calc/gemm_grid.py).
GEMM_NK_ALL_BACKENDS = [(6144, 4096), (4096, 4096), (768, 4096), (4096, 512), (3584, 4096), (10240, 8192),
                        (8192, 8192), (8192, 1024), (7168, 8192), (8192, 3584), (1536, 7168), (7168, 16384)]
# (num_heads, num_kv_heads, head_dim) per GPU.
ATTN_SHAPES = {
    (32, 8, 128): "Llama-3.1-8B / Mistral-7B / Mixtral TP1",
    (8, 2, 128): "Llama-3.1-8B TP4",
    (64, 8, 128): "Llama-3.1-70B / Qwen3-32B TP1",
    (8, 1, 128): "Llama-3.1-70B TP8",
    (32, 32, 128): "Llama-2-7B (MHA) TP1",
    (64, 8, 64): "gpt-oss TP1",
}
DECODE_BATCH = [1, 4, 16, 64, 256, 1024]
DECODE_CTX = [128, 512, 2048, 8192, 32768, 65536, 131072]
PREFILL_BATCH = [1, 8]
PREFILL_ISL = [128, 512, 1024, 2048, 4096, 8192, 16384]
MLA_HEADS = [128, 16]  # DeepSeek-V3/R1 at TP1 and TP8
MOE_MODELS = {
    (7168, 2048, 8, 256): "DeepSeek-V3/R1",
    (4096, 1536, 8, 128): "Qwen3-235B-A22B",
    (4096, 14336, 2, 8): "Mixtral-8x7B",
    (2880, 2880, 4, 128): "gpt-oss-120b",
    (2880, 2880, 4, 32): "gpt-oss-20b",
    (7168, 2048, 8, 384): "Kimi-K2",
    (6144, 16384, 2, 8): "Mixtral-8x22B",
}
MOE_TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384]
MOE_PAR = [(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (1, 4), (1, 8), (1, 32)]  # (moe_tp, moe_ep)
MOE_DTYPES = ["bfloat16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4", "w4a8_mxfp4_mxfp8"]
MOE_DIST = ["balanced", "power_law_1.01"]
A2A_SHAPES = {(7168, 8, 256): "DeepSeek-V3/R1", (4096, 8, 128): "Qwen3-235B-A22B"}  # (hidden, topk, experts)
A2A_NORMAL_TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
COMM_ELEMS_STEP = 4  # keep every message size that is 4**i times the smallest


SIG_DIGITS = 6


def us_to_s(value) -> str:
    """Source latency in microseconds (DeepEP tables) as seconds, 6 significant digits."""
    return ms_to_s(Decimal(repr(float(value))).scaleb(-3))


def ms_to_s(value) -> str:
    """Source latency (ms) as seconds: a decimal shift of its shortest repr, rounded to 6 significant digits.

    The rounding changes a value by at most 5e-6 relative; the source's own repeated measurements of one
    point differ by about 1e-2.
    """
    d = Decimal(repr(float(value)))
    if not d.is_finite() or d <= 0:
        raise SystemExit(f"non-positive latency {value!r}")
    q = Decimal(1).scaleb(d.adjusted() - SIG_DIGITS + 1)
    return format(float(d.quantize(q).scaleb(-3)), f".{SIG_DIGITS}g")


def dtype(name: str) -> str:
    return DTYPE.get(str(name).lower(), str(name).lower())


def pick(root: Path, gpu: str, op: str, backend: str, table: str, keep, sources: list):
    """Newest version of (gpu, op, backend) whose own ``table`` file has rows that ``keep`` retains.

    Versions that only point at another version's file (``reuse.yaml``) hold no file and are skipped;
    a newer file that holds only other shapes (a supplement) is skipped for an older complete one.
    Returns (version, filtered frame) or None.
    """
    import pandas as pd
    from packaging.version import Version

    base = root / gpu / op / backend
    if not base.is_dir() or (table, gpu, backend) in EXCLUDE:
        return None
    versions = [v for v in os.listdir(base) if (base / v / f"{table}.parquet").is_file()]
    for v in sorted(versions, key=Version, reverse=True):
        path = base / v / f"{table}.parquet"
        df = pd.read_parquet(path)
        df["src_row"] = range(len(df))
        df = keep(df)
        if len(df):
            if "device" in df:
                DEVICES.setdefault(gpu, set()).update(df.device.unique())
            sources.append((gpu, backend, v, path))
            return v, df
    return None


def write(out: Path, name: str, header: list[str], rows: list[list], key_cols: list[str] | None = None) -> None:
    """Write rows; a repeated key (the source measured the same point twice) keeps its first source row."""
    keyset = set()
    key_cols = key_cols or [c for c in header if c not in ("latency_s", "src_row")]
    idx = [header.index(c) for c in key_cols]
    kept, dropped = [], 0
    for r in sorted(rows, key=lambda r: r[header.index("src_row")]):
        key = tuple(r[i] for i in idx)
        if key in keyset:
            dropped += 1
            continue
        keyset.add(key)
        kept.append(r)
    order = {id(r): i for i, r in enumerate(rows)}
    kept.sort(key=lambda r: order[id(r)])
    with open(out / name, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(kept)
    print(f"{name}: {len(kept)} rows, {os.path.getsize(out / name)} bytes, {dropped} repeated source points dropped")


KERNELS: dict = {}  # (table, gpu, backend, version, dtype, kernel) -> [kernel_id, rows]


def kernel_id(table: str, gpu: str, be: str, ver: str, dt: str, kernel: str) -> int:
    """Small integer naming the source's kernel_source string in kernels.csv (long names kept out of rows)."""
    entry = KERNELS.setdefault((table, gpu, be, ver, dt, kernel), [len(KERNELS), 0])
    entry[1] += 1
    return entry[0]


CARD_TPS = (1, 2, 4, 8)


def card_gemm_shapes() -> set:
    """Per-GPU (n, k) of every shipped model card's GEMMs at TP 1, 2, 4, 8: each layer group's GEMMs as the step
    model prices them (kvplan.calc.shapes.Shapes.gemm_list: QKV, O, gate_up, down, shared experts, or the group's
    representative shape; the MoE routers, replicated) and the LM head (vocab / tp, hidden)."""
    from kvplan.calc.cost import model_cost
    from kvplan.calc.shapes import model_shapes
    from kvplan.cards.loader import parse_card
    from kvplan.cards.schema import ModelCard
    from kvplan.engines import get_profile

    shapes = set()
    for path in sorted((Path(__file__).resolve().parents[1] / "model_cards").glob("*.yaml")):
        card = parse_card(path, ModelCard)
        split = model_shapes(card, model_cost(card, get_profile("vllm")))
        for tp in CARD_TPS:
            for kind in ("attention", "mlp", "router"):
                shapes.update((n, k) for _, n, k, _ in split.gemm_list(kind, tp))
            shapes.add((card.vocab_size / tp, float(card.hidden_size)))
    return shapes


def bracketing_pairs(shapes, ns, ks) -> set:
    """The source grid's (n, k) points around each shape: for each axis the grid value itself where measured, else
    the two around it (a shape beyond the grid: the edge value), so the reader can interpolate between them."""
    def around(x, grid):
        grid = sorted(grid)
        x = min(max(x, grid[0]), grid[-1])
        if x in grid:
            return [x]
        hi = next(g for g in grid if g > x)
        return [grid[grid.index(hi) - 1], hi]
    return {(a, b) for n, k in shapes for a in around(n, ns) for b in around(k, ks)}


def gemm(root, out, sources):
    rows = []
    shapes = card_gemm_shapes()
    for gpu in GPUS:
        for be in BACKENDS:
            named = set(GEMM_NK) if be == "trtllm" else set(GEMM_NK_ALL_BACKENDS)

            def keep(df):
                pairs = named | bracketing_pairs(shapes, set(df.n.unique().tolist()), set(df.k.unique().tolist()))
                nk = df[["n", "k"]].apply(tuple, axis=1).isin(pairs)
                dropped = [dt for (table, b, dt) in EXCLUDE_DTYPES if table == "gemm_perf" and b == be]
                return df[nk & df.m.isin(POW2_M) & ~df.gemm_dtype.isin(dropped)].sort_values(["gemm_dtype", "n", "k", "m"])

            found = pick(root, gpu, "gemm", be, "gemm_perf", keep, sources)
            if not found:
                continue
            ver, df = found
            for r in df.itertuples():
                kid = kernel_id("gemm", gpu, be, ver, dtype(r.gemm_dtype), r.kernel_source)
                rows.append([gpu, be, ver, dtype(r.gemm_dtype), kid, r.m, r.n, r.k, ms_to_s(r.latency), r.src_row])
    write(out, "gemm.csv", ["gpu", "backend", "backend_version", "dtype", "kernel_id", "m", "n", "k", "latency_s",
                            "src_row"], rows, key_cols=["gpu", "backend", "backend_version", "dtype", "m", "n", "k"])


def _attn_shapes(df):
    key = df[["num_heads", "num_key_value_heads", "head_dim"]].apply(tuple, axis=1)
    keep = key.isin(ATTN_SHAPES.keys())
    if "window_size" in df:
        keep &= df.window_size == 0
    if "beam_width" in df:
        keep &= df.beam_width == 1
    return df[keep]


def _decode_keep(df):
    df = _attn_shapes(df)
    df = df.assign(ctx=df.isl + df.step)
    df = df[(df.attn_dtype == "bfloat16") & df.ctx.isin(DECODE_CTX) & df.batch_size.isin(DECODE_BATCH)]
    return df.sort_values(["kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "kernel_source",
                           "batch_size", "ctx"])


def _prefill_keep(df):
    df = _attn_shapes(df)
    df = df[(df.attn_dtype == df.kv_cache_dtype) & df.isl.isin(PREFILL_ISL) & df.batch_size.isin(PREFILL_BATCH)
            & (df.step == 0)]
    return df.sort_values(["attn_dtype", "num_heads", "num_key_value_heads", "head_dim", "kernel_source",
                           "batch_size", "isl"])


def attention(root, out, sources):
    dec, pre = [], []
    for gpu in GPUS:
        for be in BACKENDS:
            found = pick(root, gpu, "attention", be, "generation_attention_perf", _decode_keep, sources)
            if found:
                ver, df = found
                for r in df.itertuples():
                    dec.append([gpu, be, ver, dtype(r.kv_cache_dtype), r.kernel_source, r.batch_size, r.ctx,
                                r.num_heads, r.num_key_value_heads, r.head_dim, ms_to_s(r.latency), r.src_row])
            found = pick(root, gpu, "attention", be, "context_attention_perf", _prefill_keep, sources)
            if found:
                ver, df = found
                for r in df.itertuples():
                    pre.append([gpu, be, ver, dtype(r.attn_dtype), dtype(r.kv_cache_dtype), r.kernel_source,
                                r.batch_size, r.isl, r.num_heads, r.num_key_value_heads, r.head_dim,
                                ms_to_s(r.latency), r.src_row])
    write(out, "attention_decode.csv", ["gpu", "backend", "backend_version", "kv_dtype", "kernel", "batch",
                                        "context_tokens", "num_heads", "num_kv_heads", "head_dim",
                                        "latency_s", "src_row"], dec)
    write(out, "attention_prefill.csv", ["gpu", "backend", "backend_version", "dtype", "kv_dtype", "kernel",
                                         "batch", "isl_tokens", "num_heads", "num_kv_heads", "head_dim",
                                         "latency_s", "src_row"], pre)


def _mla_decode_keep(df):
    df = df.assign(ctx=df.isl + df.step)
    df = df[df.num_heads.isin(MLA_HEADS) & df.ctx.isin(DECODE_CTX) & df.batch_size.isin(DECODE_BATCH)]
    return df.sort_values(["kv_cache_dtype", "num_heads", "tp_size", "kernel_source", "batch_size", "ctx"])


def _mla_prefill_keep(df):
    df = df[df.num_heads.isin(MLA_HEADS) & df.isl.isin(PREFILL_ISL) & df.batch_size.isin(PREFILL_BATCH)
            & (df.step == 0)]
    return df.sort_values(["kv_cache_dtype", "num_heads", "tp_size", "kernel_source", "batch_size", "isl"])


def mla(root, out, sources):
    dec, pre = [], []
    for gpu in GPUS:
        for be in BACKENDS:
            found = pick(root, gpu, "mla", be, "generation_mla_perf", _mla_decode_keep, sources)
            if found:
                ver, df = found
                for r in df.itertuples():
                    dec.append([gpu, be, ver, dtype(r.mla_dtype), dtype(r.kv_cache_dtype), r.kernel_source,
                                r.batch_size, r.ctx, r.num_heads, r.tp_size, ms_to_s(r.latency), r.src_row])
            found = pick(root, gpu, "mla", be, "context_mla_perf", _mla_prefill_keep, sources)
            if found:
                ver, df = found
                for r in df.itertuples():
                    pre.append([gpu, be, ver, dtype(r.mla_dtype), dtype(r.kv_cache_dtype), r.kernel_source,
                                r.batch_size, r.isl, r.num_heads, r.tp_size, ms_to_s(r.latency), r.src_row])
    write(out, "mla_decode.csv", ["gpu", "backend", "backend_version", "dtype", "kv_dtype", "kernel", "batch",
                                  "context_tokens", "num_heads", "tp_size", "latency_s", "src_row"], dec)
    write(out, "mla_prefill.csv", ["gpu", "backend", "backend_version", "dtype", "kv_dtype", "kernel", "batch",
                                   "isl_tokens", "num_heads", "tp_size", "latency_s", "src_row"], pre)


def _moe_keep(df):
    shape = df[["hidden_size", "inter_size", "topk", "num_experts"]].apply(tuple, axis=1)
    par = df[["moe_tp_size", "moe_ep_size"]].apply(tuple, axis=1)
    df = df[shape.isin(MOE_MODELS.keys()) & par.isin(MOE_PAR) & df.num_tokens.isin(MOE_TOKENS)
            & df.distribution.isin(MOE_DIST) & df.moe_dtype.isin(MOE_DTYPES)]
    return df.sort_values(["hidden_size", "inter_size", "num_experts", "moe_dtype", "distribution",
                           "moe_tp_size", "moe_ep_size", "num_tokens"])


def moe(root, out, sources):
    rows = []
    for gpu in GPUS:
        for be in BACKENDS:
            found = pick(root, gpu, "moe", be, "moe_perf", _moe_keep, sources)
            if not found:
                continue
            ver, df = found
            for r in df.itertuples():
                kid = kernel_id("moe", gpu, be, ver, dtype(r.moe_dtype), r.kernel_source)
                rows.append([gpu, be, ver, dtype(r.moe_dtype), kid, r.num_tokens, r.hidden_size, r.inter_size, r.topk,
                             r.num_experts, r.moe_tp_size, r.moe_ep_size, r.distribution, ms_to_s(r.latency),
                             r.src_row])
    write(out, "moe.csv", ["gpu", "backend", "backend_version", "dtype", "kernel_id", "num_tokens", "hidden_size",
                           "inter_size", "topk", "num_experts", "moe_tp", "moe_ep", "distribution", "latency_s",
                           "src_row"], rows)


def _msg_keep(df):
    lo = df.message_size.min()
    return df.message_size.map(lambda s: s % lo == 0 and _is_pow(s // lo, COMM_ELEMS_STEP))


def comm(root, out, sources):
    rows = []
    for gpu in GPUS:

        def nccl_keep(df):
            return df[_msg_keep(df)].sort_values(["op_name", "nccl_dtype", "num_gpus", "message_size"])

        found = pick(root, gpu, "comm", "nccl", "nccl_perf", nccl_keep, sources)
        if found:
            ver, df = found
            for r in df.itertuples():
                # collect_nccl.py stores message_size = nccl-tests size in bytes // bytes_per_element
                # (2 for "half", 1 for "int8").
                bpe = 2 if r.nccl_dtype == "half" else 1
                rows.append([gpu, "nccl", ver, "nccl", r.op_name, dtype(r.nccl_dtype), r.num_gpus,
                             r.message_size, r.message_size * bpe, ms_to_s(r.latency), r.src_row])

        def custom_keep(df):
            graph = df.kernel_source.str.contains("graph") | (df.kernel_source == "TRTLLM")
            return df[_msg_keep(df) & graph].sort_values(["kernel_source", "num_gpus", "message_size"])

        for be in BACKENDS:
            found = pick(root, gpu, "comm", be, "custom_allreduce_perf", custom_keep, sources)
            if not found:
                continue
            ver, df = found
            for r in df.itertuples():
                if r.allreduce_dtype != "bfloat16":
                    raise SystemExit(f"unexpected allreduce dtype {r.allreduce_dtype}")
                rows.append([gpu, be, ver, "custom_allreduce:" + r.kernel_source, r.op_name,
                             dtype(r.allreduce_dtype), r.num_gpus, r.message_size, r.message_size * 2,
                             ms_to_s(r.latency), r.src_row])
    write(out, "comm.csv", ["gpu", "backend", "backend_version", "library", "op", "dtype", "num_gpus",
                            "message_elements", "message_bytes", "latency_s", "src_row"], rows)


def _a2a_keep(tokens):
    def keep(df):
        shape = df[["hidden_size", "num_topk", "num_experts"]].apply(tuple, axis=1)
        df = df[shape.isin(A2A_SHAPES.keys()) & (df.node_num == 1)]
        if tokens is not None:
            df = df[df.num_token.isin(tokens)]
        return df.sort_values(["hidden_size", "num_experts"] + (["dispatch_sms"] if "dispatch_sms" in df else [])
                              + ["num_token"])
    return keep


def moe_a2a(root, out, sources):
    """DeepEP dispatch/combine on one node (sglang wide-EP tables; 8 GPUs a node, so EP 8)."""
    rows = []
    for gpu in GPUS:
        found = pick(root, gpu, "comm", "sglang", "wideep_deepep_ll_perf", _a2a_keep(None), sources)
        if found:
            ver, df = found
            for r in df.itertuples():
                for phase in ("dispatch", "combine"):
                    rows.append([gpu, "sglang", ver, "deepep_ll", phase, 8 * r.node_num, r.num_token, r.hidden_size,
                                 r.num_topk, r.num_experts, "", us_to_s(getattr(r, f"{phase}_avg_t_us")), r.src_row])
        found = pick(root, gpu, "comm", "sglang", "wideep_deepep_normal_perf", _a2a_keep(A2A_NORMAL_TOKENS), sources)
        if found:
            ver, df = found
            for r in df.itertuples():
                for phase in ("dispatch", "combine"):
                    if getattr(r, f"{phase}_notify_us") != 0:
                        raise SystemExit("DeepEP normal notify time is not zero; latency would need the sum")
                    rows.append([gpu, "sglang", ver, "deepep_normal", phase, 8 * r.node_num, r.num_token,
                                 r.hidden_size, r.num_topk, r.num_experts, getattr(r, f"{phase}_sms"),
                                 us_to_s(getattr(r, f"{phase}_transmit_us")), r.src_row])
    write(out, "moe_a2a.csv", ["gpu", "backend", "backend_version", "library", "phase", "ep_size", "num_tokens",
                               "hidden_size", "topk", "num_experts", "sms", "latency_s", "src_row"], rows)


def moe_wideep(root, out, sources):
    """SGLang's measured DeepEP MoE layer of one rank in an EP world (aiconfigurator's wide-EP tables: decode =
    ``wideep_generation_moe_perf``, DeepEP low-latency; prefill = ``wideep_context_moe_perf``, DeepEP normal),
    uniform routing (the EPLB-balanced case kvplan prices), ``num_tokens`` the tokens entering the instance (the
    collector logs per-rank tokens × moe_ep_size: collector/wideep/sglang/collect_deepep_moe.py)."""
    rows = []
    for gpu in GPUS:
        for phase, table in (("decode", "wideep_generation_moe_perf"), ("prefill", "wideep_context_moe_perf")):
            found = pick(root, gpu, "moe", "sglang", table,
                         lambda df: df[df.distribution == "uniform"].sort_values(["moe_ep_size", "num_tokens"]),
                         sources)
            if not found:
                continue
            ver, df = found
            for r in df.itertuples():
                if r.moe_tp_size != 1:
                    raise SystemExit("wide-EP MoE row with moe_tp_size != 1")
                rows.append([gpu, "sglang", ver, dtype(r.moe_dtype), phase, r.num_tokens, r.hidden_size, r.inter_size,
                             r.topk, r.num_experts, r.moe_ep_size, ms_to_s(r.latency), r.src_row])
    write(out, "moe_wideep.csv", ["gpu", "backend", "backend_version", "dtype", "phase", "num_tokens", "hidden_size",
                                  "inter_size", "topk", "num_experts", "moe_ep", "latency_s", "src_row"], rows)


# TensorRT-LLM's FP8 activation-quantisation kernels (aiconfigurator collector/trtllm/collect_computescale.py):
# compute_scale = dynamic per-tensor quantisation minus static (the amax reduction), scale_matrix = the static
# quantise itself. The FP8 GEMM rows include both (that collector's Linear has no input_scale, so TensorRT-LLM runs
# its dynamic path); a checkpoint with static input scales pays neither where its input arrives in FP8
# (kvplan.calc.perfdb.STATIC_FP8). Kept at the GEMM table's m (POW2_M) and every k the source measured.
QUANTIZE_TABLES = {"computescale_perf": "compute_scale", "scale_matrix_perf": "scale_matrix"}


def quantize(root, out, sources):
    rows = []
    for gpu in GPUS:
        for table, op in QUANTIZE_TABLES.items():
            def keep(df):
                return df[df.m.isin(POW2_M) & (df.quant_dtype == "fp8")].sort_values(["k", "m"])

            found = pick(root, gpu, "quantize", "trtllm", table, keep, sources)
            if not found:
                continue
            ver, df = found
            for r in df.itertuples():
                # compute_scale is a difference of two timings, clamped at 0 by its collector: kept as measured
                lat = "0" if float(r.latency) == 0.0 else ms_to_s(r.latency)
                rows.append([gpu, "trtllm", ver, op, r.m, r.k, lat, r.src_row])
    write(out, "quantize.csv", ["gpu", "backend", "backend_version", "op", "m", "k", "latency_s", "src_row"], rows)


def _is_pow(x: int, base: int) -> bool:
    while x > 1 and x % base == 0:
        x //= base
    return x == 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="checkout of github.com/ai-dynamo/aiconfigurator")
    ap.add_argument("--commit", required=True, help="commit of that checkout (recorded in sources.csv)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "kvplan" / "data" / "perf"))
    args = ap.parse_args()
    root = Path(args.source) / DATA_SUBDIR
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources: list = []
    gemm(root, out, sources)
    attention(root, out, sources)
    mla(root, out, sources)
    moe(root, out, sources)
    comm(root, out, sources)
    moe_a2a(root, out, sources)
    moe_wideep(root, out, sources)
    quantize(root, out, sources)
    rows = sorted({(g, b, v, f"{DATA_SUBDIR}/{p.relative_to(root)}") for g, b, v, p in sources})
    with open(out / "sources.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["gpu", "backend", "backend_version", "source_table", "repo", "commit", "path"])
        for g, b, v, p in rows:
            w.writerow([g, b, v, Path(p).stem, "ai-dynamo/aiconfigurator", args.commit, p])
    print(f"sources.csv: {len(rows)} files")
    with open(out / "gpus.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["gpu", "card", "device"])
        for g in GPUS:
            w.writerow([g, CARD[g], ";".join(sorted(DEVICES.get(g, ())))])
    with open(out / "kernels.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["kernel_id", "table", "gpu", "backend", "backend_version", "dtype", "kernel", "rows"])
        for key, (kid, n) in sorted(KERNELS.items(), key=lambda kv: kv[1][0]):
            w.writerow([kid, *key, n])


if __name__ == "__main__":
    main()

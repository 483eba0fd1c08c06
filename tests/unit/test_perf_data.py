"""The per-kernel tables shipped in kvplan/data/perf (compacted from NVIDIA's aiconfigurator database).

Schema checks, plus spot checks against values copied by hand from the source parquet files
(github.com/ai-dynamo/aiconfigurator @ 095f58a51c4ca8e61b66ec108d86f223f8d559ce, directory
aic-core/src/aiconfigurator_core/systems/data/; "row" is the 0-based row of that file, kept in src_row).
"""

from __future__ import annotations

import csv
import math
from importlib.resources import files

import pytest

from kvplan.cards.loader import load_hardware

PERF = files("kvplan") / "data" / "perf"

GPUS = {"a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm"}
BACKENDS = {"trtllm", "vllm", "sglang", "nccl"}
DTYPES = {"bf16", "fp16", "fp8", "fp8_block", "nvfp4", "int8", "int8_wo", "int4_wo", "sq", "w4a16_mxfp4",
          "w4a8_mxfp4_mxfp8"}
LEAD = ["gpu", "backend", "backend_version"]
TABLES = {
    "gemm.csv": LEAD + ["dtype", "kernel_id", "m", "n", "k", "latency_s", "src_row"],
    "attention_decode.csv": LEAD + ["kv_dtype", "kernel", "batch", "context_tokens", "num_heads", "num_kv_heads",
                                    "head_dim", "latency_s", "src_row"],
    "attention_prefill.csv": LEAD + ["dtype", "kv_dtype", "kernel", "batch", "isl_tokens", "num_heads",
                                     "num_kv_heads", "head_dim", "latency_s", "src_row"],
    "mla_decode.csv": LEAD + ["dtype", "kv_dtype", "kernel", "batch", "context_tokens", "num_heads", "tp_size",
                              "latency_s", "src_row"],
    "mla_prefill.csv": LEAD + ["dtype", "kv_dtype", "kernel", "batch", "isl_tokens", "num_heads", "tp_size",
                               "latency_s", "src_row"],
    "moe.csv": LEAD + ["dtype", "kernel_id", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
                       "moe_tp", "moe_ep", "distribution", "latency_s", "src_row"],
    "comm.csv": LEAD + ["library", "op", "dtype", "num_gpus", "message_elements", "message_bytes", "latency_s",
                        "src_row"],
    "moe_a2a.csv": LEAD + ["library", "phase", "ep_size", "num_tokens", "hidden_size", "topk", "num_experts", "sms",
                           "latency_s", "src_row"],
}
# Columns that do not identify a measured point (the value, its provenance, a derived size). kernel_id does:
# TensorRT-LLM on B200 measured nvfp4 MoE with two kernels at the same points.
NOT_KEY = {"latency_s", "src_row", "message_bytes"}


def read(name: str) -> list[dict[str, str]]:
    with (PERF / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_schema_values_and_unique_keys(name):
    rows = read(name)
    assert len(rows) > 100
    assert list(rows[0]) == TABLES[name]
    dtype_cols = [c for c in ("dtype", "kv_dtype") if c in TABLES[name]]
    seen = set()
    for r in rows:
        assert r["gpu"] in GPUS and r["backend"] in BACKENDS and r["backend_version"]
        for c in dtype_cols:
            assert r[c] in DTYPES, (name, c, r[c])
        lat = float(r["latency_s"])
        assert math.isfinite(lat) and 0 < lat < 1.0, r  # single kernels: well under a second
        assert int(r["src_row"]) >= 0
        key = tuple(v for c, v in r.items() if c not in NOT_KEY)
        assert key not in seen, (name, key)
        seen.add(key)


def test_every_row_has_a_source_file_and_gpu_maps_to_a_card():
    sources = {(r["gpu"], r["backend"], r["backend_version"]) for r in read("sources.csv")}
    for r in read("sources.csv"):
        assert r["repo"] == "ai-dynamo/aiconfigurator" and len(r["commit"]) == 40
        assert f"/{r['gpu']}/" in r["path"]
        assert f"/{r['backend']}/{r['backend_version']}/{r['source_table']}.parquet" in r["path"]
    for name in TABLES:
        for r in read(name):
            assert (r["gpu"], r["backend"], r["backend_version"]) in sources
    cards = {r["gpu"]: r["card"] for r in read("gpus.csv")}
    assert set(cards) == GPUS
    for card in cards.values():
        assert load_hardware(card).hbm_bandwidth_bytes_per_s > 0


def test_kernel_ids_resolve():
    kernels = {r["kernel_id"]: r for r in read("kernels.csv")}
    for name, table in (("gemm.csv", "gemm"), ("moe.csv", "moe")):
        for r in read(name):
            k = kernels[r["kernel_id"]]
            assert (k["table"], k["gpu"], k["backend"], k["backend_version"], k["dtype"]) == (
                table, r["gpu"], r["backend"], r["backend_version"], r["dtype"])


def test_comm_bytes_follow_the_collectors_element_size():
    # collect_nccl.py: message_size = bytes // (2 for "half", 1 for "int8"); custom all-reduce is bf16.
    for r in read("comm.csv"):
        per = {"fp16": 2, "bf16": 2, "int8": 1}[r["dtype"]]
        assert int(r["message_bytes"]) == per * int(r["message_elements"])


# (table, match on these columns, source latency in ms copied from the parquet file, source file, row)
SPOT = [
    ("gemm.csv", dict(gpu="h200_sxm", backend="trtllm", backend_version="1.3.0rc20", dtype="bf16",
                      m="1", n="8192", k="8192"),
     0.035616000493367515, "h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet", 24339),
    ("gemm.csv", dict(gpu="h200_sxm", backend="trtllm", backend_version="1.3.0rc20", dtype="bf16",
                      m="8192", n="8192", k="8192"),
     1.3637653986612956, "h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet", 24267),
    ("attention_decode.csv", dict(gpu="h100_sxm", backend="vllm", backend_version="0.24.0", kv_dtype="bf16",
                                  kernel="vllm_flash_attn_fa3", batch="64", context_tokens="8192",
                                  num_heads="32", num_kv_heads="8", head_dim="128"),
     0.6881600220998129, "h100_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet", 33319),
    ("attention_prefill.csv", dict(gpu="h100_sxm", backend="trtllm", dtype="bf16", batch="1", isl_tokens="8192",
                                   num_heads="64", num_kv_heads="8", head_dim="128"),
     2.165349324544271, "h100_sxm/attention/trtllm/1.3.0rc20/context_attention_perf.parquet", 36854),
    ("moe.csv", dict(gpu="h200_sxm", backend="trtllm", dtype="fp8_block", num_tokens="64", hidden_size="7168",
                     inter_size="2048", topk="8", num_experts="256", moe_tp="1", moe_ep="8",
                     distribution="power_law_1.01"),
     0.3006079912185669, "h200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet", 72745),
    ("comm.csv", dict(gpu="h200_sxm", library="nccl", op="all_reduce", dtype="fp16", num_gpus="8",
                      message_elements="16777216"),
     0.19734000000000002, "h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet", 478),
    ("mla_decode.csv", dict(gpu="b200_sxm", backend="trtllm", kv_dtype="bf16", batch="64", context_tokens="8192",
                            num_heads="128"),
     0.12501866618792215, "b200_sxm/mla/trtllm/1.3.0rc20/generation_mla_perf.parquet", 2208),
]


# DeepEP tables store microseconds.
SPOT_US = [
    ("moe_a2a.csv", dict(gpu="h200_sxm", library="deepep_ll", phase="dispatch", num_tokens="128",
                         hidden_size="7168", topk="8", num_experts="256"),
     35.119, "h200_sxm/comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet", 150),
    ("moe_a2a.csv", dict(gpu="b200_sxm", library="deepep_normal", phase="combine", num_tokens="4096",
                         hidden_size="7168", topk="8", num_experts="256", sms="24"),
     756.1031823255579, "b200_sxm/comm/sglang/0.5.12/wideep_deepep_normal_perf.parquet", 2202),
]
SPOT += [(n, m, us / 1000.0, f, r) for n, m, us, f, r in SPOT_US]


@pytest.mark.parametrize("name,match,latency_ms,src_file,src_row", SPOT)
def test_spot_rows_match_the_source(name, match, latency_ms, src_file, src_row):
    hits = [r for r in read(name) if all(r[c] == v for c, v in match.items())]
    assert len(hits) == 1, hits
    row = hits[0]
    assert int(row["src_row"]) == src_row
    # ms -> s, rounded to 6 significant digits (relative change <= 5e-6).
    assert float(row["latency_s"]) == pytest.approx(latency_ms / 1000.0, rel=5e-6)
    assert any(s["path"].endswith(src_file) for s in read("sources.csv"))


def test_decode_attention_never_exceeds_the_cards_hbm_bandwidth():
    # KV bytes read = batch * context * 2 (K, V) * kv_heads * head_dim * bytes; a kernel cannot beat HBM peak.
    cards = {r["gpu"]: load_hardware(r["card"]) for r in read("gpus.csv")}
    for r in read("attention_decode.csv"):
        kv = {"bf16": 2, "fp8": 1}[r["kv_dtype"]]
        b = int(r["batch"]) * int(r["context_tokens"]) * 2 * int(r["num_kv_heads"]) * int(r["head_dim"]) * kv
        assert b / float(r["latency_s"]) < cards[r["gpu"]].hbm_bandwidth_bytes_per_s, r

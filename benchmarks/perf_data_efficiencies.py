"""Print efficiencies derived from the shipped per-kernel tables (kvplan/data/perf) against card peaks.

    python benchmarks/perf_data_efficiencies.py

Each figure is measured work / measured latency / the hardware card's peak, with the work counted as:
- GEMM bandwidth:  bytes = n*k*w + m*k*a + m*n*2   (weights at w bytes/element: bf16 2, fp8 1; activations
  a = 2 for bf16, 1 for fp8 inputs; bf16 output) ; efficiency = bytes / latency / hbm_bandwidth_bytes_per_s.
- GEMM FLOPS:      flops = 2*m*n*k ; efficiency = flops / latency / peak_flops_per_s[dtype].
- Decode attention bandwidth: bytes = batch * context_tokens * 2 (K and V) * num_kv_heads * head_dim * kv_bytes.
- Prefill attention FLOPS (causal): flops = 2 * batch * num_heads * head_dim * isl_tokens**2
  (QK^T and PV, 2*b*h*d*s^2 each, halved by the causal mask).
- MLA decode bandwidth: bytes = batch * context_tokens * 576 * kv_bytes (DeepSeek-V3 latent 512 + rope 64,
  one copy per token shared by all heads).
- MoE FLOPS (balanced routing): flops = 2 * 3 * num_tokens * topk * hidden_size * inter_size / (moe_tp * moe_ep)
  (gate, up and down projections; each GPU does 1/(tp*ep) of the routed work).
- NCCL bus bandwidth (nccl-tests convention): all_reduce busbw = bytes/latency * 2*(n-1)/n ; compared with the
  card's scale_up.bandwidth_bytes_per_s (per direction).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kvplan.cards.loader import load_hardware

DATA = Path(__file__).resolve().parents[1] / "kvplan" / "data" / "perf"
CARDS = dict(pd.read_csv(DATA / "gpus.csv")[["gpu", "card"]].values)
FLOPS_KEY = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
W_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}
A_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}
KV_BYTES = {"bf16": 2.0, "fp8": 1.0}


def card(gpu: str):
    return load_hardware(CARDS[gpu])


def rng(s: pd.Series) -> str:
    return f"{s.min():.0%}–{s.max():.0%} (median {s.median():.0%}, n={len(s)})"


def gemm_tables():
    g = pd.read_csv(DATA / "gemm.csv")
    out = []
    tp8 = {(8192, 1024), (7168, 8192), (8192, 3584), (768, 4096), (4096, 512), (3584, 4096)}
    for (gpu, be, dt), d in g.groupby(["gpu", "backend", "dtype"]):
        if dt not in W_BYTES:
            continue
        c = card(gpu)
        dec = d[d[["n", "k"]].apply(tuple, axis=1).isin(tp8) & (d.m <= 16)]
        if len(dec):
            b = dec.n * dec.k * W_BYTES[dt] + dec.m * dec.k * A_BYTES[dt] + dec.m * dec.n * 2
            eff = b / dec.latency_s / c.hbm_bandwidth_bytes_per_s
            out.append((gpu, be, dt, "TP8 decode GEMM HBM bandwidth, m<=16", rng(eff)))
        peak = c.peak_flops_per_s.get(FLOPS_KEY[dt])
        big = d[(d.m == 8192) & (d.n >= 4096) & (d.k >= 4096)]
        if len(big) and peak:
            eff = 2 * big.m * big.n * big.k / big.latency_s / peak
            out.append((gpu, be, dt, f"GEMM FLOPS at m=8192, n,k>=4096 vs {FLOPS_KEY[dt]} peak", rng(eff)))
    return out


def attention_tables():
    out = []
    a = pd.read_csv(DATA / "attention_decode.csv")
    for (gpu, be, kv), d in a.groupby(["gpu", "backend", "kv_dtype"]):
        c = card(gpu)
        d = d[(d.context_tokens >= 8192) & (d.batch >= 16) & (d.num_kv_heads < d.num_heads)]
        if not len(d):
            continue
        b = d.batch * d.context_tokens * 2 * d.num_kv_heads * d.head_dim * KV_BYTES[kv]
        eff = b / d.latency_s / c.hbm_bandwidth_bytes_per_s
        out.append((gpu, be, kv, "decode attention (GQA) HBM bandwidth, ctx>=8192, batch>=16", rng(eff)))
    p = pd.read_csv(DATA / "attention_prefill.csv")
    for (gpu, be, dt), d in p.groupby(["gpu", "backend", "dtype"]):
        c = card(gpu)
        d = d[d.isl_tokens >= 4096]
        peak = c.peak_flops_per_s.get(FLOPS_KEY[dt])
        if not len(d) or not peak:
            continue
        f = 2 * d.batch * d.num_heads * d.head_dim * d.isl_tokens**2
        out.append((gpu, be, dt, f"prefill attention FLOPS (causal), isl>=4096 vs {FLOPS_KEY[dt]} peak",
                    rng(f / d.latency_s / peak)))
    return out


def mla_moe_tables():
    out = []
    m = pd.read_csv(DATA / "mla_decode.csv")
    for (gpu, be, kv), d in m.groupby(["gpu", "backend", "kv_dtype"]):
        c = card(gpu)
        d = d[(d.context_tokens >= 8192) & (d.batch >= 16)]
        if len(d):
            b = d.batch * d.context_tokens * 576 * KV_BYTES[kv]
            out.append((gpu, be, kv, "MLA decode HBM bandwidth, ctx>=8192, batch>=16",
                        rng(b / d.latency_s / c.hbm_bandwidth_bytes_per_s)))
    e = pd.read_csv(DATA / "moe.csv")
    e = e[(e.num_tokens == 16384) & (e.distribution == "balanced")]
    for (gpu, be, dt), d in e.groupby(["gpu", "backend", "dtype"]):
        c = card(gpu)
        peak = c.peak_flops_per_s.get(FLOPS_KEY.get(dt, ""))
        if not peak:
            continue
        f = 6 * d.num_tokens * d.topk * d.hidden_size * d.inter_size / (d.moe_tp * d.moe_ep)
        out.append((gpu, be, dt, f"MoE FLOPS, 16384 tokens, balanced vs {FLOPS_KEY[dt]} peak",
                    rng(f / d.latency_s / peak)))
    return out


def comm_tables():
    out = []
    m = pd.read_csv(DATA / "comm.csv")
    d = m[(m.op == "all_reduce") & (m.message_bytes >= 64 * 2**20)]
    for (gpu, lib, n), x in d.groupby(["gpu", "library", "num_gpus"]):
        c = card(gpu)
        bus = x.message_bytes / x.latency_s * 2 * (n - 1) / n
        out.append((gpu, lib, f"{n} GPUs", "all_reduce bus bandwidth vs scale_up, >=64 MiB",
                    rng(bus / c.scale_up.bandwidth_bytes_per_s)))
    return out


def main() -> None:
    for row in gemm_tables() + attention_tables() + mla_moe_tables() + comm_tables():
        print(" | ".join(str(x) for x in row))


if __name__ == "__main__":
    main()

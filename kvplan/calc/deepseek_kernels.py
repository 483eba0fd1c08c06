"""DeepSeek's own kernels measured on H800 SXM5: the operator efficiencies of the stack DeepSeek serves with.

DeepSeek publishes per-kernel figures for its inference stack on H800 SXM5 (``kvplan/data/
deepseek_h800_kernels.csv``, every row with its repository, commit and README section):

- **DeepGEMM** (deepseek-ai/DeepGEMM README @55ab91f, "Performance"): FP8 (128-block scaled) dense
  GEMMs at M = 64, 128 and 4,096 for every DeepSeek-V3/R1 projection shape without tensor parallelism,
  and the grouped GEMMs of the routed experts (masked layout for decode, contiguous for prefill).
- **FlashMLA** (deepseek-ai/FlashMLA README @082094b, "Performance"): the dense MLA decoding kernel
  (BF16 compute and cache, MQA mode) "achieves up to 3000 GB/s in memory-bound configuration and
  660 TFLOPS in computation-bound configuration on H800 SXM5".
- **DeepEP** (the EP all-to-all): :mod:`kvplan.calc.alltoall`, scored on its H800 tables.

Each figure becomes an η in kvplan's own SOL of the operator it times, so that ``t = SOL / η`` returns
the measured time at the measured shape (:mod:`kvplan.calc.perfdb` does the same for aiconfigurator's
rows). For a group of GEMMs that kvplan charges as one operator (the MLA projections of a layer, the
MLPs), at each measured M::

    t(M)   = Σ_s c_s · 2 M N_s K_s / TFLOPS_s(M)                 (the measured time of each shape)
    SOL(M) = max(Σ_s c_s N_s K_s · B / BW, 2 M Σ_s c_s N_s K_s / peak)
    η(M)   = SOL(M) / t(M),  piecewise linear in log M between 64, 128 and 4,096, held outside

(``c_s`` the count of shape s per model, B = 1 byte per FP8 weight). Below M = 64 the GEMMs are
memory-bound and read the same weights in no less time; above 4,096 they are compute-bound at the
plateau. FlashMLA's two "up to" figures are a flat pair: η_mem = 3000 GB/s / BW, η_flops = 660 TFLOPS /
BF16 peak (the kernel computes in BF16 whatever the cache's dtype): the best the kernel reaches, an
upper bound on its speed at other batch sizes and contexts.

Nothing here is fitted: the rows are the READMEs' figures as printed.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

import numpy as np

from kvplan.calc.efficiency import Curve, Flat

DATA = Path(__file__).resolve().parents[1] / "data" / "deepseek_h800_kernels.csv"
# The hardware cards the figures were measured on: H800 SXM5 (deepseek-ai READMEs: "on H800 SXM5").
CARDS = frozenset({"h800-sxm"})
DEEPGEMM_SOURCE = "DeepGEMM README @55ab91f (H800 SXM5, NVCC 12.8)"
FLASHMLA_SOURCE = "FlashMLA README @082094b (H800 SXM5, CUDA 12.8: up to 3000 GB/s, 660 TFLOPS, BF16)"
# DeepSeek-V3/R1's MLA projections per layer at TP 1, as DeepGEMM's README lists them (N × K): q_a + kv_a
# fused (1536 + 576 = 2112 by hidden 7168), q_b (128 heads × 192 by q_lora 1536), kv_b (128 × (128 + 128) by
# kv_lora 512), o (hidden 7168 by 128 × 128). Their sum, 187,105,280, is the card's 187,107,328 MLA parameters
# per layer less the two RMSNorm vectors (1536 + 512).
MLA_SHAPES = ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384))


@lru_cache(maxsize=1)
def rows() -> tuple[dict, ...]:
    """The data file's rows (numbers as floats, blanks as None)."""
    with DATA.open(newline="", encoding="utf-8") as fh:
        out = []
        for r in csv.DictReader(fh):
            for key in ("groups", "m", "n", "k", "tflops", "gb_per_s"):
                r[key] = float(r[key]) if r[key] else None
            out.append(r)
    return tuple(out)


def grouped_rows(layout: str) -> tuple[tuple[float, float, float, float, float], ...]:
    """(groups, m per group, N, K, FLOP/s) of DeepGEMM's grouped GEMMs in ``layout`` (masked / contiguous)."""
    return tuple((r["groups"], r["m"], r["n"], r["k"], r["tflops"] * 1e12) for r in rows()
                 if r["library"] == "DeepGEMM" and r["layout"] == layout)


def _dense_flops_per_s(m: float, n: float, k: float) -> tuple[float, tuple[float, float]]:
    """DeepGEMM's dense FP8 FLOP/s at M = ``m`` for the measured (N, K) nearest (n, k): the same K and the
    nearest N where K was measured, else the nearest (N, K) in log space."""
    dense = [r for r in rows() if r["library"] == "DeepGEMM" and r["layout"] == "dense" and r["m"] == m]
    same_k = [r for r in dense if r["k"] == k]           # the same K (the kernel's inner loop): the nearest N
    best = min(same_k or dense, key=lambda r: (np.log(r["n"] / n)) ** 2 + (np.log(r["k"] / k)) ** 2)
    return best["tflops"] * 1e12, (best["n"], best["k"])


def dense_curve(shapes: tuple[tuple[float, float, float], ...], bw: float, peak: float, what: str) -> Curve:
    """η over M of GEMMs of ``shapes`` ((count, N, K), FP8 weights) run one after another at M tokens.

    Shapes DeepGEMM did not measure take the nearest measured one (:func:`_dense_flops_per_s`); the source
    says which.
    """
    params = sum(c * n * k for c, n, k in shapes)
    sizes, eta, stand_ins = [], [], set()
    for m in sorted({r["m"] for r in rows() if r["library"] == "DeepGEMM" and r["layout"] == "dense"}):
        t = 0.0
        for c, n, k in shapes:
            flops_per_s, nk = _dense_flops_per_s(m, n, k)
            if nk != (n, k):
                stand_ins.add(f"{n:g}x{k:g} as {nk[0]:g}x{nk[1]:g}")
            t += c * 2.0 * m * n * k / flops_per_s
        sol = max(params / bw, 2.0 * m * params / peak)
        sizes.append(m)
        eta.append(min(sol / t, 1.0))
    extra = f"; unmeasured shapes at the nearest measured: {', '.join(sorted(stand_ins))}" if stand_ins else ""
    return Curve(tuple(sizes), tuple(eta), f"{DEEPGEMM_SOURCE} dense FP8 GEMMs, {what}{extra}")


def flashmla_decode(bw: float, bf16_peak: float) -> Flat:
    """FlashMLA's dense decode kernel as a flat pair: 3000 GB/s of ``bw``, 660 TFLOPS of the BF16 peak."""
    mem = next(r["gb_per_s"] for r in rows() if r["library"] == "FlashMLA" and r["layout"] == "memory_bound")
    flops = next(r["tflops"] for r in rows() if r["library"] == "FlashMLA" and r["layout"] == "compute_bound")
    return Flat(min(mem * 1e9 / bw, 1.0), min(flops * 1e12 / bf16_peak, 1.0), FLASHMLA_SOURCE)


def applies(card_name: str) -> bool:
    """Whether the hardware card is the GPU these figures were measured on."""
    return card_name in CARDS


__all__ = ["CARDS", "MLA_SHAPES", "rows", "grouped_rows", "dense_curve", "flashmla_decode", "applies",
           "DEEPGEMM_SOURCE", "FLASHMLA_SOURCE"]

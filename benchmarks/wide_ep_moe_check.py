"""Score kvplan's wide-EP routed-expert readings against aiconfigurator's measured SGLang DeepEP MoE tables.

Run: python benchmarks/wide_ep_moe_check.py --source /path/to/aiconfigurator   (a checkout at 095f58a; needs pandas
and pyarrow; prints the table, asserts nothing)

aiconfigurator @095f58a holds SGLang 0.5.10's measured DeepEP MoE layer (``collector/wideep/sglang/
collect_deepep_moe.py``: one rank of an EP world of ``moe_ep_size`` ranks, fed the dispatch output it would receive,
``num_tokens`` the tokens entering the instance, logged as per-rank tokens × EP) for DeepSeek-V3's experts (7168 ×
2048, top-8 of 256, fp8_block) on H100, H200 and B200: ``systems/data/<gpu>/moe/sglang/0.5.10/
wideep_generation_moe_perf.parquet`` (decode, DeepEP low-latency) and ``wideep_context_moe_perf.parquet`` (prefill,
DeepEP normal). kvplan ships their uniform-routing rows (``kvplan/data/perf/moe_wideep.csv``) and reads them for a
DeepEP rank where they were measured (``wideep_curve``), so at a measured point its error is 0 by construction; this
script compares, on those rows at EP > 8, the time each other reading charges one rank for the routed experts (its
SOL over η, :mod:`kvplan.calc.perf_moe`), the readings kvplan falls back on where the rows do not apply:

- ``deepgemm``: DeepGEMM's H800 figures (``deepgemm_curve``; H100, and H200 through ``TRANSFER_GPUS``), what kvplan
  read on those GPUs before;
- ``ep1 / ep``: the table's EP 1 rows at the instance's tokens, the rank's time theirs / EP
  (``DEEPEP_WITHOUT_DEEPGEMM``), what kvplan reads where neither applies;
- ``ep rows``: the table's EP rows (one rank handed every token of the instance), what kvplan read before.

Error = (kvplan − measured) / measured: negative is optimistic (kvplan's experts faster than measured).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from kvplan.calc import perfdb

SUBDIR = "aic-core/src/aiconfigurator_core/systems/data"
GPUS = (("h100_sxm", "h100-sxm"), ("h200_sxm", "h200"), ("b200_sxm", "b200"))
H, I, K, E = 7168.0, 2048.0, 8.0, 256.0


def rank_sol(tokens: float, ep: float, bw: float, peak: float) -> float:
    """kvplan's SOL of one rank's routed experts (fp8_block, 1 byte a weight): touched local experts' weights over
    HBM bandwidth, or the rank's FLOPs 6 T k h i / ep over the fp8 peak (kvplan.calc.operators.operator_pass)."""
    touched = E / ep * (1 - (1 - K / E) ** tokens)
    return max(touched * 3 * H * I / bw, 6 * tokens * K * H * I / ep / peak)


def main() -> None:
    import pandas as pd

    from kvplan.cards.loader import load_hardware

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="checkout of github.com/ai-dynamo/aiconfigurator (095f58a)")
    root = Path(ap.parse_args().source) / SUBDIR
    tables = perfdb.load_default()
    print("| GPU | phase | reading | rows | median error | median abs. error | p90 abs. error |")
    print("|---|---|---|---:|---:|---:|---:|")
    for gpu, card in GPUS:
        hw = load_hardware(card)
        bw, peak = hw.hbm_bandwidth_bytes_per_s, hw.peak_flops_per_s["fp8"]
        ep1 = perfdb.moe_curve(tables, gpu, "sglang", "fp8_block", H, I, K, E, 1.0, 1.0, bw, peak)
        dg = perfdb.deepgemm_curve(gpu, "fp8_block", H, I, K, E, bw, peak)
        for phase in ("generation", "context"):
            d = pd.read_parquet(root / gpu / "moe" / "sglang" / "0.5.10" / f"wideep_{phase}_moe_perf.parquet")
            d = d[(d.distribution == "uniform") & (d.moe_ep_size > perfdb.IN_NODE_EP)]
            errors: dict[str, list[float]] = {"deepgemm": [], "ep1 / ep": [], "ep rows": []}
            for r in d.itertuples():
                t, ep, measured = float(r.num_tokens), float(r.moe_ep_size), float(r.latency) * 1e-3
                sol = rank_sol(t, ep, bw, peak)
                if dg is not None:
                    errors["deepgemm"].append(sol / float(dg(t)) / measured - 1)
                errors["ep1 / ep"].append(rank_sol(t, 1.0, bw, peak) / float(ep1(t)) / ep / measured - 1)
                rows = perfdb.moe_curve(tables, gpu, "sglang", "fp8_block", H, I, K, E, 1.0, ep, bw, peak)
                errors["ep rows"].append(sol / float(rows(t)) / measured - 1)
            for name, e in errors.items():
                if e:
                    e = 100 * np.asarray(e)
                    print(f"| {gpu} | {phase} | {name} | {e.size} | {np.median(e):+.0f}% | {np.median(np.abs(e)):.0f}% | "
                          f"{np.percentile(np.abs(e), 90):.0f}% |")


if __name__ == "__main__":
    main()

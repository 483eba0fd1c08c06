"""What-if: the dstack vLLM 0.7.4 rows on 8×H200 (tests/data/measurements/closed_loop.csv) with vLLM's published KV capacity.

Run: python benchmarks/closed_loop_pool_whatif.py

The replay prices those rows with kvplan's KV pool for the deployment (``Deployment.pool``). vLLM's own
figure for DeepSeek-V3/R1 with MLA on 8×H200 is 512,000 tokens (Neural Magic / Red Hat, "Enhancing DeepSeek
Models with MLA and FP8 Optimizations in vLLM", 2025-02-04, vLLM v0.7.1: "token capacity expanded from 54,560
to 512,000"); the C = 128 runs need 128 × (3,200 + OSL) tokens at their end, 512,000 at OSL 800. Printed per
row: measured median TTFT and output tokens/s, then the replay with kvplan's pool and with 512,000 tokens
(median TTFT, output tokens/s, preemptions). Not a score: the published capacity is v0.7.1's, the runs are
0.7.4.dev, and no row is fitted.
"""

from __future__ import annotations

import numpy as np

from closed_loop_rows import deployment, kv_policy, rows, schedule
from kvplan.plans.fleet.closed import closed_loop

PUBLISHED_TOKENS = 512_000  # vLLM v0.7.1, DeepSeek MLA on 8×H200 (module docstring)


def main() -> None:
    print("| ISL/OSL | C | measured TTFT p50 / out tok/s | kvplan pool (tokens): TTFT p50 / out tok/s / preemptions | "
          f"{PUBLISHED_TOKENS:,} tokens: TTFT p50 / out tok/s / preemptions |")
    print("|---|---:|---|---|---|")
    for r in rows():
        if not (r["engine"] == "vllm" and r["hardware_card"] == "h200" and r["engine_version"].startswith("0.7")):
            continue
        dep = deployment(r)
        n = int(r["num_requests"])
        isl, osl = np.full(n, int(r["isl"])), np.full(n, int(r["osl"]))
        per_token = float(dep.layout.sequence_bytes(1_000_000, per_gpu=True)) / 1_000_000
        cells = []
        for pool in (None, PUBLISHED_TOKENS * per_token):
            out = closed_loop(dep, isl, osl, int(r["concurrency"]), 1, n, kv_policy=kv_policy(r), kv_pool_bytes=pool,
                              **schedule(r))
            cells.append(f"{out['ttft_p50_s']:.1f} s / {out['output_tokens_per_s']:,.0f} / {out['preemptions']}")
        print(f"| {r['isl']}/{r['osl']} | {r['concurrency']} | {float(r['ttft_median_ms']) / 1e3:.1f} s / "
              f"{float(r['output_tokens_per_s']):,.0f} | ({dep.pool.tokens_per_gpu:,}) {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()

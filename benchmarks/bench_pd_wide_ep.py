"""Benchmark: a wide-EP ``kvplan pd`` search (DeepSeek-V3 on H800 nodes, attention DP × EP searched in both pools).

Run: python benchmarks/bench_pd_wide_ep.py
Prints wall-clock and CPU seconds (best of 3) of
``plan_pd(deepseek-v3, h800, --system hgx-h800-8, --enable-expert-parallel)`` with the default DP
search (8, 16, 32, 64, 128 per pool: 25 prefill × decode shapes), DeepSeek's day-6 workload, no
aggregated alternative and no sensitivity rows; then the same pinned to DP32/DP144 with the
placements and the checklist. Target: ≤ 2 s for the search. Nothing here is asserted.
"""

from __future__ import annotations

from kvplan.plans import deployment
from kvplan.plans.pd.plan import plan_pd
from timing import best_cpu

DAY6 = dict(qps=1605.4, isl=4383, osl=1211, cached_prefix_fraction=0.563, tpot="p50<=50ms",
            settings=deployment.EngineSettings(kv_dtype="fp8"), aggregated=False, sensitivity=False)


def search():
    return plan_pd("deepseek-v3", "h800", system="hgx-h800-8", expert_parallel=True, prefill_tp=[1], decode_tp=[1],
                   prefill_dp=[8, 16, 32, 64, 128], decode_dp=[8, 16, 32, 64, 128], redundant_experts=0, **DAY6)


def pinned():
    return plan_pd("deepseek-v3", "h800", system="hgx-h800-8", expert_parallel=True, prefill_tp=[1], decode_tp=[1],
                   prefill_dp=[32], decode_dp=[144], redundant_experts=32, checklist=True, **DAY6)


if __name__ == "__main__":
    for name, fn in (("wide-EP search, 25 DP pairs", search), ("day-6 pinned + placements + checklist", pinned)):
        wall, cpu, result = best_cpu(fn, runs=3)
        row = result.rows[0]
        print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU → {row['xpyd']} (prefill DP{row['prefill_dp']}, decode "
              f"DP{row['decode_dp']}), {row['prefill_nodes']:g} + {row['decode_nodes']:g} nodes")

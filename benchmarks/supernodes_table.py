"""The placement table of docs/examples/supernodes-wide-ep.md: DeepSeek-V3 and Kimi-K2 PD on 8-GPU nodes,
GB200 NVL72 and CloudMatrix-384, each pool shape planned in one domain, in partitions and across domains.

Run: python benchmarks/supernodes_table.py [--perf-model operators]   (prints the markdown rows; nothing is
asserted). The page's table is the one-η roofline's (``--perf-model roofline``, the default here: the page was
written on it); ``--perf-model operators`` prints the planners' default per-operator figures.
Workload: 200 req/s, ISL 4,383, OSL 1,211, 56.3% cached prefix (DeepSeek day-6 means), TTFT p99 ≤ 4 s,
TPOT p50 ≤ 50 ms, routed experts EP = DP (TP 1) in both pools. fp8 weights and KV where the card has an
fp8 peak; CloudMatrix-384 (ascend-910c, no fp8 peak) in bf16.
"""

from __future__ import annotations

import sys

from kvplan.errors import KvplanError
from kvplan.plans import deployment
from kvplan.plans.pd.plan import plan_pd

SYSTEMS = (("hgx-h800-8", "h800", "fp8"), ("hgx-h200-8", "h200", "fp8"), ("gb200-nvl72", "gb200", "fp8"),
           ("cloudmatrix-384", "ascend-910c", "bf16"))
SHAPES = ((16, 32), (32, 64))
WORKLOAD = dict(qps=200, isl=4383, osl=1211, cached_prefix_fraction=0.563, tpot="p50<=50ms", aggregated=False,
                sensitivity=False, placements=True, expert_parallel=True, prefill_tp=[1], decode_tp=[1])


def rows(perf_model: str = "roofline"):
    for model in ("deepseek-v3", "kimi-k2"):
        for system, hw, dtype in SYSTEMS:
            for dp_p, dp_d in SHAPES:
                label = f"| {model} | {system} | DP{dp_p}/DP{dp_d} |"
                try:
                    result = plan_pd(model, hw, system=system, prefill_dp=[dp_p], decode_dp=[dp_d],
                                     settings=deployment.EngineSettings(kv_dtype=dtype, weights_dtype=dtype,
                                                                        perf_model=perf_model),
                                     **WORKLOAD)
                except KvplanError as exc:
                    yield f"{label} — | not planned: {exc.message} |"
                    continue
                placed = [r for r in result.rows if r.get("placement")]
                if not placed:
                    yield f"{label} — | not planned: {result.rows[0].get('reason')} |"
                for r in placed:
                    name = r["placement"] + (" **(picked)**" if r.get("placement_picked") else "")
                    yield (f"{label} {name} | {r['xpyd']} | {r['total_gpus']} | {r['link_kind']} | "
                           f"{r['ttft_p99_s'] * 1e3:.0f} ms | {r['tpot_p50_s'] * 1e3:.0f} ms | "
                           f"{'yes' if r['placement_fits'] else 'no'} | {r['prefill_utilization']:.2f} |")


if __name__ == "__main__":
    print("| model | system | DP prefill/decode | placement | xPyD | GPUs | KV path | TTFT p99 | TPOT p50 | fits "
          "| prefill ρ |")
    print("|---|---|---|---|---|---:|---|---:|---:|---|---:|")
    model = sys.argv[sys.argv.index("--perf-model") + 1] if "--perf-model" in sys.argv else "roofline"
    for line in rows(model):
        print(line, flush=True)

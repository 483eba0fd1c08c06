"""Benchmark: ``kvplan tier`` — the hit-rate curve on the Mooncake trace (blocks/s) and the whole plan.

Run: python benchmarks/bench_tier.py [TRACE_DIR]   (default: examples/traces beside the repo)
Prints wall-clock figures (best of several runs); nothing here is asserted (see tests for correctness).
Stages: trace reading; the exact prefix-LRU curve (stack distances, one pass, every capacity);
the tier plan in the library (fleet, placement, per-request savings, break-evens); the CLI end to end
in a fresh process (imports and JSON included); and a flag-defined multi-turn workload.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kvplan.plans.tiers.inputs import CapacityOverrides
from kvplan.plans.tiers.reuse import from_trace, from_workload
from kvplan.plans.tiers.plan import tier_plan
from kvplan.workload.reuse import reuse_profile
from kvplan.workload.synthetic import workload_from_flags
from kvplan.workload.traces import read_trace
from timing import best

ROOT = Path(__file__).resolve().parent.parent



def main(trace_dir: Path) -> None:
    path = trace_dir / "conversation_trace.jsonl"
    t_read, trace = best(lambda: read_trace(path), runs=3)
    blocks = int(trace.block_ids.size)
    print(f"{path.name}: {trace.requests:,} requests, {blocks:,} block accesses; read {t_read * 1e3:.0f} ms")
    t_curve, _ = best(lambda: reuse_profile(trace), runs=5)
    print(f"  prefix-LRU hit-rate curve (all capacities): {t_curve * 1e3:.1f} ms = {blocks / t_curve:,.0f} blocks/s")
    reuse = from_trace(trace)
    overrides = CapacityOverrides(host_dram=1e12)
    t_plan, plan = best(lambda: tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=reuse, overrides=overrides))
    summary = plan.result.rows[-1]
    print(f"  tier plan (library, curve given, PD feedback = two plan_pd runs): {t_plan * 1e3:.1f} ms; hit "
          f"{summary['hit_rate']:.2%} on {summary['nodes']} nodes")
    t_nopd, _ = best(lambda: tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=reuse, overrides=overrides, pd=False))
    print(f"  tier plan without the PD feedback: {t_nopd * 1e3:.1f} ms")
    command = [sys.executable, "-m", "kvplan", "tier", "llama-3.1-70b", "--system", "hgx-h100-8", "--trace", str(path),
               "--dram-per-node", "1TB", "--format", "json"]
    t_cli, _ = best(lambda: subprocess.run(command, capture_output=True, check=True, cwd=ROOT), runs=3)
    print(f"  kvplan tier end to end (fresh process, trace read, curve, plan, JSON): {t_cli * 1e3:.0f} ms")
    t_chart, _ = best(lambda: subprocess.run(command + ["--chart", "/tmp/kvplan-bench-tiers.png"], capture_output=True,
                                             check=True, cwd=ROOT), runs=3)
    print(f"  … with --chart (matplotlib import + PNG): {t_chart * 1e3:.0f} ms")
    spec = workload_from_flags(rate_per_s=5, isl="mean=2k,p99=16k", osl="300", turns=4, think_time="60s",
                               shared_prefix="2k")
    t_flags, reuse_flags = best(lambda: from_workload(spec, sample_requests=50_000), runs=3)
    sampled = int(reuse_flags.trace.block_ids.size)
    t_plan_flags, _ = best(lambda: tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=reuse_flags), runs=3)
    print(f"flag workload (4 turns, 60 s think, 2k shared prefix): 50,000 sampled requests ({sampled:,} blocks) "
          f"+ curve {t_flags * 1e3:.0f} ms; plan {t_plan_flags * 1e3:.0f} ms")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "traces")

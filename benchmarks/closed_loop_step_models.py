"""Which step model the closed-loop error comes from: the one-η roofline vs the per-operator model (the default).

Run: python benchmarks/closed_loop_step_models.py [--rows]

Every row of tests/data/measurements/closed_loop.csv (the scoring set; nothing is tuned on it) is
replayed as ``benchmarks/score_closed_loop.py`` does — the row's cards, dtypes, engine, ISL/OSL,
concurrency and request count, one instance, with the row's parallel layout (SGLang's
``--enable-dp-attention`` rows as attention DP over the 8 GPUs with the experts split over them)
— twice:

- ``roofline``: the deployment's step times under ``--perf-model roofline`` (one η pair,
  :func:`kvplan.sim.steps.build_step_model`);
- ``operators``: the default, what ``kvplan plan --concurrency`` uses: the per-operator model
  (:mod:`kvplan.calc.operators` with NVIDIA aiconfigurator's kernel tables for the GPU and engine,
  as ``kvplan latency`` uses; ``Deployment.steps``), tabulated for one DP rank by :mod:`kvplan.sim.opsteps`.

Printed: per group (dense; MoE on H200; MoE on MI300X, which has no kernel tables so both models
price it from the card's η; each MoE group also per engine) median |error|, bias (median signed error) and p90 |error| of output
tokens/s, median TTFT and median ITL/TPOT, for both step models.
"""

from __future__ import annotations

import sys

import numpy as np

from closed_loop_rows import deployment, group, replay, rows as load_rows, scored


def main() -> None:
    rows = load_rows()
    errors: dict = {}
    show = "--rows" in sys.argv
    for r in rows:
        c = int(r["concurrency"])
        cells = []
        for name in ("roofline", "operators"):
            dep = deployment(r, name)
            out = replay(r, dep)
            for metric, measured, predicted in scored(r, out):
                err = (predicted - measured) / measured
                by_engine = f"{group(r)} {r['engine'].split(' ')[0]}" if r["architecture"] != "dense" else None
                for g in (group(r), by_engine, "MoE all" if r["architecture"] != "dense" else None, "all"):
                    if g:
                        errors.setdefault((name, metric, g), []).append(err)
                cells.append(f"{name} {metric} {measured:,.4g}/{predicted:,.4g} ({err:+.0%})")
        if show:
            print(f"{r['source_locator'][:50]} | {r['engine'][:14]} | {dep.model.name}/{dep.hardware.name} "
                  f"tp{dep.tp} dp{dep.parallel.dp} | {r['isl']}/{r['osl']} C={c} | " + "; ".join(cells))
    print("| step model | metric | group | rows | median abs. error | bias | p90 abs. error |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (name, metric, g), errs in sorted(errors.items()):
        e = np.asarray(errs)
        print(f"| {name} | {metric} | {g} | {e.size} | {np.median(np.abs(e)):.0%} | {np.median(e):+.0%} | "
              f"{np.percentile(np.abs(e), 90):.0%} |")


if __name__ == "__main__":
    sys.exit(main())

"""Which step model the closed-loop error comes from: the simulator's roofline steps vs the per-operator model.

Run: python benchmarks/closed_loop_step_models.py [--rows]

Every row of tests/data/measurements/closed_loop.csv (the scoring set; nothing is tuned on it) is
replayed as ``benchmarks/score_closed_loop.py`` does — the row's cards, dtypes, engine, ISL/OSL,
concurrency and request count, one instance, with the row's parallel layout (SGLang's
``--enable-dp-attention`` rows as attention DP over the 8 GPUs with the experts split over them)
— twice:

- ``roofline``: the simulator's own step times (:func:`kvplan.sim.steps.build_step_model`, what
  ``kvplan plan --concurrency`` uses on main);
- ``operators``: the same simulator fed step times from the per-operator model
  (:mod:`kvplan.calc.operators` with NVIDIA aiconfigurator's kernel tables for the GPU and engine,
  :func:`kvplan.plans.sizing.perfmodel.operator_model`, as ``kvplan latency`` uses), tabulated
  into the simulator's step form by :func:`operator_step_model`.

Printed: per group (dense; MoE on H200; MoE on MI300X, which has no kernel tables so both models
price it from the card's η; each MoE group also per engine) median |error|, bias (median signed error) and p90 |error| of output
tokens/s, median TTFT and median ITL/TPOT, for both step models.
"""

from __future__ import annotations

import sys

import numpy as np

from kvplan.calc.operators import OP_NAMES, Parallel
from kvplan.calc.perfdb import load_default
from kvplan.plans.sizing.perfmodel import operator_model
from kvplan.sim.steps import StepModel

from closed_loop_rows import deployment, group, replay, rows as load_rows


def operator_step_model(dep, max_tokens: int, decode_context: float, batch_ref: int) -> StepModel:
    """The per-operator pass in the simulator's step form (:class:`StepModel`), for one DP rank of ``dep``.

    step(n, rows, kv, F) = max(X[n] + L, X[n] + r·rows) + E[n] + max(a·kv, f·F) + comm[n] + overhead, with
    X[n] the attention-projection and dense-MLP GEMMs and E[n] the expert GEMMs of an n-token pass
    (decode: n sequences, CUDA-graph padded), L and r the LM head's weight read and compute per row,
    a and f the attention core's time per KV byte and per FLOP, and the host overhead, all three at
    the reference batch ``batch_ref`` per rank and the decode context (the table's efficiency there).
    """
    cost, machine, tp, dp = dep.cost, dep.machine, dep.tp, dep.parallel.dp
    par = Parallel(tp=tp, dp=dp, expert_parallel=dep.parallel.expert_parallel,
                   redundant_experts=dep.parallel.redundant_experts)
    fn, _effs, _clamped = operator_model(dep.model, dep.node_hardware, cost, machine, dep.engine.engine, False, False,
                                         par, [], load_default(), tps=[tp])
    i = {name: k for k, name in enumerate(OP_NAMES)}
    n = np.arange(max_tokens + 1, dtype=np.float64)
    zero = np.zeros_like(n)
    kw = {"tp": tp, "ep": dp, "phase": "decode", "context": decode_context}
    base = fn(cost, machine, tokens=dp * n, kv_bytes=zero, attention_flops=zero, lm_head_rows=zero,
              batch=dp * np.maximum(n, 1), **kw)
    t = np.maximum(base.op_memory_s, base.op_compute_s)
    x = t[i["attention_gemms"]] + t[i["mlp_gemms"]]
    b = float(batch_ref)

    def probe(**values):
        args = {"tokens": dp * b, "kv_bytes": 0.0, "attention_flops": 0.0, "lm_head_rows": 0.0, **values}
        return fn(cost, machine, batch=dp * b, **args, **kw)

    lm = probe(lm_head_rows=dp * b)
    kv, fl = probe(kv_bytes=1e9), probe(attention_flops=1e15 * dp)
    ctx = max(float(decode_context), 1.0)
    return StepModel(
        dense_memory_s=x + float(lm.op_memory_s[i["lm_head"]]), dense_compute_s=x.copy(),
        expert_s=t[i["expert_gemms"]], comm_s=np.asarray(base.comm_s, dtype=np.float64),
        row_compute_s=float(lm.op_compute_s[i["lm_head"]]) / b,
        kv_byte_s=float(max(kv.op_memory_s[i["attention"]], kv.op_compute_s[i["attention"]])) / 1e9,
        attn_flop_s=float(max(fl.op_memory_s[i["attention"]], fl.op_compute_s[i["attention"]])) / 1e15,
        overhead_s=float(np.asarray(lm.overhead_s).ravel()[0]), overlap_comm=False,
        kv_read_per_token=float(cost.kv_sequence_bytes(ctx, tp)) / ctx, kv_write_per_token=float(cost.kv_token_bytes(tp)),
        attn_flops_per_token=float(cost.decode_attention_flops(ctx)) / ctx, cost=cost, tp=tp)


def main() -> None:
    rows = load_rows()
    errors: dict = {}
    show = "--rows" in sys.argv
    for r in rows:
        dep = deployment(r)
        n, c = int(r["num_requests"] or 500), int(r["concurrency"])
        isl, osl = np.full(n, int(r["isl"])), np.full(n, int(r["osl"]))
        cap = dep.engine.max_num_seqs
        context = float(np.mean(isl + osl / 2))
        models = {"roofline": None,
                  "operators": operator_step_model(dep, dep.engine.chunk_tokens + cap, context,
                                                   max(1, min(c // dep.parallel.dp, cap)))}
        cells = []
        for name, steps in models.items():
            out = replay(r, dep, steps=steps)
            for metric, measured, predicted in (
                    ("output tok/s", r["output_tokens_per_s"], out["output_tokens_per_s"]),
                    ("TTFT p50", r["ttft_median_ms"], (out["ttft_p50_s"] or 0) * 1e3),
                    ("ITL p50", r["itl_median_ms"] or r["tpot_median_ms"], (out["tpot_p50_s"] or 0) * 1e3)):
                if measured and predicted:
                    err = (predicted - float(measured)) / float(measured)
                    by_engine = f"{group(r)} {r['engine'].split(' ')[0]}" if r["architecture"] != "dense" else None
                    for g in (group(r), by_engine, "MoE all" if r["architecture"] != "dense" else None, "all"):
                        if g:
                            errors.setdefault((name, metric, g), []).append(err)
                    cells.append(f"{name} {metric} {float(measured):,.4g}/{predicted:,.4g} ({err:+.0%})")
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

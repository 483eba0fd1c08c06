"""Sensitivity of the closed-loop scores to the eager decode step's form (a what-if, not a score).

Run: python benchmarks/closed_loop_eager_forms.py

kvplan prices a decode step that runs without CUDA graphs (``--enforce-eager``; the rows of
tests/data/measurements/closed_loop.csv whose ``cuda_graphs`` is ``none``, sourced per engine version) as

    max(GPU step, L × t_layer)     (shipped: kernel launches are asynchronous, the GPU waits only for launches
                                    the host has not yet made)

This script replays every row as ``benchmarks/score_closed_loop.py`` does three ways: with CUDA graphs for every
row (the scoring before the ``cuda_graphs`` column), with the shipped max form, and with the additive form the
prefill term uses (GPU step + L × t_layer, aiconfigurator's calibrated TTFT correction applied to each decode
step), and prints per group median |error|, bias (median signed error) and p90 |error| of output tokens/s, median
TTFT and median ITL/TPOT. The additive form is set here by replacing :func:`kvplan.calc.operators.host_bound`
(and the replay's host-bound step count) for the run; nothing here changes what kvplan ships.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

import kvplan.calc.operators as operators
import kvplan.calc.overlap as overlap
import kvplan.sim.opsteps as opsteps
from closed_loop_rows import deployment, group, replay, rows as load_rows, scored


@contextlib.contextmanager
def additive_form():
    """GPU step + dispatch on every eager decode step (the replay then adds it to D[b], no max)."""

    def added(gpu_s, dispatch_s):
        gpu = np.asarray(gpu_s, dtype=np.float64)
        return gpu + dispatch_s, np.zeros_like(gpu)      # nothing left to the replay's max: it is in D[b]

    saved = operators.host_bound, overlap.host_bound, opsteps.eager_decode_s
    operators.host_bound = overlap.host_bound = added
    opsteps.eager_decode_s = lambda *a, **k: 0.0
    try:
        yield
    finally:
        operators.host_bound, overlap.host_bound, opsteps.eager_decode_s = saved


def run(rows, form: str) -> dict:
    errors: dict = {}
    for r in rows:
        eager = r.get("cuda_graphs") == "none"
        row = dict(r, cuda_graphs="decode") if form == "graphs" else r
        with (additive_form() if form == "additive" and eager else contextlib.nullcontext()):
            dep = deployment(row)
            out = replay(row, dep)
        for metric, measured, predicted in scored(r, out):
            err = (predicted - measured) / measured
            for g in (group(r), "no CUDA graphs (cuda_graphs none)" if eager else None, "all"):
                if g:
                    errors.setdefault((metric, g), []).append(err)
    return errors


def main() -> None:
    rows = load_rows()
    forms = {name: run(rows, name) for name in ("graphs", "max", "additive")}
    print("| metric | group | rows | all with graphs | max(GPU, L × t) (shipped) | GPU + L × t |")
    print("|---|---|---:|---|---|---|")

    def cell(errs):
        e = np.asarray(errs)
        return f"{np.median(np.abs(e)):.0%} / {np.median(e):+.0%} / {np.percentile(np.abs(e), 90):.0%}"

    for key in sorted(forms["max"]):
        print(f"| {key[0]} | {key[1]} | {len(forms['max'][key])} | " + " | ".join(
            cell(forms[f][key]) for f in ("graphs", "max", "additive")) + " |")


if __name__ == "__main__":
    sys.exit(main())

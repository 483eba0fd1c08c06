"""Score ``kvplan plan --concurrency`` against public closed-loop measurements (tests/data/measurements/closed_loop.csv).

Run: python benchmarks/score_closed_loop.py [--markdown]

Every row of the scoring set (none of them tunes a default) is replayed as the benchmark ran it:
the row's model card, hardware card, TP, weights and KV dtypes, engine, ISL/OSL (fixed lengths:
the random datasets' range ratio 1, or 0 in ``vllm bench serve``; the vLLM blog's ±15% taken at its
centres), concurrency and request count (a burst: C = N), one instance, the scheduler, token budget
and sequence cap its source documents (``benchmarks/closed_loop_rows.py``), with the row's parallel layout: SGLang's ``--enable-dp-attention`` rows
(``attention_dp`` 8) as attention DP over the 8 GPUs with the experts split over them (``-tp 1 -dp 8
--enable-expert-parallel``; SGLang 0.4.3 keeps the MoE layers tensor parallel, which kvplan does not
plan, so the experts are split as EP — the same bytes per GPU); TensorRT-LLM's ``--ep_size 4`` inside
TP 8 as TP 8. Printed per row: the measured and predicted output tokens/s, median
TTFT and median ITL/TPOT where the source prints them (median ITL against the replay's median gap between
consecutive tokens, over every token; median TPOT against its median per-request TPOT), and the signed error; then median |error|,
median signed error (bias) and p90 |error| per metric, over all rows and per group (dense; MoE on each
GPU; bursts apart), with the default step model (``Deployment.steps``).
"""

from __future__ import annotations

import sys

import numpy as np

from closed_loop_rows import deployment, group, replay, rows as load_rows, source


def _f(text):
    return float(text) if text not in (None, "") else None


def main() -> None:
    rows = load_rows()
    errors: dict[str, list[float]] = {"output_tokens_per_s": [], "ttft_p50": [], "itl": [], "tpot_p50": []}
    print("| source row | engine | model / hw / tp | ISL/OSL | C | scheduler | out tok/s measured / predicted (err) | "
          "TTFT p50 ms m / p (err) | ITL or TPOT p50 ms m / p (err) | TPOT p50 ms m / p (err) |")
    print("|---|---|---|---|---:|---|---|---|---|---|")
    groups, sources, means = {}, {}, {}
    for r in rows:
        dp = int(r["attention_dp"] or 1)
        try:
            dep = deployment(r)
        except Exception as exc:  # a card or dtype kvplan lacks: reported, not scored
            print(f"| {r['source_locator']} | {r['engine']} | — | — | — | — | not scored: {exc} | | |")
            continue
        isl, osl = int(r["isl"]), int(r["osl"])
        out = replay(r, dep)
        cells = []
        for metric, measured, predicted in (
            ("output_tokens_per_s", _f(r["output_tokens_per_s"]), out["output_tokens_per_s"]),
            ("ttft_p50", _f(r["ttft_median_ms"]), out["ttft_p50_s"] * 1e3 if out["ttft_p50_s"] else None),
            # median ITL: the replay's median gap between consecutive tokens (closed_loop_rows.scored); a row without
            # one is scored on its median TPOT against the replay's
            ("itl", _f(r["itl_median_ms"]), out["itl_p50_s"] * 1e3 if out.get("itl_p50_s") else None)
            if _f(r["itl_median_ms"]) else
            ("itl", _f(r["tpot_median_ms"]), out["tpot_p50_s"] * 1e3 if out["tpot_p50_s"] else None),
            ("tpot_p50", _f(r["tpot_median_ms"]), out["tpot_p50_s"] * 1e3 if out["tpot_p50_s"] else None),
        ):
            if measured and predicted:
                err = (predicted - measured) / measured
                errors[metric].append(err)
                groups.setdefault((metric, group(r)), []).append(err)
                sources.setdefault((metric, source(r)), []).append(err)
                cells.append(f"{measured:,.4g} / {predicted:,.4g} ({err:+.0%})")
            else:
                cells.append("—")
        # a row that prints only means (NIM's tables: mean or median not said, read as AIPerf's average) against the
        # replay's means; reported apart, not in the scores above
        for metric, measured, predicted in (("ttft_mean", _f(r["ttft_mean_ms"]), out.get("ttft_mean_s")),
                                            ("itl_mean", _f(r["itl_mean_ms"]), out.get("itl_mean_s"))):
            if measured and predicted and not _f(r[metric.replace("mean", "median") + "_ms"]):
                means.setdefault((metric, source(r)), []).append(predicted * 1e3 / measured - 1)
        print(f"| {r['source_locator'][:60]} | {r['engine']} | {r['model_card']} / {r['hardware_card']} / "
              f"tp{dep.tp}" + (f" dp{dp}" if dp > 1 else "") + f" | {isl}/{osl} | "
              f"{r['concurrency']} | {out['scheduler']}, {dep.engine.chunk_tokens:,} | " + " | ".join(cells) + " |")
    print()
    for metric, errs in errors.items():
        if errs:
            e = np.asarray(errs)
            print(f"{metric}: {e.size} rows, median |error| {np.median(np.abs(e)):.1%}, bias (median signed) "
                  f"{np.median(e):+.1%}, p90 |error| {np.percentile(np.abs(e), 90):.1%}")
    print()
    print("| metric | group | rows | median abs. error | bias | p90 abs. error |")
    print("|---|---|---:|---:|---:|---:|")
    for (metric, name), errs in sorted(groups.items()):
        e = np.asarray(errs)
        print(f"| {metric} | {name} | {e.size} | {np.median(np.abs(e)):.0%} | {np.median(e):+.0%} | "
              f"{np.percentile(np.abs(e), 90):.0%} |")
    for title, table in (("source", sources), ("source (means only, not scored above)", means)):
        print()
        print(f"| metric | {title} | rows | median abs. error | bias | p90 abs. error |")
        print("|---|---|---:|---:|---:|---:|")
        for (metric, name), errs in sorted(table.items()):
            e = np.asarray(errs)
            print(f"| {metric} | {name} | {e.size} | {np.median(np.abs(e)):.0%} | {np.median(e):+.0%} | "
                  f"{np.percentile(np.abs(e), 90):.0%} |")


if __name__ == "__main__":
    sys.exit(main())

"""Score kvplan's per-operator model against published throughput and latency, per group and set.

Fitting set (the only data defaults may be tuned on): TensorRT-LLM ``performance.md`` v0.9.0
(the 72 rows of ``tests/unit/test_roofline.py``) and ``perf-overview.md``
(``tests/data/measurements/trtllm_perf_overview.csv``), plus the per-kernel database behind
``kvplan/data/perf``. Scoring set: ``tests/data/measurements/scoring_set.csv`` where present.

Writes ``docs/_perf_validation.md`` (section (e) of docs/validation.md) and
``kvplan/data/error_bands.json`` (the expected error per group that ``kvplan latency`` prints).

    python benchmarks/perf_validation.py            # write both files
    python benchmarks/perf_validation.py --check    # exit 1 when either is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.validation.perf_rows import MEASUREMENTS, Row, estimate, load_rows, stats  # noqa: E402

DOC = ROOT / "docs" / "_perf_validation.md"
BANDS = ROOT / "kvplan" / "data" / "error_bands.json"
GROUPS = ("dense-batch1", "dense-max", "moe", "prefill")
GROUP_TITLES = {"dense-batch1": "dense decode at batch 1", "dense-max": "dense at max throughput",
                "moe": "MoE", "prefill": "prefill / TTFT"}


def v090_rows() -> list[tuple[Row, str]]:
    """TensorRT-LLM performance.md v0.9.0: static-batch throughput rows and batch-1 first-token rows."""
    from tests.unit.test_roofline import TRTLLM_V090

    out = []
    for card, model, batch, tp, isl, osl, kind, measured, _default, _calibrated in TRTLLM_V090:
        dtype = "auto" if card == "a100-80gb" else "fp8"
        moe = model.startswith("mixtral")
        group = "prefill" if kind == "ttft" else ("moe" if moe else "dense-max")
        out.append((Row(source=f"performance.md v0.9.0: {model} TP{tp} batch {batch} on {card}", model=model,
                        hardware=card, label=f"TP{tp}", tp=tp, dp=1, expert_parallel=False, weights_dtype=dtype,
                        kv_dtype=dtype, isl=isl, osl=osl, measured=measured, group=group, set="fitting"),
                    f"{kind}:{batch}"))
    return out


def evaluate(row: Row, how: str = "max") -> float:
    from kvplan.plans.sizing.latency import latency

    if how == "max":
        return estimate(row)
    kind, batch = how.split(":")
    r = latency(row.model, row.hardware, isl=row.isl, osl=row.osl, batch=int(batch), tp=row.tp,
                weights_dtype=row.weights_dtype, kv_dtype=row.kv_dtype, engine="trtllm").rows[0]
    return r["ttft_s"] * 1e3 if kind == "ttft" else r["tokens_per_s_per_gpu"]


def has_tables(hardware: str) -> bool:
    from kvplan.calc.perfdb import load_default

    tables = load_default()
    return tables is not None and tables.gpu_name(hardware) is not None


def collect():
    items = [(r, "max") for r in load_rows()] + v090_rows()
    scoring = MEASUREMENTS / "scoring_set.csv"
    if scoring.exists():
        items += [(r, "max") for r in load_rows(scoring, "scoring")]
    results = []
    for row, how in items:
        value = evaluate(row, how)
        results.append((row, how, value, (value - row.measured) / row.measured))
    return results


def _pct(x: float) -> str:
    return "—" if x != x else f"{x:+.0%}" if x < 0 or x > 0 else "0%"


def render(results) -> tuple[str, dict]:
    lines = ["### Per-operator model against published throughput (fitting and scoring sets)", "",
             "Regenerate with `python benchmarks/perf_validation.py`. kvplan side: `kvplan latency MODEL HW --isl I "
             "--osl O --batch max --engine trtllm` with the row's parallelism (DEPn = `--dp n "
             "--enable-expert-parallel`), `tokens_per_s_per_gpu`; v0.9.0 rows at their published static batch. "
             "Error = (kvplan − measured) / measured: positive is optimistic for throughput, negative for latency.",
             "",
             "**Which rows are which.** Fitting set (the only data kvplan's defaults may be tuned on): every row "
             "below marked `fitting` — TensorRT-LLM `performance.md` v0.9.0 (the 72 rows of section (d), here run "
             "through the per-operator model) and `perf-overview.md` (`tests/data/measurements/"
             "trtllm_perf_overview.csv`, two revisions), plus the per-kernel database behind `kvplan/data/perf`. "
             "Scoring set: `tests/data/measurements/scoring_set.csv` rows (marked `scoring`) where that file is "
             "present; no default was tuned on them. Section (d) above is the older one-η roofline "
             "(`--perf-model roofline`); this section is the default per-operator model. No parameter was fitted "
             "to the rows below: the operator efficiencies are the per-kernel measurements, and the remaining "
             "defaults (kernel-launch overhead, link latency) are the sourced ones printed in each command's notes.",
             "",
             "**Targets** (scoring set): median |error| ≤ 15 %, |bias| ≤ 10 %, p90 ≤ 35 % per group. Where a group "
             "has no scoring rows the target is not yet measured; the fitting-set figures are in-sample.",
             "", "| set | group | rows | median abs error | median signed error (bias) | p90 abs error |",
             "|---|---|---:|---:|---:|---:|"]
    bands = {"source": "docs/validation.md section (e), generated by benchmarks/perf_validation.py", "groups": {}}
    for set_name in ("fitting", "scoring"):
        for group in GROUPS:
            s = stats([e for r, _h, _v, e in results if r.set == set_name and r.group == group])
            if s["n"] == 0:
                lines.append(f"| {set_name} | {GROUP_TITLES[group]} | 0 | no rows | | |")
                continue
            lines.append(f"| {set_name} | {GROUP_TITLES[group]} | {s['n']} | {s['median_abs']:.0%} | "
                         f"{_pct(s['bias'])} | {s['p90_abs']:.0%} |")
            current = bands["groups"].get(group)
            if current is None or set_name == "scoring":
                bands["groups"][group] = {"set": set_name, **{k: round(v, 4) for k, v in s.items()}}
    lines += ["", "The same, only rows on GPUs with per-kernel tables (A100, H100, H200, B200; GB200 and others run at "
              "the card's flat η and say so):", "",
              "| set | group | rows | median abs error | median signed error (bias) | p90 abs error |",
              "|---|---|---:|---:|---:|---:|"]
    for set_name in ("fitting", "scoring"):
        for group in GROUPS:
            s = stats([e for r, _h, _v, e in results if r.set == set_name and r.group == group and has_tables(r.hardware)])
            if s["n"]:
                lines.append(f"| {set_name} | {GROUP_TITLES[group]} | {s['n']} | {s['median_abs']:.0%} | "
                             f"{_pct(s['bias'])} | {s['p90_abs']:.0%} |")
    lines += ["", "Every row:", "", "| set | group | source | ISL / OSL | measured | kvplan | error |",
              "|---|---|---|---|---:|---:|---:|"]
    for r, how, value, err in results:
        unit = " ms" if how.startswith("ttft") else ""
        lines.append(f"| {r.set} | {r.group} | {r.source} | {r.isl} / {r.osl} | {r.measured:,.4g}{unit} | "
                     f"{value:,.4g}{unit} | {_pct(err)} |")
    return "\n".join(lines) + "\n", bands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the files are stale")
    args = parser.parse_args(argv)
    text, bands = render(collect())
    blob = json.dumps(bands, indent=1, sort_keys=True) + "\n"
    if args.check:
        stale = [p for p, t in ((DOC, text), (BANDS, blob)) if not p.exists() or p.read_text() != t]
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}")
        return 1 if stale else 0
    DOC.write_text(text)
    BANDS.parent.mkdir(parents=True, exist_ok=True)
    BANDS.write_text(blob)
    for group, b in bands["groups"].items():
        print(f"{group:13s} ({b['set']}, {b['n']} rows): median |error| {b['median_abs']:.1%}, bias {b['bias']:+.1%}, "
              f"p90 {b['p90_abs']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

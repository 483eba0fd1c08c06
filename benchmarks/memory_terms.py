"""Write docs/_memory_terms.md: vLLM's default activation and non-torch terms against public logs.

    python benchmarks/memory_terms.py     (then python benchmarks/make_validation.py includes it as section (f))

Fitting and scoring rows are kept apart (tests/validation/memory_terms.py holds the records).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.validation.memory_terms import LOGS, summary  # noqa: E402

OUT = ROOT / "docs" / "_memory_terms.md"


def render() -> str:
    lines = [
        "Without the engine's logged figures, `kvplan fit` (and every planner through the deployment) takes vLLM's "
        "start-up terms from `kvplan.calc.memory`:",
        "",
        "- activation peak = max(forward, sampler): forward = 1.1 × max_num_batched_tokens × (2h + 3i/tp) × "
        "dtype bytes (MoE layers: 2h + k × (max(2i/tp, h) + i/tp)); sampler = 10.5 × min(max_num_seqs, tokens) "
        "× vocab × 4 B. The factors were fitted on the `fit` rows below (1.07 and 10.3) and rounded up;",
        "- non-torch memory = 0.35 GiB on one GPU (the largest one-GPU `fit` row), 3.58 GiB per GPU with any "
        "peer (tp × pp > 1; the one public multi-GPU figure);",
        "- CUDA-graph memory = 0 (graphs live in the 1 − util headroom unless vLLM's estimate is on).",
        "",
        "| Log | Term | Role | Inputs | Logged | kvplan | Error |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for log in LOGS:
        value = log.kvplan_gib()
        lines.append(f"| [{log.key}]({log.source}) | {log.term} | {log.role} | {log.inputs} | "
                     f"{log.logged_gib:.2f} GiB | {value:.3f} GiB | {log.error_gib:+.3f} GiB "
                     f"({log.error_gib / log.logged_gib:+.0%}) |")
    lines += ["", "| Term | Set | n | median abs error | bias (median signed) | p90 abs error |", "|---|---|---:|---:|---:|---:|"]
    for term in ("activation", "non_torch"):
        for role in ("fit", "score"):
            s = summary(term, role)
            lines.append(f"| {term} | {role} | {s['n']} | {s['median_abs_gib']:.3f} GiB ({s['median_abs_rel']:.0%}) | "
                         f"{s['bias_gib']:+.3f} GiB ({s['bias_rel']:+.0%}) | {s['p90_abs_gib']:.3f} GiB |")
    lines += [
        "",
        "The one scoring log for the activation term (issue #12330, V0 v0.6: 9.37 GiB for Llama-3-8B at 8,192 "
        "tokens) is 7× what the fitted forms give and what the same model logged in PR #10511 a month earlier "
        "(1.26 GiB); the issue does not show why. A Llama-3-8B sizing that must hold on such a build needs "
        "`--activation-memory 9.37GiB`. No public log gives non-torch memory for tp ≥ 4; with more peers NCCL "
        "may need more than 3.58 GiB. Left out: PR #12126's 36.63 GiB (a vision encoder's profiling pass) and "
        "the Whisper activation of issue #12095 (encoder-decoder).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")

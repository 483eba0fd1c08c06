"""Regenerate docs/validation.md: every public cross-check kvplan runs, its source and its error.

    python benchmarks/make_validation.py            # write docs/validation.md
    python benchmarks/make_validation.py --check    # exit 1 if its KV and engine sections are stale
    python benchmarks/make_validation.py --output PATH [--no-real-caches]

Sections: (a) KV bytes against published figures, (b) real Hugging Face transformers caches
measured against kvplan's ``hf`` profile (run when torch and transformers import), (c) engine
start-up logs recomputed live with kvplan, (d) latency against published measurements, copied
verbatim from docs/_latency_validation.md when that file exists, (e) and (f) from docs/_perf_validation.md
and docs/_memory_terms.md. The records and measurement
functions live in ``tests/validation`` so the tests and this page use the same numbers; the page
carries no timestamp, so regenerating it unchanged gives the same bytes.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `tests.validation` importable
    sys.path.insert(0, str(ROOT))

from tests.validation import engine_logs, published  # noqa: E402

DOC = ROOT / "docs" / "validation.md"
LATENCY_FILE = ROOT / "docs" / "_latency_validation.md"
PERF_FILE = ROOT / "docs" / "_perf_validation.md"
MEMORY_FILE = ROOT / "docs" / "_memory_terms.md"
HEADINGS = {
    "published": "## (a) KV bytes against published figures",
    "real_caches": "## (b) Real transformers caches against the `hf` profile",
    "engine_logs": "## (c) Engine start-up logs",
    "latency": "## (d) Latency against published measurements",
    "perf": "## (e) Per-operator model: fitting and scoring sets",
    "memory": "## (f) vLLM's default memory terms: fitting and scoring sets",
}
CHECKED_SECTIONS = ("published", "engine_logs")


@dataclass
class Tally:
    checks: int = 0
    agree: int = 0
    sources: int = 0

    @property
    def disagree(self) -> int:
        return self.checks - self.agree


def _number(value: float, unit: str) -> str:
    if unit in ("GiB", "MiB", "x"):
        digits = 4 if abs(value) < 1 else 3 if abs(value) < 100 else 2
        text = f"{value:,.{digits}f}".rstrip("0").rstrip(".")
        return f"{text} {unit}" if unit != "x" else f"{text}x"
    return f"{value:,.0f} {unit}" if value == int(value) else f"{value:,.4f} {unit}"


def _error(error: float, reference: float, unit: str) -> str:
    if error == 0:
        return "0 (exact)"
    relative = f" ({error / reference:+.2%})".replace("-", "−") if reference else ""
    sign = "+" if error > 0 else "−"
    return f"{sign}{_number(abs(error), unit)}{relative}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def published_section() -> tuple[str, Tally]:
    """(a): each published KV figure, kvplan's value and the difference."""
    lines = [HEADINGS["published"], "",
             "kvplan's bytes (``ideal`` profile; Mooncake with ``vllm``) for the model and token count the source "
             "names. Tolerance: half the source's last printed digit.", "",
             "| Check | Model card | Quantity | Published | kvplan | Error | Agreement |",
             "|---|---|---|---:|---:|---:|---|"]
    tally = Tally(sources=len(published.sources()))
    for f in published.FIGURES:
        value = f.kvplan()
        ok = abs(value - f.published) <= f.tolerance + 1e-9
        tally.checks += 1
        tally.agree += ok
        verdict = "agrees" if ok else ("**source is wrong** (see note)" if not f.agrees else "**disagrees**")
        lines.append(f"| [{f.key}]({f.source}) | {f.model} | {_cell(f.quantity)} | {_number(f.published, f.unit)} | "
                     f"{_number(value, f.unit)} | {_error(value - f.published, f.published, f.unit)} | {verdict} |")
    lines += ["", "Figures as the sources print them (table rows transcribed), with notes:", ""]
    for f in published.FIGURES:
        note = f" — {f.note}" if f.note else ""
        lines.append(f"- `{f.key}`: “{f.quote}” ({f.source}){note}")
    return "\n".join(lines), tally


def _torch_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))


def real_caches_section(run: bool = True) -> tuple[str, Tally]:
    """(b): bytes measured in real transformers caches against kvplan's ``hf`` prediction."""
    lines = [HEADINGS["real_caches"], ""]
    if not run or not _torch_available():
        lines.append("Not run here: torch and transformers are not importable (``pip install kvplan[validation]``), "
                     "or the page was generated with ``--no-real-caches``.")
        return "\n".join(lines), Tally()
    from tests.validation import real_caches

    versions = real_caches.versions()
    lines += [
        f"Measured with torch {versions['torch']} and transformers {versions['transformers']} on CPU: random bf16 "
        "weights, a shrunk released config.json per architecture (attention layout kept), one forward pass over N "
        "random tokens with `use_cache=True`. *transformers* is Σ `.nbytes` of every key, value and state tensor in "
        "the returned cache; *kvplan* is `kv_layout(card, get_profile('hf')).sequence_bytes(N) × batch` for the card "
        "imported from the same file as released (*hub*) and as transformers saves it (*saved*). The tests in "
        "`tests/validation/test_real_caches.py` assert equality to the byte.", "",
        "| Architecture | Layout | N | Batch | transformers (B) | kvplan hub (B) | kvplan saved (B) | Result |",
        "|---|---|---:|---:|---:|---:|---:|---|"]
    rows = real_caches.cross_checks()
    tally = Tally(sources=len(real_caches.ARCHITECTURES))
    for r in rows:
        tally.checks += 1
        tally.agree += r.matches
        result = "match" if r.matches else "**mismatch**"
        lines.append(f"| {r.key} | {_cell(r.layout)} | {r.seq_len} | {r.batch} | {r.measured_bytes:,} | "
                     f"{r.predicted_hub_bytes:,} | {r.predicted_saved_bytes:,} | {result} |")
    lines += ["", "What each cache holds (longest N, batch 1):", ""]
    for key, arch in real_caches.ARCHITECTURES.items():
        summary = real_caches.measure(key, max(arch.seq_lens)).layer_summary()
        lines.append(f"- **{key}** (N = {max(arch.seq_lens)}; config: {arch.source}): {summary}")
    wrong = sorted({r.key for r in rows if not r.matches})
    if wrong:
        lines += ["", "Causes of the mismatches (transformers source, line numbers of the version above):", ""]
        lines += [f"- **{key}**: {real_caches.KNOWN_CAUSES.get(key, 'not yet explained')}" for key in wrong]
    lines += ["", "Storage behind the views: a sliding layer's `keys`/`values` are views of the last W − 1 tokens "
              "(`DynamicSlidingWindowLayer.update`), but they keep the whole `torch.cat` alive: after a prefill of "
              "N tokens the layer pins N tokens of storage, and from the first decode step W tokens (one more than "
              "it exposes). `test_sliding_layer_storage_is_the_prompt_then_w_tokens` pins this; the table counts "
              "`.nbytes`. Each sliding layer also carries an 8-byte int64 window scalar (not counted)."]
    return "\n".join(lines), tally


def engine_logs_section() -> tuple[str, Tally]:
    """(c): each logged figure recomputed with kvplan from the public inputs."""
    lines = [HEADINGS["engine_logs"], "",
             "Public inputs (model, GPU, tp, utilisation, and the memory terms the log prints, passed as "
             "`Overrides`) go through `kvplan.plans.sizing.fit.fit` or `kv_layout` bytes per token; the logged figure "
             "comes out. Tolerance is the log's own rounding carried through the arithmetic.", "",
             "| Log | Engine | Inputs | Quantity | Logged | kvplan | Error | Tolerance | Agreement |",
             "|---|---|---|---|---:|---:|---:|---|---|"]
    tally = Tally(sources=len({(log.engine, log.source) for log in engine_logs.LOGS}))
    for log in engine_logs.LOGS:
        value = log.kvplan()
        ok = abs(value - log.logged) <= log.tolerance
        tally.checks += 1
        tally.agree += ok
        verdict = "agrees" if ok else "**disagrees** (see note)"
        tolerance = f"±{_number(log.tolerance, log.unit)}: {log.tolerance_reason}"
        lines.append(f"| [{log.key}]({log.source}) | {log.engine} | {_cell(log.inputs)} | {_cell(log.quantity)} | "
                     f"{_number(log.logged, log.unit)} | {_number(value, log.unit)} | "
                     f"{_error(value - log.logged, log.logged, log.unit)} | {_cell(tolerance)} | {verdict} |")
    lines += ["", "Quoted log lines:", ""]
    for log in engine_logs.LOGS:
        lines.append(f"- `{log.key}` ({log.source}):")
        lines += [f"  - `{q}`" for q in log.quote]
        if log.disagreement:
            lines.append(f"  - Note: {log.disagreement}")
    return "\n".join(lines), tally


def latency_section() -> str:
    """(d): docs/_latency_validation.md verbatim, written by the latency work."""
    lines = [HEADINGS["latency"], ""]
    if LATENCY_FILE.exists():
        lines.append(LATENCY_FILE.read_text(encoding="utf-8").rstrip("\n"))
    else:
        lines.append("No latency cross-checks yet (`docs/_latency_validation.md` does not exist).")
    return "\n".join(lines)


def perf_section() -> str:
    """(e): docs/_perf_validation.md verbatim, written by benchmarks/perf_validation.py."""
    lines = [HEADINGS["perf"], ""]
    if PERF_FILE.exists():
        lines.append(PERF_FILE.read_text(encoding="utf-8").rstrip("\n"))
    else:
        lines.append("Not generated yet (`python benchmarks/perf_validation.py` writes `docs/_perf_validation.md`).")
    return "\n".join(lines)


def memory_section() -> str:
    """(f): docs/_memory_terms.md verbatim, written by benchmarks/memory_terms.py."""
    lines = [HEADINGS["memory"], ""]
    if MEMORY_FILE.exists():
        lines.append(MEMORY_FILE.read_text(encoding="utf-8").rstrip("\n"))
    else:
        lines.append("Not generated yet (`python benchmarks/memory_terms.py` writes `docs/_memory_terms.md`).")
    return "\n".join(lines)


def render(run_real_caches: bool = True) -> str:
    """The whole page."""
    a, a_tally = published_section()
    b, b_tally = real_caches_section(run_real_caches)
    c, c_tally = engine_logs_section()
    d = latency_section()
    total_checks = a_tally.checks + b_tally.checks + c_tally.checks
    total_sources = a_tally.sources + b_tally.sources + c_tally.sources
    header = [
        "# Validation: kvplan against published figures, real caches and engine logs", "",
        "<!-- generated by benchmarks/make_validation.py; do not edit by hand -->", "",
        "Every cross-check kvplan passes (and the ones it does not), with its public source and its error. "
        "Regenerate with `python benchmarks/make_validation.py`; "
        "`tests/validation/test_make_validation.py` fails when sections (a) and (c) are stale.", "",
        "| Section | Independent sources | Checks | Agree | Disagree |",
        "|---|---:|---:|---:|---:|",
        f"| (a) published KV figures | {a_tally.sources} | {a_tally.checks} | {a_tally.agree} | {a_tally.disagree} |",
        f"| (b) real transformers caches | {b_tally.sources} architectures | {b_tally.checks} | {b_tally.agree} | "
        f"{b_tally.disagree} |",
        f"| (c) engine start-up logs | {c_tally.sources} | {c_tally.checks} | {c_tally.agree} | {c_tally.disagree} |",
        f"| **total** | **{total_sources}** | **{total_checks}** | "
        f"**{a_tally.agree + b_tally.agree + c_tally.agree}** | "
        f"**{a_tally.disagree + b_tally.disagree + c_tally.disagree}** |", "",
        "A disagreement is listed, not hidden: in (a) the HF blog's 405B row is itself wrong; in (b) each "
        "mismatch names the transformers code responsible; in (c) the note says what the log does not show.",
    ]
    return "\n\n".join(["\n".join(header), a, b, c, d, perf_section(), memory_section()]) + "\n"


def sections(text: str) -> dict[str, str]:
    """The page split at its section headings (name → text of that section, heading included)."""
    found = {name: text.find(heading) for name, heading in HEADINGS.items()}
    ordered = sorted((pos, name) for name, pos in found.items() if pos >= 0)
    out = {}
    for i, (pos, name) in enumerate(ordered):
        end = ordered[i + 1][0] if i + 1 < len(ordered) else len(text)
        out[name] = text[pos:end].strip()
    return out


def stale_sections(path: Path = DOC) -> list[str]:
    """Names of the checked sections whose text in ``path`` differs from a fresh computation."""
    current = sections(path.read_text(encoding="utf-8")) if path.exists() else {}
    fresh = {"published": published_section()[0].strip(), "engine_logs": engine_logs_section()[0].strip()}
    return [name for name in CHECKED_SECTIONS if current.get(name) != fresh[name]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DOC,
                        help="where to write the page (default docs/validation.md)")
    parser.add_argument("--check", action="store_true",
                        help="compare sections (a) and (c) with the page; write nothing")
    parser.add_argument("--no-real-caches", action="store_true", help="skip section (b) (needs torch/transformers)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_sections(args.output)
        if stale:
            print(f"{args.output}: stale sections: {', '.join(stale)}; run python benchmarks/make_validation.py",
                  file=sys.stderr)
            return 1
        print(f"{args.output}: sections (a) and (c) are up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(run_real_caches=not args.no_real_caches), encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

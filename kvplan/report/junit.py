"""What ``kvplan check`` hands to people and CI systems: console text, JUnit XML, GitHub output.

- Console: one line per assertion (PASS/FAIL/SKIP, the value and the limit); under each
  failure, the chain of numbers that produced the value (the fit explain lines).
- JUnit XML: one ``<testsuite>`` per plan file, one ``<testcase>`` per assertion, a
  ``<failure message=…>`` with the chain as text, ``<skipped>`` for an SLO not checked yet.
  The element and attribute names follow the de-facto schema Jenkins, GitLab and the
  GitHub test-report actions read (testsuites/testsuite/testcase/failure/skipped).
- GitHub Actions: ``::error file=…,line=…,title=…::message`` workflow commands (one per failed
  assertion) and a Markdown job summary appended to ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kvplan.plans.check.run import FAILED, PASSED, SKIPPED, CheckReport
from kvplan.textsafe import gha_data, gha_property, one_line

_MARK = {PASSED: "PASS", FAILED: "FAIL", SKIPPED: "SKIP"}


def check_text(report: CheckReport) -> str:
    """The console report: every plan, every assertion, and why each failure failed."""
    lines: list[str] = []
    for plan in report.plans:
        lines.append(f"{one_line(plan.path, 1000)}: {one_line(plan.summary, 1000)}")
        explained: list[tuple[str, ...]] = []  # an explanation shared by several failures is printed once
        for o in plan.outcomes:
            lines.append(f"  {_MARK[o.status]}  {one_line(o.assertion)}  —  {one_line(o.message, 1000)}")
            if o.failed and o.why:
                why = tuple(o.why)
                if why in explained:
                    lines.append("        why: the same as above")
                    continue
                explained.append(why)
                lines.append("        why:")
                lines.extend(f"          {one_line(w, 1000)}" for w in o.why)
        lines.append("")
    c = report.counts()
    total = sum(c.values())
    tail = f", {c[SKIPPED]} skipped" if c[SKIPPED] else ""
    lines.append(f"{c[PASSED]} passed, {c[FAILED]} failed{tail} ({total} assertion{'s' if total != 1 else ''} in {len(report.plans)} "
                 f"plan file{'s' if len(report.plans) != 1 else ''})")
    return "\n".join(lines) + "\n"


def junit_xml(report: CheckReport) -> str:
    """JUnit XML: testsuites > testsuite (per plan file) > testcase (per assertion)."""
    c = report.counts()
    root = ET.Element("testsuites", name="kvplan check", tests=str(sum(c.values())), failures=str(c[FAILED]),
                      errors="0", skipped=str(c[SKIPPED]),
                      time=f"{sum(p.seconds for p in report.plans):.6f}")
    for plan in report.plans:
        suite = ET.SubElement(
            root, "testsuite", name=str(plan.path), tests=str(len(plan.outcomes)),
            failures=str(len(plan.failures)), errors="0",
            skipped=str(sum(o.status == SKIPPED for o in plan.outcomes)), time=f"{plan.seconds:.6f}",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="plan", value=plan.label)
        ET.SubElement(props, "property", name="deployment", value=plan.summary)
        for o in plan.outcomes:
            attrs = {"classname": f"kvplan.check.{plan.label}", "name": o.assertion, "file": str(plan.path),
                     "time": f"{o.seconds:.6f}"}
            if o.line is not None:
                attrs["line"] = str(o.line)
            case = ET.SubElement(suite, "testcase", attrs)
            if o.status == FAILED:
                failure = ET.SubElement(case, "failure", message=o.message, type="AssertionFailed")
                failure.text = "\n".join([o.message, *o.why])
            elif o.status == SKIPPED:
                ET.SubElement(case, "skipped", message=o.message)
        if plan.assumptions:
            out = ET.SubElement(suite, "system-out")
            out.text = "\n".join(f"Note: {a}" for a in plan.assumptions)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def github_annotations(report: CheckReport) -> list[str]:
    """``::error`` workflow commands, one per failed assertion, pointing at the plan file's line."""
    lines = []
    for plan in report.plans:
        for o in plan.failures:
            props = f"file={gha_property(str(plan.path))}"
            if o.line is not None:
                props += f",line={o.line}"
            props += f",title={gha_property(f'kvplan check: {o.assertion}')}"
            lines.append(f"::error {props}::{gha_data(o.message)}")
    return lines


def github_summary(report: CheckReport) -> str:
    """A Markdown job summary: one table per plan, the failures' chains folded below."""
    c = report.counts()
    icon = "❌" if report.failed else "✅"
    out = [f"## {icon} kvplan check: {c[PASSED]} passed, {c[FAILED]} failed"
           + (f", {c[SKIPPED]} skipped" if c[SKIPPED] else ""), ""]
    for plan in report.plans:
        out += [f"### {_md_code(plan.path)}", "", _md(plan.summary), "", "| | assertion | result |", "|---|---|---|"]
        for o in plan.outcomes:
            mark = {PASSED: "✅", FAILED: "❌", SKIPPED: "⏭️"}[o.status]
            out.append(f"| {mark} | {_md_code(o.assertion)} | {_md(o.message)} |")
        for o in plan.failures:
            if o.why:
                out += ["", f"<details><summary>why <code>{_html(o.assertion)}</code> failed</summary>", "", "```",
                        *(one_line(w, 1000).replace("```", "`\u200b``") for w in o.why), "```", "</details>"]
        out.append("")
    return "\n".join(out) + "\n"


def _md(text: object) -> str:
    """User text inside a Markdown table cell: one line, no HTML, ``|`` escaped."""
    return _html(one_line(text, 1000)).replace("|", "\\|")


def _md_code(text: object) -> str:
    """User text as inline code: a fence longer than any run of backticks inside it."""
    body = one_line(text, 1000).replace("|", "\\|")
    longest = max((len(m) for m in _backtick_runs(body)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {body} {fence}" if longest else f"`{body}`"


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for char in text:
        if char == "`":
            current += char
        elif current:
            runs.append(current)
            current = ""
    return runs + ([current] if current else [])


def _html(text: object) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def append_summary(path: Path, text: str) -> None:
    """Append to the job summary file (GitHub creates it; appending is how steps share it)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)

"""``kvplan check PLAN.yaml…`` (CI sizing checks) and ``kvplan schema`` (the plan file's JSON Schema)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import (CardsOpt, CheckFormatOpt, OutputOpt, cards_dirs, emit_text, note, output_format)
from kvplan.errors import AnswerNo, InputError
from kvplan.plans.check.run import check
from kvplan.report.junit import append_summary, check_text, github_annotations, github_summary, junit_xml
from kvplan.outputs import OutputSet, check_target
from kvplan.report.render import render
from kvplan.textsafe import write_command

CHECK_FORMATS = ("table", "json", "csv", "markdown")


def check_command(
    plans: Annotated[list[Path], typer.Argument(help="Plan files (YAML); see 'kvplan schema'.")],
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write JUnit XML to FILE (for CI).")] = None,
    fmt: CheckFormatOpt = None,
    output: OutputOpt = None,
    cards: CardsOpt = None,
) -> None:
    """Evaluate every assertion of the plan files: exit 0 if all hold, 1 if any fails, 2 on a bad file.

    On GitHub Actions (GITHUB_ACTIONS=true) failures are also emitted as ::error annotations and
    a Markdown summary is appended to $GITHUB_STEP_SUMMARY.
    """
    fmt = output_format(fmt, output, CHECK_FORMATS)
    for path, what in ((junit, "--junit"), (output, "--output")):
        if path is not None:
            check_target(path, what)
    report = check(plans, cards_dirs(cards))
    extra = OutputSet()
    if junit is not None:
        extra.add(junit, junit_xml(report), what="--junit")
    if fmt == "table":
        text = check_text(report)
    elif fmt == "markdown":
        text = github_summary(report)
    else:
        text = render(report.to_result(), fmt)
    emit_text(text, output, extra)
    for text in dict.fromkeys(a for p in report.plans for a in p.assumptions):
        note(text)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        lines = github_annotations(report)
        if lines:
            write_command(sys.stderr, "\n".join(lines) + "\n")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            try:
                append_summary(Path(summary), github_summary(report))
            except OSError as exc:
                note(f"cannot append the job summary to {summary}: {exc.strerror}")
    if report.failed:
        raise AnswerNo()


def schema_command(
    kind: Annotated[str, typer.Argument(help="plan (a plan file for check/report) or grid (a sweep grid).")] = "plan",
) -> None:
    """Print the JSON Schema of a plan file (or of a sweep grid) for editors and validators."""
    if kind == "plan":
        from kvplan.plans.check.planfile import plan_json_schema

        schema = plan_json_schema()
    elif kind == "grid":
        from kvplan.plans.check.sweep import grid_json_schema

        schema = grid_json_schema()
    else:
        raise InputError(f"unknown schema '{kind}'", "choose plan or grid")
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")

"""``kvplan report PLAN.yaml --out DIR``: a Markdown capacity report with CSV tables and PNG charts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli.options import CardsOpt, cards_dirs


def report_command(
    plan: Annotated[Path, typer.Argument(help="Plan file (YAML); see 'kvplan schema'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write (report.md, *.csv, *.png).")],
    force: Annotated[bool, typer.Option("--force", help="Replace DIR if it exists.")] = False,
    cards: CardsOpt = None,
) -> None:
    """Write a report directory: assumptions, memory per GPU, KV vs context by dtype, concurrency, latency, verdict.

    The directory is written whole or not at all; an existing one is replaced only with --force.
    """
    from kvplan.report.document import report

    doc = report(plan, out, force=force, cards=cards_dirs(cards))
    files = len(doc.charts) + len(doc.tables) + 1
    typer.echo(f"Wrote {out}/report.md ({len(doc.charts)} charts, {len(doc.tables)} tables, {files} files)", err=True)

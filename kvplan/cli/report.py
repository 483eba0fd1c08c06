"""``kvplan report PLAN.yaml --out DIR``: a Markdown capacity report with CSV tables and PNG charts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.cli.options import CardsOpt, ConcurrencyOpt, GpuCostOpt, cards_dirs


def report_command(
    plan: Annotated[Path, typer.Argument(help="Plan file (YAML); see 'kvplan schema'.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write (report.md, *.csv, *.png).")],
    force: Annotated[bool, typer.Option("--force", help="Replace DIR if it exists.")] = False,
    gpu_cost: GpuCostOpt = None,
    pd: Annotated[Optional[bool], typer.Option(
        "--pd/--no-pd", help="Add (or leave out) the disaggregated section (kvplan pd against this plan's fleet); "
                             "default: the plan's report.pd.")] = None,
    tiers: Annotated[Optional[bool], typer.Option(
        "--tiers/--no-tiers", help="Add (or leave out) the KV tier section (kvplan tier on this plan's fleet); "
                                   "default: the plan's report.tiers.")] = None,
    checklist: Annotated[Optional[bool], typer.Option(
        "--checklist/--no-checklist", help="Add (or leave out) the engineering checklist (seed §10); default: the "
                                           "plan's report.checklist.")] = None,
    concurrency: ConcurrencyOpt = None,
    cards: CardsOpt = None,
) -> None:
    """Write a report directory: executive summary, fleet, memory per GPU, KV vs context, latency, verdict.

    Optional sections (plan file 'report:' or the flags): PD, KV tiers, closed-loop chart, checklist.
    The directory is written whole or not at all; an existing one is replaced only with --force.
    """
    from kvplan.cli.pd import _tps
    from kvplan.plans.fleet.cost import parse_gpu_cost
    from kvplan.report.document import report

    sections = {"pd": pd, "tiers": tiers, "checklist": checklist,
                "concurrency": _tps(concurrency, "--concurrency") if concurrency is not None else None}
    prices = parse_gpu_cost(gpu_cost, cards_dirs(cards)) if gpu_cost is not None else None
    doc = report(plan, out, force=force, cards=cards_dirs(cards), sections=sections, gpu_cost=prices)
    files = len(doc.charts) + len(doc.tables) + 1
    typer.echo(f"Wrote {out}/report.md ({len(doc.charts)} charts, {len(doc.tables)} tables, {files} files)", err=True)

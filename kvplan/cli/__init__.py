"""The ``kvplan`` command line: one module per command, wired here."""

from __future__ import annotations

import typer

from kvplan.cli import cards
from kvplan.cli.check import check_command, schema_command
from kvplan.cli.fit import fit_command
from kvplan.cli.latency import calibrate_command, latency_command
from kvplan.cli.plan import plan_command
from kvplan.cli.pd import pd_command
from kvplan.cli.report import report_command
from kvplan.cli.size import size_command
from kvplan.cli.sweep import sweep_command
from kvplan.cli.tier import tier_command
from kvplan.cli.workload import workload_command

app = typer.Typer(
    name="kvplan",
    help="Analytical KV-cache capacity planner for LLM inference: size, fit, latency, PD and tiers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("size")(size_command)
app.command("fit")(fit_command)
app.command("latency")(latency_command)
app.command("calibrate")(calibrate_command)
app.command("workload")(workload_command)
app.command("plan")(plan_command)
app.command("check")(check_command)
app.command("report")(report_command)
app.command("sweep")(sweep_command)
app.command("tier")(tier_command)
app.command("pd")(pd_command)
app.command("schema")(schema_command)
app.add_typer(cards.app, name="cards")


def main() -> None:
    app()

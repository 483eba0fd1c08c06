"""``kvplan cards list | show | validate | import``."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml

from kvplan.cli.options import (CardNameOpt, CardsOpt, FormatOpt, OutputOpt, cards_dirs, emit, emit_text)
from kvplan.errors import CardError

app = typer.Typer(help="List, show, validate and import model, hardware and system cards.", no_args_is_help=True)


@app.command("list")
def list_command(
    kind: Annotated[str, typer.Argument(help="model, hardware or system.")] = "model",
    fmt: FormatOpt = None, output: OutputOpt = None, cards: CardsOpt = None,
) -> None:
    """List the cards kvplan can see (shipped, KVPLAN_CARDS_PATH, --cards)."""
    from kvplan.plans.catalog import list_cards

    emit(list_cards(kind, cards_dirs(cards)), fmt, output)


@app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="Card name, alias or file.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="yaml or json.")] = "yaml",
    cards: CardsOpt = None,
) -> None:
    """Print one card with every field and its sources."""
    from kvplan.plans.catalog import show_card

    kind, data = show_card(name, cards_dirs(cards))
    if fmt == "json":
        sys.stdout.write(json.dumps({"kind": kind, **data}, indent=2) + "\n")
    elif fmt == "yaml":
        sys.stdout.write(f"# {kind} card\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        raise CardError(f"unknown format '{fmt}' for cards show", "choose yaml or json")


@app.command("validate")
def validate_command(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Card files or directories (default: all).")] = None,
    fmt: FormatOpt = None, cards: CardsOpt = None,
) -> None:
    """Validate cards against the schema; exit 2 if any is invalid."""
    from kvplan.plans.catalog import validate_paths

    result = validate_paths(list(paths or []), cards_dirs(cards))
    emit(replace(result, failed=False), fmt, None)
    if result.failed:
        bad = [r for r in result.rows if not r["valid"]]
        first = bad[0] if bad else {"file": "?", "problem": "?"}
        raise CardError(f"{len(bad)} of {len(result.rows)} card(s) invalid; first: {first['problem']}",
                        "fix the fields named in the table above, then run 'kvplan cards validate' again")


@app.command("import")
def import_command(
    config: Annotated[Path, typer.Argument(help="A Hugging Face config.json.")],
    name: CardNameOpt = None,
    output: OutputOpt = None,
) -> None:
    """Turn a Hugging Face config.json into a model card (YAML)."""
    from kvplan.plans.catalog import import_config

    emit_text(import_config(config, name), output)

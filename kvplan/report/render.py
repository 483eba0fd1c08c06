"""Render a Result as a table, JSON, CSV or Markdown, and write files whole or not at all.

Machine formats (json, csv) carry the raw SI numbers under their snake_case keys; human
formats (table, markdown) show binary units (GiB), milliseconds and thousands separators.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from kvplan.errors import InputError
from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds

FORMATS = ("table", "json", "csv", "markdown")


def human(key: str, value) -> str:
    """One cell for people: bytes as GiB, seconds as ms/s, large counts with separators."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "∞" if value == math.inf else "n/a"
    if isinstance(value, (int, float)):
        if key.endswith("_bytes_per_s"):
            return f"{value / 1e9:,.1f} GB/s"
        if key.endswith("_flops_per_s"):
            return f"{value / 1e12:,.1f} TFLOP/s"
        if "_bytes" in key and not key.endswith("_per_s"):
            return format_bytes(value)
        if key.endswith("_s") and not key.endswith("_per_s"):
            return format_seconds(value)
        if isinstance(value, float) and not value.is_integer():
            return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"
        return f"{int(value):,}"
    return str(value)


def header(key: str) -> str:
    return key.replace("_per_gpu", "/gpu").replace("_", " ")


def to_json(result: Result) -> str:
    return json.dumps(result.rows, indent=2, default=_json_default) + "\n"


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def to_csv(result: Result) -> str:
    keys = list(dict.fromkeys(k for row in result.rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(result.rows)
    return buffer.getvalue()


def to_markdown(result: Result, *, explain: bool = False) -> str:
    cols = result.columns
    lines = [f"### {result.title}", "", "| " + " | ".join(header(c) for c in cols) + " |",
             "|" + "|".join("---:" if _numeric(result, c) else "---" for c in cols) + "|"]
    for row in result.rows:
        lines.append("| " + " | ".join(human(c, row.get(c)) for c in cols) + " |")
    if result.verdict:
        lines += ["", f"**Verdict:** {result.verdict}"]
    if result.assumptions:
        lines += ["", "Assumptions:", *(f"- {a}" for a in result.assumptions)]
    if explain and result.explain:
        lines += ["", "```", *result.explain, "```"]
    return "\n".join(lines) + "\n"


def _numeric(result: Result, key: str) -> bool:
    return bool(result.rows) and isinstance(result.rows[0].get(key), (int, float)) and not isinstance(
        result.rows[0].get(key), bool)


def to_table(result: Result, *, explain: bool = False, width: int | None = None) -> str:
    """A rich table rendered to text (no colour codes when written to a file or a pipe)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=result.title, title_justify="left", show_lines=False)
    for c in result.columns:
        table.add_column(header(c), justify="right" if _numeric(result, c) else "left", overflow="fold")
    for row in result.rows:
        table.add_row(*(human(c, row.get(c)) for c in result.columns))
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 200, force_terminal=False, color_system=None)
    console.print(table)
    if result.verdict:
        console.print(f"Verdict: {result.verdict}", highlight=False)
    if explain and result.explain:
        console.print("\n".join(result.explain), highlight=False, markup=False)
    return buffer.getvalue()


def render(result: Result, fmt: str, *, explain: bool = False, width: int | None = None) -> str:
    if fmt == "json":
        return to_json(result)
    if fmt == "csv":
        return to_csv(result)
    if fmt == "markdown":
        return to_markdown(result, explain=explain)
    if fmt == "table":
        return to_table(result, explain=explain, width=width)
    raise InputError(f"unknown format '{fmt}'", f"choose one of: {', '.join(FORMATS)}")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (see kvplan.outputs)."""
    from kvplan.outputs import write_atomic as write

    write(path, text)

"""Render a Result as a table, JSON, CSV or Markdown, and write files whole or not at all.

Machine formats (json, csv) carry the raw SI numbers under their snake_case keys; human
formats (table, markdown) show binary units (GiB), milliseconds and thousands separators.
"""

from __future__ import annotations

import io
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
    import json  # only for --format json (kvplan size's table start-up does without it)

    return json.dumps(_finite(result.rows), indent=2, default=_json_default, allow_nan=False) + "\n"


def _finite(value):
    """The rows with every NaN / ±inf float as None: JSON has no such numbers (``NaN`` would make the document
    unreadable to strict parsers), and a figure that does not exist — no TPOT when every request ends with its
    first token — is null, as the tables print it "—"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_default(value):
    if hasattr(value, "item"):
        return _finite(value.item())
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def to_csv(result: Result) -> str:
    keys = list(dict.fromkeys(k for row in result.rows for k in row))
    buffer = io.StringIO()
    import csv  # not at module level: kvplan size's start-up does not pay for it

    writer = csv.DictWriter(buffer, fieldnames=keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(_finite(row) for row in result.rows)  # DictWriter writes None as an empty cell
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


def terminal_width() -> int:
    """Columns of the terminal (``COLUMNS`` first, as ``shutil.get_terminal_size`` reads it; 80 otherwise)."""
    import shutil

    return max(shutil.get_terminal_size((80, 24)).columns, 20)


def to_table(result: Result, *, explain: bool = False, width: int | None = None) -> str:
    """A box-drawn table (kvplan.report.boxes), shaped to fit ``width`` columns.

    ``width`` None: the table's natural width (files). When the table is wider than ``width``:
    headers and text cells fold at their spaces; if the cells alone are still too wide, the table
    is transposed (one column per row) when that fits, else printed as key/value records.
    """
    from kvplan.report.boxes import column_widths, draw

    cols = result.columns
    heads = [header(c) for c in cols]
    cells = [[human(c, row.get(c)) for c in cols] for row in result.rows]
    right = [_numeric(result, c) for c in cols]
    cell_widths = [max([len(r[i]) for r in cells] or [0]) for i in range(len(cols))]
    natural = sum(max(len(h), w) for h, w in zip(heads, cell_widths)) + 3 * len(cols) + 1
    limit = width or natural
    # narrowest a column may get: numbers stay whole; text (and every header) folds at its spaces
    min_widths = [max(w if r else _longest_word([row[i] for row in cells]), _longest_word([h]))
                  for i, (h, w, r) in enumerate(zip(heads, cell_widths, right))]
    folded = sum(min_widths) + 3 * len(cols) + 1
    if natural <= limit or folded <= limit:
        body = draw(result.title, heads, cells, right, column_widths(heads, cells, min_widths, limit))
    else:
        key_width = max(len(h) for h in heads)
        row_widths = [max(len(v) for v in r) for r in cells]
        transposed = key_width + sum(row_widths) + 3 * (len(cells) + 1) + 1
        if len(cells) <= 8 and transposed <= limit:
            t_heads = [""] + [f"#{i + 1}" if len(cells) > 1 else "value" for i in range(len(cells))]
            t_cells = [[h, *(row[j] for row in cells)] for j, h in enumerate(heads)]
            t_right = [False] + [True] * len(cells)
            body = draw(result.title, t_heads, t_cells, t_right,
                        column_widths(t_heads, t_cells, [len(h) for h in t_heads], None))
        else:
            body = _records(result, heads, cells, limit)
    return body + _trailer(result, explain, limit)


def _longest_word(texts: list[str]) -> int:
    return max((len(word) for text in texts for word in text.split()), default=1)


def _records(result: Result, heads: list[str], cells: list[list[str]], width: int) -> str:
    """One ``key  value`` block per row (the layout of ``psql -x``), folded to ``width``."""
    import textwrap

    key_width = min(max(len(h) for h in heads), width // 2)
    lines = textwrap.wrap(result.title, width) or [""]
    for i, row in enumerate(cells, 1):
        lines.append(f"-- {i} of {len(cells)} " + "-" * max(0, width - len(f"-- {i} of {len(cells)} ") - 1))
        for h, value in zip(heads, row):
            wrapped = textwrap.wrap(value, max(width - key_width - 2, 10)) or [""]
            lines.append(f"{h:<{key_width}}  {wrapped[0]}")
            lines += [" " * (key_width + 2) + more for more in wrapped[1:]]
    return "\n".join(lines) + "\n"


def _trailer(result: Result, explain: bool, width: int) -> str:
    """The verdict and the --explain lines, folded at ``width``."""
    import textwrap

    lines = []
    if result.verdict:
        lines += textwrap.wrap(f"Verdict: {result.verdict}", max(width, 40), break_on_hyphens=False)
    if explain and result.explain:
        lines += result.explain
    return "".join(line + "\n" for line in lines)


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

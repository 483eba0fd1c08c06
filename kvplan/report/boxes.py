"""Plain-text tables in the box style of rich's default (``box.HEAVY_HEAD``), without importing rich.

rich's Table costs about a third of ``kvplan size``'s start-up; this draws the same layout:

    Title
    ┏━━━━━━━━━┳━━━━━━━┓
    ┃ seq len ┃ batch ┃
    ┡━━━━━━━━━╇━━━━━━━┩
    │ 131,072 │     1 │
    └─────────┴───────┘

Columns get their natural width; when the total exceeds ``width``, the widest column that may
still shrink (down to its ``min_widths`` entry) loses a character at a time, and its cells fold
at spaces (words longer than the column are cut). Cell widths count characters (kvplan's
cells are ASCII and one-column symbols such as — ∞ × µ ≤).
"""

from __future__ import annotations

import textwrap


def column_widths(heads: list[str], cells: list[list[str]], min_widths: list[int], width: int | None) -> list[int]:
    """Natural widths, shrunk (never below ``min_widths``) until the table fits ``width`` columns."""
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(heads)]
    floors = [min(w, max(m, 1)) for w, m in zip(widths, min_widths)]
    if width is None:
        return widths
    excess = sum(widths) + 3 * len(widths) + 1 - width
    while excess > 0:
        shrinkable = [i for i, (w, f) in enumerate(zip(widths, floors)) if w > f]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda j: widths[j] - floors[j])
        widths[i] -= 1
        excess -= 1
    return widths


def _fold(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def draw(title: str, heads: list[str], cells: list[list[str]], right: list[bool], widths: list[int]) -> str:
    """The table as text: title (folded to the table's width), header box, rows, bottom rule."""
    total = sum(widths) + 3 * len(widths) + 1
    lines = _fold(title, total) if title else []

    def rule(left: str, fill: str, mid: str, end: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + end

    def row_lines(values: list[str], bar: str, header: bool) -> list[str]:
        folded = [_fold(v, w) for v, w in zip(values, widths)]
        out = []
        for k in range(max(len(f) for f in folded)):
            parts = []
            for f, w, r in zip(folded, widths, right):
                text = f[k] if k < len(f) else ""
                parts.append(text.rjust(w) if r and not header else text.ljust(w) if not r else text.rjust(w))
            out.append(bar + bar.join(f" {p} " for p in parts) + bar)
        return out

    lines.append(rule("┏", "━", "┳", "┓"))
    lines += row_lines(heads, "┃", True)
    lines.append(rule("┡", "━", "╇", "┩"))
    for values in cells:
        lines += row_lines(values, "│", False)
    lines.append(rule("└", "─", "┴", "┘"))
    return "\n".join(lines) + "\n"

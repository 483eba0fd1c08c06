"""The result every plan returns: rows of numbers plus how they were obtained.

``rows`` are flat dicts with snake_case keys carrying unit suffixes (``_bytes``, ``_s``,
``_per_s``); they are what ``--format json`` prints and what scripts depend on.
``columns`` chooses and orders the keys a table shows; ``explain`` is the chain of formulas
with the card's numbers substituted; ``assumptions`` lists every default kvplan had to take.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Result:
    title: str
    rows: list[dict]
    columns: list[str]
    explain: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    verdict: str | None = None
    failed: bool = False  # a result that answers "no" (does not fit, infeasible): exit code 1

    def column(self, key: str) -> list:
        return [row[key] for row in self.rows]

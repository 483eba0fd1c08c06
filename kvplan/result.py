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


class Answer:
    """What the typed answers of the planners (``FleetAnswer``, ``PdAnswer``) share: their ``notes`` read as
    ``assumptions``, and the :class:`Result` the renderers take, its rows made from the typed fields then.

    A subclass has ``title``, ``columns``, ``explain``, ``notes``, ``verdict``, ``failed`` and ``rows``.
    """

    @property
    def assumptions(self) -> list[str]:
        return list(self.notes)

    def result(self, with_verdict: bool = True) -> Result:
        """The answer as a :class:`Result` (``with_verdict`` false: the command says the "no" itself)."""
        return Result(title=self.title, rows=self.rows, columns=list(self.columns), explain=list(self.explain),
                      assumptions=list(self.notes), verdict=self.verdict if with_verdict else None,
                      failed=self.failed and with_verdict)

"""Latency targets (SLOs): one type and one grammar for every command and plan file.

Grammar: ``STAT<=DURATION`` with STAT a percentile ``pNN`` (``p50``, ``p99``, ``p99.9``) or
``mean``, and a duration > 0 as :func:`kvplan.units.parse_seconds` reads it (``2s``, ``50ms``,
``300us``). A target is an upper bound, so ``<`` alone is refused with a hint to write ``<=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.errors import InputError
from kvplan.units import parse_seconds

_SLO_TEXT = re.compile(r"^\s*(p\d{1,2}(?:\.\d+)?|mean)\s*<=\s*(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Slo:
    """A latency target: ``kind`` ttft or tpot, statistic (mean, p50 … p99.9), limit in seconds."""

    kind: str
    stat: str
    limit_s: float

    @property
    def quantile(self) -> float | None:
        return None if self.stat == "mean" else float(self.stat[1:]) / 100

    @property
    def text(self) -> str:
        return f"{self.kind} {self.stat}<={self.limit_s:g}s"


def parse_slo(kind: str, text: str) -> Slo:
    """``'p99<=2s'`` → Slo('ttft', 'p99', 2.0); strict: a percentile pNN (or mean), '<=', a duration > 0."""
    flag = f"--{kind}"
    match = _SLO_TEXT.match(str(text))
    hint = f"write {flag} as a percentile and a duration, e.g. {flag} 'p99<=2s' or {flag} 'p90<=50ms'"
    if not match:
        if re.match(r"^\s*(p\d{1,2}(?:\.\d+)?|mean)\s*<[^=]", str(text), re.IGNORECASE):
            raise InputError(f"{flag}: cannot read SLO '{text}': write '<=' (a target is an upper bound)", hint)
        raise InputError(f"{flag}: cannot read SLO '{text}'", hint)
    stat = match.group(1).lower()
    if stat != "mean" and not 0 < float(stat[1:]) < 100:
        raise InputError(f"{flag}: percentile {stat} is not between p0 and p100", hint)
    try:
        limit = parse_seconds(match.group(2))
    except InputError as exc:
        no_unit = "has no unit" in exc.message
        raise InputError(f"{flag}: cannot read the duration '{match.group(2)}' in '{text}'"
                         + (": it has no unit" if no_unit else ""),
                         f"{exc.hint.split('?')[0]}? {hint}" if no_unit else hint) from None
    if limit <= 0:
        raise InputError(f"{flag}: the limit must be > 0 (got '{text}')", hint)
    if stat.endswith(".0"):
        stat = stat[:-2]
    return Slo(kind, stat, limit)

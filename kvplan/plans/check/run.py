"""``kvplan check``: evaluate every assertion of one or more plan files.

Each assertion gives one :class:`Outcome`: passed, failed or skipped (an SLO whose percentile
metric is not computed yet), with the value, the limit and the chain of numbers behind it.
A file that does not load, or a plan the math rejects (``tp=3`` on 8 KV heads), raises
``InputError`` naming the file: exit 2, nothing checked, nothing written.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.plans.check import metrics as registry
from kvplan.plans.check.expr import Assertion, evaluate, source_of
from kvplan.plans.check.planfile import PlanFile, SloTarget, load_plan
from kvplan.result import Result

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
CHECK_COLUMNS = ["plan", "assertion", "status", "value", "limit", "message"]


@dataclass
class Outcome:
    """One assertion's verdict, for people (message, why) and for CI (status, line)."""

    assertion: str
    status: str
    value: float | bool | None
    limit: float | bool | None
    metric: str | None        # the metric on the value side, when it is a single name
    message: str
    why: list[str] = field(default_factory=list)
    line: int | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status == FAILED


@dataclass
class PlanCheck:
    """All outcomes of one plan file."""

    path: Path
    label: str
    summary: str
    outcomes: list[Outcome]
    assumptions: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]


@dataclass
class CheckReport:
    plans: list[PlanCheck]

    @property
    def failed(self) -> bool:
        return any(p.failures for p in self.plans)

    def counts(self) -> dict[str, int]:
        outcomes = [o for p in self.plans for o in p.outcomes]
        return {s: sum(o.status == s for o in outcomes) for s in (PASSED, FAILED, SKIPPED)}

    def to_result(self) -> Result:
        """One row per assertion (what ``--format json`` prints)."""
        rows = [{"plan": str(p.path), "name": p.label, "assertion": o.assertion, "status": o.status,
                 "value": o.value, "limit": o.limit, "message": o.message, "line": o.line}
                for p in self.plans for o in p.outcomes]
        c = self.counts()
        verdict = f"{c[FAILED]} of {sum(c.values())} assertions failed" if self.failed else None
        return Result(title="kvplan check", rows=rows, columns=CHECK_COLUMNS, verdict=verdict, failed=self.failed)


def _number(value):
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return int(value)
    return value


def check_plan(planfile: PlanFile, cards: tuple[Path, ...] = (), context=None) -> PlanCheck:
    """Evaluate the plan's producers once, then every assertion and SLO against their values.

    ``context``: a :class:`PlanContext` already made for this plan (the report's), so its answers are shared.
    """
    start = time.perf_counter()
    plan = planfile.plan
    context = context or registry.PlanContext(plan, planfile.path.parent, cards)
    needed = [n for a in planfile.assertions for n in a.names]
    slo_checks = [(slo, _slo_metric(slo, plan)) for slo in planfile.slos]
    try:
        produced = registry.evaluate(context, needed + [m for _, m in slo_checks if m])
    except KvplanError as exc:
        raise exc.prefixed(f"{planfile.path}: ") from None
    values = {k: v for p in produced.values() for k, v in p.values.items()}
    outcomes = [_judge(a, values, produced) for a in planfile.assertions]
    for slo, metric in slo_checks:
        if metric == slo.metric:
            outcomes.append(_judge(slo.assertion(), values, produced, prefix=f"SLO {slo.text}: "))
        elif metric is not None:
            outcome = _judge(slo.assertion(metric), values, produced, prefix=f"SLO {slo.text}: ")
            outcome.message += (f" (estimate without queueing; {slo.metric} "
                                f"{registry.unavailable(slo.metric, plan)})")
            outcomes.append(outcome)
        else:
            outcomes.append(Outcome(
                assertion=f"SLO {slo.text}", status=SKIPPED, value=None, limit=slo.limit_s, metric=slo.metric,
                message=f"not checked: {slo.metric} {registry.unavailable(slo.metric, plan)}"))
    fit = produced["fit"]
    row = fit.result.rows[0]
    e = plan.engine
    summary = (f"{row['model']} on {row['hardware']}: {e.name} tp={e.tensor_parallel_size} pp={e.pipeline_parallel_size}, "
               f"max_model_len {row['seq_len']:,}, KV {row['kv_dtype']}")
    assumptions = list(dict.fromkeys(a for p in produced.values() for a in p.assumptions))
    return PlanCheck(planfile.path, planfile.label, summary, outcomes, assumptions, time.perf_counter() - start)


def _slo_metric(slo: SloTarget, plan) -> str | None:
    """The metric an SLO is checked on: its percentile when computed, else the no-queueing estimate."""
    for metric in (slo.metric, f"{slo.kind}_s"):
        if registry.unavailable(metric, plan) is None:
            return metric
    return None


def _judge(assertion: Assertion, values: dict, produced: dict, prefix: str = "") -> Outcome:
    start = time.perf_counter()
    holds = bool(evaluate(assertion.tree, values))
    value_node, op, limit_node = assertion.sides
    value = _number(evaluate(value_node, values))
    limit = _number(evaluate(limit_node, values)) if limit_node is not None else None
    metric = source_of(value_node) if source_of(value_node) in values else None
    shown = f"{source_of(value_node)} = {_show(metric, value)}"
    if op is None:
        message = shown if isinstance(value, bool) else f"{shown} ({'true' if holds else 'false'})"
    else:
        message = f"{shown}; {'holds' if holds else 'needs'} {op} {_show(metric, limit)}"
    why: list[str] = []
    if not holds:
        for producer in dict.fromkeys(registry.METRICS[n].producer.name for n in assertion.names):
            why.extend(produced[producer].explain)
        others = [n for n in assertion.names if n != metric]
        why[:0] = [f"{n} = {_show(n, values[n])}" for n in others]
    return Outcome(assertion=prefix + assertion.text, status=PASSED if holds else FAILED, value=value, limit=limit,
                   metric=metric, message=message, why=why, line=assertion.line,
                   seconds=time.perf_counter() - start)


def _show(metric: str | None, value) -> str:
    """A value for people: bytes also in GiB, seconds also in ms, booleans as true/false."""
    from kvplan.units import format_bytes, format_seconds

    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "—"
    if metric and registry.METRICS.get(metric) and isinstance(value, (int, float)) and math.isfinite(value):
        unit = registry.METRICS[metric].unit
        if unit == "bytes":
            return f"{value:,.0f} B ({format_bytes(value)})"
        if unit == "s":
            return format_seconds(value)
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def check(paths: Sequence[str | Path], cards: tuple[Path, ...] = ()) -> CheckReport:
    """Load every plan first (a bad file stops everything), then check each one."""
    planfiles = [load_plan(p) for p in paths]
    return CheckReport([check_plan(pf, cards) for pf in planfiles])

"""Add the fleet-wide parts of the capacity report: the executive summary, the fleet table, and the optional
PD, tier, closed-loop and checklist sections (:mod:`kvplan.plans.check.report_data` computes them)."""

from __future__ import annotations

from kvplan.plans.check.fleet_metrics import fleet_row
from kvplan.plans.check.planfile import slo_targets
from kvplan.plans.check.report_data import (ReportOptions, closed_loop_section, fleet_checklist, pd_section,
                                            tier_section)
from kvplan.report import sections as S


def _table(name: str, title: str, columns: list[str], rows: list[dict]) -> S.Table:
    present = [c for c in columns if any(r.get(c) is not None for r in rows)]
    return S.Table(name, title, present, rows)


def add(doc, context, produced: dict, options: ReportOptions) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Fill ``doc``'s summary, sections, charts and tables; return (assumptions, explain groups) to add."""
    assumptions: list[str] = []
    explain: list[tuple[str, list[str]]] = []
    plan = context.plan
    fleet = fleet_row(context) if "aggregated" in produced else None
    slos = {t.kind: (t.text.split(" ", 1)[1], t.stat, t.limit_s) for t in slo_targets(plan)}
    pd = None
    if options.pd or options.checklist:
        pd = pd_section(context, options.checklist)
        assumptions += list(pd.answer.notes)
        from kvplan.plans.check.report_data import CHECKLIST_MARK

        lines = list(pd.answer.explain)
        explain.append(("Disaggregated plan (kvplan pd)",
                        lines[:lines.index(CHECKLIST_MARK)] if CHECKLIST_MARK in lines else list(lines)))
    if fleet is not None:
        doc.summary = S.fleet_lines(fleet, plan, slos, context.deployment)
        if pd is not None:
            doc.summary.append(f"- Disaggregated alternative: {pd.verdict}")
        doc.tables.insert(0, _table("fleet.csv", "The fleet (kvplan plan)", S.FLEET_COLUMNS, [fleet]))
    if pd is not None and options.pd:
        doc.sections.append(S.Section("Disaggregated serving (kvplan pd)", S.pd_lines(pd)))
        rows = pd.answer.rows  # the JSON rows of kvplan pd: the recommendation, then the placements
        doc.tables.append(_table("pd.csv", "Disaggregated plan and placements (kvplan pd)", S.PD_COLUMNS,
                                 [rows[0], *(r for r in rows[1:] if r.get("placement"))]))
    tiers = None
    if options.tiers:
        tiers = tier_section(context)
        doc.sections.append(S.Section("KV tiers (kvplan tier)", S.tier_lines(tiers, fleet)))
        doc.tables.append(_table("tiers.csv", "KV tiers on the fleet (kvplan tier)", S.TIER_COLUMNS, tiers.tiers))
        if fleet is not None:
            doc.summary.append(f"- KV tiers: {tiers.result.verdict}")
        doc.charts.append(tier_chart(tiers.chart))
        assumptions += tiers.result.assumptions
    if options.concurrency:
        closed = closed_loop_section(context, options.concurrency)
        rows = closed.result.rows
        doc.sections.append(S.Section("Closed-loop latency and throughput", S.closed_loop_lines(closed)))
        doc.charts.insert(0, S.Chart(
            "closed_loop.png", "Latency vs throughput, closed loop",
            f"Output tokens/s per GPU against TPOT p50 and TTFT p99 at {', '.join(str(r['concurrency']) for r in rows)}"
            f" requests in flight over {closed.instances} instance(s) (kvplan plan --concurrency).",
            lambda path: _charts().closed_loop_chart(path, rows, closed.result.title)))
        doc.tables.append(_table("closed_loop.csv", "Closed loop: requests in flight (kvplan plan --concurrency)",
                                 S.CLOSED_COLUMNS, rows))
        assumptions += closed.result.assumptions
    if options.checklist:
        answers = fleet_checklist(context, tiers) if fleet is not None else None
        doc.sections.append(S.Section("Engineering checklist (seed §10)", S.checklist_lines(answers, pd)))
    return assumptions, explain


def tier_chart(plan) -> S.Chart:
    """The tier section's chart: ``kvplan tier --chart``'s PNG of the tier plan on this plan's fleet."""
    def draw(path) -> None:
        from kvplan.report.tier_chart import hit_rate_chart

        path.write_bytes(hit_rate_chart(plan.curve_tokens, plan.curve_hit_rate, plan.boundaries,
                                        plan.unlimited_hit_rate, plan.result.title))

    spans = ", ".join(name for name, _, end in plan.boundaries if end > 0)
    return S.Chart("tiers.png", "Prefix hit rate vs cache capacity, KV tiers",
                   "Prompt blocks served from the prefix cache (LRU) against the cache capacity in tokens"
                   f", with each tier's span on this plan's fleet ({spans}); the dotted line is "
                   "an unlimited cache (kvplan tier --chart).", draw)


def _charts():
    from kvplan.report import charts

    return charts

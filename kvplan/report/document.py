"""``kvplan report``: a Markdown capacity report for one plan file, with CSV tables and PNG charts.

The directory holds ``report.md`` and, beside it, every table as CSV and every chart as PNG;
the Markdown links to them by relative name, so the directory can be zipped, attached to a
design review or committed as is. Charts come first, tables after.

The directory is written whole or not at all: everything is built in a temporary directory
next to the target and renamed into place. An existing target is refused unless ``force``,
which renames the old directory away, renames the new one in, then deletes the old one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvplan.outputs import umask
from kvplan.errors import InputError, KvplanError
from kvplan.plans.check import metrics as registry
from kvplan.plans.check.curves import context_vs_concurrency, kv_vs_context
from kvplan.plans.check.run import PlanCheck, check_plan
from kvplan.plans.check.planfile import PlanFile, load_plan
from kvplan.plans.check.report_data import ReportOptions
from kvplan.report.sections import Chart, Section, Table
from kvplan.units import format_bytes, format_tokens



@dataclass
class Document:
    title: str
    intro: list[str]
    verdict: list[str]
    summary: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    explain: list[tuple[str, list[str]]] = field(default_factory=list)  # (which answer, its chain of numbers)

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        if self.summary:
            out += ["## Executive summary", "", *self.summary, ""]
        out += [*self.intro, "", "## Verdict", "", *self.verdict, ""]
        for section in self.sections:
            out += [f"## {section.title}", "", *section.lines, ""]
        if self.charts:
            out += ["## Charts", ""]
            for chart in self.charts:
                out += [f"### {chart.title}", "", f"![{chart.title}]({chart.name})", "", chart.caption, ""]
        if self.tables:
            out += ["## Tables", ""]
            for table in self.tables:
                more = "" if table.shown is None else f" (selected rows; all {len(table.rows)} in the CSV)"
                out += [f"### {table.title}", "", f"CSV: [{table.name}]({table.name}){more}", "",
                        *table.markdown(), ""]
        out += ["## Assumptions", "", *(f"- {a}" for a in self.assumptions), ""]
        if any(lines for _, lines in self.explain):
            out += ["## How the numbers were obtained", ""]
            for heading, lines in self.explain:
                if lines:
                    out += [f"### {heading}", "", "```", *lines, "```", ""]
        return "\n".join(out)


# --------------------------------------------------------------------------- building

EXPLAIN_HEADINGS = {"fit": "Memory and KV (kvplan fit)", "latency": "Latency of one instance (kvplan latency)",
                    "aggregated": "The fleet (kvplan plan)", "tiers": "KV tiers on the fleet (kvplan tier)",
                    "pd": "Disaggregated plan (kvplan pd)"}


def build_document(planfile: PlanFile, cards: tuple[Path, ...] = (), options: ReportOptions | None = None,
                   gpu_cost: dict[str, float] | None = None) -> Document:
    """Evaluate the plan and lay out the report (no files written).

    ``options``: the optional sections (default: the plan file's ``report`` section); ``gpu_cost``:
    prices per GPU-hour replacing the plan's ``gpu_cost``.
    """
    plan = planfile.plan
    options = options or ReportOptions.of(plan)
    context = registry.PlanContext(plan, planfile.path.parent, cards, gpu_cost)
    try:
        produced = registry.evaluate(context)
        checked = check_plan(planfile, cards, context) if (planfile.assertions or planfile.slos) else None
        doc = _layout(planfile, context, produced, checked, options)
    except KvplanError as exc:
        if exc.message.startswith(str(planfile.path)):
            raise
        raise exc.prefixed(f"{planfile.path}: ") from None
    return doc


def _layout(planfile: PlanFile, context, produced: dict, checked, options: ReportOptions) -> Document:
    from kvplan.report import fleet_sections

    plan = planfile.plan
    fit = produced["fit"]
    row = fit.result.rows[0]
    card, hw = context.model_card, context.hardware_card
    e = plan.engine
    doc = Document(
        title=f"Capacity report: {planfile.label}",
        intro=_intro(planfile, context, row),
        verdict=_verdict(fit, checked),
    )
    memory = _memory_parts(row)
    doc.charts.append(Chart(
        "memory.png", "Memory of one GPU",
        f"Where the {format_bytes(row['gpu_memory_bytes'])} of one {hw.name} go under {e.name}'s budget rule "
        f"(gpu_memory_utilization {row['gpu_memory_utilization']:g}).",
        lambda p: _charts().memory_chart(p, memory, row["gpu_memory_bytes"], f"{card.name} on {hw.name}, "
                                         f"tp={e.tensor_parallel_size} pp={e.pipeline_parallel_size}")))
    kv_table, series = _kv_by_dtype(context, row)
    doc.charts.append(Chart(
        "kv_vs_context.png", "KV of one sequence vs context, by KV dtype",
        "Per-GPU KV bytes of one sequence (block rounding and TP replication included) for each KV dtype; "
        "a curve under the dashed budget line fits one sequence of that length.",
        lambda p: _charts().kv_context_chart(p, series, row["kv_cache_memory_bytes"], row["seq_len"],
                                             f"{card.name}, tp={e.tensor_parallel_size}, {e.name}")))
    conc_table = _concurrency(context, row)
    doc.charts.append(Chart(
        "concurrency.png", "KV budget vs concurrency",
        f"How the {format_bytes(max(row['kv_cache_memory_bytes'], 0))} KV budget divides among concurrent sequences "
        f"(KV dtype {row['kv_dtype']}): the longest context every one of B sequences can have.",
        lambda p: _charts().concurrency_chart(p, [r["concurrency"] for r in conc_table.rows],
                                              [r["max_context_tokens"] for r in conc_table.rows], row["seq_len"],
                                              row["max_concurrency"], f"{card.name} on {hw.name}, KV {row['kv_dtype']}")))
    latency_table = _latency_vs_batch(context, row, doc)
    doc.tables += [
        Table("memory.csv", "Memory of one GPU", ["part", "size_bytes", "share_of_gpu"],
              [{"part": k, "size_bytes": v, "share_of_gpu": round(v / row["gpu_memory_bytes"], 4)} for k, v in memory]),
        kv_table, conc_table,
    ]
    if latency_table is not None:
        doc.tables.append(latency_table)
    more_assumptions, more_explain = fleet_sections.add(doc, context, produced, options)
    assumptions = [*doc.assumptions, *(a for p in produced.values() for a in p.assumptions)]
    if checked is not None:
        assumptions += checked.assumptions
    doc.assumptions = list(dict.fromkeys([*assumptions, *more_assumptions]))
    doc.explain = [(EXPLAIN_HEADINGS.get(name, name), p.explain) for name, p in produced.items()] + more_explain
    return doc


def _charts():
    from kvplan.report import charts

    return charts


def _intro(planfile: PlanFile, context, row: dict) -> list[str]:
    plan, e = planfile.plan, planfile.plan.engine
    lines = []
    if plan.description:
        lines += [plan.description, ""]
    lines += [
        f"- Plan file: `{planfile.path}`",
        f"- Model: **{context.model_card.name}** ({context.model_card.attention_kinds}, "
        f"{context.model_card.num_layers} layers, max context {context.model_card.max_context:,})",
        f"- Hardware: **{context.hardware_card.name}**" + (f" in system {plan.system}" if plan.system else "")
        + f", {format_bytes(row['gpu_memory_bytes'])} per GPU",
        f"- Engine: **{e.name}**, tensor_parallel_size {e.tensor_parallel_size}, pipeline_parallel_size "
        f"{e.pipeline_parallel_size}, max_model_len {row['seq_len']:,}, kv_cache_dtype {e.kv_cache_dtype} "
        f"({row['kv_dtype']}), weights {e.weights_dtype}, block_size {row['block_size'] or 'none'}",
    ]
    if plan.workload is not None:
        w = plan.workload
        parts = [f"qps {w.qps:g}" if w.qps else None, f"isl {_tokens(w.isl)}" if w.isl else None,
                 f"osl {_tokens(w.osl)}" if w.osl else None, f"trace {w.trace}" if w.trace else None,
                 f"concurrency {context.concurrency}"]
        lines.append("- Workload: " + ", ".join(p for p in parts if p))
    if plan.slo is not None:
        lines.append("- SLOs: " + ", ".join(f"{k} {v}" for k, v in (("TTFT", plan.slo.ttft), ("TPOT", plan.slo.tpot)) if v))
    return lines


def _verdict(fit, checked: PlanCheck | None) -> list[str]:
    row = fit.result.rows[0]
    if row["fits"]:
        lines = [f"**Fits.** {row['num_blocks']:,} blocks = {row['kv_cache_tokens']:,} tokens of KV per GPU; "
                 f"{row['max_concurrency']:,.2f} requests of {row['seq_len']:,} tokens at once."]
    else:
        lines = [f"**Does not fit:** {(fit.result.verdict or '').removeprefix('does not fit: ')}"]
    if checked is not None:
        counts = {s: sum(o.status == s for o in checked.outcomes) for s in ("passed", "failed", "skipped")}
        lines += ["", f"Assertions: {counts['passed']} passed, {counts['failed']} failed"
                  + (f", {counts['skipped']} skipped" if counts["skipped"] else "") + ".", ""]
        mark = {"passed": "✅", "failed": "❌", "skipped": "⏭️"}
        lines += [f"- {mark[o.status]} `{o.assertion}`: {o.message}" for o in checked.outcomes]
    return lines


def _memory_parts(row: dict) -> list[tuple[str, float]]:
    gpu = row["gpu_memory_bytes"]
    parts = [("weights", row["weights_bytes_per_gpu"]), ("activation peak", row["activation_bytes"]),
             ("non-torch", row["non_torch_bytes"]), ("CUDA graphs", row["cudagraph_bytes"]),
             ("KV cache", max(row["kv_cache_memory_bytes"], 0.0))]
    rest = gpu - sum(v for _, v in parts)
    parts = [(k, v) for k, v in parts if v > 0 or k in ("weights", "KV cache")]
    if rest >= 0:
        parts.append(("held back (1 − utilization)", rest))
    else:
        parts.append(("over capacity", rest))
    return parts


def _kv_by_dtype(context, row: dict) -> tuple[Table, dict]:
    rows, shown, series = kv_vs_context(context.deployment, row["seq_len"], row["kv_dtype"])
    table = Table("kv_vs_context.csv", "KV of one sequence vs context, by KV dtype",
                  ["kv_dtype", "context_tokens", "kv_bytes_per_sequence_per_gpu", "max_concurrency"], rows, shown)
    return table, series


def _concurrency(context, row: dict) -> Table:
    rows, shown = context_vs_concurrency(context.deployment, row["seq_len"], row["max_concurrency"])
    return Table("concurrency.csv", "KV budget vs concurrency",
                 ["concurrency", "max_context_tokens", "kv_bytes_per_gpu_at_max_context"], rows, shown)


def _latency_vs_batch(context, row: dict, doc: Document) -> Table | None:
    """Decode step vs batch at the workload's context (or max_model_len / 2), when latency is importable."""
    import importlib.util

    if importlib.util.find_spec("kvplan.plans.sizing.latency") is None:
        return None
    from kvplan.plans.build import latency_from_names

    card, e, plan = context.model_card, context.plan.engine, context.plan
    if plan.workload is not None and plan.workload.has_lengths:
        isl, osl, _ = registry.workload_lengths(context)
    else:
        isl, osl = max(1, min(row["seq_len"] // 2, card.max_context - 1)), 1
    top = max(2, min(context.deployment.engine.max_num_seqs, 1024))
    batches = sorted({int(b) for b in np.rint(np.geomspace(1, top, 24))})
    try:
        result = latency_from_names(card, context.hardware_card, isl=[isl], osl=[osl], batch=batches,
                                    tp=[e.tensor_parallel_size], kv_dtype=e.kv_cache_dtype,
                                    weights_dtype=e.weights_dtype, engine=e.name, allow_long_context=True)
    except KvplanError as exc:
        doc.assumptions.append(f"latency vs batch not drawn: {exc.message}")
        return None
    per_seq = row["kv_bytes_per_sequence_per_gpu"] / row["seq_len"] * isl if row["seq_len"] else 0
    limit = context.deployment.pool.bytes_per_gpu / per_seq if per_seq else None
    rows = [{"batch": r["batch"], "context_tokens": r["context"], "decode_step_s": r["decode_step_s"],
             "floor_decode_step_s": r["floor_decode_step_s"], "decode_tokens_per_s": r["decode_tokens_per_s"],
             "bound": r["bound"]} for r in result.rows]
    doc.charts.append(Chart(
        "latency_vs_batch.png", "Decode latency vs batch",
        f"Roofline decode step at context {format_tokens(isl)} tokens (kvplan.plans.sizing.latency) and its physical floor; "
        f"the dotted line is about where the KV budget runs out at that context (~{limit:,.0f} sequences)."
        if limit else "Roofline decode step and its physical floor.",
        lambda p: _charts().latency_chart(p, [r["batch"] for r in rows], [r["decode_step_s"] for r in rows],
                                          [r["floor_decode_step_s"] for r in rows],
                                          [r["decode_tokens_per_s"] for r in rows], limit,
                                          f"{card.name} on {context.hardware_card.name}, tp={e.tensor_parallel_size}")))
    doc.assumptions.extend(result.assumptions)
    return Table("latency_vs_batch.csv", "Decode latency vs batch", list(rows[0]), rows)


# --------------------------------------------------------------------------- writing


def write_document(doc: Document, directory: Path) -> list[Path]:
    """Write report.md, the charts and the CSV tables into an existing (empty) directory."""
    written = []
    for chart in doc.charts:
        chart.draw(directory / chart.name)
        written.append(directory / chart.name)
    for table in doc.tables:
        (directory / table.name).write_text(table.csv(), encoding="utf-8")
        written.append(directory / table.name)
    (directory / "report.md").write_text(doc.markdown(), encoding="utf-8")
    written.append(directory / "report.md")
    return written


def replace_directory(target: Path, fill, *, force: bool = False) -> None:
    """Build ``target`` in a temporary sibling with ``fill(path)``, then rename it into place."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if target.exists() and not force:
        raise InputError(f"'{target}' already exists", "pass --force to replace it, or choose another --out")
    if target.exists() and not target.is_dir():
        raise InputError(f"'{target}' exists and is not a directory", "choose another --out")
    if not parent.is_dir():
        raise InputError(f"cannot write '{target}': no directory '{parent}'", "create the parent directory first")
    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp"))
    except OSError as exc:
        raise InputError(f"cannot write '{target}': {exc.strerror}", "choose a writable --out") from None
    try:
        fill(staging)
        os.chmod(staging, 0o777 & ~umask())  # mkdtemp makes 0700; a report directory is an ordinary one
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.", suffix=".old"))
            os.replace(target, old / target.name)
            try:
                os.replace(staging, target)
            except OSError:
                os.replace(old / target.name, target)  # put the old report back
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise InputError(f"cannot write '{target}': {exc.strerror or exc}", "choose a writable --out") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def report(plan: str | Path | PlanFile, out: str | Path, *, force: bool = False, cards: tuple[Path, ...] = (),
           sections: dict | None = None, gpu_cost: dict[str, float] | None = None) -> Document:
    """Evaluate ``plan`` and write its report directory ``out`` (whole or not at all).

    ``sections``: {pd, tiers, checklist, concurrency} given on the command line (None entries keep the
    plan file's ``report`` section); ``gpu_cost``: prices per GPU-hour replacing the plan's.
    """
    planfile = plan if isinstance(plan, PlanFile) else load_plan(plan)
    out = Path(out)
    if out.exists() and not force:  # refuse before any work
        raise InputError(f"'{out}' already exists", "pass --force to replace it, or choose another --out")
    try:
        options = ReportOptions.of(planfile.plan, **(sections or {}))
    except InputError as exc:
        raise exc.prefixed(f"{planfile.path}: ") from None
    doc = build_document(planfile, cards, options, gpu_cost)
    replace_directory(out, lambda d: write_document(doc, d), force=force)
    return doc


__all__ = ["Document", "build_document", "replace_directory", "report", "write_document"]


def _tokens(value) -> str:
    """A workload length as written: a count with thousands separators, or a distribution's text."""
    return f"{value:,}" if isinstance(value, int) else str(value)

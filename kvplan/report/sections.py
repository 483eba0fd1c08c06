"""The capacity report's fleet-wide sections: executive summary, fleet, PD, tiers, closed loop, checklist.

Each function lays out a library answer that :mod:`kvplan.plans.check.report_data` (or the
fleet producer) computed; nothing here computes a figure. The one fleet is ``kvplan plan``'s
row (:func:`kvplan.plans.check.fleet_metrics.fleet_row`) and every section quotes it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from kvplan.report.render import human
from kvplan.units import format_bytes, format_seconds

FLEET_COLUMNS = ["instances", "gpus_per_instance", "total_gpus", "nodes", "system", "batch_per_instance",
                 "concurrency", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "kv_demand_mean_bytes",
                 "kv_capacity_bytes", "binding_constraint", "sized_by", "feasible", "fleet_cost_per_hour",
                 "cost_per_million_output_tokens"]
PD_COLUMNS = ["scenario", "placement", "placement_fits", "xpyd", "prefill_tp", "decode_tp", "prefill_gpus", "decode_gpus", "total_gpus",
              "link_kind", "kv_transfer_s", "exposed_transfer_s", "link_utilization", "ttft_p99_s", "tpot_p99_s",
              "feasible", "binding_constraint"]
TIER_COLUMNS = ["tier", "kind", "capacity_bytes", "capacity_tokens", "read_bytes_per_s", "hit_rate",
                "cumulative_hit_rate", "ttft_saved_p50_s", "ttft_saved_p99_s", "prefill_gpu_s_saved_per_s", "content"]
CLOSED_COLUMNS = ["concurrency", "instances", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_mean_s",
                  "output_tokens_per_s", "output_tokens_per_s_per_gpu", "request_throughput_per_s"]


@dataclass
class Table:
    """A table: its CSV file name, a title, column keys and rows of raw numbers."""

    name: str
    title: str
    columns: list[str]
    rows: list[dict]
    shown: list[dict] | None = None  # a subset for the Markdown (the CSV has every row)

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: _whole(v) for k, v in row.items()} for row in self.rows)
        return buffer.getvalue()

    def markdown(self) -> list[str]:
        rows = self.shown if self.shown is not None else self.rows
        lines = ["| " + " | ".join(c.replace("_", " ") for c in self.columns) + " |",
                 "|" + "|".join("---:" if _numeric(rows, c) else "---" for c in self.columns) + "|"]
        lines += ["| " + " | ".join(human(c, r.get(c)) for c in self.columns) + " |" for r in rows]
        return lines


def _whole(value):
    """Whole floats as ints in CSV (5368709120, not 5368709120.0), as the JSON output does."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _numeric(rows: list[dict], key: str) -> bool:
    value = rows[0].get(key) if rows else None
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Chart:
    name: str
    title: str
    caption: str
    draw: object  # callable(path)


@dataclass
class Section:
    title: str
    lines: list[str]


def _n(count, noun: str) -> str:
    """'1 GPU', '16 GPUs' (thousands separated)."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _sec(value) -> str:
    return "—" if value is None else format_seconds(value)


def _money(value) -> str:
    return f"{value:,.4g}"


def _against(row: dict, kind: str, slo_text: str | None, stat: str | None, limit_s: float | None) -> str:
    if slo_text is None:
        return f"p99 {_sec(row[f'{kind}_p99_s'])} (no SLO given)"
    value = row.get(f"{kind}_{stat}_s")
    if value is None:
        return f"{stat} — against the SLO {slo_text} (no fleet meets it)"
    return f"{stat} {format_seconds(value)} against the SLO {slo_text} ({'met' if value <= limit_s else 'missed'})"


def fleet_lines(row: dict, plan, slos: dict, deployment) -> list[str]:
    """The fleet in a few lines: GPUs and nodes, the batch to configure, p99 TTFT/TPOT against the SLOs, cost."""
    e = plan.engine
    if row["instances"] is None:
        return [f"- **No fleet meets the plan**: {row['reason']}",
                f"- TTFT: {_against(row, 'ttft', *slos.get('ttft', (None, None, None)))}",
                f"- TPOT: {_against(row, 'tpot', *slos.get('tpot', (None, None, None)))}"]
    where = (f", on {row['nodes']:,} node(s) of {row['system']} ({row['accelerators_per_node']} GPUs each)"
             if row.get("nodes") else "")
    lines = [
        f"- **{_n(row['total_gpus'], 'GPU')}**: {row['instances']:,} instance(s) × {_n(row['gpus_per_instance'], 'GPU')} of "
        f"{row['hardware']} (tp {row['tp']}, pp {row['pp']}), {row['engine']}{where}",
        f"- Batch to configure: max_num_seqs {row['batch_per_instance']:,} per instance (fleet concurrency "
        f"{row['concurrency']:,.1f}); max_num_batched_tokens {deployment.engine.chunk_tokens:,}; KV per GPU "
        f"{format_bytes(deployment.pool.bytes_per_gpu)}",
        f"- TTFT: {_against(row, 'ttft', *slos.get('ttft', (None, None, None)))}",
        f"- TPOT: {_against(row, 'tpot', *slos.get('tpot', (None, None, None)))}",
    ]
    if row.get("fleet_cost_per_hour") is not None:
        lines.append(f"- Cost: {_money(row['fleet_cost_per_hour'])} per hour, "
                     f"{_money(row['cost_per_million_output_tokens'])} per million output tokens (at "
                     f"{row['gpu_cost_per_gpu_hour']:g} per GPU-hour)")
    lines.append(f"- Fleet plan feasible: {'yes' if row['feasible'] else 'no: ' + str(row['reason'])}"
                 f" (binding: {row['binding_constraint']}" + (f"; {row['binding_detail']}" if row.get("binding_detail")
                                                             else "") + f"; sized by {row['sized_by'].replace('_', ' ')})")
    seqs = deployment.engine.max_num_seqs
    if seqs != row["batch_per_instance"]:
        lines.append(f"- The plan file's max_num_seqs is {seqs:,}" + ("" if e.max_num_seqs is not None else
                                                                       " (the engine's default)") + "; set it to {row['batch_per_instance']:,} "
                     "to hold the TPOT SLO (the cap the fleet was sized with)")
    return lines


def pd_lines(section) -> list[str]:
    """The PD section: the recommended xPyD, its pools and KV transfer, the placements, the verdict vs the fleet."""
    r, c = section.plan, section.comparison
    lines = [f"**Verdict against this plan's fleet:** {section.verdict}.", ""]
    if r.feasible:
        lines += [
            f"- Recommended: **{r.xpyd}**: prefill {r.prefill.instances} × {r.prefill.label()} on "
            f"{r.prefill_hardware} ({_n(r.prefill.gpus, 'GPU')}), decode {r.decode.instances} × {r.decode.label()} "
            f"on {r.decode_hardware} ({_n(r.decode.gpus, 'GPU')}): {_n(r.total_gpus, 'GPU')} in all",
            f"- KV transfer: {format_bytes(r.kv_transfer_bytes)} per mean request over the {r.link_kind} "
            f"({r.link}): {_sec(r.kv_transfer_s)}, of which {_sec(r.exposed_transfer_s)} exposed after "
            f"layer-wise overlap; link utilisation {human('x', r.link_utilization)}",
            f"- TTFT p99 {_sec(r.ttft.get('p99'))}, TPOT p99 {_sec(r.tpot.get('p99'))} (SLOs {r.ttft_slo}, "
            f"{r.tpot_slo}); binding: {r.binding_constraint}",
        ]
        if c.get("pd_cost_per_hour") is not None:
            lines.append(f"- Cost: {_money(c['pd_cost_per_hour'])} per hour, "
                         f"{_money(c['pd_cost_per_million_output_tokens'])} per million output tokens")
    else:
        lines.append(f"- No xPyD meets the SLOs: {r.reason}")
    for p in section.placements:
        where = p.placement
        fits = p.feasible and where.fits
        lines.append(f"- Placement {where.name}: {p.xpyd or '—'}, "
                     + (f"{_n(p.total_gpus, 'GPU')}, TTFT p99 {_sec(p.ttft.get('p99'))}, TPOT p99 "
                        f"{_sec(p.tpot.get('p99'))}" if fits else "does not fit" if p.feasible
                        else f"infeasible ({p.binding_constraint})")
                     + (" — picked" if where.picked else "") + (f" ({where.reason})" if where.reason else ""))
    return lines


def tier_lines(section, fleet: dict) -> list[str]:
    s = section.summary
    fits = s["active_kv_fits_hbm"]
    lines = [
        f"On this plan's fleet ({fleet['instances']:,} instance(s), {_n(fleet['total_gpus'], 'GPU')}): "
        + section.result.verdict + ".", "",
        f"- Where the KV lives: active decode KV {format_bytes(s['active_kv_bytes_per_gpu'])} per GPU (p99 of a batch "
        f"{format_bytes(s['active_kv_p99_bytes_per_gpu'])}) in HBM, whose KV budget is "
        f"{format_bytes(s['hbm_kv_budget_bytes_per_gpu'])} per GPU — " + ("it fits" if fits else "it spills")
        + "; the rest of HBM and the slower tiers hold the prefix/session cache",
        f"- Hit rates: {s['hit_rate']:.2%} of prompt blocks from the tiers (an unlimited cache would reach "
        f"{s['unlimited_hit_rate']:.2%}); TTFT saved p50 {_sec(s['ttft_saved_p50_s'])}, p99 "
        f"{_sec(s['ttft_saved_p99_s'])}; prefill GPU time saved {(s['prefill_gpu_share_saved'] or 0):.1%}",
    ]
    for t in section.tiers:
        lines.append(f"- {t['tier']}: {human('capacity_tokens', t['capacity_tokens'])} tokens, hit {t['hit_rate']:.2%}"
                     f" — {t['content']}")
    w = section.what_if
    if w is not None:
        lines.append(
            f"- Spill what-if: every instance at its configured batch of {section.what_if_batch:,} sequences holds "
            f"{format_bytes(w['active_kv_bytes_per_gpu'])} of decode KV per GPU against "
            f"{format_bytes(w['hbm_kv_budget_bytes_per_gpu'])} — "
            + ("it still fits HBM" if w["active_kv_fits_hbm"] else
               f"{format_bytes(w['active_kv_spilled_bytes_per_gpu'])} spills to slower tiers, TPOT "
               f"+{_sec(w['tpot_penalty_p50_s'])} (p99 +{_sec(w['tpot_penalty_p99_s'])}); vLLM and SGLang preempt "
               "instead of streaming it"))
    elif section.what_if_note:
        lines.append(f"- Spill what-if at the configured batch of {section.what_if_batch:,}: {section.what_if_note}")
    return lines


def closed_loop_lines(section) -> list[str]:
    rows = section.result.rows
    best = max(rows, key=lambda r: r["output_tokens_per_s"] or 0.0)
    return [f"{section.instances:,} instance(s) of this plan's fleet with C requests in flight (as `vllm bench serve "
            "--max-concurrency C` runs); each row is kvplan plan --concurrency's replay.", "",
            f"- Highest throughput of the levels: C = {best['concurrency']:,}: "
            f"{human('x', best['output_tokens_per_s'])} output tokens/s "
            f"({human('x', best['output_tokens_per_s_per_gpu'])} per GPU), TTFT p99 {_sec(best['ttft_p99_s'])}, "
            f"TPOT p50 {_sec(best['tpot_p50_s'])}"]


def checklist_lines(fleet_answers: list[str] | None, section) -> list[str]:
    """The seed's §10 questions: for this plan's fleet (aggregated), then for the disaggregated plan."""
    lines = []
    if fleet_answers:
        lines += ["### This plan's fleet (aggregated)", "", *fleet_answers, ""]
    lines += ["### The disaggregated plan (kvplan pd --checklist)", ""]
    if not section.checklist:
        return lines + ["No checklist: no disaggregated plan meets the SLOs."]
    return lines + [f"For {section.plan.xpyd} of this workload:", "", *section.checklist]

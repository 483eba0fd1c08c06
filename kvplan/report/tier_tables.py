"""Tables people read for a tier plan: one row per tier, then the summary as quantity/value pairs.

Machine formats (json, csv) print the plan's rows as they are (SI units); these tables show
GiB, GB/s, ms and percentages.
"""

from __future__ import annotations

from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds

TABLE_COLUMNS = ["tier", "capacity", "read_per_gpu", "latency", "break_even", "hit_rate", "cumulative",
                 "ttft_saved_p50", "ttft_saved_p99", "prefill_gpu_s_saved_per_s", "content"]


def presentation(result: Result) -> list[Result]:
    """[tier table (verdict, explain), summary table (assumptions)]."""
    tiers = [r for r in result.rows if r.get("kind") != "summary"]
    summary = next(r for r in result.rows if r.get("kind") == "summary")
    rows = [_tier_cells(r) for r in tiers] + [_tier_cells(summary)]
    table = Result(title=result.title, rows=rows, columns=TABLE_COLUMNS, explain=result.explain,
                   verdict=result.verdict)
    items = [
        ("workload", summary["workload"]),
        ("arrival rate", f"{summary['rate_per_s']:.4g} req/s"),
        ("ISL p50 / p99 (tokens)", f"{summary['isl_p50']:,.0f} / {summary['isl_p99']:,.0f}"),
        ("prefill at p50 / p99 ISL", f"{format_seconds(summary['prefill_p50_s'])} / {format_seconds(summary['prefill_p99_s'])}"),
        ("fleet", f"{summary['nodes']} node(s){' (fewest stable)' if summary['nodes_auto'] else ''}, "
                  f"{summary['instances']} instance(s) of tp={summary['tp']}, {summary['gpus']} GPUs"),
        ("decode batch per instance (Little's law)", f"{summary['decode_batch_per_instance']:.2f}"),
        ("TPOT (mean step between prefills)", format_seconds(summary["tpot_s"])),
        ("HBM KV budget per GPU", format_bytes(summary["hbm_kv_budget_bytes_per_gpu"])),
        ("active decode KV per GPU (mean / p99 batch)",
         f"{format_bytes(summary['active_kv_bytes_per_gpu'])} / {format_bytes(summary['active_kv_p99_bytes_per_gpu'])}"),
        ("active decode KV fits in HBM", "yes" if summary["active_kv_fits_hbm"] else "NO"),
        ("TPOT penalty from spilled decode KV (p50 / p99)",
         f"{format_seconds(summary['tpot_penalty_p50_s'])} / {format_seconds(summary['tpot_penalty_p99_s'])}"),
        ("prefix hit rate: all tiers / unlimited cache",
         f"{summary['hit_rate']:.2%} / {summary['unlimited_hit_rate']:.2%}"),
        ("reusable KV held until reuse (Little's law)",
         f"{summary['reuse_capacity_tokens_littles_law'] / 1e6:,.3g}M tokens = "
         f"{format_bytes(summary['reuse_capacity_bytes_littles_law'])}"),
        ("prefill GPU time without cache", f"{summary['prefill_gpu_s_per_s_without_cache']:,.3g} GPU-s per s"),
        ("prefill GPU time saved", f"{summary['prefill_gpu_s_saved_per_s']:,.3g} GPU-s per s "
                                   f"({summary['prefill_gpu_share_saved'] or 0:.1%})"),
    ]
    if summary.get("cached_prefix_fraction") is not None:
        items.append(("prompt tokens served from the tiers (PD's cached_prefix_fraction)",
                      f"{summary['cached_prefix_fraction']:.2%}"))
    for label in ("without_cache", "with_cache"):
        if f"pd_feasible_{label}" in summary:
            items.append((f"PD {summary['pd_ttft_slo']}, {summary['pd_tpot_slo']}, {label.replace('_', ' ')}",
                          _pd(summary, label)))
    summary_table = Result(title="Tier plan summary", rows=[{"quantity": k, "value": v} for k, v in items],
                           columns=["quantity", "value"], assumptions=result.assumptions)
    return [table, summary_table]


def _pd(summary: dict, label: str) -> str:
    if not summary[f"pd_feasible_{label}"]:
        return f"infeasible (binding: {summary[f'pd_binding_constraint_{label}']})"
    return (f"{summary[f'pd_xpyd_{label}']}: prefill TP{summary[f'pd_prefill_tp_{label}']} "
            f"({summary[f'pd_prefill_gpus_{label}']} GPUs), decode TP{summary[f'pd_decode_tp_{label}']}, "
            f"{summary[f'pd_total_gpus_{label}']} GPUs in all")


def _tier_cells(row: dict) -> dict:
    summary = row.get("kind") == "summary"
    breakeven = row.get("break_even_tokens")
    return {
        "tier": row["tier"],
        "capacity": f"{format_bytes(row['capacity_bytes'])} ({row['capacity_tokens'] / 1e6:,.3g}M tok)",
        "read_per_gpu": "" if summary else f"{row['read_bytes_per_s'] / 1e9:,.4g} GB/s",
        "latency": "" if summary else format_seconds(row["latency_s"]),
        "break_even": "" if breakeven is None else ("never" if breakeven < 0 else f"{breakeven:,} tok"),
        "hit_rate": f"{row['hit_rate']:.2%}",
        "cumulative": f"{row['cumulative_hit_rate']:.2%}",
        "ttft_saved_p50": format_seconds(row["ttft_saved_p50_s"]) if row["ttft_saved_p50_s"] >= 0
        else "−" + format_seconds(-row["ttft_saved_p50_s"]),
        "ttft_saved_p99": format_seconds(row["ttft_saved_p99_s"]) if row["ttft_saved_p99_s"] >= 0
        else "−" + format_seconds(-row["ttft_saved_p99_s"]),
        "prefill_gpu_s_saved_per_s": f"{row['prefill_gpu_s_saved_per_s']:,.3g}",
        "content": row["content"],
    }

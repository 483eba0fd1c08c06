"""``kvplan plan``'s tables for people: the plan as quantity/value rows, closed form vs replay, runners-up, scale-out.

Reads the JSON rows of :mod:`kvplan.plans.fleet.rows` (the edge: nothing below reads a row) and
formats them; it computes nothing.
"""

from __future__ import annotations

from kvplan.plans.fleet.plan import _diff
from kvplan.result import Result
from kvplan.units import format_bytes, format_seconds

SCALE_COLUMNS = ["rate_multiplier", "rate_per_s", "instances", "total_gpus", "batch_per_instance", "ttft_p99_s",
                 "tpot_p99_s", "binding_constraint", "feasible"]
BINDING_TEXT = {
    "none": "none: one instance meets every constraint",
    "kv_capacity": "KV capacity (the batch an instance's KV pool holds)",
    "max_num_seqs": "max_num_seqs (the engine's batch cap)",
    "max_num_batched_tokens": "the token budget per step (max_num_batched_tokens / 2 caps the batch)",
    "tpot_slo": "TPOT SLO (the batch whose step time meets it)",
    "ttft_slo": "TTFT SLO (prefill queueing)",
    "memory": "memory (weights and reserves leave no KV on the instance)",
    "link": "a transfer link",
    "utilization": "queue utilisation above the ceiling (no TTFT SLO)",
    "instances": "instance count limit",
}


def presentation(result: Result) -> list[Result]:
    """The plan as quantity/value rows, closed form vs simulation when present, and the scale-out table."""
    row = result.rows[0]
    items = [("rate", f"{row['rate_per_s']:,.4g} req/s")]
    if row["instances"] is not None:
        items += [
            ("instances × GPUs each = GPUs", f"{row['instances']:,} × {row['gpus_per_instance']} = {row['total_gpus']:,}"
             + (f" on {row['nodes']:,} node{'s' if row['nodes'] != 1 else ''} of {row['accelerators_per_node']} "
                f"({row['system']})" if row.get("nodes") else "")),
            ("batch per instance (max_num_seqs to set)", f"{row['batch_per_instance']:,}") if row.get("dp", 1) == 1
            else ("batch per instance = DP ranks × batch per rank (max_num_seqs to set)",
                  f"{row['dp']} × {row['batch_per_rank']:,} = {row['batch_per_instance']:,}"),
            ("batch limits: KV (CLT p99) / KV at mean C / KV at p99 C / TPOT SLO",
             " / ".join(_count(row.get(k)) for k in ("batch_kv", "batch_kv_mean", "batch_kv_p99", "batch_tpot"))),
            ("mean batch per instance", f"{row['batch_mean']:,.3g}") if row.get("dp", 1) == 1
            else ("mean batch per DP rank", f"{row['batch_mean']:,.3g}"),
            ("concurrency (Little: λ × time in system)", f"{row['concurrency']:,.4g}"),
            ("KV demand at mean / p99 final context (fleet)",
             f"{format_bytes(row['kv_demand_mean_bytes'])} / {format_bytes(row['kv_demand_p99_bytes'])}"),
            ("KV held on average (fleet, context ISL + tokens so far)", format_bytes(row["kv_held_mean_bytes"])),
            ("KV capacity / headroom at p99 context (fleet)",
             f"{format_bytes(row['kv_capacity_bytes'])} / {format_bytes(row['headroom_bytes'])}"),
            ("memory: weights + activations + KV demand / GPU memory",
             f"{format_bytes(row['memory_demand_bytes'])} / {format_bytes(row['gpu_memory_bytes'])}"),
        ]
    for kind in ("ttft", "tpot"):
        items.append((f"{kind.upper()} mean / p50 / p90 / p99" + (f" (SLO {row[f'{kind}_slo']})" if row[f"{kind}_slo"] else ""),
                      " / ".join(format_seconds(row[f"{kind}_{s}_s"]) if row[f"{kind}_{s}_s"] is not None else "—"
                                 for s in ("mean", "p50", "p90", "p99"))))
    if row.get("fleet_cost_per_hour") is not None:
        items.append(("cost: fleet per hour / per million output tokens (at --gpu-cost "
                      f"{row['gpu_cost_per_gpu_hour']:g} per GPU-hour)",
                      f"{row['fleet_cost_per_hour']:,.4g} / {row['cost_per_million_output_tokens']:,.4g}"))
    binding = BINDING_TEXT.get(row["binding_constraint"], row["binding_constraint"])
    items.append(("binding constraint", binding + (f"; {row['binding_detail']}" if row.get("binding_detail") else "")))
    items.append(("feasible", "yes" if row["feasible"] else f"no: {row['reason']}"))
    tables = [Result(title=result.title, rows=[{"quantity": k, "value": v} for k, v in items],
                     columns=["quantity", "value"], explain=result.explain, assumptions=result.assumptions)]
    if "sim_ttft_p50_s" in row:
        compare = []
        for kind in ("ttft", "tpot"):
            for s in ("mean", "p50", "p90", "p99"):
                closed, simulated = row[f"{kind}_{s}_s"], row[f"sim_{kind}_{s}_s"]
                compare.append({"metric": f"{kind}_{s}", "closed_form_s": closed, "simulated_s": simulated,
                                "difference": _diff(closed, simulated)})
        tables.append(Result(title=f"Closed form vs simulation ({row['sim_requests']:,} requests)", rows=compare,
                             columns=["metric", "closed_form_s", "simulated_s", "difference"]))
    others = [r for r in result.rows if r.get("kind") == "candidate"]
    if others:
        shown = [{**r, "binding_constraint": r["binding_constraint"] if r["feasible"]
                  else f"{r['binding_constraint']}: {r['reason']}"} for r in others]
        tables.append(Result(title="Runners-up: the other instance shapes searched", rows=shown,
                             columns=["tp", "pp", "dp", "ep", "instances", "total_gpus", "batch_per_instance", "ttft_p99_s",
                                      "tpot_p99_s", "binding_constraint", "feasible"]))
    scale = [r for r in result.rows if r.get("kind") == "scale"]
    if scale:
        shown = [{**r, "rate_multiplier": f"{r['rate_multiplier']:g}×",
                  "binding_constraint": r["binding_constraint"] if r["feasible"] else f"{r['binding_constraint']}: {r['reason']}"}
                 for r in scale]
        tables.append(Result(title=f"Scaling out: the same workload at higher rates (tp={row['tp']}"
                             + (f" pp={row['pp']}" if row["pp"] > 1 else "") + (f" dp={row['dp']}" if row.get("dp", 1) > 1 else "")
                             + (f" ep={row['ep']}" if row.get("expert_parallel") else "") + " instances)", rows=shown,
                             columns=SCALE_COLUMNS))
    return tables


def _count(value) -> str:
    return "—" if value is None else f"{value:,}"

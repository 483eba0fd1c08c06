"""Typed results inside the library: the fleet and PD planners pass dataclasses, rows are made only for output.

Read from the code with ``ast``: no module of ``plans/fleet`` (the open-loop planner) or ``plans/pd``
other than the row makers (``rows.py``) subscripts a row (``row["…"]``, ``rows[0]``), calls
``.row()`` or reads another result's ``.rows``; a test shows the checker fails on such code. And the
typed answers carry their notes as fields, not as row keys.
"""

from __future__ import annotations

import ast
import dataclasses

from ..conftest import ROOT

TYPED = [*(f"kvplan/plans/fleet/{m}.py" for m in ("aggregated", "answer", "binding", "cost", "plan", "replay",
                                                    "search")),
         *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "kvplan/plans/pd").glob("*.py")) if p.name != "rows.py")]
ROW_NAMES = {"row", "rows", "base", "pd", "agg", "fleet", "choice", "near", "far", "picked", "across"}


def row_reads(source: str) -> list[str]:
    """Where ``source`` reads a row: ``name["key"]`` / ``rows[i]`` on a row-like name, ``.row()``, ``x.rows``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ROW_NAMES:
            found.append(f"line {node.lineno}: {node.value.id}[…]")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "row":
            found.append(f"line {node.lineno}: .row()")
        elif isinstance(node, ast.Attribute) and node.attr == "rows" and not (
                isinstance(node.value, ast.Name) and node.value.id == "self"):
            found.append(f"line {node.lineno}: .rows")
    return found


def test_the_checker_finds_row_reads():
    assert row_reads("x = row['total_gpus']") == ["line 1: row[…]"]
    assert row_reads("x = result.rows[0]") == ["line 1: .rows"]
    assert row_reads("x = plan.row()") == ["line 1: .row()"]
    assert row_reads("x = plan.total_gpus\ny = self.rows") == []


def test_fleet_and_pd_planners_read_no_rows():
    reads = {path: row_reads((ROOT / path).read_text()) for path in TYPED}
    assert {path: r for path, r in reads.items() if r} == {}
    assert len(TYPED) >= 15  # the pd subpackage was found


def test_answers_are_frozen_and_carry_notes_as_fields():
    from kvplan.plans.fleet.plan import FleetAnswer, ScalePoint
    from kvplan.plans.pd.result import Placement, PdAnswer, PdPlan, PoolFigures

    for cls in (FleetAnswer, ScalePoint, PdAnswer, PdPlan, PoolFigures, Placement):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
    assert "notes" in {f.name for f in dataclasses.fields(FleetAnswer)}
    assert "notes" in {f.name for f in dataclasses.fields(PdAnswer)}


def test_pd_answer_fields_match_its_rows():
    from kvplan.plans.pd.plan import plan_pd

    answer = plan_pd("llama-3.1-8b", "hgx-h100-8", qps=10, isl="4k", osl="256", ttft="p99<=2s", tpot="p99<=50ms",
                     sensitivity=False)
    base, row = answer.plan, answer.rows[0]
    assert base.feasible and row["feasible"] is True
    assert (base.prefill.instances, base.decode.instances) == (row["prefill_instances"], row["decode_instances"])
    assert base.total_gpus == row["total_gpus"] == base.prefill.gpus + base.decode.gpus
    assert base.ttft["p99"] == row["ttft_p99_s"] <= 2.0 and base.tpot["p99"] == row["tpot_p99_s"] <= 0.05
    assert answer.aggregated is not None and answer.aggregated.mode == "aggregated" == answer.rows[1]["mode"]
    assert not any(key.startswith("_") for r in answer.rows for key in r)
    assert list(answer.notes) == answer.result().assumptions


def test_fleet_answer_fields_match_its_rows():
    from kvplan.plans.fleet.aggregated import parse_slo
    from kvplan.plans.fleet.plan import fleet_workload, plan

    answer = plan("llama-3.1-8b", "h100-sxm", fleet_workload(qps=10, isl="1k:4k", osl="200", sample_requests=5000),
                  [parse_slo("ttft", "p99<=2s"), parse_slo("tpot", "p90<=50ms")], scale=[2])
    main, row = answer.plan, answer.rows[0]
    assert row["kind"] == "plan" and row["instances"] == main.instances and row["total_gpus"] == main.total_gpus
    assert row["kv_capacity_bytes"] == main.memory.kv_capacity_bytes and row["ttft_p99_s"] == main.ttft["p99"]
    assert [s.multiplier for s in answer.scale] == [2] and answer.rows[-1]["rate_per_s"] == 2 * main.rate_per_s
    assert not any(key.startswith("_") for r in answer.rows for key in r)

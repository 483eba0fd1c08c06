"""One deployment, one workload, one fleet: the commands agree with each other.

- ``kvplan pd``'s aggregated alternative is ``kvplan plan``'s fleet for the same deployment and
  workload (same GPUs, same percentiles), and it runs on the system the PD plan runs on;
- the length grammar (``1k:8k`` = mean:p99) reads the same in plan, pd, tier, workload and check;
- one ``kvplan pd`` call resolves each candidate deployment once, and never re-runs ``fit``.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from kvplan.workload.synthetic import LogNormal, parse_length

from ..conftest import json_rows

STATS = ("mean", "p50", "p90", "p95", "p99")
L40S_PD = ["pd", "llama-3.1-70b", "l40s", "--system", "l40s-pcie-8", "--placement", "same-node", "--qps", "1",
           "--isl", "2k", "--osl", "256"]


def _aggregated(rows: list[dict]) -> dict:
    (row,) = [r for r in rows if r["mode"] == "aggregated"]
    return row


def _plan_row(invoke, *args) -> dict:
    result = invoke("plan", *args, "--format", "json")
    rows = json_rows(result)
    return [r for r in rows if r["kind"] == "plan"][0]


def _same_fleet(agg: dict, plan: dict) -> None:
    assert agg["total_gpus"] == plan["total_gpus"]
    assert agg["prefill_instances"] == plan["instances"]
    for kind in ("ttft", "tpot"):
        for stat in STATS:
            assert agg[f"{kind}_{stat}_s"] == plan[f"{kind}_{stat}_s"], (kind, stat)
    assert agg["binding_constraint"] == plan["binding_constraint"]


def test_l40s_same_node_aggregated_alternative_is_feasible_on_the_system(invoke):
    """L40S has no NVLink: TP4/TP8 run over the l40s-pcie-8 system's PCIe, for PD and aggregated alike."""
    result = invoke(*L40S_PD, "--format", "json")
    rows = json_rows(result)
    agg = _aggregated(rows)
    assert agg["feasible"] is True and agg["total_gpus"] is not None
    assert agg["prefill_tp"] in (4, 8)
    assert "not planned" not in result.stderr
    assert "aggregated alternative: kvplan plan's fleet model" in result.stderr and "on l40s-pcie-8" in result.stderr
    plan = _plan_row(invoke, "llama-3.1-70b", "l40s", "--system", "l40s-pcie-8", "--tp", agg["prefill_tp"],
                     "--qps", "1", "--isl", "2k", "--osl", "256", "--ttft", "p99<=4s", "--tpot", "p99<=100ms")
    _same_fleet(agg, plan)


@pytest.mark.parametrize("hardware, qps, isl, osl, ttft, tpot", [
    ("hgx-h100-8", "10", "4k", "256", "p99<=2s", "p99<=50ms"),
    ("h100-sxm", "3", "1k:8k", "256:1k", "p99<=4s", "p99<=100ms"),
])
def test_pd_aggregated_alternative_equals_kvplan_plan(invoke, hardware, qps, isl, osl, ttft, tpot):
    common = ["--qps", qps, "--isl", isl, "--osl", osl, "--ttft", ttft, "--tpot", tpot]
    agg = _aggregated(json_rows(invoke("pd", "llama-3.1-8b", hardware, *common, "--format", "json")))
    assert agg["feasible"]
    plan = _plan_row(invoke, "llama-3.1-8b", hardware, "--tp", agg["prefill_tp"], *common)
    _same_fleet(agg, plan)


def test_mean_p99_shorthand_is_the_lognormal_of_that_mean_and_p99():
    """``1k:8k``: ln X ~ N(μ, σ²) with σ = z − sqrt(z² − 2 ln(8192/1024)), μ = ln 1024 − σ²/2 (z = Φ⁻¹(0.99))."""
    z = 2.3263478740408408
    sigma = z - math.sqrt(z * z - 2 * math.log(8))
    dist = parse_length("1k:8k")
    assert isinstance(dist, LogNormal)
    assert dist.sigma == pytest.approx(sigma, rel=1e-12)
    assert dist.mu == pytest.approx(math.log(1024) - sigma**2 / 2, rel=1e-12)
    assert dist.mean == pytest.approx(1024, rel=1e-12) and dist.quantile(0.99) == pytest.approx(8192, rel=1e-9)
    assert parse_length(" 256 : 1k ") == parse_length("mean=256,p99=1k")


SHORT = ["--isl", "1k:8k", "--osl", "256:1k"]
LONG = ["--isl", "mean=1k,p99=8k", "--osl", "mean=256,p99=1k"]
COMMANDS = {
    "plan": ["plan", "llama-3.1-8b", "h100-sxm", "--qps", "3", "--tpot", "p99<=100ms"],
    "pd": ["pd", "llama-3.1-8b", "hgx-h100-8", "--qps", "3"],
    "tier": ["tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--qps", "3"],
    "workload": ["workload", "--qps", "3"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_mean_p99_lengths_read_identically_by_every_command(invoke, command):
    short = invoke(*COMMANDS[command], *SHORT, "--format", "json")
    long = invoke(*COMMANDS[command], *LONG, "--format", "json")
    assert short.exit_code in (0, 1), short.stderr
    assert short.exit_code == long.exit_code
    assert json.loads(short.stdout) == json.loads(long.stdout)


def test_mean_p99_lengths_read_identically_by_check(invoke, tmp_path):
    body = ("model: llama-3.1-8b\nhardware: h100-sxm\nengine: {{max_model_len: 32k}}\n"
            "workload: {{qps: 3, isl: '{isl}', osl: '{osl}'}}\nslo: {{tpot: 'p99<=100ms'}}\n"
            "assertions:\n  - total_gpus <= 64\n  - tpot_p99_s <= 100ms\n  - tpot_s <= 100ms\n")
    short, long = tmp_path / "short.yaml", tmp_path / "long.yaml"
    short.write_text(body.format(isl="1k:8k", osl="256:1k"))
    long.write_text(body.format(isl="mean=1k,p99=8k", osl="mean=256,p99=1k"))
    a, b = invoke("check", short, "--format", "json"), invoke("check", long, "--format", "json")
    assert a.exit_code == b.exit_code == 0, a.stderr
    rows_a, rows_b = json.loads(a.stdout), json.loads(b.stdout)
    for row in (*rows_a, *rows_b):
        row.pop("name", None), row.pop("plan", None)
    assert rows_a == rows_b
    assert {r.get("status") for r in rows_a} == {"passed"}


def test_one_pd_call_resolves_each_candidate_deployment_once(monkeypatch):
    """Prefill and decode candidates at TP 1, 2, 4, 8 on one node: 4 deployments, each resolved once, no fit()."""
    from kvplan.plans import deployment
    from kvplan.plans.pd import plan as pd_plan
    from kvplan.plans.sizing import fit as fit_module

    resolved: Counter = Counter()
    real = deployment.resolve

    def counting(model, hardware=None, **kwargs):
        dep = real(model, hardware, **kwargs)
        resolved[(dep.model.name, dep.name, dep.parallel)] += 1
        return dep

    def no_fit(*args, **kwargs):
        raise AssertionError("a planner re-ran fit() instead of reading the deployment's KV pool")

    monkeypatch.setattr(deployment, "resolve", counting)
    monkeypatch.setattr(fit_module, "fit", no_fit)
    result = pd_plan.plan_pd("llama-3.1-8b", "hgx-h100-8", qps=10, isl="4k", osl="256", ttft="p99<=2s",
                             tpot="p99<=50ms")
    assert result.rows[0]["feasible"] and result.rows[1]["mode"] == "aggregated"
    assert len(resolved) == 4 and set(resolved.values()) == {1}
    assert sorted(p.tp for _, _, p in resolved) == [1, 2, 4, 8]


TIER_FLAGS = ["--qps", "40", "--isl", "1k:8k", "--osl", "256:1k"]


def test_tier_fleet_is_kvplan_plans_fleet(invoke):
    """One instance per node (tp 8 on an 8-GPU node): tier's fleet is plan's, instance for instance."""
    tier = json_rows(invoke("tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--tp", "8", *TIER_FLAGS, "--no-pd",
                            "--format", "json"))[-1]
    plan = _plan_row(invoke, "llama-3.1-8b", "hgx-h100-8", "--tp", "8", *TIER_FLAGS)
    assert tier["instances"] == tier["plan_instances"] == plan["instances"]
    assert tier["gpus"] == plan["total_gpus"]
    assert tier["decode_batch_per_instance"] == plan["batch_mean"]
    assert tier["tpot_s"] == plan["tpot_mean_s"]
    assert tier["prefill_load_per_instance"] == plan["prefill_utilization"]


def test_tier_places_plans_fleet_on_whole_nodes():
    """tp 1 on an 8-GPU node: plan's N instances round up to whole nodes; the batch and TPOT are plan's fleet
    model evaluated at that whole-node count."""
    import math

    from kvplan.plans.deployment import Parallelism, resolve
    from kvplan.plans.fleet.aggregated import FleetWorkload, plan_fleet
    from kvplan.plans.tiers.plan import tier_plan
    from kvplan.plans.tiers.reuse import from_workload
    from kvplan.workload.synthetic import workload_from_flags

    spec = workload_from_flags(rate_per_s=40, isl="1k:8k", osl="256:1k")
    summary = tier_plan("llama-3.1-8b", system="hgx-h100-8", tp=1, reuse=from_workload(spec), pd=False).result.rows[-1]
    fleet = plan_fleet(resolve("llama-3.1-8b", "hgx-h100-8", parallel=Parallelism(tp=1)), FleetWorkload.from_spec(spec))
    assert summary["plan_instances"] == fleet.instances
    assert summary["nodes"] == math.ceil(fleet.instances / 8) and summary["instances"] == 8 * summary["nodes"]
    point = fleet.setup["model"].evaluate(summary["instances"])
    assert summary["decode_batch_per_instance"] == point.batch_mean
    assert summary["tpot_s"] == point.tpot["mean"]


WORKLOAD_FLAGS = ["--isl", "1k:8k", "--osl", "256:1k", "--arrival-cv", "2", "--turns", "3", "--think-time", "30s",
                  "--shared-prefix", "2k", "--sample", "1000", "--seed", "0"]
FLAG_READERS = {
    "workload": ["workload", "--rate", "3"],
    "plan": ["plan", "llama-3.1-8b", "h100-sxm", "--qps", "3", "--tp", "1"],
    "tier": ["tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--qps", "3", "--no-pd"],
    "route": ["route", "--rate", "3", "--instances", "2", "--cache-tokens", "1M", "--service-time", "1s"],
}


def _record_workloads(monkeypatch) -> list:
    """Every Workload the one builder makes during a command (wherever a module holds the builder)."""
    import sys

    import kvplan.cli.workload  # noqa: F401  (the modules that hold the builder, loaded before patching)
    import kvplan.plans.fleet.plan  # noqa: F401
    import kvplan.plans.route.request  # noqa: F401
    import kvplan.plans.tiers.reuse  # noqa: F401
    import kvplan.workload.synthetic as synthetic

    original, built = synthetic.workload_from_flags, []

    def recording(**kwargs):
        built.append(original(**kwargs))
        return built[-1]

    for module in list(sys.modules.values()):
        if getattr(module, "workload_from_flags", None) is original:
            monkeypatch.setattr(module, "workload_from_flags", recording)
    return built


@pytest.mark.parametrize("command", list(FLAG_READERS))
def test_every_command_reads_the_workload_flags_through_the_one_builder(invoke, monkeypatch, command):
    """workload, plan, tier and route pass the flags as written; the builder reads them the same for all."""
    from kvplan.workload.synthetic import LogNormal, workload_from_flags

    built = _record_workloads(monkeypatch)
    result = invoke(*FLAG_READERS[command], *WORKLOAD_FLAGS, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    (spec,) = built
    assert spec == workload_from_flags(rate_per_s=3.0, isl="1k:8k", osl="256:1k", arrival_cv=2.0, turns=3,
                                       think_time="30s", shared_prefix="2k")
    assert (spec.rate_per_s, spec.arrival_cv, spec.turns, spec.think_time_s, spec.shared_prefix_tokens) == \
        (3.0, 2.0, 3, 30.0, 2048)
    assert isinstance(spec.isl, LogNormal) and spec.isl.mean == pytest.approx(1024, rel=1e-12)
    assert spec.osl.quantile(0.99) == pytest.approx(1024, rel=1e-9)


def test_pd_reads_rate_lengths_and_burstiness_as_the_builder_does():
    """pd takes no session flags; its --qps, --isl, --osl and --arrival-cv read as the one builder reads them."""
    from kvplan.plans.pd.model import as_length, workload_from_inputs
    from kvplan.workload.synthetic import workload_from_flags

    spec = workload_from_flags(rate_per_s=3.0, isl="1k:8k", osl="256:1k", arrival_cv=2.0)
    pd = workload_from_inputs(3.0, "1k:8k", "256:1k", 2.0, None)
    assert as_length("1k:8k") == spec.isl and as_length("256:1k") == spec.osl
    assert (pd.rate_per_s, pd.arrival_scv) == (spec.rate_per_s, spec.arrival_cv**2) == (3.0, 4.0)
    assert pd.osl_mean == pytest.approx(spec.osl.mean, rel=1e-12)
    assert pd.osl_p99 == round(spec.osl.quantile(0.99)) == 1024

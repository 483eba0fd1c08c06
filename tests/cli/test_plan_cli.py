"""``kvplan plan`` through the CLI: JSON equals the library, every format, stdout/stderr apart, errors."""

from __future__ import annotations

import csv
import io
import json

import pytest

from kvplan.plans.fleet.aggregated import EngineSettings, Shape, parse_slo
from kvplan.plans.fleet.plan import fleet_workload, plan

from ..conftest import DATA

TRACES = DATA / "traces"
AZURE = TRACES / "azure_conv_head200.csv"
FLAGS = ["plan", "llama-3.1-8b", "h100-sxm", "--qps", "10", "--isl", "1k:4k", "--osl", "200",
         "--ttft", "p99<=2s", "--tpot", "p90<=50ms", "--sample", "5000"]
SLOS = [parse_slo("ttft", "p99<=2s"), parse_slo("tpot", "p90<=50ms")]


def as_json(rows):
    return json.loads(json.dumps(rows))


def test_json_equals_library_for_flags(invoke):
    res = invoke(*FLAGS, "--format", "json")
    assert res.exit_code == 0, res.stderr
    lib = plan("llama-3.1-8b", "h100-sxm", fleet_workload(qps=10, isl="1k:4k", osl="200", sample_requests=5000), SLOS)
    assert json.loads(res.stdout) == as_json(lib.rows)
    kinds = [r["kind"] for r in lib.rows]
    # no --tp: TP 1, 2, 4, 8 are searched; the cheapest is the plan, the other three are runners-up
    assert kinds == ["plan", "candidate", "candidate", "candidate", "scale", "scale", "scale"]
    assert [r.get("rate_multiplier") for r in lib.rows[4:]] == [2, 5, 10]
    assert sorted(r["tp"] for r in lib.rows[:4]) == [1, 2, 4, 8] and lib.rows[0]["tp"] == 1
    assert "Note:" not in res.stdout and "Note: workload: flags: 5,000 sampled requests" in res.stderr


def test_json_equals_library_for_a_trace_with_simulation(invoke):
    args = ["plan", "llama-3.1-8b", "h100-sxm", "--trace", AZURE, "--ttft", "p99<=2s", "--tpot", "p90<=50ms",
            "--tp", "1", "--max-num-seqs", "128", "--chunk-size", "4k", "--kv-dtype", "fp8", "--simulate",
            "--scale", "3", "--format", "json"]
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    lib = plan("llama-3.1-8b", "h100-sxm", fleet_workload(trace=AZURE), SLOS, Shape(1),
               EngineSettings(kv_dtype="fp8", max_num_seqs=128, chunk_tokens=4096), scale=[3], simulate=True)
    assert rows == as_json(lib.rows)
    main = rows[0]
    for key in ("instances", "gpus_per_instance", "total_gpus", "batch_per_instance", "concurrency",
                "kv_demand_mean_bytes", "kv_demand_p99_bytes", "kv_capacity_bytes", "headroom_bytes",
                "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
                "binding_constraint", "feasible", "sim_ttft_p99_s", "sim_tpot_p99_s", "sim_requests"):
        assert key in main, key
    assert main["sim_requests"] == 200 and main["batch_per_instance"] <= 128
    assert "Note: simulation: 200 requests (the trace)" in res.stderr


def test_a_trace_longer_than_the_replay_bound_is_replayed_up_to_it(invoke, monkeypatch):
    # without --sim-requests a trace is replayed whole only up to MAX_REPLAY_REQUESTS (100,000, the most
    # --sim-requests accepts); the bound is lowered to 150 here so that the 200-request trace passes it
    import kvplan.plans.fleet.plan as fleet_plan
    from kvplan.cli.options import MAX_SIM_REQUESTS

    assert fleet_plan.MAX_REPLAY_REQUESTS == MAX_SIM_REQUESTS == 100_000
    monkeypatch.setattr(fleet_plan, "MAX_REPLAY_REQUESTS", 150)
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--trace", AZURE, "--tp", "1", "--ttft", "p99<=2s",
                 "--scale", "2", "--format", "json")
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert rows[0]["sim_requests"] == 150
    assert "Note: simulation: 150 requests (the first 150 of the trace's 200; --sim-requests replays fewer)" in res.stderr
    explicit = json.loads(invoke("plan", "llama-3.1-8b", "h100-sxm", "--trace", AZURE, "--tp", "1", "--ttft", "p99<=2s",
                                 "--scale", "2", "--sim-requests", "120", "--format", "json").stdout)
    assert explicit[0]["sim_requests"] == 120


def test_table_shows_plan_comparison_and_scale_out(invoke):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--trace", AZURE, "--ttft", "p99<=2s", "--simulate")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    for text in ("Fleet plan: llama-3.1-8b on h100-sxm", "instances × GPUs each = GPUs", "binding constraint",
                 "Closed form vs simulation (200 requests)", "Scaling out", "10×"):
        assert text in out, text
    assert "Note:" not in out and "Note: chunked prefill" in res.stderr


def test_markdown_csv_and_file(invoke, tmp_path):
    md = invoke(*FLAGS, "--scale", "2", "--format", "markdown")
    assert md.exit_code == 0 and md.stdout.startswith("### Fleet plan") and "| quantity | value |" in md.stdout
    text = invoke(*FLAGS, "--scale", "2,5", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["kind"] == "plan" and rows[0]["feasible"] == "True" and len(rows) == 1 + 3 + 2  # 3 runners-up
    out = tmp_path / "plan.json"
    res = invoke(*FLAGS, "--scale", "2", "--format", "json", "-o", out)
    assert res.exit_code == 0 and res.stdout == "" and f"Wrote {out}" in res.stderr
    assert json.loads(out.read_text())[0]["kind"] == "plan"


def test_explain_chain_goes_to_stderr_with_json(invoke):
    res = invoke(*FLAGS, "--scale", "2", "--format", "json", "--explain")
    assert res.exit_code == 0
    json.loads(res.stdout)
    for text in ("Little's law", "Erlang-C", "B_kv", "TPOT mean = (t(B̄+1) + E[V]/n)/(1 − ρx)", "binding"):
        assert text in res.stderr, text


def test_unattainable_slo_exits_1_with_reason_and_rows(invoke):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--qps", "5", "--isl", "1k", "--osl", "100",
                 "--tpot", "p99<=1ms", "--format", "json")
    assert res.exit_code == 1
    error = [line for line in res.stderr.splitlines() if not line.startswith(("Note: ", "  "))]  # a note's continuation
    assert error[0].startswith("Error: infeasible: TPOT p99 <= 1.00 ms is unattainable: a request decoding alone")
    assert error[1].startswith("Hint: relax --tpot") and "Traceback" not in res.stderr
    row = json.loads(res.stdout)[0]
    assert row["feasible"] is False and row["instances"] is None and row["tpot_p99_s"] > 0.001


def test_gpu_budget_infeasible_in_table(invoke):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--qps", "200", "--isl", "2k", "--osl", "256",
                 "--ttft", "p99<=1s", "--max-gpus", "4", "--scale", "2")
    assert res.exit_code == 1 and "more than --max-gpus 4" in res.stderr and "feasible" in res.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--trace", TRACES / "empty_azure.csv"], "has no requests"),
    (["--trace", TRACES / "empty.jsonl"], "has no requests"),
    (["--trace", TRACES / "bad_azure.csv"], "4 malformed rows: line 3: ContextTokens 'abc' is not a whole number"),
    (["--qps", "-5", "--isl", "1k", "--osl", "100"], "--qps must be > 0 (got -5.0)"),
    (["--qps", "0", "--isl", "1k", "--osl", "100"], "--qps must be > 0"),
    (["--qps", "5", "--isl", "1k", "--osl", "100", "--ttft", "p99<2s"], "--ttft: cannot read SLO 'p99<2s': write '<='"),
    (["--qps", "5", "--isl", "1k", "--osl", "100", "--tpot", "fast"], "--tpot: cannot read SLO 'fast'"),
    (["--qps", "5", "--isl", "1k"], "no workload"),
    (["--trace", AZURE, "--isl", "1k"], "give a --trace or --isl/--osl, not both"),
    (["--trace", TRACES / "tiny_azure.csv", "--rate-basis", "peak"], "needs a trace of at least a minute"),
    (["--qps", "5", "--isl", "1k:100", "--osl", "100"], "no lognormal has mean 1,024 and p99 100"),
    (["--qps", "5", "--isl", "1k", "--osl", "100", "--tp", "3"], "tp=3 does not fit 8 KV heads"),
    (["--qps", "5", "--isl", "1k", "--osl", "100", "--scale", "2,-1"], "--scale multipliers must be > 0"),
    (["--trace", TRACES / "missing.csv"], "not found"),
])
def test_bad_input_exits_2_with_error_and_hint(invoke, args, message):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", *args, "--format", "json")
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    first, *rest = res.stderr.splitlines()
    assert first.startswith("Error: ") and message in first, first
    assert rest and rest[0].startswith("Hint: ") and "Traceback" not in res.stderr


def test_skip_bad_rows_plans_the_rest_and_names_the_lines(invoke):
    res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--trace", TRACES / "bad_azure.csv", "--skip-bad-rows",
                 "--scale", "2", "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert "Note: skipped 4 malformed rows (lines 3, 5, 6, 7)" in res.stderr
    assert json.loads(res.stdout)[0]["feasible"] is True

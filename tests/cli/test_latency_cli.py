"""``kvplan latency`` and ``kvplan calibrate`` through the CLI: stdout/stderr, formats, files, errors."""

from __future__ import annotations

import csv
import io
import json

import pytest

from kvplan.cards.loader import load_hardware
from kvplan.plans.build import calibrate_from_names, latency_from_names
from kvplan.plans.sizing.latency import Efficiencies, Speculation

from ..conftest import DATA, json_rows

CAL = DATA / "calibration"
REQUIRED_KEYS = ("model", "hardware", "tp", "batch", "isl", "osl", "prefill_s", "ttft_s", "decode_step_s",
                 "tpot_s", "tokens_per_s", "bound", "floor_decode_step_s")


def test_latency_json_equals_library(invoke):
    result = invoke("latency", "llama-3.1-70b", "h200", "--isl", "2k", "--osl", "256", "--batch", "1,8,64",
                    "--tp", "1,8", "--format", "json")
    assert result.exit_code == 0, result.stderr
    lib = latency_from_names("llama-3.1-70b", "h200", isl=[2048], osl=[256], batch=[1, 8, 64], tp=[1, 8]).rows
    assert json.loads(result.stdout) == json.loads(json.dumps(lib))
    assert "Note:" not in result.stdout and "Note: η_flops = 0.75" in result.stderr


def test_latency_rows_carry_the_documented_keys(invoke):
    rows = json_rows(invoke("latency", "mixtral-8x7b", "h100-sxm", "--tp", "2", "--batch", "1,64",
                            "--format", "json"))
    assert len(rows) == 2
    for row in rows:
        for key in REQUIRED_KEYS:
            assert key in row, key
        assert row["bound"] in ("memory", "compute", "communication")
    assert rows[0]["experts_touched_per_layer"] == pytest.approx(2.0)
    assert rows[1]["experts_touched_per_layer"] > 7.99


def test_latency_options_reach_the_library(invoke):
    args = ["latency", "llama-3.1-8b", "h100-sxm", "--isl", "4k", "--osl", "128", "--batch", "16", "--chunk-size",
            "1k", "--spec-k", "3", "--spec-alpha", "0.7", "--eta-mem", "0.7", "--eta-flops", "0.6",
            "--step-overhead", "250us", "--context", "8k", "--kv-dtype", "fp8", "--format", "json"]
    rows = json_rows(invoke(*args))
    lib = latency_from_names("llama-3.1-8b", "h100-sxm", isl=[4096], osl=[128], batch=[16], context=[8192],
                             kv_dtype="fp8",
                             chunk_size=1024, speculation=Speculation(3, 0.7),
                             efficiencies=Efficiencies(0.7, 0.6, 250e-6)).rows
    assert rows == json.loads(json.dumps(lib))
    assert rows[0]["prefill_passes"] == 64 and rows[0]["context"] == 8192 and rows[0]["kv_dtype"] == "fp8"
    assert "decode_step_with_chunk_s" in rows[0] and "spec_speedup" in rows[0]


def test_latency_table_csv_markdown_and_file(invoke, tmp_path):
    table = invoke("latency", "llama-3.1-8b", "h200")
    assert table.exit_code == 0 and "Latency: llama-3.1-8b on h200" in table.stdout and "ms" in table.stdout
    text = invoke("latency", "llama-3.1-8b", "h200", "--batch", "1,2", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["batch"] for r in rows] == ["1", "2"]
    md = invoke("latency", "llama-3.1-8b", "h200", "--format", "markdown").stdout
    assert md.startswith("### Latency") and "Assumptions:" in md
    out = tmp_path / "lat.json"
    written = invoke("latency", "llama-3.1-8b", "h200", "--format", "json", "-o", out)
    assert written.exit_code == 0 and written.stdout == "" and f"Wrote {out}" in written.stderr
    assert json.loads(out.read_text())[0]["model"] == "llama-3.1-8b"


def test_latency_explain_shows_every_term(invoke):
    result = invoke("latency", "llama-3.1-70b", "h200", "--isl", "128", "--explain")
    for term in ("decode weights read", "decode KV read", "decode FLOPs", "memory time", "compute time",
                 "communication", "floor", "intensity", "prefill", "request"):
        assert term in result.stdout, term
    json_explain = invoke("latency", "llama-3.1-70b", "h200", "--explain", "--format", "json")
    assert "memory time" in json_explain.stderr and json.loads(json_explain.stdout)


@pytest.mark.parametrize(("args", "message"), [
    (["--batch", "0"], "--batch must be a positive integer (got 0)"),
    (["--isl", "128k"], "exceeds llama-3.1-70b's max_context (131,072)"),
    (["--context", "200k"], "--context 204,800 exceeds llama-3.1-70b's max_context"),
    (["--spec-k", "3"], "--spec-k and --spec-alpha go together"),
    (["--ep", "2"], "has no routed experts"),
    (["--tp", "3"], "tp=3 does not fit 8 KV heads"),
    (["--eta-mem", "1.5"], "--eta-mem must be in [0.001, 1]"),
    (["--step-overhead", "fast"], "cannot read a duration 'fast'"),
    (["--step-overhead", "1e9s"], "--step-overhead must be >= 0 and at most 1 h"),
    (["--chunk-size", "0"], "--chunk-size must be a positive integer"),
    (["--enable-expert-parallel"], "has no routed experts (a dense model)"),
    (["--tp", "4", "--dp", "3"], "= 12 GPUs exceed h200's 8 GPUs per node and the card has no NIC"),
    (["--dp", "0"], "--dp must be >= 1"),
    (["--perf-model", "magic"], "--perf-model must be operators or roofline"),
    (["--batch", "most"], "cannot read a token count 'most'"),
    (["--max-num-seqs", "0"], "--max-num-seqs must be a positive integer"),
])
def test_latency_bad_input_exits_2_with_one_clear_line(invoke, args, message):
    result = invoke("latency", "llama-3.1-70b", "h200", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


def test_latency_missing_flops_dtype_exits_2(invoke):
    result = invoke("latency", "llama-2-70b", "a100-80gb", "--tp", "4", "--isl", "128", "--weights-dtype", "fp8")
    assert result.exit_code == 2 and result.stdout == ""
    assert "Error: hardware card 'a100-80gb' has no peak_flops_per_s.fp8" in result.stderr
    assert "Hint:" in result.stderr


def test_calibrate_cli_writes_card_and_equals_library(invoke, tmp_path):
    card_path = tmp_path / "h100-lab.yaml"
    result = invoke("calibrate", "llama-3.1-8b", "h100-sxm", CAL / "llama-3.1-8b-h100-sxm-synthetic.csv",
                    "--card-out", card_path, "--name", "h100-lab", "--format", "json")
    assert result.exit_code == 0, result.stderr
    lib = calibrate_from_names("llama-3.1-8b", "h100-sxm", CAL / "llama-3.1-8b-h100-sxm-synthetic.csv", name="h100-lab")
    assert json.loads(result.stdout) == json.loads(json.dumps(lib.result.rows))
    assert f"Wrote {card_path}" in result.stderr and "Verdict: fitted η_mem = 0.7000" in result.stderr
    hw = load_hardware(str(card_path))
    assert hw.name == "h100-lab" and hw.efficiency.flops == pytest.approx(0.6)
    rows = json_rows(invoke("latency", "llama-3.1-8b", card_path, "--format", "json"))
    assert rows[0]["hardware"] == "h100-lab" and rows[0]["eta_mem"] == pytest.approx(0.7)


def test_calibrate_table_prints_fit_and_residuals(invoke):
    result = invoke("calibrate", "llama-3.1-8b", "h100-sxm", CAL / "llama-3.1-8b-h100-sxm-synthetic.csv")
    assert result.exit_code == 0
    assert "Verdict: fitted η_mem = 0.7000, η_flops = 0.6000, step overhead = 200.0 µs" in result.stdout
    assert "relative error" in result.stdout and "--card-out" in result.stderr


@pytest.mark.parametrize(("name", "message"), [
    ("missing-column.csv", "missing column 'step_time_s' or 'ttft_s'"),
    ("non-numeric.csv", "non-numeric.csv line 3: column 'context': not a number ('abc')"),
    ("both-kinds.csv", "line 2: needs exactly one of step_time_s or ttft_s"),
    ("absent.csv", "no file at"),
])
def test_calibrate_bad_csv_exits_2(invoke, name, message):
    result = invoke("calibrate", "llama-3.1-8b", "h100-sxm", CAL / name)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr


def test_help_lists_latency_and_calibrate(invoke):
    out = invoke("--help").stdout
    assert "latency" in out and "calibrate" in out
    assert "--chunk-size" in invoke("latency", "--help").stdout


@pytest.mark.parametrize(("model", "args", "message"), [
    ("deepseek-v3", ["--dp", "3", "--enable-expert-parallel"], "EP size 3 (TP 1 × DP 3) does not divide"),
    ("deepseek-v3", ["--dp", "16", "--enable-expert-parallel"], "exceed h200's 8 GPUs per node"),
    ("deepseek-v3", ["--ep-redundant-experts", "32"], "--ep-redundant-experts needs --enable-expert-parallel"),
])
def test_moe_parallelism_bad_input_is_one_error_and_hint(invoke, model, args, message):
    result = invoke("latency", model, "h200", *args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("Error: ") and message in lines[0]
    assert lines[1].startswith("Hint: ") and len(lines) == 2


def test_expert_parallel_across_nodes_over_the_system_nic(invoke):
    result = invoke("latency", "deepseek-v3", "h200", "--system", "hgx-h200-8", "--dp", "72",
                    "--enable-expert-parallel", "--ep-redundant-experts", "32", "--batch", "720", "-f", "json")
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)[0]
    assert (row["ep"], row["gpus"], row["dp"]) == (72, 72, 8 * 9) and row["decode_comm_s"] > 0

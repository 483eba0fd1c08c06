"""``kvplan workload`` through the CLI: formats, notes on stderr, errors, and library equivalence."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from numpy.testing import assert_allclose

from kvplan.plans.fleet.workload import workload, workload_spec
from kvplan.workload.synthetic import workload_from_flags

from ..conftest import DATA, TRACES_DIR, json_rows

TRACES = DATA / "traces"
TINY = TRACES / "tiny_mooncake.jsonl"


def test_json_summary_and_lru_rows_by_hand(invoke):
    # 1536 tokens = 3 blocks, 2560 = 5 blocks; hand-worked hits in tests/unit/test_workload.py
    result = invoke("workload", TINY, "--cache-tokens", "1536,2560", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    summary, lru = rows[0], rows[1:]
    assert summary["kind"] == "summary" and summary["requests"] == 5
    for key in ("requests", "duration_s", "rate_per_s", "interarrival_cv", "isl_mean", "isl_p50", "isl_p90",
                "isl_p99", "osl_mean", "osl_p50", "osl_p90", "osl_p99", "prefix_hit_rate_unlimited"):
        assert key in summary
    assert_allclose(summary["rate_per_s"], 0.4)
    assert_allclose(summary["prefix_hit_rate_unlimited"], 6 / 14)
    assert [(r["cache_tokens"], r["cache_blocks"]) for r in lru] == [(1536, 3), (2560, 5)]
    assert_allclose([r["lru_hit_rate"] for r in lru], [3 / 14, 6 / 14])
    assert_allclose([r["lru_block_hit_rate"] for r in lru], [5 / 14, 8 / 14])
    assert result.stderr.startswith("Note: LRU over 512-token prompt blocks")


def test_cli_json_equals_library(invoke):
    cli = json_rows(invoke("workload", TINY, "--cache-tokens", "1k,3M", "--format", "json"))
    library = workload(str(TINY), cache_tokens=[1024, 3 * 1024**2])
    assert cli == json.loads(json.dumps(library.rows))
    assert cli[2]["cache_tokens"] == 3 * 1024 * 1024  # M = 1024²


def test_flags_json_equals_library(invoke):
    cli = json_rows(invoke("workload", "--rate", "2", "--isl", "mean=2k,p99=16k", "--osl", "256", "--turns", "3",
                           "--think-time", "20s", "--sample", "2000", "--cache-tokens", "64k", "--format", "json"))
    spec = workload_from_flags(rate_per_s=2, isl="mean=2k,p99=16k", osl="256", turns=3, think_time="20s")
    library = workload_spec(spec, cache_tokens=[65536], sample_requests=2000)
    assert cli == json.loads(json.dumps(library.rows))
    assert cli[0]["rate_per_s"] == 2 and cli[0]["idle_sessions_mean"] == pytest.approx(2 / 3 * 2 * 20)


def test_table_shows_sparkline_and_cache_table(invoke):
    result = invoke("workload", TRACES / "mooncake_conversation_head200.jsonl", "--cache-tokens", "1M")
    assert result.exit_code == 0, result.stderr
    assert "Workload: mooncake_conversation_head200.jsonl (mooncake)" in result.stdout
    assert "requests per minute" in result.stdout
    assert any(ch in result.stdout for ch in "▁▂▃▄▅▆▇█")
    assert "LRU prefix cache: hit rate vs capacity" in result.stdout
    assert "1m (1,048,576)" in result.stdout
    assert "Note: LRU over 512-token prompt blocks" in result.stderr
    assert "Note" not in result.stdout


def test_markdown_and_csv(invoke):
    md = invoke("workload", TRACES / "tiny_azure.csv", "--format", "markdown")
    assert md.exit_code == 0 and md.stdout.startswith("### Workload: tiny_azure.csv (azure)")
    assert "| inter-arrival CV | 0.64 |" in md.stdout
    out = invoke("workload", TRACES / "tiny_azure.csv", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 1 and float(rows[0]["rate_per_s"]) == 1.5


def test_output_file_written_whole(invoke, tmp_path):
    target = tmp_path / "w.json"
    result = invoke("workload", TINY, "--format", "json", "-o", target)
    assert result.exit_code == 0 and result.stdout == ""
    assert f"Wrote {target}" in result.stderr
    assert json.loads(target.read_text())[0]["requests"] == 5


def test_generic_csv_columns(invoke):
    rows = json_rows(invoke("workload", TRACES / "tiny_generic.csv", "--columns",
                            "timestamp=ts,isl=prompt_tokens,osl=output_tokens", "--timestamp-unit", "ms",
                            "--format", "json"))
    assert rows[0]["trace_format"] == "csv"
    assert_allclose([rows[0]["rate_per_s"], rows[0]["isl_p90"]], [0.4, 1843.2])


def test_bad_rows_exit_2_naming_lines(invoke):
    result = invoke("workload", TRACES / "bad_azure.csv", "--format", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: ") and "4 malformed rows: line 3: ContextTokens 'abc'" in lines[0]
    assert lines[1] == "Hint: fix those lines, or pass --skip-bad-rows to skip them"
    assert "Traceback" not in result.stderr


def test_skip_bad_rows_reports_count_on_stderr(invoke):
    result = invoke("workload", TRACES / "bad_mooncake.jsonl", "--skip-bad-rows", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "Note: skipped 4 malformed rows (lines 2, 4, 5, 7)" in result.stderr
    rows = json.loads(result.stdout)
    assert rows[0]["requests"] == 3 and rows[0]["skipped_rows"] == 4


@pytest.mark.parametrize("args, message", [
    (["empty.jsonl"], "has no requests"),
    (["empty_azure.csv"], "has no requests"),
    (["unknown_header.csv"], "cannot tell the format"),
    (["tiny_azure.csv", "--cache-tokens", "1M"], "has no hash_ids"),
    (["tiny_mooncake.jsonl", "--cache-tokens", "12x"], "cannot read a token count '12x'"),
    (["tiny_mooncake.jsonl", "--trace-format", "parquet"], "unknown trace format 'parquet'"),
    (["tiny_mooncake.jsonl", "--bucket", "0s"], "rate bucket must be > 0 s"),
    (["tiny_mooncake.jsonl", "--rate", "3"], "not both"),
])
def test_errors_one_line_exit_2(invoke, args, message):
    result = invoke("workload", TRACES / args[0], *args[1:])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    ([], "no workload: give a TRACE file"),
    (["--rate", "-1", "--isl", "1k", "--osl", "10"], "Error: --rate: input should be greater than 0"),
    (["--rate", "1", "--isl", "mean=1k,p99=100k", "--osl", "10"], "no lognormal has mean 1,024"),
])
def test_flag_errors(invoke, args, message):
    result = invoke("workload", *args)
    assert result.exit_code == 2 and result.stdout == "" and message in result.stderr


def test_workload_command_does_not_import_pandas():
    code = ("import sys; from kvplan.cli import app; import kvplan.plans.fleet.workload; "
            "assert 'pandas' not in sys.modules, 'pandas imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow
def test_full_mooncake_trace_cli(invoke):
    path = TRACES_DIR / "conversation_trace.jsonl"
    rows = json_rows(invoke("workload", path, "--cache-tokens", "3M,10M,50M", "--format", "json"))
    rates = [r["lru_hit_rate"] for r in rows[1:]]
    assert rates == sorted(rates) and rates[-1] <= rows[0]["prefix_hit_rate_unlimited"]

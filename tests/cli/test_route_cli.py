"""``kvplan route`` through the CLI: JSON equals the library, lists, formats, files, chart, errors."""

from __future__ import annotations

import csv
import io
import json

import pytest
from numpy.testing import assert_allclose

from kvplan.plans.route import route
from kvplan.workload.traces import read_trace

from ..conftest import DATA, TRACES_DIR, json_rows

TINY = DATA / "traces" / "tiny_mooncake.jsonl"
HEAD = DATA / "traces" / "mooncake_conversation_head200.jsonl"
AZURE = DATA / "traces" / "tiny_azure.csv"


def test_json_equals_library(invoke):
    result = invoke("route", HEAD, "--instances", "1,4", "--policy", "round-robin,prefix-aware,consistent-hash",
                    "--cache-tokens", "64k", "--service-time", "20s", "-f", "json")
    assert result.exit_code == 0, result.stderr
    library = route(read_trace(HEAD), [1, 4], ["round-robin", "prefix-aware", "consistent-hash"],
                    cache_tokens=65536, service_time_s=20.0)
    assert json_rows(result) == json.loads(json.dumps(library.rows))
    assert [(r["policy"], r["instances"]) for r in json_rows(result)] == [
        (p, n) for n in (1, 4) for p in ("round-robin", "prefix-aware", "consistent-hash")]
    assert result.stderr.startswith("Note: per-instance LRU of 128 blocks")


def test_default_policies_without_service_times_skip_load_policies(invoke):
    rows = json_rows(invoke("route", TINY, "--instances", "2", "--cache-tokens", "50k", "-f", "json"))
    assert [r["policy"] for r in rows] == ["round-robin", "random"]
    rows = json_rows(invoke("route", TINY, "--instances", "2", "--cache-tokens", "50k", "--service-time", "5s",
                            "-f", "json"))
    assert [r["policy"] for r in rows] == ["round-robin", "random", "least-loaded", "prefix-aware", "consistent-hash"]


def test_csv_markdown_and_output_file(invoke, tmp_path):
    result = invoke("route", TINY, "--instances", "1,2", "--policy", "round-robin", "--cache-tokens", "50k",
                    "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["instances"] for r in rows] == ["1", "2"]
    md = invoke("route", TINY, "--instances", "2", "--policy", "round-robin", "--cache-tokens", "50k", "-f", "markdown")
    assert md.exit_code == 0 and "| round-robin | 2 | 21.43 %" in md.stdout
    out = tmp_path / "route.json"
    result = invoke("route", TINY, "--instances", "2", "--policy", "round-robin", "--cache-tokens", "50k",
                    "-f", "json", "-o", out)
    assert result.exit_code == 0 and result.stdout == ""
    assert_allclose(json.loads(out.read_text())[0]["hit_rate"], 3 / 14)


def test_chart_is_a_png(invoke, tmp_path):
    chart = tmp_path / "route.png"
    result = invoke("route", TINY, "--instances", "1,2,4", "--cache-tokens", "50k", "--service-time", "5s",
                    "--chart", chart, "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_synthetic_multi_turn_workload(invoke):
    rows = json_rows(invoke("route", "--rate", "4", "--isl", "1k", "--osl", "128", "--turns", "4", "--think-time", "20s",
                            "--sample", "2000", "--instances", "4", "--policy", "round-robin,prefix-aware",
                            "--cache-tokens", "1M", "--service-time", "10s", "-f", "json"))
    by = {r["policy"]: r for r in rows}
    assert by["prefix-aware"]["hit_rate"] > by["round-robin"]["hit_rate"] > 0


def test_deployment_pool_is_the_cache(invoke):
    result = invoke("route", HEAD, "llama-3.1-8b", "h100-sxm", "--instances", "2,4", "--policy", "round-robin,prefix-aware",
                    "-f", "json")
    assert result.exit_code == 0, result.stderr
    fit = json_rows(invoke("fit", "llama-3.1-8b", "h100-sxm", "--seq", "32k", "-f", "json"))[0]
    rows = [r for r in json_rows(result) if r["kind"] == "route"]
    for row in rows:
        assert row["cache_tokens_per_instance"] == fit["kv_cache_tokens"]
        assert row["prefill_gpu_s_saved"] >= 0 and row["gpus_needed"] >= 1
        if row["instances"] == 2:  # 2 instances cannot hold the decode slots this trace needs
            assert row["meets_slos"] is False and row["failures"] == "slots" and row["ttft_p99_s"] is None
        else:
            assert row["ttft_p99_s"] > row["ttft_p50_s"] > 0 and row["meets_slos"]


@pytest.mark.parametrize("args, message", [
    ((AZURE, "--policy", "prefix-aware", "--service-time", "5s"), "has no hash_ids"),
    ((TINY, "--instances", "0", "--cache-tokens", "1M"), "--instances must be whole numbers from 1"),
    ((TINY, "--policy", "round-robn", "--cache-tokens", "1M"), "unknown routing policy 'round-robn'"),
    ((TINY, "--policy", "least-loaded", "--cache-tokens", "1M"), "needs each request's time in system"),
    ((TINY, "--chart", "x.svg", "--cache-tokens", "1M"), "charts are PNG files"),
])
def test_bad_input_is_one_error_and_hint(invoke, tmp_path, args, message):
    result = invoke("route", *args, "-o", tmp_path / "out.json")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert message in lines[0]
    assert not (tmp_path / "out.json").exists()
    if "round-robn" in message:
        assert "did you mean 'round-robin'" in lines[1]


def test_mooncake_default_run_is_documented_shape(invoke):
    result = invoke("route", TRACES_DIR / "conversation_trace.jsonl", "--instances", "16", "--cache-tokens", "3M",
                    "--service-time", "20s", "-f", "json")
    rows = json_rows(result)
    assert len(rows) == 5 and all(len(r["instance_hit_rates"]) == 16 for r in rows)


def test_migration_rows_with_a_system(invoke):
    result = invoke("route", HEAD, "llama-3.1-8b", "h100-sxm", "--system", "hgx-h100-8", "--instances", "4",
                    "--policy", "round-robin,prefix-aware", "-f", "json")
    assert result.exit_code == 0, result.stderr
    rows = [r for r in json_rows(result) if r["kind"] == "migration"]
    links = {r["link_kind"]: r for r in rows}
    assert set(links) == {"scale_up", "host_link", "nic"}
    # hgx-h100-8 card: NVLink 450 GB/s × 0.84, PCIe Gen5 64 GB/s (no efficiency: line rate), CX-7 50 GB/s × 0.87
    assert_allclose([links[k]["link_bandwidth_bytes_per_s"] for k in ("scale_up", "host_link", "nic")],
                    [378e9, 64e9, 43.5e9])
    for row in rows:
        assert row["kv_bytes_per_token_per_gpu"] == 131072  # Llama-3.1-8B bf16: 32 layers × 8 heads × 128 × 2 × 2
        assert_allclose(row["route_to_holder_share"] + row["copy_share"] + row["recompute_share"], 1.0)
        assert row["diverted_requests"] > 0
        # no fixed latency on these cards: mean copy = mean missing tokens × bytes per token / bandwidth
        assert_allclose(row["copy_s_mean"], row["diverted_tokens"] / row["diverted_requests"]
                            * 131072 / row["link_bandwidth_bytes_per_s"])
    assert links["nic"]["break_even_tokens"] >= links["scale_up"]["break_even_tokens"] >= 1
    assert "Note: migration:" in result.stderr


def test_default_policies_without_hash_ids(invoke):
    result = invoke("route", AZURE, "--instances", "2", "--service-time", "5s", "-f", "json")
    assert [r["policy"] for r in json_rows(result)] == ["round-robin", "random", "least-loaded"]
    assert all(r["hit_rate"] is None and r["load_imbalance"] >= 1 for r in json_rows(result))
    assert "Note: prefix-aware, consistent-hash left out: the trace has no hash_ids" in result.stderr

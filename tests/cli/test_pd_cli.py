"""``kvplan pd`` through the CLI: JSON = library, formats, the Mooncake trace, and bad input."""

from __future__ import annotations

import csv
import io
import json

from kvplan.plans.pd.plan import PDSettings, plan_pd
from kvplan.units import parse_seconds

from ..conftest import DATA, json_rows

LLAMA8B = ["pd", "llama-3.1-8b", "hgx-h100-8", "--qps", "10", "--isl", "4k", "--osl", "256",
           "--ttft", "p99<=2s", "--tpot", "p99<=50ms"]
REQUIRED = ("scenario", "mode", "prefill_instances", "decode_instances", "prefill_tp", "decode_tp", "total_gpus",
            "kv_transfer_s", "ttft_p99_s", "tpot_p99_s", "goodput_per_gpu", "feasible", "binding_constraint")
EXCERPT = DATA / "traces" / "mooncake_conversation_head200.jsonl"


def test_pd_json_equals_library_and_rows_carry_the_keys(invoke):
    result = invoke(*LLAMA8B, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    lib = plan_pd("llama-3.1-8b", "hgx-h100-8", qps=10, isl="4k", osl="256", ttft="p99<=2s", tpot="p99<=50ms").rows
    assert rows == json.loads(json.dumps(lib))
    assert [r["mode"] for r in rows[:2]] == ["disaggregated", "aggregated"]
    assert [r["scenario"] for r in rows] == ["base", "base", "isl×2", "osl×2", "rate×2", "link bandwidth ÷4"]
    assert all(set(r) == set(rows[0]) for r in rows)
    for row in rows:
        for key in REQUIRED:
            assert key in row, key
    pd = rows[0]
    assert pd["feasible"] and pd["xpyd"] == f"{pd['prefill_instances']}P{pd['decode_instances']}D"
    assert pd["total_gpus"] == pd["prefill_instances"] * pd["prefill_tp"] + pd["decode_instances"] * pd["decode_tp"]
    assert abs(pd["goodput_per_gpu"] - 10 / pd["total_gpus"]) < 1e-12
    assert rows[5]["kv_transfer_s"] > rows[0]["kv_transfer_s"]  # bandwidth ÷ 4
    assert "Note:" in result.stderr and "Verdict:" in result.stderr


def test_pd_table_markdown_csv_explain_and_file(invoke, tmp_path):
    args = [*LLAMA8B, "--no-sensitivity"]
    table = invoke(*args, "--explain")
    assert table.exit_code == 0, table.stderr
    assert "PD disaggregation: llama-3.1-8b" in table.stdout and "Verdict:" in table.stdout
    assert "link:" in table.stdout and "n = min(TP_p" in table.stdout and "staging" in table.stdout
    md = invoke(*args, "--format", "markdown").stdout
    assert md.startswith("### PD disaggregation") and "**Verdict:**" in md and "| xpyd |" in md
    rows = list(csv.DictReader(io.StringIO(invoke(*args, "--format", "csv").stdout)))
    assert len(rows) == 2 and {"kv_transfer_s", "binding_constraint"} <= set(rows[0])
    out = tmp_path / "pd.json"
    written = invoke(*args, "--format", "json", "-o", out)
    assert written.exit_code == 0 and written.stdout == "" and len(json.loads(out.read_text())) == 2


def test_pd_options_reach_the_library(invoke):
    args = ["pd", "llama-3.1-70b", "h100-sxm", "--system", "hgx-h100-8", "--qps", "2", "--isl", "16k", "--osl", "128",
            "--ttft", "p90<=6s", "--tpot", "p99<=80ms", "--prefill-tp", "4", "--decode-tp", "8",
            "--prefill-instances", "3", "--decode-instances", "1", "--placement", "cross-node",
            "--cached-prefix-fraction", "0.25", "--link-latency", "20us", "--kv-dtype", "fp8",
            "--no-aggregated", "--no-sensitivity", "--format", "json"]
    rows = json_rows(invoke(*args))
    lib = plan_pd("llama-3.1-70b", "h100-sxm", system="hgx-h100-8", qps=2, isl="16k", osl="128", ttft="p90<=6s",
                  tpot="p99<=80ms", prefill_tp=[4], decode_tp=[8], prefill_instances=3, decode_instances=1,
                  placement="cross-node", cached_prefix_fraction=0.25, link_latency_s=parse_seconds("20us"),
                  settings=PDSettings(kv_dtype="fp8"),
                  aggregated=False, sensitivity=False).rows
    assert rows == json.loads(json.dumps(lib))
    row = rows[0]
    assert row["xpyd"] == "3P1D" and row["link_kind"] == "nic" and abs(row["link_latency_s"] - 20e-6) < 1e-12
    assert row["cached_prefix_fraction"] == 0.25 and "ttft_p90_s" in row


def test_heterogeneous_pools_over_a_given_link(invoke):
    args = ["pd", "llama-3.1-70b", "hgx-h100-8", "--decode-hardware", "h20", "--qps", "4", "--isl", "8k", "--osl",
            "512", "--ttft", "p99<=4s", "--tpot", "p99<=100ms", "--link-bandwidth", "400Gbps", "--link-efficiency",
            "0.87", "--no-sensitivity", "--format", "json"]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)[0]
    assert row["prefill_hardware"] == "h100-sxm" and row["decode_hardware"] == "h20"
    assert row["link_kind"] == "nic" and abs(row["link_bandwidth_bytes_per_s"] - 50e9 * 0.87) < 1
    assert row["feasible"]


def test_mooncake_trace_excerpt(invoke):
    args = ["pd", "llama-3.1-70b", "h100-sxm", "--system", "hgx-h100-8", "--trace", EXCERPT,
            "--ttft", "p90<=6s", "--tpot", "p99<=100ms", "--format", "json"]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows[0]["mode"] == "disaggregated" and rows[0]["feasible"]
    assert rows[0]["isl_mean"] > 1000 and "mooncake_conversation_head200.jsonl" in result.stderr
    assert invoke(*args[:5], "--trace", EXCERPT, "--isl", "8k").exit_code == 2


# --------------------------------------------------------------------------- bad input


def test_unmeetable_ttft_exits_1_naming_the_binding_constraint_and_best_value(invoke):
    result = invoke("pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "32k", "--osl", "64",
                    "--ttft", "p99<=10ms", "--tpot", "p99<=100ms", "--no-sensitivity", "--format", "json")
    assert result.exit_code == 1
    err = result.stderr
    assert "Error: " in err and "TTFT p99 ≤ 10.00 ms is unattainable" in err and "the best TP pair reaches" in err
    assert "Hint: relax --ttft to at least" in err and "Traceback" not in err
    rows = json.loads(result.stdout)
    assert rows[0]["binding_constraint"] == "ttft_slo" and rows[0]["feasible"] is False
    assert rows[0]["best_achievable_ttft_s"] > 0.01


def test_unmeetable_tpot_exits_1(invoke):
    result = invoke("pd", "llama-3.1-70b", "hgx-h100-8", "--qps", "1", "--isl", "2k", "--osl", "64",
                    "--ttft", "p99<=10s", "--tpot", "p99<=1ms", "--no-sensitivity")
    assert result.exit_code == 1
    assert "TPOT p99 ≤ 1.00 ms is unattainable" in result.stderr and "Hint: relax --tpot to at least" in result.stderr


def test_a_link_without_bandwidth_exits_2(invoke):
    for system in ("h100-pcie-8-cxl-example",):
        result = invoke("pd", "llama-3.1-8b", system, "--placement", "cross-node", "--qps", "1", "--isl", "2k",
                        "--osl", "64")
        assert result.exit_code == 2, result.stderr
        assert f"Error: {system} has no nic link" in result.stderr
        assert "Hint: add the link with its source to the card, pass --link-bandwidth" in result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""
    hetero = invoke("pd", "llama-3.1-8b", "hgx-h100-8", "--decode-hardware", "h20", "--qps", "1", "--isl", "2k",
                    "--osl", "64")
    # H100 prefill, H20 decode out of the box: without --decode-system, h20's usual system h20-8 (which carries
    # its NIC) is assumed and the KV crosses the NIC
    assert hetero.exit_code == 0, hetero.stderr
    assert "Note: no --system: assumed h20-8, the usual system of h20" in hetero.stderr
    row = json.loads(invoke("pd", "llama-3.1-8b", "hgx-h100-8", "--decode-hardware", "h20", "--qps", "1", "--isl",
                            "2k", "--osl", "64", "--format", "json").stdout)[0]
    assert row["link_kind"] == "nic"


def test_weights_that_fit_no_tp_exit_1(invoke):
    result = invoke("pd", "llama-3.1-405b", "l40s-pcie-8", "--qps", "1", "--isl", "2k", "--osl", "64")
    assert result.exit_code == 1
    assert "Error: llama-3.1-405b does not fit the prefill hardware l40s at any TP in [1, 2, 4, 8]" in result.stderr
    assert "Hint: use larger TPs" in result.stderr and "--weights-dtype fp8" in result.stderr
    # l40s alone: its usual system l40s-pcie-8 (8 cards, PCIe peer-to-peer) is assumed, so TP up to 8 is tried
    alone = invoke("pd", "llama-3.1-405b", "l40s", "--qps", "1", "--isl", "2k", "--osl", "64")
    assert alone.exit_code == 1 and "does not fit the prefill hardware l40s at any TP in [1, 2, 4, 8]" in alone.stderr
    # a card with no usual system keeps its own scale-up domain (an NVLink-bridged pair of H100 PCIe)
    pair = invoke("pd", "llama-3.1-405b", "h100-pcie", "--qps", "1", "--isl", "2k", "--osl", "64")
    assert pair.exit_code == 1 and "TP 4, 8 exceed(s) h100-pcie's scale-up domain (2)" in pair.stderr
    decode = invoke("pd", "llama-3.1-405b", "hgx-h200-8", "--decode-hardware", "l40s", "--link-bandwidth", "50GB/s",
                    "--qps", "1", "--isl", "2k", "--osl", "64")
    assert decode.exit_code == 1 and "does not fit the decode hardware l40s" in decode.stderr


def test_bad_usage_exits_2(invoke):
    base = ["pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "2k", "--osl", "64"]
    cases = {
        ("--ttft", "p99<4s"): "--ttft: cannot read SLO",
        ("--placement", "same-rack"): "unknown placement 'same-rack'",
        ("--cached-prefix-fraction", "1.2"): "--cached-prefix-fraction must be in [0, 1)",
        ("--prefill-instances", "2"): "--prefill-instances and --decode-instances go together",
        ("--decode-hardware", "h20", "--placement", "same-node"): "cannot share a node",
        ("--link-bandwidth", "fast"): "cannot read a bandwidth",
    }
    for extra, message in cases.items():
        result = invoke(*base, *extra)
        assert result.exit_code == 2, (extra, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, (extra, result.stderr)
    missing = invoke("pd", "llama-3.1-8b", "h100-sxm", "--isl", "2k", "--osl", "64")
    assert missing.exit_code == 2 and "Error: no workload" in missing.stderr
    unknown = invoke("pd", "llama-3.1-8b", "h100-sxn", "--qps", "1", "--isl", "2k", "--osl", "64")
    assert unknown.exit_code == 2 and "unknown hardware 'h100-sxn'" in unknown.stderr


def test_a_given_xpyd_that_fails_exits_1(invoke):
    result = invoke("pd", "llama-3.1-8b", "hgx-h100-8", "--qps", "40", "--isl", "8k", "--osl", "256",
                    "--ttft", "p99<=2s", "--tpot", "p99<=50ms", "--prefill-tp", "1", "--decode-tp", "1",
                    "--prefill-instances", "1", "--decode-instances", "1", "--no-sensitivity", "--format", "json")
    assert result.exit_code == 1
    row = json.loads(result.stdout)[0]
    assert row["xpyd"] == "1P1D" and not row["feasible"] and "fails" in row["reason"]
    assert "Error: the given 1P1D does not meet TTFT p99 ≤ 2.000 s" in result.stderr
    assert "Hint: give more instances" in result.stderr


def test_pd_metrics_in_a_plan_file(invoke, tmp_path):
    plan = tmp_path / "pd.yaml"
    plan.write_text("model: llama-3.1-8b\nsystem: hgx-h100-8\nworkload: {qps: 20, isl: 4k, osl: 256}\n"
                    "slo: {ttft: 'p99<=2s', tpot: 'p99<=50ms'}\nassertions:\n  - prefill_gpus + decode_gpus <= 16\n"
                    "  - kv_transfer_s < 10ms\n  - pd_goodput_per_gpu >= 2\n")
    result = invoke("check", plan)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "PASS  prefill_gpus + decode_gpus <= 16" in result.stdout and "kv_transfer_s = " in result.stdout
    lib = plan_pd("llama-3.1-8b", "hgx-h100-8", qps=20, isl=4096, osl=256, ttft="p99<=2s", tpot="p99<=50ms",
                  aggregated=False, sensitivity=False).rows[0]
    assert f"pd_goodput_per_gpu = {lib['goodput_per_gpu']:,.4g}" in result.stdout

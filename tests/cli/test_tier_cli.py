"""``kvplan tier`` through the CLI: JSON rows, library equivalence, tables, the chart, and bad input."""

from __future__ import annotations

import json

import pytest
from numpy.testing import assert_allclose

from kvplan.plans.tiers.inputs import CapacityOverrides
from kvplan.plans.tiers.reuse import from_trace
from kvplan.plans.tiers.plan import tier_plan

from ..conftest import DATA, TRACES_DIR, json_rows

HEAD200 = DATA / "traces" / "mooncake_conversation_head200.jsonl"
TIERS = DATA / "tiers"
CONVERSATION = TRACES_DIR / "conversation_trace.jsonl"
ROW_KEYS = {"tier", "kind", "capacity_bytes", "capacity_tokens", "read_bytes_per_s", "latency_s", "break_even_tokens",
            "content", "hit_rate", "cumulative_hit_rate", "ttft_saved_p50_s", "ttft_saved_p99_s",
            "prefill_gpu_s_saved_per_s"}
BASE = ("tier", "llama-3.1-70b", "--system", "hgx-h100-8")


def test_json_rows_per_tier_and_a_summary(invoke):
    result = invoke(*BASE, "--trace", HEAD200, "--dram-per-node", "1TB", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["kind"] for r in rows] == ["hbm", "host_dram", "remote", "summary"]
    for row in rows:
        assert ROW_KEYS <= set(row)
    assert rows[1]["tier"] == "host DDR5 (1 TB per node, --dram-per-node)"
    assert rows[1]["tier_capacity_bytes"] == 1e12 * rows[-1]["nodes"]
    assert_allclose(sum(r["hit_rate"] for r in rows[:-1]), rows[-1]["hit_rate"])
    assert "HBM keeps the hot path" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("Verdict: active decode KV fits in HBM")


def test_cli_json_equals_library(invoke):
    cli = json_rows(invoke(*BASE, "--trace", HEAD200, "--dram-per-node", "1TB", "--nodes", "3", "--format", "json"))
    library = tier_plan("llama-3.1-70b", system="hgx-h100-8", reuse=from_trace(HEAD200), nodes=3,
                        overrides=CapacityOverrides(host_dram=1e12))
    assert cli == json.loads(json.dumps(library.result.rows))


def test_table_markdown_csv_and_explain(invoke):
    table = invoke(*BASE, "--trace", HEAD200, "--explain")
    assert table.exit_code == 0, table.stderr
    assert "Tier plan: llama-3.1-70b on" in table.stdout and "Tier plan summary" in table.stdout
    assert "Verdict: active decode KV fits in HBM" in table.stdout
    assert "Mooncake Eq. 2 (FAST'25): B_min" in table.stdout  # every tier against Eq. 2's minimum
    markdown = invoke(*BASE, "--trace", HEAD200, "--format", "markdown")
    assert markdown.stdout.startswith("### Tier plan: llama-3.1-70b")
    assert "**Verdict:** active decode KV fits in HBM" in markdown.stdout
    csv_out = invoke(*BASE, "--trace", HEAD200, "--format", "csv")
    header = csv_out.stdout.splitlines()[0].split(",")
    assert header[:4] == ["tier", "kind", "capacity_bytes", "capacity_tokens"]
    assert len(csv_out.stdout.splitlines()) == 5  # header + HBM, DRAM, remote, total


def test_one_shared_drive_breaks_even_only_at_long_contexts(invoke):
    """One 7 GB/s drive for 8 GPUs at 50% MFU: break-even ~37k tokens (tests/unit/test_tiers.py works it out);
    against Eq. 2 at the p50 prompt (~7k tokens) recompute is faster."""
    result = invoke("tier", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--trace", HEAD200, "--tiers",
                    TIERS / "one_shared_drive.yaml", "--eta-flops", "0.5", "--overlap-comm", "--no-pd",
                    "--format", "json", "--explain")
    assert result.exit_code == 0, result.stderr
    dram, drive = json.loads(result.stdout)[1:3]
    assert dram["break_even_tokens"] < 1000 < 20_000 < drive["break_even_tokens"] < 60_000
    assert drive["read_bytes_per_s"] * 8 < drive["mooncake_eq2_min_read_bytes_per_s"]
    assert "8 × 0.875 = 7 GB/s → recompute is faster at the p50 ISL" in result.stderr


def test_chart_is_a_png(invoke, tmp_path):
    chart = tmp_path / "tiers.png"
    result = invoke("tier", "llama-3.1-70b", "--system", "hgx-h100-8-nvme", "--trace", HEAD200, "--chart", chart,
                    "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Wrote {chart}" in result.stderr
    kinds = [r["kind"] for r in json.loads(result.stdout)]
    assert kinds == ["hbm", "host_dram", "nvme", "remote", "summary"]


def test_flag_workload_with_sessions(invoke):
    result = invoke("tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--tp", "1", "--qps", "2", "--isl", "1k",
                    "--osl", "200", "--turns", "5", "--think-time", "30s", "--system-prompt-tokens", "2k",
                    "--sample", "5000", "--format", "json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)[-1]
    assert_allclose(summary["reuse_capacity_tokens_littles_law"], 48 * 2.5 * 1224 + 2048)
    assert summary["hit_rate"] > 0.5 and summary["instances"] == 8 * summary["nodes"]


def test_rag_documents_from_flags(invoke):
    # worked by hand in tests/unit/test_tiers.py::test_rag_documents_by_hand
    result = invoke(*BASE, "--qps", "1", "--isl", "100", "--osl", "10", "--system-prompt-tokens", "512",
                    "--rag-docs", "2", "--rag-doc-tokens", "1k", "--rag-zipf", "0", "--sample", "1000", "--no-pd",
                    "--format", "json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)[-1]
    assert_allclose(summary["unlimited_hit_rate"], 2995 / 4000)
    assert summary["reuse_capacity_tokens_littles_law"] == 512 + 2 * 1024
    assert "RAG: 2 documents × 1,024 tokens" in summary["workload"]


def test_decode_kv_out_of_hbm_exits_1_with_the_penalty(invoke):
    result = invoke("tier", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--nodes", "1", "--qps", "0.05",
                    "--isl", "120k", "--osl", "2k", "--sample", "2000", "--decode-batch", "32",
                    "--tiers", TIERS / "big_dram.yaml", "--format", "json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)[-1]
    assert summary["tpot_penalty_p99_s"] > 1.0
    assert "The hot path belongs in HBM" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--trace", DATA / "traces" / "azure_code_head200.csv"), "reuse needs hash_ids"),
    (("--trace", HEAD200, "--tiers", TIERS / "zero_bandwidth.yaml"),
     "zero_bandwidth.yaml: tiers.0.read_bytes_per_s: Input should be greater than or equal to 1000000 (got 0)"),
    (("--trace", HEAD200, "--qps", "2"), "not both"),
    ((), "no workload"),
    (("--trace", HEAD200, "--cxl-per-node", "1TB"), "--cxl-per-node: system card hgx-h100-8 has no cxl tier"),
    (("--trace", HEAD200, "--dram-per-node", "1XB"), "cannot read a byte size '1XB'"),
    (("--trace", HEAD200, "--tp", "16"), "--tp 16 does not divide the system's 8 accelerators"),
    (("--trace", HEAD200, "--chart", "out.svg"), "charts are PNG files"),
    (("--trace", HEAD200, "--rag-docs", "5"), "--rag-docs describes a flag workload"),
])
def test_bad_input_exits_2_with_one_clear_line(invoke, args, message):
    result = invoke(*BASE, *args)
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_infeasible_exits_1(invoke):
    weights = invoke("tier", "llama-3.1-405b", "h100-sxm", "--tp", "1", "--trace", HEAD200)
    assert weights.exit_code == 1 and "leaves no KV memory" in weights.stderr
    nowhere = invoke("tier", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--nodes", "1", "--qps", "0.05",
                     "--isl", "120k", "--osl", "2k", "--sample", "2000", "--decode-batch", "32",
                     "--tiers", TIERS / "tiny_dram.yaml")
    assert nowhere.exit_code == 1 and "every tier together hold" in nowhere.stderr


def test_mooncake_conversation_trace_on_h100_nodes_with_1tb_dram(invoke):
    if not CONVERSATION.is_file():
        pytest.fail(f"{CONVERSATION} is missing: the real traces ship in examples/traces")
    rows = json_rows(invoke("tier", "llama-3.1-70b", "--system", "hgx-h100-8", "--trace", CONVERSATION,
                            "--dram-per-node", "1TB", "--format", "json"))
    summary = rows[-1]
    assert_allclose(summary["unlimited_hit_rate"], 0.3664, atol=5e-5)
    assert summary["active_kv_fits_hbm"] and summary["tpot_penalty_p50_s"] == 0
    assert rows[0]["kind"] == "hbm" and rows[0]["hit_rate"] > 0.1
    assert 0.25 < summary["hit_rate"] <= summary["unlimited_hit_rate"]


def test_check_plan_asserts_tier_metrics(invoke, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "model: llama-3.1-70b\nsystem: hgx-h100-8\nengine: {name: vllm, tensor_parallel_size: 8}\n"
        f"workload: {{trace: {HEAD200}}}\n"
        "assertions:\n  - tier_hit_rate >= 0.05\n  - active_kv_fits_hbm: true\n  - tier_hit_rate_nvme <= 0\n")
    result = invoke("check", plan)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "PASS  tier_hit_rate >= 0.05" in result.stdout
    failing = tmp_path / "fail.yaml"
    failing.write_text(plan.read_text().replace("tier_hit_rate >= 0.05", "tier_hit_rate >= 0.5"))
    assert invoke("check", failing).exit_code == 1

"""The worked examples under docs/examples/ say what kvplan prints today.

Each case reads a page's headline figures from the page itself (a regular expression over its
text, so that the page is the expected value) and runs the smallest command that prints them
(the page's own command, in JSON, without the parts that do not change the figure: sensitivity
rows, charts, --explain). A figure compares at the precision the page writes it. A model change
that moves one of them fails here until the page is rerun (tests/cli/test_readme_examples.py does
the same for the README).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
MOONCAKE = "examples/traces/conversation_trace.jsonl"
AZURE_CONV = "examples/traces/AzureLLMInferenceTrace_conv.csv"


def _page(name: str) -> str:
    return " ".join((EXAMPLES / name).read_text(encoding="utf-8").split())


def _figures(name: str, pattern: str) -> tuple[str, ...]:
    """The groups of ``pattern`` (whitespace-insensitive) on page ``name``; fails if the page no longer says it."""
    match = re.search(pattern, _page(name))
    assert match, f"docs/examples/{name} no longer matches {pattern!r}: update this test with the page"
    return match.groups()


def _printed(value: float, page_figure: str, scale: float = 1.0) -> str:
    """``value × scale`` written at the page figure's decimals and thousands separators."""
    text = page_figure.replace(",", "")
    decimals = len(text.split(".")[1]) if "." in text else 0
    written = f"{value * scale:,.{decimals}f}" if "," in page_figure else f"{value * scale:.{decimals}f}"
    return written


def _same(value: float, page_figure: str, scale: float = 1.0) -> bool:
    return _printed(value, page_figure, scale) == page_figure


def _assert_pd_row(row: dict, xpyd: str, gpus: str, ttft: str, tpot: str, pct: str, ttft_scale: float) -> None:
    """A pd row's xPyD (or N × TPk), GPUs and TTFT / TPOT at percentile ``pct`` as the page writes them (TTFT × ttft_scale,
    TPOT in ms)."""
    assert (row["xpyd"], row["total_gpus"]) == (xpyd.replace(" × ", "×"), int(gpus)), row["mode"]
    assert _same(row[f"ttft_{pct}_s"], ttft, ttft_scale) and _same(row[f"tpot_{pct}_s"], tpot, 1e3), row["mode"]


def _json(invoke, monkeypatch, *args: str) -> list[dict]:
    monkeypatch.chdir(ROOT)
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


# --- Mooncake tiers: Llama-3.1-70B on HGX H100 nodes, 1 TB of DRAM per node -------------------------------

TIER = ("tier", "llama-3.1-70b", "--system", "hgx-h100-8", "--trace", MOONCAKE, "--dram-per-node", "1TB",
        "--ttft", "p99<=10s", "--perf-model", "roofline")


def test_mooncake_tier_page_fleet_binding_and_hit_rates(invoke, monkeypatch):
    page = "mooncake-tiers-llama70b.md"
    nodes, gpus, rho = _figures(page, r"so that is \*\*(\d+) nodes\*\* \((\d+) GPUs, ρ = ([\d.]+) per instance\)")
    hbm_hit, = _figures(page, r"\| HBM \(H100, after weights[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([\d.]+)% \|")
    dram_hit, cumulative = _figures(page, r"\| host DDR5, 1 TB per node[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([\d.]+)% \| ([\d.]+)% \|")
    total, = _figures(page, r"\| \*\*total\*\* \|[^|]*\| \| \| \*\*([\d.]+)%\*\*")
    above, = _figures(page, rf"\| \*\*{nodes} nodes, 1 TB DRAM per node\*\* \(above\) \| \*\*([\d.]+)%\*\*")
    cached, = _figures(page, r"\(([\d.]+) on the \d+-node fleet above")

    monkeypatch.chdir(ROOT)
    result = invoke(*TIER, "--format", "json")
    assert result.exit_code == 0, result.stderr[-2000:]
    hbm, dram, _remote, summary = json.loads(result.stdout)
    assert (summary["nodes"], summary["gpus"], summary["instances"]) == (int(nodes), int(gpus), int(nodes))
    assert _same(summary["prefill_load_per_instance"], rho)
    assert "binding kv_capacity" in " ".join(result.stderr.split())
    assert _figures(page, r"At [\d.]+ req/s (KV capacity) binds")
    assert _same(hbm["hit_rate"], hbm_hit, 100) and _same(dram["hit_rate"], dram_hit, 100)
    for figure in (cumulative, total, above):
        assert _same(summary["hit_rate"], figure, 100)
    assert _same(summary["cached_prefix_fraction"], cached)


def test_mooncake_tier_page_variant_with_one_node_more(invoke, monkeypatch):
    page = "mooncake-tiers-llama70b.md"
    nodes, hit, p50_ms, p99_s, saved = _figures(
        page, r"\| (\d+) nodes \(`--nodes \1`\)[^|]*\| ([\d.]+)% \| ([\d.]+) ms / ([\d.]+) s \| ([\d.]+)% \|")
    summary = _json(invoke, monkeypatch, *TIER, "--nodes", nodes)[-1]
    assert summary["nodes"] == int(nodes)
    assert _same(summary["hit_rate"], hit, 100)
    assert _same(summary["ttft_saved_p50_s"], p50_ms, 1e3) and _same(summary["ttft_saved_p99_s"], p99_s)
    assert _same(summary["prefill_gpu_share_saved"], saved, 100)


def test_mooncake_tier_page_lru_curve(invoke, monkeypatch):
    page = "mooncake-tiers-llama70b.md"
    cells = _figures(page, r"\| prefix hit rate \(per block\) \|" + r" \**([\d.]+)%\** \|" * 8)
    rows = _json(invoke, monkeypatch, "workload", MOONCAKE, "--cache-tokens", "1M,2M,3M,5M,10M,20M,50M")
    lru = [r["lru_hit_rate"] for r in rows if r["kind"] == "lru"]
    assert [_printed(h, c, 100) for h, c in zip(lru, cells)] == list(cells[:7])
    assert _same(rows[0]["prefix_hit_rate_unlimited"], cells[7], 100)


# --- Mooncake PD: the recommendation table ------------------------------------------------------------------

def test_mooncake_pd_page_recommendation(invoke, monkeypatch):
    page = "mooncake-pd-llama70b.md"
    xpyd, gpus, ttft, tpot = _figures(
        page, r"\| \*\*disaggregated\*\* \| \*\*(\w+)\*\* \|[^|]*\|[^|]*\| \*\*(\d+)\*\* \| ([\d.]+) s \| ([\d.]+) ms \|")
    agg_xpyd, agg_gpus, agg_ttft, agg_tpot = _figures(
        page, r"\| aggregated \(chunked prefill[^|]*\| (\d+ × TP\d+) \| \| \| (\d+) \| ([\d.]+) s \| ([\d.]+) ms \|")
    disagg, agg = _json(invoke, monkeypatch, "pd", "llama-3.1-70b", "h100-sxm", "--system", "hgx-h100-8",
                        "--trace", MOONCAKE, "--ttft", "p99<=10s", "--tpot", "p99<=100ms", "--perf-model", "roofline",
                        "--no-sensitivity")
    _assert_pd_row(disagg, xpyd, gpus, ttft, tpot, "p99", 1.0)
    _assert_pd_row(agg, agg_xpyd, agg_gpus, agg_ttft, agg_tpot, "p99", 1.0)


# --- Azure conversation trace, Llama-3.1-8B on one H100 -----------------------------------------------------

def test_azure_conv_page_plan(invoke, monkeypatch):
    page = "azure-conv-llama8b.md"
    instances, = _figures(page, r"\| instances × GPUs each = GPUs \| (\d+) × 1 = \d+ \|")
    batch, = _figures(page, r"\| batch per instance \(max_num_seqs to set\) \| (\d+) \|")
    ttft = _figures(page, r"\| TTFT mean / p50 / p90 / p99 \| ([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+) ms \|")
    tpot = _figures(page, r"\| TPOT mean / p50 / p90 / p99 \| ([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+) ms \|")
    plan = _json(invoke, monkeypatch, "plan", "llama-3.1-8b", "h100-sxm", "--trace", AZURE_CONV,
                 "--ttft", "p99<=2s", "--tpot", "p90<=50ms")[0]
    assert (plan["instances"], plan["tp"], plan["batch_per_instance"]) == (int(instances), 1, int(batch))
    for stat, figure in zip(("mean", "p50", "p90", "p99"), ttft):
        assert _same(plan[f"ttft_{stat}_s"], figure, 1e3), (stat, plan[f"ttft_{stat}_s"], figure)
    for stat, figure in zip(("mean", "p50", "p90", "p99"), tpot):
        assert _same(plan[f"tpot_{stat}_s"], figure, 1e3), (stat, plan[f"tpot_{stat}_s"], figure)


# --- DistServe OPT-13B, calibrated to the paper's two measurements ------------------------------------------

def test_distserve_page_calibrated_plan(invoke, monkeypatch):
    page = "distserve-opt13b.md"
    xpyd, gpus, ttft, tpot = _figures(
        page, r"\| disaggregated \| \*\*(\w+)\*\* \| (\d+) \| \*\*[\d.]+\*\* \| ([\d.]+) ms \| ([\d.]+) ms \|")
    agg_xpyd, agg_gpus, agg_ttft, agg_tpot = _figures(
        page, r"\| aggregated, pd's own alternative \(TP searched\) \| (\d+ × TP\d+) \| (\d+) \| [\d.]+ \| ([\d.]+) ms \| ([\d.]+) ms \|")
    disagg, agg = _json(invoke, monkeypatch, "pd", "opt-13b", "a100-80gb", "--system", "hgx-a100-8", "--qps", "10",
                        "--isl", "512", "--osl", "64", "--ttft", "p90<=0.4s", "--tpot", "p90<=0.04s",
                        "--prefill-tp", "1", "--decode-tp", "1", "--eta-flops", "0.369", "--eta-mem", "0.485",
                        "--no-sensitivity")
    _assert_pd_row(disagg, xpyd, gpus, ttft, tpot, "p90", 1e3)
    assert disagg["binding_constraint"] == "prefill_utilization"
    _assert_pd_row(agg, agg_xpyd, agg_gpus, agg_ttft, agg_tpot, "p90", 1e3)


# --- DeepSeek-V3 day 6 on H800 ------------------------------------------------------------------------------

DAY6 = ("pd", "deepseek-v3", "h800", "--system", "hgx-h800-8", "--enable-expert-parallel", "--prefill-dp", "32",
        "--decode-dp", "144", "--ep-redundant-experts", "32", "--qps", "1605.5", "--isl", "4383", "--osl", "1211",
        "--cached-prefix-fraction", "0.563", "--kv-dtype", "fp8", "--tpot", "p50<=50ms", "--no-sensitivity",
        "--no-aggregated")


@pytest.mark.parametrize("column", [0, 1], ids=["serial", "two-batch-overlap"])
def test_deepseek_day6_page_table(invoke, monkeypatch, column):
    page = "deepseek-v3-day6.md"
    row = lambda label, cell: _figures(page, rf"\| {label} \| [^|]* \| {cell} \|[^|]*\| {cell} \|")  # noqa: E731
    xpyd = row("xPyD", r"(\w+)")
    prefill_nodes = row("prefill nodes", r"(\d+)")
    decode_nodes = row("decode nodes", r"(\d+)")
    tpot = row("TPOT p50", r"([\d.]+) ms")
    ttft = row("TTFT p99", r"([\d.]+) s")
    args = DAY6 + (("--two-batch-overlap",) if column else ())
    plan = _json(invoke, monkeypatch, *args)[0]
    assert plan["xpyd"] == xpyd[column]
    assert (plan["prefill_nodes"], plan["decode_nodes"]) == (int(prefill_nodes[column]), int(decode_nodes[column]))
    assert _same(plan["tpot_p50_s"], tpot[column], 1e3) and _same(plan["ttft_p99_s"], ttft[column])


# --- The online-chat seed: Llama-3.1-70B TP8 at 400 req/s ---------------------------------------------------

def test_seed_online_chat_page_plan(invoke, monkeypatch):
    page = "seed-online-chat.md"
    instances, gpus = _figures(page, r"\| instances × GPUs each = GPUs \| (\d+) × 8 = (\d+) \|")
    batch, = _figures(page, r"\| batch per instance \(max_num_seqs to set\) \| (\d+) \(the TPOT SLO's limit\) \|")
    ttft = _figures(page, r"\| TTFT mean / p50 / p90 / p99 \| ([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+) ms \|")
    tpot = _figures(page, r"\| TPOT mean / p50 / p90 / p99 \| ([\d.]+) / ([\d.]+) / ([\d.]+) / ([\d.]+) ms \|")
    needed, allowed = _figures(page, r"at (?:N − 1 = )?13 instances each would need a mean of (\d+) running sequences, "
                                     r"but the largest batch whose TPOT p90 meets 50 ms \([^)]*\) is (\d+)")
    plan = _json(invoke, monkeypatch, "plan", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--qps", "400", "--isl", "256",
                 "--osl", "512", "--ttft", "p99<=2s", "--tpot", "p90<=50ms", "--max-num-seqs", "1024")[0]
    assert (plan["instances"], plan["total_gpus"], plan["batch_per_instance"]) == (int(instances), int(gpus), int(batch))
    for stat, figure in zip(("mean", "p50", "p90", "p99"), ttft):
        assert _same(plan[f"ttft_{stat}_s"], figure, 1e3), (stat, plan[f"ttft_{stat}_s"], figure)
    for stat, figure in zip(("mean", "p50", "p90", "p99"), tpot):
        assert _same(plan[f"tpot_{stat}_s"], figure, 1e3), (stat, plan[f"tpot_{stat}_s"], figure)
    assert plan["binding_constraint"] == "tpot_slo"
    assert f"allows a batch of {allowed} per instance; the load needs a mean of {needed}" in plan["binding_detail"]


# --- Supernodes: DeepSeek-V3 on CloudMatrix-384, the page's first command -----------------------------------

def test_supernodes_page_cloudmatrix_rows(invoke, monkeypatch):
    page = "supernodes-wide-ep.md"
    wanted = {}
    for placement in ("one-domain", "partitions", "across-domains"):
        wanted[placement] = _figures(
            page, rf"\| deepseek-v3 \| cloudmatrix-384 \| DP32/DP64 \| {placement}(?: \*\*\(picked\)\*\*)? \| "
                  r"(\w+) \| (\d+) \| (\w+) \| (\d+) ms \| (\d+) ms \|")
    rows = _json(invoke, monkeypatch, "pd", "deepseek-v3", "cloudmatrix-384", "--enable-expert-parallel",
                 "--prefill-dp", "32", "--decode-dp", "64", "--qps", "200", "--isl", "4383", "--osl", "1211",
                 "--cached-prefix-fraction", "0.563", "--tpot", "p50<=50ms", "--weights-dtype", "bf16",
                 "--kv-dtype", "bf16", "--placements", "--no-aggregated", "--no-sensitivity", "--perf-model", "roofline")
    by_placement = {r["scenario"].removeprefix("placement: "): r for r in rows if r["scenario"].startswith("placement")}
    for placement, (xpyd, gpus, link, ttft_ms, tpot_ms) in wanted.items():
        row = by_placement[placement]
        assert (row["xpyd"], row["total_gpus"], row["link_kind"]) == (xpyd, int(gpus), link), placement
        assert _same(row["ttft_p99_s"], ttft_ms, 1e3) and _same(row["tpot_p50_s"], tpot_ms, 1e3), placement


def test_supernodes_page_gb200_decode_step(invoke, monkeypatch):
    """The per-operator paragraph's GB200 step at a batch of 8 over DP8 (B200's tables, SGLang's DeepGEMM rows for
    vLLM's fp8_block GEMMs) and its three largest terms, from the command the page names (its --explain)."""
    step, attn, mlp, experts = _figures(
        "supernodes-wide-ep.md", r"gives a (\d+\.\d) ms step \(63\.9 ms on the eager-timed rows\): attention "
                                 r"projections (\d+\.\d+) ms, dense-MLP and shared-expert GEMMs (\d+\.\d+) ms, routed "
                                 r"experts (\d+\.\d+) ms")
    args = ("latency", "deepseek-v3", "gb200", "--system", "gb200-nvl72", "--tp", "1", "--dp", "8",
            "--enable-expert-parallel", "--batch", "8", "--weights-dtype", "fp8")
    (row,) = _json(invoke, monkeypatch, *args)
    assert _same(row["decode_step_s"], step, 1e3), (row["decode_step_s"], step)
    explain = invoke(*args, "--explain")
    assert explain.exit_code == 0, explain.stderr[-2000:]
    for label, figure in (("attention GEMMs (QKV, O)", attn), ("dense MLP GEMMs", mlp), ("routed-expert GEMMs", experts)):
        assert re.search(rf"{re.escape(label)} += max\(.*\) = {re.escape(figure)} ms", explain.stdout), (label, figure)

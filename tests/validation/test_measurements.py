"""The published-measurement tables in tests/data/measurements: schema, provenance, and the figures
the issues quote, checked against the pages they were transcribed from (values typed by hand here)."""

from __future__ import annotations

import csv
import math

import pytest
import yaml

from kvplan.cards.loader import load_hardware, load_model, load_system

from ..conftest import DATA

MEASUREMENTS = DATA / "measurements"

COMMON = ["model", "gpu", "num_gpus", "tp", "weights_dtype", "isl", "osl", "metric", "value", "unit", "notes"]
REQUIRED = {
    "trtllm_perf_overview.csv": ["source_repo", "source_path", "source_version", "source_url", "pp", "ep",
                                 "attention_dp", "kv_dtype", "engine", "engine_version", *COMMON],
    "scoring_set.csv": ["group", "architecture", "phase", "source", "source_url", "source_locator", "engine",
                        "engine_version", "model_card", "hardware_card", "batch", "concurrency", "ep", "attention_dp",
                        "kv_dtype", *COMMON],
    "closed_loop.csv": ["source", "source_url", "source_locator", "engine", "engine_version", "engine_config", "client",
                        "model", "model_card", "gpu", "hardware_card", "num_gpus", "tp", "weights_dtype", "kv_dtype",
                        "isl", "osl", "concurrency", "ttft_mean_ms", "ttft_median_ms", "tpot_mean_ms", "itl_mean_ms",
                        "itl_median_ms", "output_tokens_per_s", "notes"],
}
# columns every row of a file fills with a positive integer, and ones that are positive when present
POSITIVE_INT = {"trtllm_perf_overview.csv": ("num_gpus", "tp", "isl", "osl"),
                "scoring_set.csv": (),
                "closed_loop.csv": ("num_gpus", "tp", "isl", "osl", "concurrency")}
OPTIONAL_POSITIVE_INT = ("num_gpus", "tp", "isl", "osl", "pp", "ep", "attention_dp", "concurrency", "num_requests",
                         "batch", "nodes")
CLOSED_LOOP_METRICS = ("ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_median_ms", "tpot_p99_ms",
                       "itl_mean_ms", "itl_median_ms", "itl_p99_ms", "output_tokens_per_s", "request_throughput_per_s")
SCORING_GROUPS = ("dense_decode_batch1", "dense_max_throughput", "moe", "prefill_ttft")


def _rows(name: str) -> list[dict]:
    with open(MEASUREMENTS / name, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_csv_has_the_required_columns_and_rows(name):
    with open(MEASUREMENTS / name, newline="") as fh:
        header = next(csv.reader(fh))
    missing = [c for c in REQUIRED[name] if c not in header]
    assert not missing, f"{name} lacks columns {missing}"
    assert len(header) == len(set(header))
    assert len(_rows(name)) >= 8


def _positive(text: str) -> bool:
    value = float(text)
    return math.isfinite(value) and value > 0


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_row_has_a_source_and_positive_figures(name):
    for i, row in enumerate(_rows(name), start=2):
        where = f"{name} line {i}"
        assert row["source_url"].startswith("https://"), f"{where}: no source URL"
        assert row["notes"].strip(), f"{where}: no notes"
        for col in POSITIVE_INT[name]:
            assert int(row[col]) > 0, f"{where}: {col}"
        for col in OPTIONAL_POSITIVE_INT:
            if row.get(col, "").strip():
                assert int(row[col]) > 0, f"{where}: {col}"
        if "value" in row:
            assert _positive(row["value"]), f"{where}: value {row['value']}"
            assert row["unit"].strip() and row["metric"].strip(), where
        else:
            present = [m for m in CLOSED_LOOP_METRICS if row[m].strip()]
            assert row["output_tokens_per_s"].strip() and present, where
            assert all(_positive(row[m]) for m in present), where


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_named_cards_exist(name):
    """A row that names a kvplan card names one that loads (the planners look them up by name)."""
    for row in _rows(name):
        if row.get("model_card"):
            load_model(row["model_card"])
        if row.get("hardware_card"):
            load_hardware(row["hardware_card"])


def test_trtllm_parallelism_is_consistent():
    for i, row in enumerate(_rows("trtllm_perf_overview.csv"), start=2):
        tp, pp = int(row["tp"]), int(row["pp"])
        assert int(row["num_gpus"]) == tp * pp, f"line {i}"
        label = row["parallelism_label"]
        if label.startswith("DEP"):   # attention data-parallel + expert-parallel over the TP ranks
            assert int(row["ep"]) == int(row["attention_dp"]) == tp, f"line {i}"
        else:
            assert row["ep"] == row["attention_dp"] == "", f"line {i}"
        assert row["metric"] == "output_tokens_per_s_per_gpu" and row["unit"] == "tokens/s/GPU"
        assert row["weights_dtype"] in ("fp8", "fp4")


def _one(rows, **match):
    found = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
    assert len(found) == 1, (match, len(found))
    return found[0]


def test_trtllm_worked_rows_match_the_page():
    """The three fitting-set worked examples of the performance-model issue, as the page prints them
    (docs/source/developer-guide/perf-overview.md at commit 585c756)."""
    rows = [r for r in _rows("trtllm_perf_overview.csv") if "585c756" in r["source_version"]]
    dsr1 = _one(rows, model="DeepSeek-R1-0528", hardware_card="h200", isl=1024, osl=1024)
    assert (int(dsr1["value"]), dsr1["num_gpus"], dsr1["ep"], dsr1["kv_dtype"]) == (1620, "8", "8", "fp8")
    llama = _one(rows, model="Llama-3.3-70B-Instruct", hardware_card="h100-sxm", isl=1000, osl=1000)
    assert (int(llama["value"]), llama["tp"], llama["weights_dtype"]) == (2209, "2", "fp8")
    qwen = _one(rows, model="Qwen3-235B-A22B", hardware_card="h200", isl=1000, osl=1000)
    assert (int(qwen["value"]), qwen["ep"], qwen["attention_dp"]) == (3288, "4", "4")
    newest = [r for r in _rows("trtllm_perf_overview.csv") if r["engine_version"] == "1.2.0"]
    assert int(_one(newest, model="DeepSeek-R1-0528", hardware_card="h200", isl=1024, osl=1024)["value"]) == 1724


def test_scoring_set_groups_are_the_four_and_hold_eight_rows_each():
    rows = _rows("scoring_set.csv")
    groups = {r["group"] for r in rows}
    assert set(SCORING_GROUPS) <= groups <= {*SCORING_GROUPS, "dense_decode_batched"}
    for group in SCORING_GROUPS:
        assert sum(r["group"] == group for r in rows) >= 8, group
    for r in rows:
        assert r["architecture"] in ("dense", "moe")
        assert (r["group"] == "prefill_ttft") == (r["phase"] == "prefill"), r["source_locator"]
        assert (r["group"] == "moe") <= (r["architecture"] == "moe")
        # the fitting set never scores: no row comes from TensorRT-LLM's perf-overview / performance.md tables
        assert "perf-overview" not in r["source"] + r["source_url"] and "performance.md" not in r["source_url"]


def test_scoring_rows_match_their_sources():
    """A few figures typed by hand from the pages (vLLM FP8-KV blog, gpt-fast README, LMSYS, ROCm README)."""
    rows = _rows("scoring_set.csv")

    def value(**match):
        found = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
        assert len(found) == 1, match
        return float(found[0]["value"])

    assert value(hardware_card="b200", model_card="llama-3.1-8b", kv_dtype="bf16", metric="itl_fit_slope_ms_per_context_token") == 1.80e-05
    assert value(hardware_card="h100-sxm", model_card="llama-3.1-8b", kv_dtype="fp8", metric="itl_fit_intercept_ms") == 6.58
    assert value(model_card="llama-2-70b", tp=8, metric="output_tokens_per_s_per_user") == 62.50
    assert value(model_card="deepseek-v3", hardware_card="h100-sxm", phase="decode") == 22282
    assert value(hardware_card="mi300x", model_card="llama-3.1-405b", batch=128, isl=2048, metric="e2e_latency_s") == 125.471
    # TensorRT-LLM DeepSeek-R1 best-practice blog, "H200 max-throughput": Per GPU Output Throughput 1436.1584
    assert value(hardware_card="h200", model_card="deepseek-v3", metric="output_tokens_per_s_per_gpu") == 1436.1584
    # vLLM FP8-KV post, H100 gpt-oss-20b: "intercepts remain tightly clustered between 4.03 and 4.07 ms" (midpoint)
    assert value(hardware_card="h100-sxm", model_card="gpt-oss-20b", kv_dtype="bf16", metric="itl_fit_intercept_ms") == 4.05
    # GPUStack Qwen3-8B latency page, baseline vLLM '# BS=1': 'Mean TPOT (ms): 7.28', 'Mean TTFT (ms): 59.01' over
    # 'Total input tokens: 23260' / 'Total generated tokens: 22061' of 100 requests (mean lengths 232.6 / 220.6)
    assert value(model_card="qwen3-8b", metric="tpot_ms") == 7.28 and value(model_card="qwen3-8b", metric="ttft_ms") == 59.01
    gp = [r for r in rows if r["model_card"] == "qwen3-8b" and "GPUStack" in r["source"]]
    # SGLang cookbook (sgl-project/sgl-cookbook 7b5bd9c), DeepSeek-R1 on 8×B200, Chat 1K/1K low concurrency:
    # 'Mean TPOT (ms): 9.16', 'Mean TTFT (ms): 153.00', 'Total input tokens: 6101', 'Total generated tokens: 4210'
    # of 'Successful requests: 10'; GPT-OSS-120b latency-sensitive run: 'Mean TTFT (ms): 33.71' over 100 requests
    cb = [r for r in rows if "sgl-cookbook" in r["source"] and r["model_card"] == "deepseek-v3"
          and r["hardware_card"] == "b200" and r["isl"] == "610" and r["osl"] == "421"]
    assert {(r["metric"], float(r["value"])) for r in cb} == {("tpot_ms", 9.16), ("ttft_ms", 153.0)}
    assert str(round(6101 / 10)) == "610" and str(round(4210 / 10)) == "421"
    assert value(model_card="gpt-oss-120b", hardware_card="b200", metric="ttft_ms") == 33.71
    assert {(r["isl"], r["osl"], r["concurrency"]) for r in gp} == {(str(round(23260 / 100)), str(round(22061 / 100)), "1")}


def test_closed_loop_rows_obey_littles_law():
    """Closed loop: throughput = concurrency x OSL / (TTFT + (OSL - 1) x TPOT) for every published run (means where
    published, else medians; ±15% length spread in the vLLM rows). A mistyped digit breaks it."""
    for i, r in enumerate(_rows("closed_loop.csv"), start=2):
        if r["burst"]:
            continue  # no request is replaced: the next test checks those
        ttft_s = float(r["ttft_mean_ms"] or r["ttft_median_ms"]) / 1e3
        step_s = float(r["tpot_mean_ms"] or r["itl_mean_ms"] or r["itl_median_ms"]) / 1e3
        osl, c = int(r["osl"]), int(r["concurrency"])
        little = c * osl / (ttft_s + (osl - 1) * step_s)
        assert 0.95 <= little / float(r["output_tokens_per_s"]) <= 1.25, f"closed_loop.csv line {i}"


def test_closed_loop_burst_rows_add_up():
    """Bursts (all N requests sent at once, C = N): output tokens/s over requests/s is the mean output length (the
    printed totals / N, OSL or a little under it where a request stopped early), and no request can finish before
    its own prefill and OSL − 1 decode steps: duration = N / request rate >= median TTFT + (OSL − 1) × median TPOT."""
    bursts = [r for r in _rows("closed_loop.csv") if r["burst"]]
    assert len(bursts) >= 8
    for r in bursts:
        assert r["burst"] == "yes" and r["concurrency"] == r["num_requests"]
        # requests/s is printed to two decimals (0.48 for 100 requests in 206.90 s): 2% slack
        mean_osl = float(r["output_tokens_per_s"]) / float(r["request_throughput_per_s"])
        assert 0.97 * int(r["osl"]) <= mean_osl <= 1.02 * int(r["osl"]), r["source_locator"]
        duration_s = int(r["num_requests"]) / float(r["request_throughput_per_s"])
        floor_s = (float(r["ttft_median_ms"]) + (int(r["osl"]) - 1) * float(r["tpot_median_ms"])) / 1e3
        assert 1.02 * duration_s >= floor_s, r["source_locator"]


def test_closed_loop_worked_rows():
    rows = _rows("closed_loop.csv")
    nim = _one(rows, engine_version="1.8.0", concurrency=1, isl=5000)
    assert (float(nim["ttft_mean_ms"]), float(nim["itl_mean_ms"]), float(nim["output_tokens_per_s"])) == (406.77, 18.58, 51.67)
    # the same page, table '500 Input Tokens / 2000 Output Tokens', concurrency 1: '| 1 | 47.77 | 18.91 | 52.85 |'
    nim = _one(rows, engine_version="1.8.0", concurrency=1, isl=500)
    assert (float(nim["ttft_mean_ms"]), float(nim["itl_mean_ms"]), float(nim["output_tokens_per_s"])) == (47.77, 18.91, 52.85)
    assert nim["osl"] == "2000" and (nim["tp"], nim["num_gpus"], nim["weights_dtype"], nim["kv_dtype"]) == ("2", "2", "fp8", "")
    # every NIM row names its table; the page's nine rows transcribed so far: 5000/500 at C = 1 ... 250, 500/2000 at C = 1
    tables = sorted((r["isl"], r["osl"], int(r["concurrency"])) for r in rows if r["engine"].startswith("nvidia-nim"))
    assert tables == [("500", "2000", 1)] + [("5000", "500", c) for c in (1, 5, 25, 50, 100, 150, 200, 250)]
    assert all(r["source_locator"] == f"table '{r['isl']} Input Tokens / {r['osl']} Output Tokens', C = {r['concurrency']}"
               for r in rows if r["engine"].startswith("nvidia-nim"))
    h200 = _one(rows, hardware_card="h200", engine="vllm", concurrency=4, osl=800)
    assert float(h200["tpot_mean_ms"]) == 25.72997376 and int(h200["isl"]) == 3200


def test_deepep_h800_figures_stay_under_the_links_of_the_h800_cards():
    """DeepEP's measured bandwidths on H800 + CX7 400 Gb/s: RDMA at or below the NIC's 50 GB/s, NVLink at or below the
    160 GB/s DeepSeek quotes as the achievable NVLink rate (the hgx-h800-8 card's 200 GB/s x 0.8)."""
    node = load_system("hgx-h800-8")
    rows = list(csv.DictReader(open(MEASUREMENTS / "deepep_h800.csv", newline="")))
    assert len(rows) == 32 and all(r["source_url"].startswith("https://github.com/deepseek-ai/DeepEP/") for r in rows)
    for r in rows:
        assert _positive(r["value"]) and int(r["ep_size"]) >= 8
        if r["metric"] == "bottleneck_bandwidth_nvlink_GB_per_s":
            assert float(r["value"]) * 1e9 <= node.scale_up.bandwidth_bytes_per_s * node.scale_up.efficiency
        elif r["metric"].startswith(("bottleneck_bandwidth_rdma", "rdma_bandwidth")):
            assert float(r["value"]) * 1e9 <= node.nic.bandwidth_bytes_per_s * node.nic.count
    latency = {(r["operation"], int(r["ep_size"])): float(r["value"]) for r in rows if r["metric"] == "latency_us"}
    assert latency[("dispatch", 8)] == 163 and latency[("combine", 256)] == 360


# --------------------------------------------------------------------------- DeepSeek day 6


def _day6():
    return yaml.safe_load((MEASUREMENTS / "deepseek_day6.yaml").read_text())


def test_day6_figures_are_quoted_with_their_source():
    d = _day6()
    assert d["source"]["repo"] == "deepseek-ai/open-infra-index" and len(d["source"]["commit"]) == 40
    for key, fig in d["figures"].items():
        assert fig["quote"].strip(), key
        if fig["value"] is not None:
            # every figure's digits appear in its quote (4,989 printed with a comma; 608B as 608B)
            assert any(s in fig["quote"] for s in _printed_forms(fig["value"])), key


def _printed_forms(value: float) -> list[str]:
    forms = [f"{value:g}", f"{value:,.0f}", f"{value:,.2f}"]
    for scale, suffix in ((1e9, "B"), (1e3, "k")):
        forms.append(f"{value / scale:g}{suffix}")
    if 0 < value < 1:
        forms.append(f"{value * 100:g}%")
    return forms


def test_day6_derived_isl_osl_and_node_counts_follow_the_published_totals():
    """Mean ISL/OSL from 608B in, 168B out and a mean KV length of 4,989 per output token (each request
    I in, O out: I/O = 608/168 and I + O/2 = 4989), and the node split from the per-node throughputs."""
    f = {k: v["value"] for k, v in _day6()["figures"].items()}
    d = {k: v["value"] for k, v in _day6()["derived"].items()}
    ratio = 608 / 168
    osl = 4989 / (ratio + 0.5)
    assert d["input_per_output_ratio"] == pytest.approx(ratio, abs=5e-5)
    assert d["mean_osl_tokens"] == pytest.approx(osl, abs=0.05) == pytest.approx(1211.2, abs=0.05)
    assert d["mean_isl_tokens"] == pytest.approx(ratio * osl, abs=0.05)
    assert d["mean_isl_tokens"] + d["mean_osl_tokens"] / 2 == pytest.approx(f["mean_kv_length_per_output_token"], abs=0.1)
    assert d["requests_per_s"] == pytest.approx(608e9 / 86400 / (ratio * osl), abs=0.05)
    assert d["prefill_nodes"] == pytest.approx(608e9 / 86400 / 73.7e3, abs=0.005)
    assert d["decode_nodes"] == pytest.approx(168e9 / 86400 / 14.8e3, abs=0.005)
    assert d["prefill_nodes"] + d["decode_nodes"] == pytest.approx(f["average_nodes"], rel=1e-3)
    assert f["average_nodes"] * f["gpus_per_node"] * f["gpu_cost_usd_per_hour"] * 24 == f["daily_cost_usd"]
    assert d["cache_hit_fraction_from_totals"] == pytest.approx(342 / 608, abs=5e-5)
    assert d["cache_hit_fraction_from_totals"] == pytest.approx(f["cache_hit_fraction"], abs=5e-4)
    revenue = 342e9 * 0.14e-6 + (608e9 - 342e9) * 0.55e-6 + 168e9 * 2.19e-6
    assert d["daily_revenue_check_usd"] == pytest.approx(revenue, abs=0.5)
    assert revenue == pytest.approx(f["daily_revenue_usd_if_r1_pricing"], rel=2e-4)


def test_deepseek_node_cards_carry_the_published_links():
    """hgx-h800-8: eight 400 Gb/s CX7 NICs per node (one per GPU) and NVLink 400 GB/s bidirectional."""
    node, gpu = load_system("hgx-h800-8"), load_hardware("h800")
    assert gpu.name == "h800-sxm" and node.accelerator == "h800-sxm"
    assert node.nic.bandwidth_bytes_per_s * node.nic.count * node.accelerators == pytest.approx(8 * 400e9 / 8)
    assert node.scale_up.bandwidth_bytes_per_s * 2 == pytest.approx(400e9)
    assert node.scale_up.bandwidth_bytes_per_s * node.scale_up.efficiency == pytest.approx(160e9)
    assert gpu.hbm_bandwidth_bytes_per_s == pytest.approx(3.35e12)

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
}
POSITIVE_INT = ("num_gpus", "tp", "isl", "osl")
OPTIONAL_POSITIVE_INT = ("pp", "ep", "attention_dp", "concurrency", "num_requests", "batch")


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


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_row_has_a_source_and_positive_figures(name):
    for i, row in enumerate(_rows(name), start=2):
        where = f"{name} line {i}"
        assert any(row.get(k, "").strip() for k in ("source_url", "source")), f"{where}: no source"
        for col in POSITIVE_INT:
            assert int(row[col]) > 0, f"{where}: {col}"
        for col in OPTIONAL_POSITIVE_INT:
            if row.get(col, "").strip():
                assert int(row[col]) > 0, f"{where}: {col}"
        value = float(row["value"])
        assert math.isfinite(value) and value > 0, f"{where}: value {row['value']}"
        assert row["unit"].strip() and row["metric"].strip() and row["notes"].strip(), where


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

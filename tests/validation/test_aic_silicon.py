"""NVIDIA aiconfigurator's measured serving runs (tests/data/measurements/aic_silicon.csv, scoring set): the file's
invariants, rows typed by hand from the source, and the closed loop's TPOT on a fixed sample of rows."""

from __future__ import annotations

import csv
import importlib.util
import re

import numpy as np
import pytest

from kvplan.cards.loader import load_hardware, load_model

from ..conftest import DATA, ROOT

FILE = DATA / "measurements" / "aic_silicon.csv"
COLUMNS = ["row_id", "provenance", "engine", "engine_version", "checkpoint", "model_card", "architecture", "system",
           "hardware_card", "tp", "pp", "attention_dp", "moe_tp", "moe_ep", "gemm_quant_mode", "moe_quant_mode", "isl",
           "osl", "batch_size", "concurrency", "ttft_ms", "tpot_ms"]


@pytest.fixture(scope="module")
def rows():
    with FILE.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_rows_are_unique_aggregated_single_instance_runs(rows):
    assert len(rows) == 2079 and len({r["row_id"] for r in rows}) == len(rows)
    # one measurement once: the source lists some runs two or three times (a database dump and dated result
    # files, DeepSeek-V3 and -R1 labels of one run), which would weigh them more in every median
    same = {(r["model_card"], r["engine"], r["engine_version"], r["system"], r["tp"], r["pp"], r["attention_dp"],
             r["moe_tp"], r["moe_ep"], r["batch_size"], r["gemm_quant_mode"], r["moe_quant_mode"], r["isl"], r["osl"],
             r["concurrency"], f"{float(r['ttft_ms']):.6g}", f"{float(r['tpot_ms']):.6g}") for r in rows}
    assert len(same) == len(rows)
    for r in rows:
        assert r["engine"] in ("vllm", "sglang", "trtllm") and r["architecture"] in ("dense", "moe")
        # the rule the extraction keeps: C requests in flight are one instance's batch on each attention-DP rank
        assert int(r["concurrency"]) == int(r["batch_size"]) * max(int(r["attention_dp"] or 1), 1), r["row_id"]
        assert int(r["isl"]) >= 1 and int(r["osl"]) >= 1 and float(r["ttft_ms"]) > 0 and float(r["tpot_ms"]) > 0
        assert not re.search(r"(?:^|[=;\s])/", r["provenance"]), r["row_id"]  # no absolute (local) paths


def test_named_cards_exist(rows):
    for name in {r["model_card"] for r in rows}:
        assert load_model(name).name == name
    for name in {r["hardware_card"] for r in rows}:
        assert load_hardware(name).name == name


@pytest.mark.parametrize("row_id, fields", [
    # typed from aic-core/src/aiconfigurator_core/systems/silicon_sample.csv at ai-dynamo/aiconfigurator 095f58a
    ("dsr1_h200_sglang_fp8_agg_1024x1024_c4_cfg81",
     dict(engine="sglang", engine_version="0.5.9", checkpoint="deepseek-ai/DeepSeek-V3", system="h200_sxm", tp="8",
          moe_tp="8", moe_ep="1", gemm_quant_mode="fp8", moe_quant_mode="fp8_block", isl="1024", osl="1024",
          concurrency="4", ttft_ms="259.9114292766899", tpot_ms="10.29225441516629")),
    ("qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c8_tp2_epnone_1",
     dict(engine="vllm", engine_version="0.12.0", checkpoint="Qwen/Qwen3-32B", system="h100_sxm", tp="2",
          gemm_quant_mode="", isl="1024", osl="128", concurrency="8", ttft_ms="154.2481599", tpot_ms="18.0370482875",
          provenance="source_file=Qwen_Qwen3-32B.csv; silicon_concurrency=8")),
])
def test_rows_match_the_source(rows, row_id, fields):
    row = next(r for r in rows if r["row_id"] == row_id)
    assert {k: row[k] for k in fields} == fields


def _scorer():
    spec = importlib.util.spec_from_file_location("score_aic_silicon", ROOT / "benchmarks" / "score_aic_silicon.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_closed_loop_tpot_on_every_fortieth_row_meets_the_closed_loop_target():
    # scoring set (nothing tuned on it): every 40th row, replayed as aiconfigurator's benchmark template runs it
    # (22 C requests, the first 2 C warm-up; benchmarks/score_aic_silicon.py). The closed-loop target is
    # a median |error| ≤ 20%; the bias is held within ±10% (an optimistic planner under-provisions).
    score = _scorer()
    errors = []
    for r in score.rows()[::40]:
        try:
            dep = score.deployment(r)
        except Exception as exc:  # a layout or figure kvplan lacks: not scored (the script lists them)
            assert "TP × EP" in str(exc) or "fp4" in str(exc) or "divisible" in str(exc), exc
            continue
        out = score.replay(r, dep)
        errors.append(out["tpot_mean_s"] * 1e3 / float(r["tpot_ms"]) - 1)
    e = np.asarray(errors)
    assert e.size >= 40
    assert np.median(np.abs(e)) <= 0.20 and abs(np.median(e)) <= 0.10, (np.median(np.abs(e)), np.median(e))

"""kvplan check / schema / report / sweep / fit --from-vllm through the CLI: exit codes, messages, files."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import xml.etree.ElementTree as ET

import pytest


from kvplan.plans.build import fit_from_names

from ..conftest import ROOT, json_rows

PLANS = ROOT / "examples" / "plans"
PASS, FAIL = PLANS / "llama70b-h100-pass.yaml", PLANS / "llama70b-h100-fail.yaml"
NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run(invoke):
    """invoke with the GitHub Actions variables unset, so local and CI runs print the same."""
    def _run(*args, env=None):
        return invoke(*args, env={**NO_CI, **(env or {})})
    return _run


# --------------------------------------------------------------------------- check


def test_check_passing_plan_exits_0(run):
    res = run("check", PASS)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == (f"{PASS}: llama-3.1-70b on h100-sxm: vllm tp=8 pp=1, max_model_len 131,072, KV fp8")
    assert "  PASS  max_concurrency_at_max_len >= 16  —  max_concurrency_at_max_len = 20.16; holds >= 16" in lines
    assert "  PASS  kv_fits == true  —  kv_fits = true; holds == true" in lines
    assert lines[-1] == "9 passed, 0 failed (9 assertions in 1 plan file)"
    assert "FAIL" not in res.stdout and "Traceback" not in res.stderr


def test_check_failing_plan_exits_1_with_value_limit_and_why(run):
    res = run("check", FAIL)
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert "  FAIL  max_concurrency_at_max_len >= 16  —  max_concurrency_at_max_len = 6.022; needs >= 16" in lines
    why = lines[lines.index("        why:") + 1:]
    # by hand: 0.9 × 85,520,809,984 B − weights 70,553,706,496 × 2 / 4 − activation 5,516,034,048 B (vLLM's sampler
    # transient, 10.5 × 1,024 × 128,256 × 4 at vLLM V1's default max_num_seqs 1,024 on an H100 — the plan file
    # sets none — above the forward's 1.1 × 8192 × (2·8192 + 3·28672/4) × 2 = 682,832,691 B)
    # − non-torch 3.58 GiB (tp > 1) = 32,331,846,287 B → 49,334 blocks of 16 × 40,960 B
    assert any("79.65 GiB × 0.9 − weights 32.85 GiB" in line and "49,334 blocks" in line for line in why)
    assert any("= 49,334 blocks × 655,360 B / 5,368,709,120 B per request = 6.022" in line for line in why)
    assert lines[-1] == "1 passed, 1 failed (2 assertions in 1 plan file)"


def test_check_several_files_and_json(run):
    res = run("check", PASS, FAIL, "--format", "json")
    assert res.exit_code == 1
    rows = json.loads(res.stdout)
    assert len(rows) == 11 and [r["status"] for r in rows].count("failed") == 1
    failed = next(r for r in rows if r["status"] == "failed")
    assert (failed["plan"], failed["value"], failed["limit"], failed["line"]) == (str(FAIL), 6.0222, 16, 19)


def test_junit_xml_for_ci(run, tmp_path):
    junit = tmp_path / "junit.xml"
    res = run("check", PASS, FAIL, "--junit", junit)
    assert res.exit_code == 1
    assert f"Wrote {junit}" in res.stderr
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("11", "1", "0")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(PASS), str(FAIL)]
    assert [len(s.findall("testcase")) for s in suites] == [9, 2]
    assert [s.get("failures") for s in suites] == ["0", "1"]
    failures = root.findall(".//failure")
    assert len(failures) == 1
    assert failures[0].get("message") == "max_concurrency_at_max_len = 6.022; needs >= 16"
    assert "max concurrency at 131,072 tokens" in failures[0].text
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]


def test_github_actions_annotations_and_summary(run, tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    res = run("check", PASS, FAIL, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert res.exit_code == 1
    annotations = [line for line in res.stderr.splitlines() if line.startswith("::")]
    assert annotations == [f"::error file={FAIL},line=19,title=kvplan check%3A max_concurrency_at_max_len >= 16::"
                           "max_concurrency_at_max_len = 6.022; needs >= 16"]
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ kvplan check: 10 passed, 1 failed")
    assert "| ❌ | `max_concurrency_at_max_len >= 16` |" in text and f"### `{FAIL}`" in text


def test_no_annotations_outside_github(run):
    assert "::error" not in run("check", FAIL).stderr


def _plan(tmp_path, body: str):
    path = tmp_path / "plan.yaml"
    path.write_text("model: llama-3.1-70b\nhardware: h100-sxm\n" + body)
    return path


@pytest.mark.parametrize(("body", "error", "hint"), [
    ("engine: {tensor_parallel: 4}\nworkloads: {qps: 1}\n",
     "unknown keys engine.tensor_parallel, workloads", "valid keys — top level: name, description, model"),
    ("assertions: [max_concurency >= 16]\n",
     "assertion 'max_concurency >= 16': unknown metric 'max_concurency'", "valid metrics: kv_cache_memory_bytes, "),
    ("assertions: ['ttft_s <= 2s']\n", "metric 'ttft_s' needs a workload", "add a workload section"),
    ("assertions: ['open(1) == 1']\n", "call is not allowed", "assertions use metric names"),
    ("engine: {tensor_parallel_size: 3}\nassertions: [kv_fits]\n", "tp=3 does not fit 8 KV heads", "valid tp values"),
])
def test_bad_plan_exits_2_and_writes_nothing(run, tmp_path, body, error, hint):
    plan = _plan(tmp_path, body)
    junit = tmp_path / "junit.xml"
    res = run("check", plan, "--junit", junit)
    assert res.exit_code == 2, res.stdout + res.stderr
    first, second = res.stderr.strip().splitlines()[:2]
    assert first.startswith(f"Error: {plan}: ") and error in first
    assert second.startswith("Hint: ") and hint in second
    assert res.stdout == "" and "Traceback" not in res.stderr
    assert not junit.exists() and [p.name for p in tmp_path.iterdir()] == ["plan.yaml"]


def test_unknown_metric_hint_lists_every_metric(run, tmp_path):
    from kvplan.plans.check.metrics import METRICS

    res = run("check", _plan(tmp_path, "assertions: [nope > 1]\n"))
    hint = res.stderr.strip().splitlines()[1]
    assert hint.removeprefix("Hint: valid metrics: ").split(", ") == list(METRICS)


def test_unwritable_junit_path(run, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("")
    res = run("check", PASS, "--junit", blocker / "junit.xml")
    assert res.exit_code == 2 and res.stderr.startswith("Error: cannot write")
    assert res.stdout == ""


def test_missing_plan_file(run):
    res = run("check", "nope.yaml")
    assert res.exit_code == 2 and res.stderr.startswith("Error: no plan file at 'nope.yaml'")


def test_schema_prints_the_plan_json_schema(run):
    res = run("schema")
    assert res.exit_code == 0
    schema = json.loads(res.stdout)
    assert schema["title"] == "kvplan plan file" and schema["additionalProperties"] is False
    assert "assertions" in schema["properties"]
    grid = json.loads(run("schema", "grid").stdout)
    assert {"models", "hardware", "seq", "batch", "kv_dtype", "tp", "pp", "engine"} <= set(grid["properties"])
    assert run("schema", "nope").exit_code == 2


# --------------------------------------------------------------------------- report


def test_report_for_llama70b_on_h100(run, tmp_path):
    import matplotlib.image

    out = tmp_path / "report"
    res = run("report", PASS, "--out", out)
    assert res.exit_code == 0, res.stderr
    assert res.stderr.startswith(f"Wrote {out}/report.md (4 charts, 5 tables")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["concurrency.csv", "concurrency.png", "fleet.csv", "kv_vs_context.csv", "kv_vs_context.png",
                     "latency_vs_batch.csv", "latency_vs_batch.png", "memory.csv", "memory.png", "report.md"]
    for png in out.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
        pixels = matplotlib.image.imread(png)
        assert pixels.shape[0] > 300 and pixels.shape[1] > 600
        assert pixels[..., :3].std() > 0.05  # lines and bars were drawn, not a blank canvas
    markdown = (out / "report.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", markdown)
    assert set(links) == set(names) - {"report.md"}
    for link in links:
        assert (out / link).is_file()
    assert markdown.index("## Charts") < markdown.index("## Tables") < markdown.index("## Assumptions")
    # tp 8: 0.9 × 85,520,809,984 − 17,638,426,624 − 1,379,008,512 − 3.58 GiB = 54,107,298,119.7 B → 165,122 blocks
    # of 16 × 20,480 B (max concurrency at 131,072 tokens 165,122 × 16 / 131,072 = 20.16)
    assert "**Fits.** 165,122 blocks" in markdown and "9 passed, 0 failed" in markdown
    with (out / "kv_vs_context.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["kv_dtype"] for r in rows} == {"bf16", "fp8", "int4", "fp4"}
    at_max = {r["kv_dtype"]: int(r["kv_bytes_per_sequence_per_gpu"]) for r in rows if r["context_tokens"] == "131072"}
    assert at_max["bf16"] == 2 * at_max["fp8"] == 2 * 2_684_354_560
    memory = {r["part"]: float(r["size_bytes"]) for r in csv.DictReader((out / "memory.csv").open())}
    assert memory["KV cache"] == fit_from_names("llama-3.1-70b", "h100-sxm", seq=[131072], kv_dtype=["fp8"], tp=[8],
                                                gpu_memory_utilization=0.9, max_num_seqs=256).rows[0]["kv_cache_memory_bytes"]
    assert sum(memory.values()) == pytest.approx(85520809984)
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging directory left behind


def test_report_refuses_existing_dir_then_force_replaces(run, tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "old.txt").write_text("old")
    res = run("report", FAIL, "--out", out)
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"Error: '{out}' already exists",
                                       "Hint: pass --force to replace it, or choose another --out"]
    assert (out / "old.txt").exists()
    res = run("report", FAIL, "--out", out, "--force")
    assert res.exit_code == 0, res.stderr
    assert not (out / "old.txt").exists() and (out / "report.md").exists()
    assert "**Fits.**" in (out / "report.md").read_text() and "1 failed" in (out / "report.md").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_report_unwritable_out_leaves_nothing(run, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("")
    res = run("report", PASS, "--out", blocker / "report")
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: cannot write '{blocker / 'report'}'")
    assert res.stderr.splitlines()[1].startswith("Hint: ")
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_report_of_a_bad_plan(run, tmp_path):
    out = tmp_path / "report"
    res = run("report", _plan(tmp_path, "engin: vllm\n"), "--out", out)
    assert res.exit_code == 2 and "unknown key engin" in res.stderr
    assert not out.exists()


# --------------------------------------------------------------------------- sweep


GRID = """\
models: [llama-3.1-70b, qwen3-32b]
hardware: [h100-sxm, h200]
seq: [8k, 32k, 128k]
batch: [1, 16, 64]
kv_dtype: [bf16, fp8]
tp: [2, 3, 8]
"""


def test_sweep_csv_rows_and_agreement_with_fit(run, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    out = tmp_path / "out.csv"
    res = run("sweep", grid, "-o", out)
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(out.open()))
    # tp=3 is invalid for both (8 KV heads); qwen3-32b (40,960 tokens) drops 128k
    skipped = 2 * 2 * 1 * 3 * 3 * 2 + 2 * 2 * 2 * 1 * 3
    assert len(rows) == 2 * 2 * 3 * 3 * 2 * 3 - skipped
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Wrote {out}: {len(rows)} rows of 216 grid points ({skipped} skipped)")
    assert "Note: skipped 36 points: llama-3.1-70b: tp=3 does not fit 8 KV heads" in res.stderr
    for row in rows[::7]:
        cli = json_rows(run("fit", row["model"], row["hardware"], "--max-model-len", row["seq_len"], "--batch",
                            row["batch"], "--kv-dtype", row["kv_dtype"], "--tp", row["tp"], "--format", "json"))[0]
        for key in ("kv_bytes_per_sequence", "kv_bytes_total_per_gpu", "weights_bytes_per_gpu"):
            assert float(row[key]) == cli[key], key
        for key in ("kv_cache_memory_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency",
                    "max_context_at_batch"):
            if cli["kv_cache_memory_bytes"] > 0:
                assert float(row[key]) == cli[key], key
            else:  # no KV memory at all: the cache cells are empty, not negative
                assert row[key] == "", key
        assert row["fits"] == ("true" if cli["fits"] else "false")
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["grid.yaml", "out.csv"]


def test_sweep_to_stdout_and_strict(run, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    res = run("sweep", grid)
    assert res.exit_code == 0 and res.stdout.startswith("model,hardware,seq_len,batch,kv_dtype,tp,pp,engine,")
    res = run("sweep", grid, "--strict")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("Error: ") and ("tp=3" in res.stderr or "max context" in res.stderr)


@pytest.mark.parametrize(("name", "message"), [
    ("out.xlsx", "cannot tell the format of"),
    ("missing/out.csv", "no directory"),
])
def test_sweep_bad_output(run, tmp_path, name, message):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    res = run("sweep", grid, "-o", tmp_path / name)
    assert res.exit_code == 2 and message in res.stderr.splitlines()[0]
    assert [p.name for p in tmp_path.iterdir()] == ["grid.yaml"]


def test_sweep_parquet(run, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    out = tmp_path / "out.parquet"
    res = run("sweep", grid, "-o", out)
    if importlib.util.find_spec("pyarrow") is None:
        assert res.exit_code == 2
        assert res.stderr.splitlines() == [f"Error: writing '{out}' needs pyarrow, which is not installed",
                                           "Hint: pip install 'kvplan[parquet]', or write .csv"]
        assert not out.exists()
    else:
        import pandas as pd

        # 2 models × 2 hw × 3 seq × 3 batch × 2 dtypes × 3 tp = 216; tp=3 fits neither model (−72);
        # qwen3-32b stops at 40,960 tokens, so its 128k points go (−24): 120 rows
        assert res.exit_code == 0 and len(pd.read_parquet(out)) == 120


def test_sweep_bad_grid(run, tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-70b]\nhardware: [h100-sxm]\nsequence: [8k]\n")
    res = run("sweep", grid)
    assert res.exit_code == 2
    assert res.stderr.startswith(f"Error: {grid}: unknown key sequence")
    assert "seq" in res.stderr.splitlines()[1]


def test_example_grid_runs(run, tmp_path):
    res = run("sweep", ROOT / "examples" / "grids" / "long-context.yaml", "-o", tmp_path / "s.csv")
    assert res.exit_code == 0, res.stderr
    assert "900 rows of 1,080 grid points (180 skipped)" in res.stderr


# --------------------------------------------------------------------------- fit --from-vllm

SERVE = ("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve meta-llama/Llama-3.1-70B-Instruct \\\n"
         "    --tensor-parallel-size=4 --max-model-len 131072 --kv-cache-dtype fp8 \\\n"
         "    --gpu-memory-utilization 0.9 --block-size 16 --max-num-seqs 128 \\\n"
         "    --max-num-batched-tokens 8192 --enable-prefix-caching --port 8000 \\\n"
         "    --served-model-name llama70b --swap-space 16 --disable-log-requests")


def test_fit_from_vllm_equals_the_flags(run):
    res = run("fit", "--from-vllm", SERVE, "h100-sxm", "--format", "json")
    assert res.exit_code == 0, res.stderr
    row = json.loads(res.stdout)[0]
    lib = fit_from_names("llama-3.1-70b", "h100-sxm", seq=[131072], kv_dtype=["fp8"], tp=[4],
                         gpu_memory_utilization=0.9,
                         block_size=16, max_num_seqs=128, max_num_batched_tokens=8192).rows[0]
    assert row == json.loads(json.dumps(lib))
    # max_num_seqs 128: sampler 10.5 × 128 × 128,256 × 4 = 689,504,256 B (above the forward's 682,832,691 B);
    # 0.9 × 85,520,809,984 − 35,276,853,248 − 689,504,256 − 3.58 GiB = 37,158,375,751.7 B → 56,699 blocks of 655,360 B
    assert (row["model"], row["tp"], row["kv_dtype"], row["num_blocks"]) == ("llama-3.1-70b", 4, "fp8", 56699)
    assert "Note: ignored vLLM flags kvplan does not model: --swap-space 16" in res.stderr.splitlines()


def test_fit_from_vllm_short_forms_quantization_and_overrides(run):
    line = "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 2 -q fp8 --max-model-len 32K"
    row = json_rows(run("fit", "--hardware", "h100-sxm", "--from-vllm", line, "--format", "json"))[0]
    lib = fit_from_names("llama-3.1-70b", "h100-sxm", seq=[32768], tp=[2], weights_dtype="fp8").rows[0]
    assert row["weights_bytes_per_gpu"] == lib["weights_bytes_per_gpu"] == 70553706496 * 0 + lib["weights_bytes_per_gpu"]
    assert (row["tp"], row["seq_len"], row["num_blocks"]) == (2, 32768, lib["num_blocks"])
    res = run("fit", "--from-vllm", line, "h100-sxm", "--max-model-len", "8k", "--format", "json")
    assert json.loads(res.stdout)[0]["seq_len"] == 8192
    assert "Note: seq 8k given to kvplan overrides the vLLM line's 32768" in res.stderr


def test_fit_from_vllm_default_max_model_len_is_the_models(run):
    row = json_rows(run("fit", "--from-vllm", "vllm serve meta-llama/Llama-3.1-8B-Instruct", "h100-sxm",
                        "--format", "json"))[0]
    assert row["seq_len"] == 131072


@pytest.mark.parametrize(("args", "message"), [
    (["fit", "--from-vllm", "vllm serve llama-3.1-8b"], "needs the hardware"),
    (["fit", "llama-3.1-8b", "h100-sxm", "--from-vllm", "vllm serve llama-3.1-8b"], "give only HARDWARE"),
    (["fit", "--from-vllm", "vllm serve llama-3.1-8b", "h100-sxm", "--engine", "sglang"], "--engine sglang"),
    (["fit", "--from-vllm", "vllm serve meta-llama/Llama-9-1T", "h100-sxm"], "unknown model 'meta-llama/Llama-9-1T'"),
    (["fit", "--from-vllm", "docker run vllm/vllm-openai", "h100-sxm"], "no 'vllm serve'"),
    (["fit", "llama-3.1-8b"], "fit needs MODEL and HARDWARE"),
])
def test_fit_from_vllm_errors(run, args, message):
    res = run(*args)
    assert res.exit_code == 2, res.stdout + res.stderr
    assert res.stderr.startswith("Error: ") and message in res.stderr.splitlines()[0]
    assert res.stderr.splitlines()[1].startswith("Hint: ")


def test_check_json_equals_the_library(run):
    from kvplan.plans.check.run import check

    cli = json.loads(run("check", PASS, FAIL, "--format", "json").stdout)
    lib = check([PASS, FAIL]).to_result().rows
    assert cli == json.loads(json.dumps(lib))

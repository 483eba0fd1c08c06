"""Flags that read alike across commands (CLI tests with the exact commands).

- ``--perf-model`` is read in any case, as ``--engine`` is (``Roofline``, ``PER-OPERATOR``);
- ``pd --prefill-dp/--decode-dp`` above 1 on a dense model is refused as ``plan --dp`` is;
- ``--two-batch-overlap`` on a dense model is refused (SGLang implements it for MoE layers only);
- ``--sim-requests`` is bounded (the replay's time grows with it);
- a long note continues on indented lines of at most 300 characters, keeping every word.
"""

from __future__ import annotations

import json
import re

import pytest

from kvplan.cli.options import MAX_SIM_REQUESTS, NOTE_INDENT, NOTE_WIDTH, note_lines

from tests.hostile.harness import assert_refused, run_inprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None}


def _json(args):
    res = run_inprocess([*args, "--format", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout), res


@pytest.mark.parametrize("spelling, model", [("Roofline", "roofline"), ("ROOFLINE", "roofline"),
                                             ("PER-OPERATOR", "operators"), ("Operators", "operators"),
                                             ("per_operator", "operators")])
def test_perf_model_in_any_case_like_engine(spelling, model):
    rows, _ = _json(["latency", "llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "16", "--perf-model", spelling])
    assert {row["perf_model"] for row in rows} == {model}
    # the same answer as the canonical spelling
    canonical, _ = _json(["latency", "llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "16", "--perf-model", model])
    assert rows == canonical


def test_engine_and_perf_model_case_both_accepted_on_plan():
    rows, _ = _json(["plan", "llama-3.1-8b", "h100-sxm", "--tp", "1", "--qps", "1", "--isl", "1k", "--osl", "64",
                     "--engine", "vLLM", "--perf-model", "Roofline", "--sample", "2000"])
    assert rows[0]["engine"] == "vllm"


def test_unknown_perf_model_is_still_refused():
    res = run_inprocess(["latency", "llama-3.1-8b", "h100-sxm", "--perf-model", "Rooflin"], env=NO_CI)
    assert_refused(res)
    assert "--perf-model must be operators or roofline" in res.stderr and "Rooflin" in res.stderr


@pytest.mark.parametrize("flag, value", [("--prefill-dp", "2"), ("--decode-dp", "1,2"), ("--decode-dp", "8")])
def test_pd_dense_attention_dp_refused_like_plan(tmp_path, flag, value):
    out = tmp_path / "pd.json"
    res = run_inprocess(["pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "1k", "--osl", "100", flag, value,
                         "-o", out], env=NO_CI)
    assert_refused(res, outputs=[out])
    plan = run_inprocess(["plan", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "1k", "--osl", "100",
                          "--dp", "2"], env=NO_CI)
    assert_refused(plan)
    error = next(line for line in res.stderr.splitlines() if line.startswith("Error:"))
    plan_error = next(line for line in plan.stderr.splitlines() if line.startswith("Error:"))
    assert error == plan_error.replace("--dp", flag)
    assert "Hint: drop it: a dense model's data parallelism is independent instances, which pd counts" in res.stderr


def test_pd_dp1_on_dense_and_dp_on_moe_still_run():
    rows, _ = _json(["pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "1k", "--osl", "100", "--decode-dp", "1",
                     "--no-sensitivity", "--no-aggregated"])
    assert rows[0]["decode_dp"] == 1


@pytest.mark.parametrize("args", [
    ["pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "1k", "--osl", "100", "--two-batch-overlap"],
    ["latency", "llama-3.1-8b", "h100-sxm", "--two-batch-overlap"],
    ["latency", "llama-3.1-8b", "h100-sxm", "--two-batch-overlap", "--perf-model", "roofline"],
])
def test_two_batch_overlap_refused_on_dense_models(tmp_path, args):
    out = tmp_path / "out.json"
    res = run_inprocess([*args, "-o", out], env=NO_CI)
    assert_refused(res, outputs=[out])
    assert "--two-batch-overlap: llama-3.1-8b is a dense model" in res.stderr
    assert "Hint: drop --two-batch-overlap for dense models" in res.stderr


def test_two_batch_overlap_on_moe_still_runs():
    rows, res = _json(["latency", "mixtral-8x7b", "h100-sxm", "--isl", "1k", "--osl", "16", "--two-batch-overlap"])
    assert rows and "two-batch overlap" in res.stderr
    off, _ = _json(["latency", "mixtral-8x7b", "h100-sxm", "--isl", "1k", "--osl", "16", "--no-two-batch-overlap"])
    assert off and rows[0]["decode_step_s"] <= off[0]["decode_step_s"]


@pytest.mark.parametrize("value", [str(MAX_SIM_REQUESTS + 1), "1000000", "10000000"])
def test_sim_requests_bounded(tmp_path, value):
    out = tmp_path / "plan.json"
    res = run_inprocess(["plan", "llama-3.1-8b", "h100-sxm", "--qps", "5", "--isl", "1k", "--osl", "200", "--simulate",
                         "--sim-requests", value, "-o", out], env=NO_CI, timeout_s=10)
    assert_refused(res, outputs=[out])
    assert res.seconds < 10
    assert f"--sim-requests {value} is more than the 100,000 kvplan accepts" in res.stderr
    assert "0.13 ms a request" in res.stderr  # the measured cost, in the hint


LONG = ("step times: the per-operator model (--perf-model operators, the default; --perf-model roofline for one η "
        "pair): per-kernel tables (NVIDIA aiconfigurator, kvplan/data/perf) for h100-sxm, tp 8: attention GEMMs: "
        "aiconfigurator vllm 0.24.0 bf16 GEMM n=1536, k=7168; mlp GEMMs: aiconfigurator vllm 0.24.0 bf16 GEMM "
        "n=10240, k=8192; LM head: aiconfigurator vllm 0.24.0 bf16 GEMM n=10240, k=8192; decode attention: "
        "aiconfigurator vllm 0.24.0 decode attention, 8/1 heads of 128, KV bf16; vllm CUDA graphs: decode GEMMs run at "
        "the captured batch size at or above the batch per rank (vllm/config/vllm.py _set_cudagraph_sizes: [1, 2, 4] + "
        "range(8, 256, 8) + range(256, min(2 × max_num_seqs, 512) + 1, 16); larger batches run without a graph)")


@pytest.mark.parametrize("width", [NOTE_WIDTH, 120, 80])
def test_long_note_split_keeps_every_word(width):
    lines = note_lines(LONG, width)
    assert len(LONG) > NOTE_WIDTH and len(lines) > 1
    assert lines[0].startswith("Note: step times:") and all(line.startswith(NOTE_INDENT) for line in lines[1:])
    assert max(len(line) for line in lines) <= width
    assert " ".join(line.strip() for line in lines).split() == ("Note: " + LONG).split()
    if width == NOTE_WIDTH:  # clauses fit: a line ends only after a top-level "; " (never inside brackets)
        assert all(line.endswith(";") for line in lines[:-1])
        assert not any(line.endswith("the default;") for line in lines)


def test_short_note_is_one_line():
    assert note_lines("KV in bf16", 80) == ["Note: KV in bf16"]


def test_notes_printed_by_a_readme_command_stay_within_300_characters():
    res = run_inprocess(["latency", "deepseek-v3", "h200", "--dp", "8", "--enable-expert-parallel", "--isl", "1k",
                         "--osl", "1k", "--batch", "max", "--format", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if line.startswith(("Note:", NOTE_INDENT))]
    assert len(notes) > 10
    assert max(len(line) for line in notes) <= NOTE_WIDTH
    # the per-kernel table note (~560 characters in one line before) keeps its sources
    text = re.sub(r"\n  ", " ", res.stderr)
    assert "per-kernel tables (NVIDIA aiconfigurator, kvplan/data/perf) for h200, tp 1" in text
    assert "prefill attention: aiconfigurator vllm 0.14.0 prefill attention bf16, KV bf16" in text


def test_route_output_follows_the_extension(tmp_path):
    """kvplan route -o x.json wrote a box-drawn table (found by the fuzz): the extension names the format."""
    from tests.hostile.corpus import ROUTE_TRACE

    out = tmp_path / "route.json"
    res = run_inprocess(["route", ROUTE_TRACE, "--cache-tokens", "1M", "-o", out], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert rows[0]["kind"] == "route" and rows[0]["requests"] == 200
    md = tmp_path / "route.md"
    assert run_inprocess(["route", ROUTE_TRACE, "--cache-tokens", "1M", "-o", md], env=NO_CI).exit_code == 0
    assert md.read_text(encoding="utf-8").lstrip().startswith(("|", "#", "**"))


@pytest.mark.parametrize("flag, value", [("--eta-flops", "2e-320"), ("--eta-mem", "1e-300"), ("--eta-mem", "0.0009")])
def test_efficiency_below_a_thousandth_refused(flag, value):
    """--eta-flops 2e-320 (found by the fuzz) made every time infinite and TPOT NaN with exit 0."""
    res = run_inprocess(["latency", "llama-3.1-8b", "h100-sxm", flag, value], env=NO_CI)
    assert_refused(res)
    assert f"{flag} must be in [0.001, 1] (got {value if 'e' not in value else float(value)})" in res.stderr


def test_efficiency_of_a_thousandth_answers_finite():
    rows, _ = _json(["latency", "llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "16", "--eta-flops", "0.001",
                     "--eta-mem", "0.001"])
    assert all(0 < row["tpot_s"] < float("inf") for row in rows)

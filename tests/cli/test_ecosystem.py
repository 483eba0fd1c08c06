"""Habits users bring from vLLM and other CLIs: defaults, spellings, terminal width, version, completion."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..conftest import ROOT, TRACES_DIR, json_rows

TRACE = TRACES_DIR / "conversation_trace.jsonl"


# --- fit's default max_model_len is the model's own maximum, as in vLLM -------------------------

def test_fit_llama2_on_a100_defaults_to_the_models_context(invoke):
    result = invoke("fit", "llama-2-7b", "a100-80gb")
    assert result.exit_code == 0, result.stderr
    assert "Note: max_model_len 4,096: llama-2-7b's maximum context, vLLM's default" in result.stderr
    rows = json_rows(invoke("fit", "llama-2-7b", "a100-80gb", "--format", "json"))
    # Llama-2's config.json: max_position_embeddings 4096
    assert [r["seq_len"] for r in rows] == [4096]
    assert rows[0]["fits"] is True


def test_fit_default_context_is_each_models_own(invoke):
    rows = json_rows(invoke("fit", "llama-3.1-8b", "h100-sxm", "--format", "json"))
    assert rows[0]["seq_len"] == 131072  # Llama-3.1: max_position_embeddings 131072


def test_explicit_max_model_len_has_no_default_note(invoke):
    result = invoke("fit", "llama-2-7b", "a100-80gb", "--max-model-len", "2k")
    assert result.exit_code == 0
    assert "maximum context, vLLM's default" not in result.stderr


# --- vLLM spellings ------------------------------------------------------------------------------

@pytest.mark.parametrize("short", [["-tp", "8"], ["--tensor-parallel-size", "8"], ["--tp=8"]])
def test_vllm_tp_spellings(invoke, short):
    want = json_rows(invoke("size", "llama-3.1-70b", "--tp", "8", "--seq", "1k", "--format", "json"))
    got = json_rows(invoke("size", "llama-3.1-70b", *short, "--seq", "1k", "--format", "json"))
    assert got == want
    assert got[0]["tp"] == 8
    assert got[0]["kv_bytes_per_token_per_gpu"] == 80 * 2 * 1 * 128 * 2  # 80 layers, K+V, 8/8 KV heads, d=128, bf16


@pytest.mark.parametrize("spelling,canonical", [
    ("vLLM", "vllm"), ("VLLM", "vllm"), ("tensorrt-llm", "trtllm"), ("TensorRT-LLM", "trtllm"),
    ("trt-llm", "trtllm"), ("SGLang", "sglang"),
])
def test_engine_names_any_case_and_aliases(invoke, spelling, canonical):
    got = json_rows(invoke("size", "llama-3.1-8b", "--seq", "1000", "--engine", spelling, "--format", "json"))
    want = json_rows(invoke("size", "llama-3.1-8b", "--seq", "1000", "--engine", canonical, "--format", "json"))
    assert got == want
    assert got[0]["engine"] == canonical


def test_engine_alias_in_fit_and_latency(invoke):
    got = json_rows(invoke("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "8k", "--engine", "TRT-LLM",
                           "--format", "json"))
    assert got[0]["engine"] == "trtllm"
    assert got[0]["kv_cache_tokens"] % 32 == 0  # TensorRT-LLM's 32-token blocks
    result = invoke("latency", "llama-3.1-8b", "h100-sxm", "--engine", "vLLM", "--format", "json")
    assert result.exit_code == 0, result.stderr


def test_unknown_engine_still_refused_with_a_hint(invoke):
    result = invoke("size", "llama-3.1-8b", "--engine", "tgi")
    assert result.exit_code == 2
    assert "Error: unknown engine 'tgi'" in result.stderr
    assert "Hint: choose one of: vllm" in result.stderr


@pytest.mark.parametrize("flags,weights_dtype", [
    (["--quantization", "fp8"], "fp8"), (["-q", "awq"], "int4"), (["--quantization", "gptq"], "int4"),
    (["--quantization", "mxfp4"], "mxfp4"), (["--dtype", "float16"], "fp16"), (["--dtype", "half"], "fp16"),
    (["--dtype", "bfloat16", "--quantization", "fp8"], "fp8"),
])
def test_vllm_quantization_and_dtype_set_the_weights_dtype(invoke, flags, weights_dtype):
    base = ("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "8k", "--format", "json")
    got = json_rows(invoke(*base, *flags))
    want = json_rows(invoke(*base, "--weights-dtype", weights_dtype))
    assert got == want


def test_fp8_quantization_halves_the_linear_weights(invoke):
    base = ("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "8k", "--format", "json")
    bf16 = json_rows(invoke(*base))[0]["weights_bytes_per_gpu"]
    fp8 = json_rows(invoke(*base, "--quantization", "fp8"))[0]["weights_bytes_per_gpu"]
    # P parameters, E of them in embed_tokens + lm_head (2 × 128256 × 4096), which stay 16-bit:
    # bf16 = 2P, fp8 = (P − E) × 1 + E × 2 = bf16 / 2 + E (norms are ~0.0003% of P)
    embed = 2 * 128256 * 4096
    assert fp8 == pytest.approx(bf16 / 2 + embed, rel=1e-4)


def test_unknown_quantization_is_refused(invoke):
    result = invoke("fit", "llama-3.1-8b", "h100-sxm", "--quantization", "foo")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --quantization 'foo'")
    assert "\nHint: " in result.stderr


@pytest.mark.parametrize("vllm_value,kvplan_value", [("8G", "8GiB"), ("8g", "8GB"), ("1073741824", "1GiB")])
def test_kv_cache_memory_bytes_reads_like_vllm(invoke, vllm_value, kvplan_value):
    base = ("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "8k", "--format", "json")
    got = json_rows(invoke(*base, "--kv-cache-memory-bytes", vllm_value))
    want = json_rows(invoke(*base, "--kv-cache-memory", kvplan_value))
    assert got == want


def test_32k_is_32768_as_a_kvplan_flag_and_32000_in_a_vllm_line(invoke):
    flag = json_rows(invoke("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "32k", "--format", "json"))
    line = json_rows(invoke("fit", "--from-vllm", "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32k",
                            "h100-sxm", "--format", "json"))
    upper = json_rows(invoke("fit", "--from-vllm", "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32K",
                             "h100-sxm", "--format", "json"))
    assert flag[0]["seq_len"] == 32768
    assert line[0]["seq_len"] == 32000  # vllm/engine/arg_utils.py: human_readable_int('32k') = 32 × 10**3
    assert upper[0]["seq_len"] == 32768  # human_readable_int('32K') = 32 × 2**10


def test_the_k_difference_is_documented_beside_the_flag(invoke):
    for command in ("fit", "size"):
        text = " ".join(invoke(command, "--help", terminal_width=200).stdout.split())
        assert "k=1024 (32k = 32,768)" in text, command
        assert "32k = 32,000" in text, command
    readme = " ".join((ROOT / "README.md").read_text().replace("`", "").split())
    assert "32k = 32,000" in readme


def test_max_num_seqs_beyond_the_caches_concurrency_is_warned(invoke):
    base = ("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "128k", "--format", "json")
    result = invoke(*base, "--max-num-seqs", "512")
    concurrency = json_rows(result)[0]["max_concurrency"]
    assert 1 < concurrency < 512
    assert f"Note: --max-num-seqs 512 exceeds the cache's max concurrency {concurrency:.2f}" in result.stderr
    below = invoke(*base, "--max-num-seqs", "1")
    assert "exceeds the cache's max concurrency" not in below.stderr
    default = invoke(*base)
    assert "exceeds the cache's max concurrency" not in default.stderr


# --- terminal width -----------------------------------------------------------------------------

NARROW_COMMANDS = {
    "size": ["size", "llama-3.1-70b", "--seq", "4k,32k,128k", "--kv-dtype", "bf16,fp8", "--tp", "1,8"],
    "size-one-row": ["size", "llama-3.1-70b"],
    "fit": ["fit", "llama-3.1-70b", "h100-sxm", "--tp", "4,8", "--max-model-len", "8k,128k"],
    "latency": ["latency", "llama-3.1-8b", "h100-sxm", "--batch", "1,8,64"],
    "plan": ["plan", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--qps", "400", "--isl", "256", "--osl", "512",
             "--ttft", "p99<=2s", "--tpot", "p90<=50ms", "--max-num-seqs", "1024"],
    "pd": ["pd", "llama-3.1-70b", "h100-sxm", "--system", "hgx-h100-8", "--trace", str(TRACE),
           "--ttft", "p99<=10s", "--tpot", "p99<=100ms"],
    "tier": ["tier", "llama-3.1-70b", "--system", "hgx-h100-8", "--trace", str(TRACE), "--dram-per-node", "1TB"],
}


@pytest.mark.parametrize("name", list(NARROW_COMMANDS))
@pytest.mark.parametrize("columns", [80, 60])
def test_tables_follow_the_terminal_width(invoke, name, columns):
    result = invoke(*NARROW_COMMANDS[name], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) > 5
    assert max(len(line) for line in lines) <= columns, name


def test_wide_terminal_keeps_one_table(invoke):
    args = NARROW_COMMANDS["size"]
    wide = invoke(*args, env={"COLUMNS": "250"}).stdout
    assert "┃ seq len ┃" in wide  # the header row of one table: every column side by side
    assert len(wide.splitlines()) == 4 + 12 + 1  # title, top rule, header, rule, 12 rows, bottom rule
    narrow = invoke(*args, env={"COLUMNS": "80"}).stdout
    for value in ("131,072", "40.00 GiB", "5.00 GiB"):  # 128k × 320 KiB bf16, /8 at tp 8
        assert value in wide and value in narrow


def test_narrow_one_row_table_is_transposed_with_every_field(invoke):
    out = invoke("fit", "llama-3.1-8b", "h100-sxm", "--max-model-len", "8k", env={"COLUMNS": "80"}).stdout
    for field in ("seq len", "num blocks", "kv cache tokens", "max concurrency", "fits"):
        assert any(line.startswith(f"│ {field} ") for line in out.splitlines()), field


def test_table_written_to_a_file_is_not_folded(invoke, tmp_path):
    target = tmp_path / "size.txt"
    result = invoke(*NARROW_COMMANDS["size"], "-o", target, env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = target.read_text()
    assert "┃ seq len ┃" in text and max(len(line) for line in text.splitlines()) > 80


def _commands():
    from typer.main import get_command

    from kvplan.cli import app

    group = get_command(app)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from ((f"{name} {sub}".split(), c) for sub, c in command.commands.items())
        else:
            yield [name], command


def test_help_shows_whole_option_names_at_80_columns(invoke):
    count = 0
    for words, command in _commands():
        result = invoke(*words, "--help", terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0, words
        for param in command.params:
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("-"):
                    assert opt in result.stdout, f"{' '.join(words)}: {opt}"
                    count += 1
        assert max(len(line) for line in result.stdout.splitlines()) <= 80, words
    assert count > 100


# --- version and completion ---------------------------------------------------------------------

def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, cwd=ROOT)


def test_version():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    out = _run("--version")
    assert out.returncode == 0
    assert out.stdout == f"kvplan {version}\n"


def test_show_completion_prints_a_bash_script():
    # typer detects the shell from the process tree; its own switch makes SHELL an argument instead
    out = _run("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert out.returncode == 0, out.stderr
    assert "_kvplan_completion()" in out.stdout
    assert "_KVPLAN_COMPLETE=complete_bash" in out.stdout


@pytest.mark.parametrize("words,cword,expected", [
    ("kvplan fi", 1, {"fit"}),
    ("kvplan s", 1, {"size", "schema", "sweep"}),
    ("kvplan fit --max-mo", 2, {"--max-model-len"}),
    ("kvplan size --tensor", 2, {"--tensor-parallel-size"}),
])
def test_bash_completion_completes_commands_and_options(words, cword, expected):
    out = _run(env={"_KVPLAN_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == expected


# --- notes and verdicts once, --quiet ----------------------------------------------------------

PD = ("pd", "llama-3.1-70b", "h100-sxm", "--system", "hgx-h100-8", "--trace", str(TRACE),
      "--ttft", "p99<=10s", "--tpot", "p99<=100ms", "--no-sensitivity")


def _notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Note: ")]


def test_pd_prints_each_note_once_tagged_by_tp(invoke):
    result = invoke(*PD)
    assert result.exit_code == 0, result.stderr
    notes = _notes(result.stderr)
    # 25 since vLLM V1's device defaults (max_num_seqs 1,024 on an H100): the larger sampler transient leaves TP2 no
    # KV memory for Llama-3.1-70B, and the skipped shape is named once
    assert len(notes) == len(set(notes)) and len(notes) <= 25
    activation = [n for n in notes if "activation peak estimated" in n]
    assert len(activation) >= 2  # one per TP searched, each saying which
    assert all(n.startswith("Note: vllm tp=") for n in activation)
    assert len({n.split(":")[1] for n in activation}) == len(activation)
    assert not any("--max-num-seqs" in n for n in notes)  # the concurrency warning belongs to kvplan fit


def test_quiet_drops_the_notes_not_the_answer(invoke):
    loud = invoke(*PD, "--format", "json")
    quiet = invoke("--quiet", *PD, "--format", "json")
    assert quiet.exit_code == loud.exit_code == 0
    assert _notes(loud.stderr) and not _notes(quiet.stderr)
    assert quiet.stdout == loud.stdout
    again = invoke(*PD, "--format", "json")  # --quiet does not stick to the next command
    assert _notes(again.stderr) == _notes(loud.stderr)


def test_quiet_after_the_command_in_a_shell():
    loud = _run("fit", "llama-3.1-8b", "h100-sxm")
    quiet = _run("fit", "llama-3.1-8b", "h100-sxm", "--quiet")
    assert loud.returncode == quiet.returncode == 0
    assert "Note: " in loud.stderr and "Note: " not in quiet.stderr
    assert quiet.stdout == loud.stdout


def test_infeasible_pd_verdict_is_said_once(invoke):
    result = invoke("pd", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "32k", "--osl", "64",
                    "--ttft", "p99<=10ms", "--tpot", "p99<=100ms", "--no-sensitivity")
    assert result.exit_code == 1
    assert "Verdict:" not in result.stdout
    both = result.stdout + result.stderr
    assert both.count("TTFT p99 ≤ 10.00 ms is unattainable") == 1
    assert result.stderr.count("Error: ") == 1 and "Hint: " in result.stderr


def test_check_explains_a_shared_cause_once(invoke, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text((ROOT / "examples" / "plans" / "llama70b-h100-fail.yaml").read_text()
                    + "  - max_concurrency_at_max_len >= 12\n  - max_concurrency_at_max_len >= 20\n")
    result = invoke("check", plan)
    assert result.exit_code == 1
    out = result.stdout
    assert out.count("  FAIL  ") == 3
    assert out.count("        why:\n") == 1 and out.count("why: the same as above") == 2
    assert out.count("max concurrency at 131,072 tokens = 49,334 blocks") == 1


# --- Hugging Face: quantization_config, model directories, quantised repo ids ---------------------

import json as _json  # noqa: E402

from ..conftest import DATA  # noqa: E402

LLAMA8B_CONFIG = _json.loads((DATA / "hf_configs" / "llama-3.1-8b.json").read_text())
FIT = ("--max-model-len", "8k", "--format", "json")


def _model_dir(tmp_path, name: str, quantization: dict | None):
    directory = tmp_path / name
    directory.mkdir()
    config = dict(LLAMA8B_CONFIG)
    if quantization is not None:
        config["quantization_config"] = quantization
    (directory / "config.json").write_text(_json.dumps(config))
    return directory


def test_fp8_quantization_config_model_directory_fits_as_fp8_weights(invoke, tmp_path):
    plain = _model_dir(tmp_path, "Llama-3.1-8B-Instruct", None)
    fp8 = _model_dir(tmp_path, "Llama-3.1-8B-Instruct-FP8",
                     {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"})
    base = json_rows(invoke("fit", plain, "h100-sxm", *FIT))[0]
    result = invoke("fit", fp8, "h100-sxm", *FIT)
    row = json_rows(result)[0]
    assert row["model"] == "llama-3.1-8b-instruct-fp8"  # the directory's name
    embed = 2 * 128256 * 4096  # embed_tokens + lm_head stay 16-bit
    assert row["weights_bytes_per_gpu"] == pytest.approx(base["weights_bytes_per_gpu"] / 2 + embed, rel=1e-4)
    assert row["weights_bytes_per_gpu"] == json_rows(invoke("fit", plain, "h100-sxm", *FIT, "--weights-dtype", "fp8"))[0][
        "weights_bytes_per_gpu"]
    assert "weights sized as fp8 (quantization_config quant_method fp8)" in result.stderr
    assert row["kv_cache_memory_bytes"] > base["kv_cache_memory_bytes"]  # smaller weights leave more KV


@pytest.mark.parametrize("quantization,weights_dtype", [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}, "int4"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "int4"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "int8"),
    ({"quant_method": "mxfp4"}, "mxfp4"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}, "targets": ["Linear"]}}}, "fp8"),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128}, "targets": ["Linear"]}}}, "int4"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
])
def test_quantization_configs_size_their_weights(invoke, tmp_path, quantization, weights_dtype):
    quantised = _model_dir(tmp_path, "q", quantization)
    plain = _model_dir(tmp_path, "p", None)
    got = json_rows(invoke("fit", quantised / "config.json", "h100-sxm", *FIT))[0]
    want = json_rows(invoke("fit", plain, "h100-sxm", *FIT, "--weights-dtype", weights_dtype))[0]
    assert got["weights_bytes_per_gpu"] == want["weights_bytes_per_gpu"]
    assert got["weights_bytes_per_gpu"] < json_rows(invoke("fit", plain, "h100-sxm", *FIT))[0]["weights_bytes_per_gpu"]


def test_unknown_quantization_method_says_so(invoke, tmp_path):
    odd = _model_dir(tmp_path, "odd", {"quant_method": "eetq"})
    result = invoke("fit", odd, "h100-sxm", *FIT)
    assert result.exit_code == 0
    assert "quant_method eetq: not known to kvplan; weights sized as the checkpoint's bf16" in result.stderr


def test_directory_without_config_is_refused(invoke, tmp_path):
    result = invoke("size", tmp_path)
    assert result.exit_code == 2
    assert "is a directory without a config.json" in result.stderr and "Hint: " in result.stderr


@pytest.mark.parametrize("repo_id,weights_dtype", [
    ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "fp8"),
    ("meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic", "fp8"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "int4"),
    ("meta-llama/Llama-3.1-70B-Instruct-GPTQ-Int8", "int8"),
])
def test_quantised_repo_ids_resolve_to_the_base_card(invoke, repo_id, weights_dtype):
    result = invoke("fit", repo_id, "h100-sxm", "--tp", "4", *FIT)
    row = json_rows(result)[0]
    want = json_rows(invoke("fit", "llama-3.1-70b", "h100-sxm", "--tp", "4", *FIT, "--weights-dtype", weights_dtype))[0]
    assert row == want
    assert f"resolved to the llama-3.1-70b card with {weights_dtype} weights" in result.stderr
    size = invoke("size", repo_id, "--seq", "1k")
    assert size.exit_code == 0 and "resolved to the llama-3.1-70b card" in size.stderr


def test_dated_rereleases_and_unknown_bases_are_not_guessed(invoke):
    dated = invoke("size", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8")
    assert dated.exit_code == 2
    assert "Error: unknown model 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8'" in dated.stderr
    assert "dated re-release of qwen3-235b-a22b" in dated.stderr and "config.json" in dated.stderr
    unknown = invoke("size", "someone/Nonexistent-7B-AWQ")
    assert unknown.exit_code == 2 and "unknown model" in unknown.stderr


# --- every assumed memory term is a Note; logged figures replace them --------------------------

def test_every_assumed_vllm_memory_term_is_a_note(invoke):
    base = ("fit", "llama-3.1-70b", "h100-sxm", "--tp", "8", "--max-model-len", "8k", "--format", "json")
    assumed = invoke(*base).stderr
    for term in ("vllm tp=8: activation peak estimated at", "vllm tp=8: non-torch memory (NCCL, CUDA context) assumed 3.58 GiB",
                 "vllm: CUDA-graph memory assumed 0", "GPU memory 79.65 GiB from the h100-sxm card"):
        assert term in assumed, term
    assert "PR #10511" in assumed and "issue #12330" in assumed  # the public logs the ranges come from
    logged = invoke(*base, "--gpu-memory", "79.65GiB", "--activation-memory", "1.26GiB", "--non-torch-memory", "3.58GiB",
                    "--cudagraph-memory", "0.36GiB").stderr
    assert not any(word in logged for word in ("activation peak", "non-torch", "CUDA-graph", "GPU memory"))


# --- the design-review report opens with the fleet ---------------------------------------------

def test_report_opens_with_an_executive_summary_of_the_checked_fleet(invoke, tmp_path):
    plan = ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml"
    out = tmp_path / "report"
    result = invoke("report", plan, "--out", out)
    assert result.exit_code == 0, result.stderr
    text = (out / "report.md").read_text()
    lines = text.splitlines()
    assert lines[2] == "## Executive summary"
    summary = "\n".join(lines[3:10])
    from kvplan.plans.check import metrics as registry
    from kvplan.plans.check.planfile import load_plan

    planfile = load_plan(plan)  # the fleet kvplan check asserts on: the summary must be that one
    fleet = registry.evaluate(registry.PlanContext(planfile.plan, planfile.path.parent, ()))["aggregated"].values
    assert f"**{fleet['total_gpus']:,} GPUs**: {fleet['instances']} instance(s) × 8 GPUs of h100-sxm" in summary
    assert fleet["total_gpus"] == fleet["instances"] * 8
    assert f"max_num_seqs {fleet['batch_per_instance']:,} per instance" in summary
    assert "TTFT: p99 " in summary and "against the SLO p99<=2s (met)" in summary
    assert "TPOT: p99 " in summary and "against the SLO p99<=50ms (met)" in summary
    assert text.index("## Executive summary") < text.index("## Verdict")


def test_report_without_a_workload_has_no_fleet_summary(invoke, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: {name: vllm, max_model_len: 8k}\n"
                    "assertions:\n  - kv_fits: true\n")
    result = invoke("report", plan, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.stderr
    assert "## Executive summary" not in (tmp_path / "r" / "report.md").read_text()

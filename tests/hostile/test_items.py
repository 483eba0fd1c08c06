"""Each hostile-input item of the issue as a test with the exact command (or the exact file)."""

from __future__ import annotations

import json

import pytest

from .corpus import ROOT, billion_laughs
from .harness import assert_refused, run_inprocess, run_subprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None}


def kvplan(*args, env=None):
    return run_inprocess(args, env={**NO_CI, **(env or {})})


# --------------------------------------------------------------------------- units


def test_gpu_memory_without_a_unit_is_refused_with_did_you_mean():
    res = kvplan("fit", "llama-3.1-8b", "h100-sxm", "--gpu-memory", "80")
    assert_refused(res)
    assert res.stderr.splitlines()[0] == "Error: a byte size '80' has no unit"
    assert res.stderr.splitlines()[1].startswith("Hint: did you mean '80GiB' or '80GB'?")


def test_tpot_without_a_unit_is_refused_with_did_you_mean():
    res = kvplan("plan", "llama-3.1-8b", "h100-sxm", "--qps", "2", "--isl", "2k", "--osl", "256", "--tpot", "p99<=50")
    assert_refused(res)
    assert "'50' in 'p99<=50': it has no unit" in res.stderr.splitlines()[0]
    assert res.stderr.splitlines()[1].startswith("Hint: did you mean '50ms' or '50s'?")


def test_tokens_stay_unitless():
    res = kvplan("size", "llama-3.1-8b", "--seq", "128k", "--batch", "4", "--format", "json")
    assert res.exit_code == 0, res.stderr
    row = json.loads(res.stdout)[0]
    assert row["seq_len"] == 131_072 and row["batch"] == 4
    assert kvplan("size", "llama-3.1-8b", "--seq", "131072", "--format", "json").exit_code == 0


@pytest.mark.parametrize("args,needle", [
    (("fit", "llama-3.1-8b", "h100-sxm", "--gpu-memory", "0"), "--gpu-memory must be > 0"),
    (("fit", "llama-3.1-8b", "h100-sxm", "--max-num-seqs", "0"), "--max-num-seqs must be a positive integer"),
    (("fit", "llama-3.1-8b", "h100-sxm", "--max-num-seqs", "-5000"), "--max-num-seqs must be a positive integer"),
    (("fit", "llama-3.1-8b", "h100-sxm", "--max-num-batched-tokens", "-100000"), "--max-num-batched-tokens must be a positive integer"),
    (("size", "llama-3.1-8b", "--max-num-batched-tokens", "-100000"), "--max-num-batched-tokens must be a positive integer"),
    (("size", "llama-3.1-8b", "--kv-dtype", ","), "empty --kv-dtype"),
    (("size", "llama-3.1-8b", "--seq", "1e308"), "more than the 4,294,967,296 kvplan accepts"),
    (("workload", "--rate", "5", "--isl", "2k", "--osl", "256", "--seed", "-1"), "--seed must be >= 0"),
    (("workload", "--rate", "5", "--isl", "2k", "--osl", "256", "--turns", "1000000000"), "--turns 1000000000 is more than the 10,000 kvplan accepts"),
    (("workload", "--rate", "5", "--isl", "2k", "--osl", "256", "--bucket", "0s"), "rate bucket must be > 0 s"),
    (("latency", "llama-3.1-8b", "h100-sxm", "--spec-k", "100000000", "--spec-alpha", "0.7"), "--spec-k 100000000 is more than the 64 kvplan accepts"),
    (("pd", "llama-3.1-8b", "h100-sxm", "--qps", "2", "--isl", "2k", "--osl", "256", "--ttft", "p99<=2s",
      "--tpot", "p99<=50ms", "--prefill-instances", "1000000000"), "--prefill-instances 1000000000 is more than"),
])
def test_flag_values_out_of_range_exit_2_not_1(args, needle):
    res = kvplan(*args)
    assert_refused(res)
    assert needle in res.stderr.splitlines()[0]


# --------------------------------------------------------------------------- files


def test_billion_laughs_card_is_refused_without_expanding(tmp_path):
    card = tmp_path / "lol.yaml"
    card.write_text(billion_laughs(key="notes"), encoding="utf-8")
    res = run_subprocess(["size", card], env=NO_CI, timeout_s=30)
    assert_refused(res)
    assert "expands to more than 200,000 values" in res.stderr and len(res.stderr) < 1000


def test_billion_laughs_plan_and_grid_are_refused(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(billion_laughs(key="description") + "model: llama-3.1-8b\nhardware: h100-sxm\n", encoding="utf-8")
    grid = tmp_path / "grid.yaml"
    grid.write_text(billion_laughs(key="seq") + "models: [llama-3.1-8b]\nhardware: [h100-sxm]\n", encoding="utf-8")
    assert_refused(run_subprocess(["check", plan], env=NO_CI))
    assert_refused(run_subprocess(["sweep", grid, "-o", tmp_path / "x.csv"], env=NO_CI), outputs=[tmp_path / "x.csv"])


def test_dev_zero_as_a_trace_is_refused():
    res = run_subprocess(["workload", "/dev/zero", "--trace-format", "azure"], env=NO_CI, timeout_s=30)
    assert_refused(res)
    assert "not a regular file" in res.stderr


def test_one_bad_card_in_a_cards_dir_does_not_break_other_lookups(tmp_path):
    (tmp_path / "broken.yaml").write_bytes("name: x\n".encode("utf-16"))
    (tmp_path / "binary.yaml").write_bytes(b"\x00\xff" * 64)
    res = kvplan("size", "llama-3.1-8b", "--cards", tmp_path, "--format", "json")
    assert res.exit_code == 0, res.stderr
    bad = kvplan("size", "broken", "--cards", tmp_path)
    assert_refused(bad)
    assert "UTF-16" in bad.stderr


@pytest.mark.parametrize("text,needle", [
    ('{"num_hidden_layers": NaN}', "not a number kvplan accepts"),
    ('{"num_hidden_layers": Infinity}', "not a number kvplan accepts"),
    ('{"rope_theta": 1e999}', "overflows a float"),
    ('{"vocab_size": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
])
def test_config_json_numbers_are_finite_and_bounded(tmp_path, text, needle):
    config = tmp_path / "config.json"
    config.write_text(text, encoding="utf-8")
    res = kvplan("size", config)
    assert_refused(res)
    assert needle in res.stderr


def test_num_hidden_layers_10_to_the_12_is_refused_fast(tmp_path):
    card = yaml_card(tmp_path, count=10**12)
    res = run_subprocess(["size", card], env=NO_CI, timeout_s=30)
    assert_refused(res)
    assert "layer_groups.0.count" in res.stderr


def test_infinite_bandwidth_in_a_hardware_card_is_refused(tmp_path):
    text = (ROOT / "hardware_cards" / "h100-sxm.yaml").read_text(encoding="utf-8")
    import re

    text = re.sub(r"(?m)^hbm_bandwidth_bytes_per_s: .*$", "hbm_bandwidth_bytes_per_s: .inf", text)
    card = tmp_path / "hw.yaml"
    card.write_text(text, encoding="utf-8")
    res = kvplan("fit", "llama-3.1-8b", card, "--max-model-len", "8k")
    assert_refused(res)
    assert "hbm_bandwidth_bytes_per_s" in res.stderr and "finite" in res.stderr


@pytest.mark.parametrize("field,value", [("count", True), ("num_kv_heads", True), ("head_dim", False)])
def test_a_boolean_in_a_card_integer_field_is_refused_not_read_as_1(tmp_path, field, value):
    # YAML `count: true` is a Python bool, and bool is an int: a lax schema read it as 1 layer.
    card = yaml_card(tmp_path, **{field: value})
    res = kvplan("size", card, "--seq", "8k")
    assert_refused(res)
    first = res.stderr.splitlines()[0]
    assert f"layer_groups.0.{field}: {str(value).lower()} is a boolean, not a number" in first
    assert kvplan("cards", "validate", card).exit_code == 2


def test_a_boolean_in_a_hardware_card_number_is_refused(tmp_path):
    import re

    text = (ROOT / "hardware_cards" / "h100-sxm.yaml").read_text(encoding="utf-8")
    card = tmp_path / "hw.yaml"
    card.write_text(re.sub(r"(?m)^hbm_capacity_bytes: .*$", "hbm_capacity_bytes: true", text), encoding="utf-8")
    res = kvplan("fit", "llama-3.1-8b", card, "--max-model-len", "8k")
    assert_refused(res)
    assert "hbm_capacity_bytes: true is a boolean, not a number" in res.stderr.splitlines()[0]


@pytest.mark.parametrize("entry", ["mamba", "conv", "hybrid", "full_attn", 7])
def test_an_unknown_layer_types_entry_is_refused_naming_the_known_types(tmp_path, entry):
    # It used to be sized as full attention without a word (a Mamba layer has no per-token KV).
    config = json.loads((ROOT / "tests" / "data" / "hf_configs" / "gpt-oss-20b.json").read_text(encoding="utf-8"))
    config["layer_types"][3] = entry
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    for args in (("size", path), ("cards", "import", path, "-o", tmp_path / "card.yaml")):
        res = kvplan(*args)
        assert_refused(res)
        lines = res.stderr.splitlines()
        assert lines[0] == f"Error: config.json: layer_types holds {entry!r}, which kvplan cannot size"
        assert lines[1].startswith("Hint: known layer_types: full_attention, sliding_attention, chunked_attention, "
                                   "linear_attention, attention;")
    assert not (tmp_path / "card.yaml").exists()


def test_known_layer_types_still_import(tmp_path):
    # gpt-oss-20b alternates sliding_attention (window 128) and full_attention over 24 layers.
    res = kvplan("size", ROOT / "tests" / "data" / "hf_configs" / "gpt-oss-20b.json", "--seq", "8k", "--format", "json")
    assert res.exit_code == 0, res.stderr
    groups = {g["kind"]: g for g in __import__("yaml").safe_load(kvplan(
        "cards", "import", ROOT / "tests" / "data" / "hf_configs" / "gpt-oss-20b.json").stdout)["layer_groups"]}
    assert groups["sliding"]["count"] == 12 and groups["full"]["count"] == 12 and groups["sliding"]["window"] == 128


def yaml_card(tmp_path, **group):
    import yaml

    data = yaml.safe_load((ROOT / "model_cards" / "llama-3.1-8b.yaml").read_text(encoding="utf-8"))
    data.pop("field_sources", None)
    data["layer_groups"][0].update(group)
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_grid_seq_1e300_is_refused(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: [1e300]\nbatch: [1]\n", encoding="utf-8")
    res = run_subprocess(["sweep", grid, "-o", tmp_path / "out.csv"], env=NO_CI)
    assert_refused(res, outputs=[tmp_path / "out.csv"])


def test_grid_with_ten_billion_points_names_its_count(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: {start: 1, stop: 100000, num: 100000}\n"
                    "batch: {start: 1, stop: 100000, num: 100000}\n", encoding="utf-8")
    res = run_subprocess(["sweep", grid, "-o", tmp_path / "out.csv"], env=NO_CI)
    assert_refused(res, outputs=[tmp_path / "out.csv"])
    assert "the grid has 10,000,000,000 points" in res.stderr


def test_trace_input_length_2_to_the_62_is_refused(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": %d, "output_length": 10, "hash_ids": [1]}\n' % 2**62,
                     encoding="utf-8")
    res = kvplan("workload", trace)
    assert_refused(res)


@pytest.mark.parametrize("stamp", ["0001-01-01 00:00:00.000000", "9999-12-31 23:59:59.000000"])
def test_azure_timestamps_in_year_1_or_9999_are_read(tmp_path, stamp):
    trace = tmp_path / "azure.csv"
    trace.write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n{stamp},100,10\n{stamp[:-1]}5,200,20\n",
                     encoding="utf-8")
    res = kvplan("workload", trace, "--format", "json")
    assert res.exit_code == 0, res.stderr


def test_assertion_chains_and_huge_literals_are_refused(tmp_path):
    plan_text = (ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml").read_text(encoding="utf-8")
    head = plan_text[: plan_text.index("assertions:")]
    for assertion in ("kv_fits" + " + kv_fits" * 100_000 + " > 1", "gpus_per_instance <= " + "9" * 5000,
                      "(" * 10_000 + "kv_fits" + ")" * 10_000):
        plan = tmp_path / "plan.yaml"
        plan.write_text(head + "assertions:\n  - " + json.dumps(assertion) + "\n", encoding="utf-8")
        res = run_subprocess(["check", plan], env=NO_CI)
        assert_refused(res)


def test_a_300_character_model_name_is_unknown_not_a_crash():
    res = kvplan("size", "m" * 300)
    assert_refused(res)
    assert res.stderr.startswith("Error: unknown model 'mmmm") and "…" in res.stderr.splitlines()[0]


# --------------------------------------------------------------------------- GitHub Actions


def test_no_user_string_starts_a_workflow_command_under_github_actions(tmp_path):
    """User strings with newlines and '::' in every place a user string can go, under GITHUB_ACTIONS."""
    evil = "x\n::warning title=pwned::injected\n##[error]also"
    plan = tmp_path / "p\n::error::name.yaml"
    plan.write_text((ROOT / "examples" / "plans" / "llama70b-h100-fail.yaml").read_text(encoding="utf-8"),
                    encoding="utf-8")
    runs = [
        ("check", plan), ("size", evil), ("fit", "llama-3.1-8b", evil), ("size", "llama-3.1-8b", "--seq", evil),
        ("size", "llama-3.1-8b", "--kv-dtype", evil), ("workload", tmp_path / evil), ("sizee" + evil,),
        ("size", "llama-3.1-8b", "--" + evil), ("tier", "llama-3.1-8b", "--system", evil, "--qps", "1"),
        ("plan", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "2k", "--osl", "9", "--tpot", evil),
        ("size", "llama-3.1-8b", "-o", tmp_path / evil / "x.json"),
    ]
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    for args in runs:
        res = kvplan(*args, env=env)
        assert res.exit_code in (1, 2), (args, res.stderr)
        for line in (res.stdout + "\n" + res.stderr).splitlines():
            stripped = line.lstrip()
            if stripped.startswith("::"):
                assert stripped.startswith("::error file=") and "\n" not in stripped, (args, line)
                assert "%0A" in stripped or "pwned" not in stripped, (args, line)
            assert not stripped.startswith("##["), (args, line)

"""Plan files: schema, the assertion language, the metric registry, evaluation, check, vLLM lines."""

from __future__ import annotations

import math
import textwrap
import xml.etree.ElementTree as ET

import pytest

from kvplan.errors import InputError
from kvplan.plans.check import metrics as registry
from kvplan.plans.check.run import FAILED, PASSED, SKIPPED, check
from kvplan.plans.check.expr import evaluate, parse_assertion
from kvplan.plans.sizing.fit import Overrides
from kvplan.plans.check.planfile import Plan, load_plan, plan_json_schema
from kvplan.plans.sizing.vllm_cmdline import human_int, parse_vllm_serve
from kvplan.report.junit import github_annotations, junit_xml
from kvplan.plans.build import fit_from_names

from ..conftest import ROOT

PLANS = ROOT / "examples" / "plans"
PASS, FAIL = PLANS / "llama70b-h100-pass.yaml", PLANS / "llama70b-h100-fail.yaml"


def write(tmp_path, text: str, name: str = "plan.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASE = """\
model: llama-3.1-70b
hardware: h100-sxm
engine: {name: vllm, tensor_parallel_size: 4, max_model_len: 32k}
"""


# --------------------------------------------------------------------------- the assertion language


@pytest.mark.parametrize(("text", "values", "expected"), [
    ("max_concurrency >= 16", {"max_concurrency": 16.0}, True),
    ("max_concurrency >= 16", {"max_concurrency": 15.99}, False),
    ("prefill_gpus + decode_gpus <= 64", {"prefill_gpus": 24, "decode_gpus": 40}, True),
    ("prefill_gpus + decode_gpus <= 64", {"prefill_gpus": 24, "decode_gpus": 41}, False),
    ("kv_cache_memory_bytes >= 40GiB", {"kv_cache_memory_bytes": 40 * 2**30}, True),
    ("kv_cache_memory_bytes >= 40GB", {"kv_cache_memory_bytes": 39.9e9}, False),
    ("ttft_s <= 2s", {"ttft_s": 2.0}, True),
    ("tpot_s < 50ms", {"tpot_s": 0.05}, False),
    ("max_context_at_batch >= 128k", {"max_context_at_batch": 131072}, True),
    ("kv_fits == true", {"kv_fits": True}, True),
    ("kv_fits == false", {"kv_fits": True}, False),
    ("not kv_fits or num_blocks * 16 >= 1000", {"kv_fits": True, "num_blocks": 62}, False),
    ("1 <= tp_ok <= 8", {"tp_ok": 8}, True),
    ("-a / 2 > -1", {"a": 1}, True),
    ("weights_bytes_per_gpu / kv_cache_memory_bytes < 1", {"weights_bytes_per_gpu": 1, "kv_cache_memory_bytes": 0},
     False),
])
def test_expressions_evaluate(text, values, expected):
    assertion = parse_assertion(text)
    assert set(assertion.names) <= set(values)
    assert evaluate(assertion.tree, values) is expected


def test_mapping_form_is_equality():
    assertion = parse_assertion({"kv_fits": True})
    assert assertion.text == "kv_fits == true" and assertion.names == ("kv_fits",)
    assert parse_assertion({"num_blocks": 100}).text == "num_blocks == 100"


@pytest.mark.parametrize(("text", "what"), [
    ("__import__('os').system('true') == 0", "call"),
    ("kv_fits.__class__ == 1", "attribute"),
    ("blocks[0] > 1", "subscript"),
    ("model == 'llama'", "'llama'"),
    ("(lambda: 1)() == 1", "call"),
    ("num_blocks ** 2 > 1", "binop"),
    ("[x for x in y]", "listcomp"),
])
def test_anything_outside_the_whitelist_is_refused(text, what):
    with pytest.raises(InputError) as err:
        parse_assertion(text)
    assert what in err.value.message and "is not allowed" in err.value.message


@pytest.mark.parametrize("text", ["max_concurrency >=", "ttft_s <= 2parsecs", "a = 1"])
def test_malformed_assertions(text):
    with pytest.raises(InputError):
        parse_assertion(text)


def test_sides_give_value_and_limit():
    value, op, limit = parse_assertion("a + b <= 64").sides
    assert op == "<=" and evaluate(value, {"a": 1, "b": 2}) == 3 and evaluate(limit, {}) == 64


# --------------------------------------------------------------------------- the schema


def test_examples_load_with_line_numbers():
    plan = load_plan(PASS)
    assert plan.plan.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert plan.plan.engine.max_model_len == 131072 and plan.plan.engine.kv_cache_dtype == "fp8"
    lines = PASS.read_text().splitlines()
    for assertion in plan.assertions:
        assert assertion.line is not None
        assert lines[assertion.line - 1].strip().startswith("- ")
    assert [s.metric for s in plan.slos] == ["ttft_p99_s", "tpot_p99_s"]
    assert plan.slos[1].limit_s == pytest.approx(0.05)


def test_unknown_keys_are_named_with_the_valid_ones(tmp_path):
    path = write(tmp_path, """\
        model: llama-3.1-70b
        hardware: h100-sxm
        engine: {name: vllm, tensor_parallel: 4, max_model_lenn: 8k}
        workloads: {qps: 1}
        """)
    with pytest.raises(InputError) as err:
        load_plan(path)
    message = err.value.message
    assert message.startswith(f"{path}: unknown keys ")
    for key in ("engine.tensor_parallel", "engine.max_model_lenn", "workloads"):
        assert key in message
    assert "tensor_parallel_size" in err.value.hint and "workload" in err.value.hint


def test_unknown_metric_lists_the_valid_ones(tmp_path):
    path = write(tmp_path, BASE + "assertions:\n  - max_concurency >= 16\n")
    with pytest.raises(InputError) as err:
        load_plan(path)
    assert "unknown metric 'max_concurency'" in err.value.message
    assert "did you mean 'max_concurrency'" in err.value.message
    valid = err.value.hint.removeprefix("valid metrics: ").split(", ")
    assert set(valid) == set(registry.METRICS) and "max_concurrency_at_max_len" in valid


def test_latency_metric_without_workload_says_so(tmp_path):
    path = write(tmp_path, BASE + "assertions:\n  - ttft_s <= 2s\n")
    with pytest.raises(InputError) as err:
        load_plan(path)
    assert "metric 'ttft_s' needs a workload" in err.value.message


def test_pd_metric_needs_the_slos(tmp_path):
    # prefill_gpus / decode_gpus come from kvplan pd (plans/check/metrics.py), which sizes the pools for both SLOs
    path = write(tmp_path, BASE + "workload: {qps: 1, isl: 1k, osl: 128}\nassertions:\n"
                 "  - prefill_gpus + decode_gpus <= 64\n")
    with pytest.raises(InputError) as err:
        load_plan(path)
    assert "metric 'prefill_gpus' needs both SLOs" in err.value.message


@pytest.mark.parametrize(("body", "message"), [
    ("model: llama-3.1-70b\n", "give exactly one of 'hardware' and 'system'"),
    ("model: llama-3.1-70b\nhardware: h100-sxm\nsystem: hgx-h100-8\n", "exactly one of 'hardware' and 'system'"),
    (BASE.replace("32k", "32q"), "engine.max_model_len: cannot read a token count '32q'"),
    (BASE + "slo: {ttft: 'p99 < two seconds'}\n", "cannot read SLO"),
    (BASE + "workload: {isl: 1k}\n", "give both isl and osl"),
    (BASE.replace("name: vllm", "name: tgi"), "engine.name"),
    (BASE.replace("max_model_len: 32k", "kv_cache_dtype: fp7"), "unknown KV cache dtype 'fp7'"),
    (BASE + "assertions:\n  - {kv_fits: true, num_blocks: 1}\n", "exactly one key"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("model: [unclosed\n", "is not valid YAML"),
])
def test_bad_plans_name_the_problem(tmp_path, body, message):
    with pytest.raises(InputError) as err:
        load_plan(write(tmp_path, body))
    assert message in err.value.message
    assert err.value.message.startswith(str(tmp_path / "plan.yaml"))


def test_missing_file():
    with pytest.raises(InputError) as err:
        load_plan("no/such/plan.yaml")
    assert "no plan file at 'no/such/plan.yaml'" in err.value.message


def test_engine_native_names_are_mapped(tmp_path):
    plan = load_plan(write(tmp_path, """\
        model: llama-3.1-70b
        hardware: h100-sxm
        engine: {name: sglang, tp_size: 4, context_length: 32k, mem_fraction_static: 0.85, page_size: 1}
        """)).plan
    assert (plan.engine.tensor_parallel_size, plan.engine.max_model_len) == (4, 32768)
    assert plan.engine.gpu_memory_utilization == 0.85 and plan.engine.block_size == 1
    with pytest.raises(InputError) as err:  # a vLLM name under trtllm is fine, a clash is not
        load_plan(write(tmp_path, "model: x\nhardware: y\nengine: {name: trtllm, max_seq_len: 8k, max_model_len: 8k}\n"))
    assert "name the same setting" in err.value.message


def test_engine_as_a_plain_name(tmp_path):
    assert load_plan(write(tmp_path, "model: x\nhardware: y\nengine: trtllm\n")).plan.engine.name == "trtllm"


def test_json_schema_forbids_unknown_keys():
    schema = plan_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["EngineSettings"]["additionalProperties"] is False
    assert {"model", "hardware", "system", "engine", "workload", "slo", "assertions"} <= set(schema["properties"])
    assert "tensor_parallel_size" in schema["$defs"]["EngineSettings"]["properties"]
    Plan.model_validate({"model": "m", "hardware": "h"})  # the minimal plan


# --------------------------------------------------------------------------- evaluation and check


def test_fit_metrics_equal_the_fit_library():
    plan = load_plan(FAIL)
    context = registry.PlanContext(plan.plan, plan.path.parent)
    values = registry.evaluate(context, ["kv_fits"])["fit"].values
    row = fit_from_names("llama-3.1-70b", "h100-sxm", seq=[131072], batch=[1], kv_dtype=["fp8"], tp=[4],
                         gpu_memory_utilization=0.9, overrides=Overrides()).rows[0]
    for metric, key in (("kv_cache_memory_bytes", "kv_cache_memory_bytes"), ("num_blocks", "num_blocks"),
                        ("kv_cache_tokens", "kv_cache_tokens"), ("max_concurrency_at_max_len", "max_concurrency"),
                        ("max_concurrency", "max_concurrency"), ("kv_fits", "fits"),
                        ("weights_bytes_per_gpu", "weights_bytes_per_gpu"), ("kv_bytes_per_token", "kv_bytes_per_token"),
                        ("kv_bytes_per_sequence", "kv_bytes_per_sequence"),
                        ("max_context_at_batch", "max_context_at_batch")):
        assert values[metric] == row[key], metric
    assert values["max_concurrency_at_max_len"] == 6.0222  # 49,334 blocks × 16 / 131,072 (derivation in test_check_report_sweep_cli)


def test_latency_metrics_come_from_the_latency_library():
    from kvplan.plans.build import latency_from_names

    plan = load_plan(PASS)
    produced = registry.evaluate(registry.PlanContext(plan.plan, plan.path.parent), ["ttft_s", "tpot_s"])
    rows = latency_from_names("llama-3.1-70b", "h100-sxm", isl=[8192], osl=[512], batch=[1, 16], tp=[8], kv_dtype="fp8",
                              chunk_size=8192).rows
    assert produced["latency"].values["ttft_s"] == rows[0]["ttft_s"]
    assert produced["latency"].values["tpot_s"] == rows[1]["tpot_s"]


def test_system_card_gives_its_accelerator(tmp_path):
    plan = load_plan(write(tmp_path, "model: llama-3.1-8b\nsystem: hgx-h100-8\nassertions: [kv_fits]\n"))
    report = check([plan.path])
    assert report.plans[0].outcomes[0].status == PASSED
    assert "on h100-sxm" in report.plans[0].summary


def test_check_passes_and_fails_with_values_limits_and_why():
    report = check([PASS, FAIL])
    passing, failing = report.plans
    assert not passing.failures and all(o.status == PASSED for o in passing.outcomes)
    [failure] = failing.failures
    assert failure.assertion == "max_concurrency_at_max_len >= 16"
    assert (failure.value, failure.limit, failure.status) == (6.0222, 16, FAILED)
    assert failure.message == "max_concurrency_at_max_len = 6.022; needs >= 16"
    assert any("49,334 blocks" in line for line in failure.why)
    assert report.failed and report.counts() == {PASSED: 10, FAILED: 1, SKIPPED: 0}


def test_slo_without_workload_is_skipped_not_passed(tmp_path):
    path = write(tmp_path, BASE + "slo: {ttft: 'p99<=2s'}\nassertions: [kv_fits]\n")
    [plan] = check([path]).plans
    slo = plan.outcomes[-1]
    assert slo.status == SKIPPED and "ttft_p99_s needs a workload" in slo.message


def test_plan_the_engine_rejects_is_an_error_naming_the_file(tmp_path):
    path = write(tmp_path, BASE.replace("tensor_parallel_size: 4", "tensor_parallel_size: 3") + "assertions: [kv_fits]\n")
    with pytest.raises(InputError) as err:
        check([path])
    assert err.value.message.startswith(f"{path}: llama-3.1-70b: tp=3 does not fit 8 KV heads")


def test_junit_xml_parses_with_one_suite_per_file():
    report = check([PASS, FAIL])
    root = ET.fromstring(junit_xml(report))
    assert root.tag == "testsuites" and root.get("failures") == "1" and root.get("tests") == "11"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [str(PASS), str(FAIL)]
    cases = suites[1].findall("testcase")
    assert [c.get("name") for c in cases] == ["kv_fits == true", "max_concurrency_at_max_len >= 16"]
    failure = cases[1].find("failure")
    assert failure.get("message") == "max_concurrency_at_max_len = 6.022; needs >= 16"
    assert "49,334 blocks" in failure.text and cases[0].find("failure") is None
    assert cases[1].get("file") == str(FAIL) and int(cases[1].get("line")) == 19


def test_github_annotations_escape_properties():
    [line] = github_annotations(check([PASS, FAIL]))
    assert line == (f"::error file={FAIL},line=19,title=kvplan check%3A max_concurrency_at_max_len >= 16::"
                    "max_concurrency_at_max_len = 6.022; needs >= 16")


# --------------------------------------------------------------------------- vLLM serve lines


def test_realistic_serve_line():
    serve = parse_vllm_serve(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-70B-Instruct \\\n"
        "  --tensor-parallel-size=4 --max-model-len 131072 --kv-cache-dtype fp8 \\\n"
        "  --gpu-memory-utilization 0.92 --block-size 16 --max-num-batched-tokens 16k \\\n"
        "  --max-num-seqs 128 --enable-prefix-caching --port 8000 --served-model-name llama \\\n"
        "  --swap-space 16 --disable-log-requests --quantization fp8 --enforce-eager\n")
    assert serve.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert (serve.tensor_parallel_size, serve.max_model_len, serve.kv_cache_dtype) == (4, 131072, "fp8")
    assert (serve.gpu_memory_utilization, serve.block_size) == (0.92, 16)
    assert (serve.max_num_batched_tokens, serve.max_num_seqs, serve.weights_dtype) == (16000, 128, "fp8")
    assert serve.unknown == ["--swap-space 16"]
    assert any("enforce-eager" in n for n in serve.notes)


@pytest.mark.parametrize(("line", "field", "value"), [
    ("vllm serve m -tp 8", "tensor_parallel_size", 8),
    ("vllm serve m -pp 2", "pipeline_parallel_size", 2),
    ("vllm serve m --tensor_parallel_size 2", "tensor_parallel_size", 2),
    ("vllm serve m --max-model-len 128K", "max_model_len", 131072),
    ("vllm serve m --max-model-len 128k", "max_model_len", 128000),
    ("vllm serve m --max-model-len -1", "max_model_len", None),
    ("vllm serve m -q awq", "weights_dtype", "int4"),
    ("vllm serve m --quantization=mxfp4", "weights_dtype", "mxfp4"),
    ("vllm serve m --dtype half", "weights_dtype", "fp16"),
    ("vllm serve m --kv-cache-dtype bfloat16", "kv_cache_dtype", "bf16"),
    ("vllm serve m --kv-cache-memory-bytes 20Gi", "kv_cache_memory_bytes", 20 * 2**30),
    ("python -m vllm.entrypoints.openai.api_server --model m -tp 2", "tensor_parallel_size", 2),
])
def test_flag_forms(line, field, value):
    assert getattr(parse_vllm_serve(line), field) == value


@pytest.mark.parametrize(("line", "message"), [
    ("sglang serve m", "no 'vllm serve'"),
    ("vllm serve --port 8000", "names no model"),
    ("vllm serve m --tensor-parallel-size", "needs a value"),
    ("vllm serve m --max-model-len 12x", "is not an integer"),
    ("vllm serve a --model b", "two models"),
    ("vllm serve m --dtype fp7", "is not a vLLM dtype"),
    ("vllm serve 'm", "cannot split"),
])
def test_bad_serve_lines(line, message):
    with pytest.raises(InputError) as err:
        parse_vllm_serve(line)
    assert message in err.value.message


def test_human_int_follows_vllm():
    assert [human_int(t, "x") for t in ("8192", "25.6k", "16K", "1Mi", "2m")] == [8192, 25600, 16384, 2**20, 2_000_000]
    assert math.isclose(human_int("1.5g", "x"), 1.5e9)


def test_card_files_in_a_plan_are_relative_to_it(tmp_path):
    config = ROOT / "tests" / "data" / "hf_configs" / "llama-3.1-8b.json"
    (tmp_path / "config.json").write_text(config.read_text())
    path = write(tmp_path, "model: config.json\nhardware: h100-sxm\nengine: {max_model_len: 8k}\n"
                 "assertions: [kv_bytes_per_token == 131072, {kv_fits: false}]\n")
    [plan] = check([path]).plans
    assert [o.status for o in plan.outcomes] == [PASSED, FAILED]
    assert plan.outcomes[1].message == "kv_fits = true; needs == false"

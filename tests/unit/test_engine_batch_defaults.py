"""The engines' batch defaults (max_num_seqs, max_num_batched_tokens) when a command leaves them out.

vLLM V1 sets them for ``vllm serve`` from the device (vllm/engine/arg_utils.py, EngineArgs._set_default_args;
get_batch_defaults after its refactor, the same figures):

    if device_memory >= 70 * GiB_bytes and "a100" not in device_name:
        OPENAI_API_SERVER: max_num_batched_tokens 8192, max_num_seqs 1024
    else:
        OPENAI_API_SERVER: max_num_batched_tokens 2048, max_num_seqs 256
    max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
"""

from __future__ import annotations

import json

import pytest

from kvplan.engines import batch_defaults
from kvplan.plans.deployment import EngineSettings, resolve

GiB = 2**30


@pytest.mark.parametrize(("name", "memory_gib", "expected"), [
    ("h200", 140.40, (1024, 8192)),      # a GPU with >= 70 GiB
    ("h100-sxm", 79.65, (1024, 8192)),
    ("h100-pcie", 74.51, (1024, 8192)),
    ("mi300x", 191.98, (1024, 8192)),
    ("a100-80gb", 80.0, (256, 2048)),    # "a100" in the name: the small defaults (PR #17885)
    ("l40s", 44.99, (256, 2048)),        # below 70 GiB
    ("x", 70.0, (1024, 8192)),           # the threshold itself counts (>=)
    ("x", 69.99, (256, 2048)),
])
def test_vllm_defaults_follow_device_memory_and_name(name, memory_gib, expected):
    seqs, tokens, note = batch_defaults("vllm", memory_gib * GiB, name)
    assert (seqs, tokens) == expected
    assert f"max_num_seqs {seqs:,}, max_num_batched_tokens {tokens:,}: vLLM V1's defaults" in note
    assert "vllm/engine/arg_utils.py" in note


def test_other_engines_keep_their_fixed_figures_without_a_note():
    for engine in ("sglang", "trtllm"):
        assert batch_defaults(engine, 140 * GiB, "h200") == (256, 8192, None)


def test_a_deployment_takes_the_default_unless_a_value_is_given():
    dep = resolve("llama-3.1-8b", "h200")
    assert (dep.engine.max_num_seqs, dep.engine.chunk_tokens) == (1024, 8192)
    assert any("max_num_seqs 1,024, max_num_batched_tokens 8,192: vLLM V1's defaults" in n for n in dep.notes)
    dep = resolve("llama-3.1-8b", "l40s")
    assert (dep.engine.max_num_seqs, dep.engine.chunk_tokens) == (256, 2048)
    dep = resolve("llama-3.1-8b", "h200", engine=EngineSettings(max_num_seqs=256))
    assert (dep.engine.max_num_seqs, dep.engine.chunk_tokens) == (256, 8192)
    dep = resolve("llama-3.1-8b", "h200", engine=EngineSettings(max_num_seqs=64, chunk_tokens=4096))
    assert (dep.engine.max_num_seqs, dep.engine.chunk_tokens) == (64, 4096)
    assert not any("vLLM V1's defaults" in n for n in dep.notes)


def test_plan_says_which_default_it_took_and_the_flag_overrides_it(invoke):
    args = ("plan", "llama-3.1-8b", "h100-sxm", "--qps", "2", "--isl", "1k", "--osl", "128", "--ttft", "p99<=2s",
            "--sample", "2000", "--scale", "2", "--format", "json")
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    assert "Note: GPU memory 79.65 GiB from the h100-sxm card (runtime figure)" in res.stderr
    assert "max_num_seqs 1,024, max_num_batched_tokens 8,192: vLLM V1's defaults for vllm serve" in res.stderr
    res = invoke(*args, "--max-num-seqs", "256", "--chunk-size", "2048")
    assert res.exit_code == 0 and "vLLM V1's defaults" not in res.stderr
    assert json.loads(res.stdout)[0]["batch_per_instance"] <= 256

"""The Deployment: resolved once from names, with its parallel layout and the engine's KV pool."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.plans.deployment import EngineSettings, Parallelism, resolve
from kvplan.plans.sizing.fit import Overrides
from kvplan.plans.build import fit_from_names


GiB = 2**30


def test_kv_pool_by_hand_per_gpu_and_per_instance():
    """llama-3.1-70b, fp8 KV, tp 4: 80 layers × 8/4 KV heads × (128 + 128) × 1 B = 40,960 B per token per GPU.

    A 20 GiB budget (given, as vLLM's --kv-cache-memory-bytes) holds floor(20 GiB / (16 × 40,960 B)) = 32,768
    blocks of 16 tokens = 524,288 tokens on every GPU of the group; with attention DP 2 each group has its own.
    """
    dep = resolve("llama-3.1-70b", "h100-sxm", engine=EngineSettings(kv_dtype="fp8"), parallel=Parallelism(tp=4, dp=2),
                  overrides=Overrides(kv_cache_memory_bytes=20 * GiB))
    assert dep.layout.bytes_per_token_per_gpu == 80 * 2 * 256 * 1
    assert dep.pool.block_size == 16 and dep.pool.block_bytes_per_gpu == 16 * 40_960
    assert dep.pool.blocks_per_gpu == 20 * GiB // (16 * 40_960) == 32_768
    assert dep.pool.tokens_per_gpu == 524_288
    assert dep.pool.bytes_per_gpu == 32_768 * 655_360
    assert dep.gpus == 8 and dep.pool.bytes_per_instance == 8 * 32_768 * 655_360
    assert dep.pool.tokens_per_instance == 2 * 524_288


def test_pool_is_the_engine_start_up_arithmetic_of_fit():
    """The pool is what ``kvplan fit`` prints for the same engine settings (one rule, two views)."""
    for model, hw, tp, engine in (("llama-3.1-8b", "h100-sxm", 1, "vllm"), ("qwen3-32b", "a100-80gb", 2, "sglang"),
                                  ("deepseek-v3", "h200", 8, "trtllm")):
        dep = resolve(model, hw, engine=EngineSettings(engine=engine), parallel=Parallelism(tp=tp))
        row = fit_from_names(model, hw, seq=4096, tp=tp, engine=engine).rows[0]
        assert dep.pool.blocks_per_gpu == row["num_blocks"]
        assert dep.pool.block_bytes_per_gpu == row["block_bytes_per_gpu"]
        assert dep.pool.tokens_per_gpu == row["kv_cache_tokens"]
        assert dep.memory.weights_bytes_per_gpu == row["weights_bytes_per_gpu"]
        assert dep.memory.kv_cache_memory_bytes == row["kv_cache_memory_bytes"]


def test_expert_parallel_splits_the_experts_over_tp_times_dp():
    """mixtral-8x7b, bf16, tp 2 × dp 2 with EP: experts E = 32 layers × 8 × 176,160,768 params × 2 B over 4 ranks,
    the rest (W − E, W = 46,702,792,704 params × 2 B) over the 2 TP ranks."""
    dep = resolve("mixtral-8x7b", "h100-sxm", parallel=Parallelism(tp=2, dp=2, expert_parallel=True))
    experts = 32 * 8 * 176_160_768 * 2
    total = 46_702_792_704 * 2
    assert dep.parallel.ep == 4
    assert dep.memory.weights_bytes_per_gpu == pytest.approx((total - experts) / 2 + experts / 4, rel=1e-12)
    plain = resolve("mixtral-8x7b", "h100-sxm", parallel=Parallelism(tp=2, dp=2))
    assert plain.parallel.ep == 1 and plain.memory.weights_bytes_per_gpu == pytest.approx(total / 2, rel=1e-12)


@pytest.mark.parametrize("parallel, message", [
    (Parallelism(tp=2, expert_parallel=True), "dense model"),
    (Parallelism(dp=0), "--dp must be a whole number >= 1"),
    (Parallelism(tp=0), "--tp must be a whole number >= 1"),
])
def test_bad_parallelism_is_an_input_error(parallel, message):
    with pytest.raises(InputError) as err:
        resolve("llama-3.1-8b", "h100-sxm", parallel=parallel)
    assert message in err.value.message


def test_expert_parallel_ranks_must_divide_the_experts():
    with pytest.raises(InputError) as err:
        resolve("mixtral-8x7b", "h100-sxm", parallel=Parallelism(tp=1, dp=3, expert_parallel=True))
    assert "ep = tp × dp = 3 does not divide" in err.value.message


def test_a_system_in_the_hardware_place_brings_its_links():
    dep = resolve("llama-3.1-70b", "l40s-pcie-8", parallel=Parallelism(tp=4))
    assert dep.hardware.name == "l40s" and dep.system is not None and dep.system.name == "l40s-pcie-8"
    assert dep.name == "l40s-pcie-8"
    assert dep.hardware.scale_up is None  # the bare card has no GPU-to-GPU link
    assert dep.node_hardware.scale_up == dep.system.scale_up
    assert dep.machine.scale_up_bytes_per_s > 0  # TP 4 resolves over the system's link


def test_system_of_another_accelerator_is_refused():
    with pytest.raises(InputError) as err:
        resolve("llama-3.1-8b", "h100-sxm", system="l40s-pcie-8")
    assert "holds l40s, not h100-sxm" in err.value.message


def test_the_deployment_is_frozen():
    dep = resolve("llama-3.1-8b", "h100-sxm")
    with pytest.raises(AttributeError):
        dep.parallel = Parallelism(tp=2)  # type: ignore[misc]
    assert dep.cost is dep.cost and dep.machine is dep.machine  # resolved once, kept


def test_no_kv_memory_is_an_empty_pool_not_an_error():
    dep = resolve("llama-3.1-70b", "l40s")
    assert dep.pool.empty and dep.pool.bytes_per_gpu == 0 and dep.memory.kv_cache_memory_bytes < 0

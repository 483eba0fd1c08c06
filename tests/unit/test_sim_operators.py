"""The simulator on the per-operator model: its tabulated steps equal the per-operator pass exactly,
and the planners' step-time model (``Deployment.steps``) is the one ``kvplan latency`` uses."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc.roofline import decode_step, mixed_chunk_step, prefill
from kvplan.plans.deployment import EngineSettings, Parallelism, resolve
from kvplan.plans.build import latency_from_names as latency
from kvplan.sim import SimConfig, build_step_model, simulate


def deployment(model: str, hw: str = "h100-sxm", tp: int = 1, engine: str = "vllm", perf_model: str = "operators"):
    return resolve(model, hw, engine=EngineSettings(engine=engine, perf_model=perf_model), parallel=Parallelism(tp=tp))


@pytest.mark.parametrize(("model", "tp", "engine"), [("llama-3.1-8b", 1, "vllm"), ("llama-3.1-70b", 4, "trtllm"),
                                                     ("mixtral-8x7b", 2, "vllm")])
def test_operator_step_model_equals_the_pass(model, tp, engine):
    dep = deployment(model, tp=tp, engine=engine)
    st = dep.steps
    assert st.model == "operators" and st.pass_fn is not None
    ctx = 2000.0
    table = build_step_model(dep.cost, dep.machine, tp, 9000, ctx, steps=st)
    rng = np.random.default_rng(0)
    for _ in range(100):
        tokens = int(rng.integers(1, 9000))
        batch = int(rng.integers(1, 300))
        rows = float(rng.integers(0, min(tokens, 300) + 1))
        kv, flops = float(rng.uniform(0, 4e10)), float(rng.uniform(0, 5e14))
        expected = st.pass_fn(dep.cost, dep.machine, tp=tp, ep=1, tokens=tokens, kv_bytes=kv, attention_flops=flops,
                              lm_head_rows=rows, batch=batch, context=ctx, phase="mixed").time_s
        assert_allclose(table.step_s(tokens, rows, kv, flops, batch), float(expected), rtol=1e-9)
    # a decode-only step of b sequences holding T tokens: D[b] + γ[b] T, the pass's decode_step at the context
    for b in (1, 7, 64, 200):
        expected = float(decode_step(dep.cost, dep.machine, b, ctx, tp=tp, pass_fn=st.pass_fn).time_s)
        assert_allclose(table.decode_base_s(b) + table.decode_gamma_s(b) * b * ctx, expected, rtol=1e-9)


@pytest.mark.parametrize(("b", "start", "end", "prompt"), [(0, 0, 8192, 8192), (31, 0, 2000, 2000),
                                                          (100, 4096, 8000, 30000), (7, 16000, 24000, 100000)])
def test_a_chunk_step_equals_the_mixed_pass(b, start, end, prompt):
    """Decoders at the decode context plus one chunk of a prompt: the table's step is mixed_chunk_step's pass
    (the chunk's attention at the prefill efficiency of its prompt; log-interpolated in S, so rtol 1e-3)."""
    dep = deployment("llama-3.1-8b")
    st = dep.steps
    ctx = 1500.0
    table = build_step_model(dep.cost, dep.machine, 1, 9000, ctx, steps=st)
    got = table.chunk_step_s(b + end - start, b + (end == prompt), b * ctx, np.array([float(start)]),
                             np.array([float(end)]), [prompt], b + 1)
    cost = dep.cost
    kv = b * cost.kv_sequence_bytes(ctx, 1) + (end - start) * cost.kv_token_bytes(1) \
        + cost.kv_sequence_bytes(start, 1) * (start > 0)
    chunk_kv = (end - start) * cost.kv_token_bytes(1) + cost.kv_sequence_bytes(start, 1) * (start > 0)
    chunk_fl = cost.prefill_attention_flops(start, end)
    expected = st.pass_fn(cost, dep.machine, tp=1, ep=1, tokens=b + end - start, kv_bytes=kv,
                          attention_flops=b * cost.decode_attention_flops(ctx) + chunk_fl,
                          lm_head_rows=b + (end == prompt), batch=b + 1, context=ctx, phase="mixed",
                          chunk_kv_bytes=chunk_kv, chunk_attention_flops=chunk_fl, chunk_context=prompt).time_s
    assert_allclose(got, float(expected), rtol=1e-3)


def test_one_request_alone_on_the_operator_model():
    dep = deployment("llama-3.1-8b")
    st = dep.steps
    table = build_step_model(dep.cost, dep.machine, 1, 9000, 1050, steps=st)
    r = simulate(np.zeros(1), np.array([1000]), np.array([101]), np.zeros(1), table,
                 SimConfig(1, 64, 8192, 1e12, warmup_fraction=0.0))
    # the prompt alone in one mixed step (batch 1, context the decode context), then 100 decode steps; the
    # request reaches the scheduler vLLM's prefill dispatch (32 layers × 0.8 ms, once per request) after it is sent
    _, total = mixed_chunk_step(dep.cost, dep.machine, 0, 1050, 1000, 8192, pass_fn=st.pass_fn)
    assert table.request_dispatch_s == 32 * 0.8e-3
    assert_allclose(r.ttft_s[0], float(total) + 32 * 0.8e-3, rtol=1e-4)  # the chunk at its prompt length, log-interpolated
    each = [table.decode_base_s(1) + table.decode_gamma_s(1) * c for c in range(1001, 1101)]
    assert_allclose(r.tpot_s[0], np.mean(each), rtol=1e-9)


def test_deployment_steps_are_latencys_operator_model():
    """plan/pd/tier's step times equal kvplan latency's per-operator figures (the same pass)."""
    dep = deployment("llama-3.1-70b", tp=4)
    rows = latency("llama-3.1-70b", "h100-sxm", isl=2048, osl=2, batch=[1, 32, 128], tp=4).rows
    got = dep.steps.decode_s(np.array([1.0, 32.0, 128.0]), 2048.0)
    assert_allclose(got, [r["decode_step_s"] for r in rows], rtol=1e-12)
    pre = dep.steps.prefill(1, 2048).time_s
    assert_allclose(float(pre), rows[0]["prefill_s"], rtol=1e-12)


def test_roofline_stays_available():
    dep = deployment("llama-3.1-8b", perf_model="roofline")
    assert dep.steps.pass_fn is None and dep.steps.model == "roofline"
    assert_allclose(dep.steps.decode_s(8, 1000), decode_step(dep.cost, dep.machine, 8, 1000).time_s, rtol=0)
    assert_allclose(dep.steps.prefill(1, 1000).time_s, prefill(dep.cost, dep.machine, 1, 1000).time_s, rtol=0)
    rows = latency("llama-3.1-8b", "h100-sxm", isl=1000, osl=2, batch=8, perf_model="roofline").rows
    assert_allclose(float(dep.steps.decode_s(8, 1000)), rows[0]["decode_step_s"], rtol=1e-12)


def test_operators_are_slower_than_the_roofline_at_batch_1_on_h100():
    """At batch 1 the measured decode GEMMs reach less than the roofline's η_mem 0.8 (aiconfigurator tables)."""
    ops = deployment("llama-3.1-8b").steps.decode_s(1, 1000)
    roof = deployment("llama-3.1-8b", perf_model="roofline").steps.decode_s(1, 1000)
    assert float(ops) > float(roof)


def test_bad_perf_model_is_an_input_error():
    from kvplan.errors import InputError

    with pytest.raises(InputError, match="--perf-model"):
        deployment("llama-3.1-8b", perf_model="magic")


def test_a_dp_rank_table_is_the_lock_step_pass():
    """Attention DP 8 + EP 8 (DeepSeek-V3 on H200): the simulator's engine is one DP rank; its table's step is the
    per-operator pass over dp × the rank's tokens, rows and attention FLOPs with the rank's KV bytes, and a decode
    step of b sequences per rank is decode_step of dp·b sequences over the instance (the fleet model's t(b))."""
    dp = 8
    dep = resolve("deepseek-v3", "h200", engine=EngineSettings(engine="vllm", weights_dtype="fp8"),
                  parallel=Parallelism(tp=1, dp=dp, expert_parallel=True))
    st = dep.steps
    assert st.model == "operators" and st.dp == dp
    ctx = 3000.0
    table = build_step_model(dep.cost, dep.machine, 1, 2000, ctx, dp=dp, steps=st)
    rng = np.random.default_rng(1)
    for _ in range(40):
        tokens, batch = int(rng.integers(1, 2000)), int(rng.integers(1, 256))
        rows = float(rng.integers(0, min(tokens, 256) + 1))
        kv, flops = float(rng.uniform(0, 4e9)), float(rng.uniform(0, 5e13))
        expected = st.pass_fn(dep.cost, dep.machine, tp=1, ep=dp, tokens=dp * tokens, kv_bytes=kv,
                              attention_flops=dp * flops, lm_head_rows=dp * rows, batch=dp * batch, context=ctx,
                              phase="mixed").time_s
        assert_allclose(table.step_s(tokens, rows, kv, flops, batch), float(expected), rtol=1e-9)
    for b in (1, 16, 128):
        expected = float(st.decode_s(dp * b, ctx))
        assert_allclose(table.decode_base_s(b) + table.decode_gamma_s(b) * b * ctx, expected, rtol=1e-9)
    # the same instance step kvplan latency prices (--tp 1 --dp 8 --enable-expert-parallel, batch = all ranks):
    # both charge the attention-DP imbalance λ_dp(8) by default (aggregated serving), and at a balanced lock step
    # (--dp-imbalance 1, a PD pool's steps) both drop it
    for given, steps in ((None, st), (1.0, st.with_dp_imbalance(1.0))):
        rows = latency("deepseek-v3", "h200", isl=3000, osl=2, batch=[dp * 16], tp=1, dp=dp, expert_parallel=True,
                       weights_dtype="fp8", dp_imbalance=given).rows
        assert_allclose(float(steps.decode_s(dp * 16, 3000.0)), rows[0]["decode_step_s"], rtol=1e-12)


def test_a_gpu_without_kernel_tables_falls_back_to_its_eta_and_says_so_once(invoke):
    """MI300X ships no per-kernel tables: the per-operator default prices every operator at the card's η and the
    output says so in one note; the flat pass then reads the weights at η_mem, as the roofline does."""
    args = ("plan", "llama-3.1-8b", "mi300x", "--tp", "1", "--qps", "1", "--isl", "1k", "--osl", "128")
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    said = [line for line in res.stderr.splitlines() if line.startswith("Note: ") and "no per-kernel table" in line]
    assert len(said) == 1 and "mi300x" in said[0] and "every operator at the card's η_mem 0.8" in said[0]
    roof = invoke(*args, "--perf-model", "roofline")
    assert roof.exit_code == 0 and "no per-kernel table" not in roof.stderr
    ops = deployment("llama-3.1-8b", hw="mi300x").steps
    flat = ops.pass_fn.parts[1]
    assert flat.mlp_gemms.eta_mem == flat.attention_decode.eta_mem == 0.8

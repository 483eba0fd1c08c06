"""Per-operator step model: efficiency curves, parallelism (vLLM --tp/--dp/--enable-expert-parallel),
redundant experts, hierarchical all-to-all, CUDA-graph padding and --batch max, against closed forms
worked by hand from the cards' public figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc.efficiency import Curve, Flat, Grid, LatencyCurve
from kvplan.calc.memory import weight_bytes
from kvplan.calc.operators import (OperatorEfficiencies, Parallel, alltoall_hierarchical_s, model_shapes,
                                   operator_pass, padded_batch)
from kvplan.calc.roofline import Machine, decode_step, model_cost
from kvplan.cards.loader import load_hardware, load_model
from kvplan.cards.schema import HardwareCard
from kvplan.engines import get_profile
from kvplan.errors import InputError
from kvplan.plans.sizing.latency import Efficiencies
from kvplan.plans.build import latency_from_names
from kvplan.plans.sizing.perfmodel import ENGINE_PERF, flat_efficiencies, make_pass, weights_per_gpu

VLLM = get_profile("vllm")
H200_BW = 4.8e12
BF16 = 989.5e12
FP8 = 1979e12
L70_PARAMS = 70_553_706_496
L70_VH = 128_256 * 8_192
DSV3_EXPERT = 44_040_192            # 3 × 7168 × 2048 parameters, fp8: one byte each
DSV3_MLA_TOKEN = 61 * 576 * 2       # latent + rope, bf16, all layers: 70,272 B


def machine(**kw) -> Machine:
    base = dict(name="test", compute_dtype="bf16", bandwidth_bytes_per_s=H200_BW, peak_flops_per_s=BF16,
                eta_mem=0.8, eta_flops=0.75, step_overhead_s=100e-6, scale_up_bytes_per_s=450e9,
                scale_up_latency_s=10e-6, scale_up_domain=8, nic_bytes_per_s=50e9 * 0.87, nic_latency_s=20e-6)
    base.update(kw)
    return Machine(**base)


# --------------------------------------------------------------------------- efficiency curves


def test_curve_is_linear_in_log_size_and_clamps_outside():
    c = Curve((1.0, 100.0), (0.2, 0.6), "test")
    assert_allclose(c([1, 10, 100]), [0.2, 0.4, 0.6])       # 10 is the log-midpoint of 1 and 100
    assert_allclose(c([0.5, 1000]), [0.2, 0.6])               # clamped to the measured ends
    assert list(c.outside([0.5, 10, 1000])) == [True, False, True]
    # the SOL over η: max(2 ms, 1 ms) / 0.4
    assert_allclose(c.time_s(2e-3, 1e-3, 10), 5e-3)


def test_grid_is_bilinear_in_log_sizes():
    g = Grid((1.0, 100.0), (10.0, 1000.0), ((0.1, 0.3), (0.5, 0.7)), "test")
    assert_allclose(g(10, 100), 0.4)          # both log-midpoints: the mean of the four corners
    assert_allclose(g(1, 100), 0.2)
    assert_allclose(g(100, 10), 0.5)
    assert_allclose(g(1e6, 1e6), 0.7)         # clamped
    assert bool(g.outside(1e6, 100)) and not bool(g.outside(10, 100))


def test_latency_curve_is_log_log_and_linear_past_the_table():
    lc = LatencyCurve((1e3, 1e5), (10e-6, 100e-6), "test")
    assert_allclose(lc(1e4), math.sqrt(10e-6 * 100e-6))       # log-log midpoint: the geometric mean
    assert_allclose(lc(10), 10e-6)                           # α below the smallest message
    slope = (100e-6 - 10e-6) / (1e5 - 1e3)
    assert_allclose(lc(2e5), 100e-6 + 1e5 * slope)


def test_flat_fallback_is_the_card_roofline():
    f = Flat(0.8, 0.5)
    assert_allclose(f.time_s(1.0, 0.3), 1.25)
    assert_allclose(f.time_s(0.1, 0.3), 0.6)


# --------------------------------------------------------------------------- the pass


def test_batch_one_dense_decode_is_the_memory_roofline_exactly():
    """Llama-3.1-70B, H200, batch 1, context 128: every operator memory-bound, so the step is
    (weights + KV) / (BW × 0.8) + overhead, as the roofline worked case (docs/validation.md)."""
    weights = (L70_PARAMS - L70_VH) * 2
    kv = 128 * 80 * 2 * 8 * 128 * 2
    row = latency_from_names("llama-3.1-70b", "h200", isl=128, osl=2, batch=1,
                             efficiencies=Efficiencies(eta_mem=0.8, step_overhead_s=250e-6)).rows[0]
    assert row["perf_model"] == "operators"
    assert row["decode_weight_bytes_per_gpu"] == weights and row["decode_kv_bytes_per_gpu"] == kv
    assert_allclose(row["decode_step_s"], (weights + kv) / (H200_BW * 0.8) + 250e-6, rtol=1e-12)
    parts = sum(row[f"decode_{k}_s"] for k in ("attention_gemms", "mlp_gemms", "expert_gemms", "attention", "lm_head"))
    assert_allclose(parts + row["step_overhead_s"] + row["decode_comm_s"], row["decode_step_s"], rtol=1e-12)


def test_gemm_efficiency_curve_applies_per_operator():
    """A measured GEMM curve replaces η for the GEMMs only: at batch 1 the dense GEMM bytes of
    Llama-3.1-8B at η(1) = 0.5, the attention core at the card's 0.8."""
    card = load_model("llama-3.1-8b")
    cost = model_cost(card, VLLM)
    shapes = model_shapes(card, cost)
    curve = Curve((1.0, 1024.0), (0.5, 0.9), "test")
    flat = Flat(0.8, 0.75)
    effs = OperatorEfficiencies(curve, curve, curve, flat, flat, flat, overhead_base_s=0.0)
    m = machine()
    step = decode_step(cost, m, 1, 1000, pass_fn=make_pass(shapes, effs, Parallel()))
    dense = cost.other_weight_bytes + cost.lm_head_weight_bytes
    kv = 1000 * 32 * 2 * 8 * 128 * 2
    assert_allclose(step.time_s, dense / (H200_BW * 0.5) + kv / (H200_BW * 0.8), rtol=1e-12)


def test_replicated_routers_are_read_whole_in_bf16_on_every_rank():
    """Qwen3-235B-A22B at TP 8, batch 1: each GPU reads the dense weights ÷ 8 but its 94 routers of 128 × 4096
    whole, in bf16 (kvplan.calc.shapes.ROUTER_SOURCE): 49,283,072 × 2 B = 98,566,144 B, i.e. 7/8 of it,
    86,245,376 B, more than the dense weights ÷ 8. With the flat η 0.8 the MLP group's time is then
    (the non-router remainder ÷ 8 + the routers whole) / (BW × 0.8)."""
    card = load_model("qwen3-235b-a22b")
    cost = model_cost(card, VLLM)
    shapes = model_shapes(card, cost)
    flat = Flat(0.8, 0.75)
    effs = OperatorEfficiencies(flat, flat, flat, flat, flat, flat, overhead_base_s=0.0)
    p = operator_pass(cost, machine(), shapes=shapes, effs=effs, par=Parallel(tp=8), tokens=1, kv_bytes=0.0,
                      attention_flops=0.0, lm_head_rows=1, batch=1, context=610)
    dense = (cost.other_weight_bytes + cost.lm_head_weight_bytes) / 8
    experts = 94 * 8 * cost.expert_weight_bytes / 8
    assert_allclose(p.weight_bytes - experts, dense + 86_245_376, rtol=1e-12)
    b = cost.other_weight_bytes / cost.dense_params_per_token
    mlp = ((shapes.mlp_params - 49_283_072) * b / 8 + 98_566_144) / (H200_BW * 0.8)
    assert_allclose(p.op_memory_s[1], mlp, rtol=1e-12)


def test_attention_split_follows_the_geometry():
    """Llama-3.1-8B: QKV + O per layer = 4096 × (4096 + 2 × 1024) + 4096 × 4096 = 41,943,040; × 32 layers."""
    card = load_model("llama-3.1-8b")
    shapes = model_shapes(card, model_cost(card, VLLM))
    assert shapes.attention_params == 32 * (4096 * (4096 + 1024 + 1024) + 4096 * 4096)
    assert shapes.mlp_params > 32 * 3 * 4096 * 14336      # the MLPs plus the norms


def test_mla_kv_is_per_attention_dp_rank_not_replicated():
    """DeepSeek-V3, batch 64 at context 1000: dp 8 → 8 sequences per GPU × 1000 × 70,272 B;
    tp 2 × dp 4 → 16 per DP rank, the latent replicated on both TP ranks."""
    for tp, dp, per_gpu in ((1, 8, 8), (2, 4, 16)):
        row = latency_from_names("deepseek-v3", "h200", isl=1000, osl=2, batch=64, tp=tp, dp=dp,
                                 expert_parallel=True).rows[0]
        assert row["decode_kv_bytes_per_gpu"] == per_gpu * 1000 * DSV3_MLA_TOKEN
        assert row["ep"] == 8 and row["gpus"] == 8


def test_redundant_experts_make_ep72_work_and_count_their_memory():
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM)
    dense = cost.dense_weight_bytes + cost.lm_head_weight_bytes     # untied: the input embedding as well
    w = weights_per_gpu(card, cost, 1, 72, True, 32)
    assert_allclose(w - dense, 58 * (256 + 32) / 72 * DSV3_EXPERT, rtol=1e-12)   # 4 experts per GPU per layer
    with pytest.raises(InputError, match="does not divide") as err:
        latency_from_names("deepseek-v3", "hgx-h200-8", isl=1000, osl=2, batch=72, dp=72, expert_parallel=True)
    assert "--ep-redundant-experts 32" in err.value.hint
    row = latency_from_names("deepseek-v3", "hgx-h200-8", isl=1000, osl=2, batch=720, dp=72, expert_parallel=True,
                             redundant_experts=32).rows[0]
    assert row["ep"] == 72 and row["gpus"] == 72
    # 4 local experts, each touched with probability 1 − (1 − 8/256)^720
    assert_allclose(row["experts_touched_per_layer"], 4 * (1 - (1 - 8 / 256) ** 720), rtol=1e-12)


def test_hierarchical_alltoall_closed_form():
    m = machine()
    msg = 1e6
    assert_allclose(alltoall_hierarchical_s(msg, 8, m), 7 / 8 * msg / 450e9 + 10e-6, rtol=1e-12)
    inside, outside = 7 / 16 * msg / 450e9, 8 / 16 * msg / (50e9 * 0.87)
    assert_allclose(alltoall_hierarchical_s(msg, 16, m), max(inside, outside) + 20e-6, rtol=1e-12)
    assert alltoall_hierarchical_s(msg, 1, m) == 0


def test_expert_parallel_comm_is_dispatch_plus_combine():
    """DeepSeek-V3, EP 8 (dp 8), batch 64: 2 × 58 all-to-alls of 64/8 × 8 × 7168 × 2 B per GPU."""
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM)
    fn = make_pass(model_shapes(card, cost), flat_efficiencies(1, 1, "t", 0.0), Parallel(dp=8, expert_parallel=True))
    step = decode_step(cost, machine(), 64, 2048, tp=1, ep=8, pass_fn=fn)
    msg = 64 / 8 * 8 * 7168 * 2
    assert_allclose(step.comm_s, 2 * 58 * (7 / 8 * msg / 450e9 + 10e-6), rtol=1e-12)


def test_imbalance_charges_the_hottest_rank():
    """Compute-bound experts: FLOPs on the hottest rank = 2 × P_e × 58 × λ × n × k / ep."""
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM)
    shapes = model_shapes(card, cost)
    effs = flat_efficiencies(1.0, 1.0, "t", 0.0)
    n = 8192
    times = []
    for lam in (1.0, 1.5):
        step = operator_pass(cost, machine(bandwidth_bytes_per_s=1e18), shapes=shapes, effs=effs,
                             par=Parallel(dp=8, expert_parallel=True, imbalance=lam), tokens=n, kv_bytes=0.0,
                             attention_flops=0.0, lm_head_rows=n, batch=n, context=1)
        times.append(step.op_compute_s[2])
        assert_allclose(step.op_compute_s[2], 2 * DSV3_EXPERT * 58 * lam * n * 8 / 8 / BF16, rtol=1e-12)
    assert_allclose(times[1] / times[0], 1.5)


def test_cuda_graph_padding_follows_vllm_sizes():
    sizes = ENGINE_PERF["vllm"].cuda_graph_sizes
    assert_allclose(padded_batch([1, 3, 5, 9, 248, 250, 257, 512, 600], sizes),
                    [1, 4, 8, 16, 248, 256, 272, 512, 600])
    assert_allclose(padded_batch([3, 600], ENGINE_PERF["trtllm"].cuda_graph_sizes), [4, 1024])
    assert_allclose(padded_batch([3], ()), [3])


def test_fp8_and_bf16_efficiencies_differ_by_dtype():
    hw = load_hardware("h100-sxm").model_copy(deep=True)
    data = hw.model_dump(mode="json", exclude_defaults=True)
    data["efficiency"] = {"memory_bandwidth": 0.8, "flops": 0.75, "flops_by_dtype": {"fp8": 0.5}}
    card = HardwareCard.model_validate(data)
    fp8 = latency_from_names("llama-3.1-8b", card, isl=128, osl=2, weights_dtype="fp8").rows[0]
    bf16 = latency_from_names("llama-3.1-8b", card, isl=128, osl=2).rows[0]
    assert (fp8["eta_flops"], bf16["eta_flops"]) == (0.5, 0.75)


# --------------------------------------------------------------------------- bad input and --batch max


def test_impossible_parallelism_is_an_input_error():
    with pytest.raises(InputError, match="dense model"):
        latency_from_names("llama-3.1-8b", "h200", expert_parallel=True)
    with pytest.raises(InputError, match="no NIC"):
        latency_from_names("llama-3.1-70b", "h200", tp=4, dp=3)
    with pytest.raises(InputError, match="--dp"):
        latency_from_names("llama-3.1-8b", "h200", dp=0)
    with pytest.raises(InputError, match="imbalance"):
        latency_from_names("deepseek-v3", "h200", dp=8, expert_parallel=True, expert_imbalance=0.5)


def test_batch_max_is_the_kv_pool_over_one_sequence():
    """ideal engine: pool = 0.9 × HBM − weights; a sequence of 2,304 tokens holds 2,304 × 131,072 B."""
    card, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    expected = math.floor((0.9 * hw.hbm_capacity_bytes - weight_bytes(card)) / (2304 * 32 * 2 * 8 * 128 * 2))
    row = latency_from_names(card, hw, isl=2048, osl=256, batch="max", engine="ideal").rows[0]
    assert row["batch"] == expected and row["batch_max"]
    capped = latency_from_names(card, hw, isl=2048, osl=256, batch="max", engine="ideal", max_num_seqs=64).rows[0]
    assert capped["batch"] == 64


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 1024), extra=st.integers(0, 1024), ctx=st.integers(1, 32_000),
       dp=st.sampled_from([1, 2, 8]))
def test_more_batch_never_lowers_the_operator_step(batch, extra, ctx, dp):
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM)
    fn = make_pass(model_shapes(card, cost), flat_efficiencies(0.8, 0.75, "t", 1e-4, 1e-6),
                   Parallel(dp=dp, expert_parallel=True), ENGINE_PERF["vllm"].cuda_graph_sizes)
    t0 = decode_step(cost, machine(), batch, ctx, ep=dp, pass_fn=fn).time_s
    t1 = decode_step(cost, machine(), batch + extra, ctx, ep=dp, pass_fn=fn).time_s
    assert t1 >= t0 * (1 - 1e-12)


def test_one_point_and_a_sweep_are_the_same_code_path():
    card = load_model("mixtral-8x7b")
    cost = model_cost(card, VLLM, tps=(1, 2))
    fn = make_pass(model_shapes(card, cost), flat_efficiencies(0.8, 0.75, "t", 1e-4), Parallel())
    batches = np.array([1, 7, 64, 300])
    many = decode_step(cost, machine(), batches, 4000, tp=2, pass_fn=fn).time_s
    one = [float(decode_step(cost, machine(), int(b), 4000, tp=2, pass_fn=fn).time_s) for b in batches]
    assert_allclose(many, one, rtol=1e-12)


# --------------------------------------------------------------------------- attention-DP imbalance


def test_attention_dp_imbalance_goes_through_the_blogs_dp8_figure():
    """TensorRT-LLM tech blog 10: 34,140 tok/s of a balanced 37,912 at DP8, so λ_dp(8) = 37,912 / 34,140 = 1.11049;
    one busy rank at (1 + w) × the others: w = 0.11049 / (1 − 1.11049 / 8) = 0.12830, λ_dp(2) = 1.12830 / 1.06415, λ_dp(4) = 1.12830 / 1.03207."""
    from kvplan.plans.sizing.perfmodel import attention_dp_imbalance

    assert_allclose(attention_dp_imbalance(8), 37_912 / 34_140, rtol=1e-12)
    assert_allclose(attention_dp_imbalance([1, 2, 4]), [1.0, 1.060281, 1.093231], rtol=2e-6)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 512))
def test_attention_dp_imbalance_grows_with_the_ranks_and_stays_under_one_busy_rank(n):
    from kvplan.plans.sizing.perfmodel import attention_dp_imbalance

    lam, nxt = float(attention_dp_imbalance(n)), float(attention_dp_imbalance(n + 1))
    assert 1.0 <= lam <= nxt < 1.12830


@pytest.mark.parametrize("dp", [1, 8])
def test_dp_imbalance_scales_the_kernels_of_a_data_parallel_step_only(dp):
    """time = λ_dp Σ t_op + comm + overhead for dp > 1; one rank (dp 1) is never scaled."""
    card = load_model("deepseek-v3")
    cost = model_cost(card, VLLM, "fp8", "bf16")
    m = machine(compute_dtype="fp8", peak_flops_per_s=FP8)
    effs = flat_efficiencies(0.8, 0.75, "test", 100e-6)
    kw = dict(shapes=model_shapes(card, cost), effs=effs, tokens=64.0 * dp, kv_bytes=64 * 1000 * DSV3_MLA_TOKEN,
              attention_flops=1e12, lm_head_rows=64.0 * dp, batch=64.0 * dp, context=1000.0)
    base = operator_pass(cost, m, par=Parallel(dp=dp, expert_parallel=True), **kw)
    hot = operator_pass(cost, m, par=Parallel(dp=dp, expert_parallel=True, dp_imbalance=1.25), **kw)
    scale = 1.25 if dp > 1 else 1.0
    assert_allclose(hot.time_s - hot.comm_s - hot.overhead_s, scale * (base.time_s - base.comm_s - base.overhead_s))
    assert_allclose(hot.comm_s, base.comm_s)


def test_latency_charges_the_sourced_dp_imbalance_and_takes_an_override():
    args = dict(isl=1024, osl=64, batch=512, dp=8, expert_parallel=True, weights_dtype="fp8", engine="trtllm")
    default = latency_from_names("deepseek-v3", "h200", **args)
    balanced = latency_from_names("deepseek-v3", "h200", dp_imbalance=1.0, **args).rows[0]
    row = default.rows[0]
    assert any("λ_dp = 1.110 at dp 8" in n and "tech blog 10" in n for n in default.assumptions)

    def kernels(r):
        return r["decode_step_s"] - r["decode_comm_s"] - r["step_overhead_s"]

    assert_allclose(kernels(row), 37_912 / 34_140 * kernels(balanced), rtol=1e-9)
    with pytest.raises(InputError, match="--dp-imbalance"):
        latency_from_names("deepseek-v3", "h200", dp_imbalance=0.5, **args)
    # the busiest rank does at most the whole step: λ_dp ≤ dp (1e308 once printed Infinity)
    for too_big in (1e308, 8.5):
        with pytest.raises(InputError, match="exceeds --dp 8"):
            latency_from_names("deepseek-v3", "h200", dp_imbalance=too_big, **args)


def test_engine_profiles_say_what_their_sources_say_of_host_work():
    """TensorRT-LLM's overlap scheduler and SGLang's zero-overhead scheduler hide the host work (their docs); vLLM
    publishes no per-step host time: each says so, and an explicit --step-overhead replaces the sentence."""
    notes = {e: latency_from_names("llama-3.1-8b", "h100-sxm", isl=1024, osl=2, engine=e).assumptions
             for e in ("vllm", "sglang", "trtllm")}
    assert any("host work per step" in n and "no per-step host time" in n for n in notes["vllm"])
    assert any("host work per step" in n and "zero-overhead" in n for n in notes["sglang"])
    assert any("host work per step" in n and "overlap scheduler" in n for n in notes["trtllm"])
    given = latency_from_names("llama-3.1-8b", "h100-sxm", isl=1024, osl=2,
                               efficiencies=Efficiencies(step_overhead_s=1e-3)).assumptions
    assert not any("host work per step" in n for n in given)


def test_a_step_with_a_prompt_is_padded_only_where_the_engine_replays_a_graph_for_it():
    """vLLM pads a mixed step's tokens to its next piecewise-graph size; TensorRT-LLM runs a step with context
    requests without a graph (ScheduledRequests.can_run_cuda_graph), so at its own token count. Compute-bound
    GEMMs (bandwidth 1e18) make the step proportional to the tokens it runs: 8 decoders + a 252-token chunk =
    260 tokens, padded to 272 (vLLM sizes) or 384 (TensorRT-LLM's), else 260."""
    card = load_model("llama-3.1-8b")
    cost = model_cost(card, VLLM)
    shapes, effs = model_shapes(card, cost), flat_efficiencies(0.8, 0.75, "t", 0.0)
    fast = machine(bandwidth_bytes_per_s=1e18)

    def mixed(graph_sizes, mixed_graphs):
        fn = make_pass(shapes, effs, Parallel(), graph_sizes, mixed_graphs=mixed_graphs)
        return fn(cost, fast, tp=1, ep=1, tokens=260, phase="mixed", batch=9, kv_bytes=0.0, attention_flops=0.0,
                  lm_head_rows=9, context=1).op_compute_s[:2]      # attention and MLP GEMMs

    trt, vllm = ENGINE_PERF["trtllm"], ENGINE_PERF["vllm"]
    assert not trt.mixed_graphs and vllm.mixed_graphs and "can_run_cuda_graph" in trt.mixed_graphs_source
    plain = mixed((), True)
    assert_allclose(mixed(trt.cuda_graph_sizes, trt.mixed_graphs), plain, rtol=1e-12)
    assert_allclose(mixed(vllm.cuda_graph_sizes, vllm.mixed_graphs), np.asarray(plain) * 272 / 260, rtol=1e-12)
    assert_allclose(mixed(trt.cuda_graph_sizes, True), np.asarray(plain) * 384 / 260, rtol=1e-12)


def test_tensor_parallel_experts_on_one_rank_gather_nothing():
    """TP8 experts without attention DP: each GPU holds a slice of every expert, its partial sums are reduced by
    the layer's all-reduce (2 L + 1 a step), and no token is gathered, whatever the measured all-gather curve says.
    With attention DP (dp 2 × tp 4 on the same 8 GPUs) each MoE layer gathers and scatters its tokens: 2 × L_moe
    all-gathers more. Curves: all-reduce 10 µs, all-gather 25 µs at every size (flat, one point each)."""
    card = load_model("gpt-oss-120b")
    cost = model_cost(card, VLLM)
    flat = flat_efficiencies(0.8, 0.75, "t", 0.0)
    curves = {("all_reduce", 8): LatencyCurve((1.0,), (10e-6,), "t"), ("all_reduce", 4): LatencyCurve((1.0,), (10e-6,), "t"),
              ("all_gather", 8): LatencyCurve((1.0,), (25e-6,), "t")}
    effs = OperatorEfficiencies(**{**flat.__dict__, "collectives": curves})
    shapes = model_shapes(card, cost)
    layers, moe = cost.layers, cost.moe_layers          # gpt-oss-120b: 36 layers, every one MoE
    assert (layers, moe) == (36, 36)

    def comm(tp, dp):
        return operator_pass(cost, machine(), shapes=shapes, effs=effs, par=Parallel(tp=tp, dp=dp), tokens=dp,
                             kv_bytes=0.0, attention_flops=0.0, lm_head_rows=dp, batch=dp, context=1).comm_s
    assert_allclose(comm(8, 1), 73 * 10e-6, rtol=1e-12)                    # (2 × 36 + 1) all-reduces, no gather
    assert_allclose(comm(4, 2), 73 * 10e-6 + 72 * 25e-6, rtol=1e-12)        # + 2 × 36 gathers over the 8 GPUs

"""Per-kernel efficiency tables: each η is SOL / measured latency of a shipped row, checked by hand
from the CSV text; the model reproduces a measured kernel at its measured shape; GPUs without
tables fall back to the card's η and say so."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.calc import perfdb
from kvplan.plans.sizing.latency import Efficiencies
from kvplan.plans.build import latency_from_names

DATA = Path(perfdb.__file__).resolve().parents[1] / "data" / "perf"
H100_BW, H200_BW = 3.35e12, 4.8e12          # hardware cards: NVIDIA datasheets
H100_BF16, H200_FP8 = 989.5e12, 1979e12


def rows(name: str, **equal) -> list[dict]:
    with open(DATA / f"{name}.csv", encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle) if all(r[k] == str(v) for k, v in equal.items())]


def test_gemm_eta_is_sol_over_the_measured_row():
    """H100, TensorRT-LLM bf16, n = 768, k = 4096: at m = 1 memory-bound, η = 768 × 4096 × 2 B / BW / t;
    at m = 4096 compute-bound, η = 2 × 4096 × 768 × 4096 / peak / t."""
    tables = perfdb.load_default()
    curve = perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "bf16", 768, 4096, H100_BW, H100_BF16)
    r1 = rows("gemm", gpu="h100_sxm", backend="trtllm", dtype="bf16", m=1, n=768, k=4096)[0]
    r2 = rows("gemm", gpu="h100_sxm", backend="trtllm", dtype="bf16", m=4096, n=768, k=4096)[0]
    assert_allclose(curve(1), 768 * 4096 * 2 / H100_BW / float(r1["latency_s"]), rtol=1e-12)
    assert_allclose(curve(4096), 2 * 4096 * 768 * 4096 / H100_BF16 / float(r2["latency_s"]), rtol=1e-12)
    assert "n=768, k=4096" in curve.source and bool(curve.outside(16384)) and not bool(curve.outside(64))


def test_fp8_gemms_reach_a_different_share_than_bf16():
    tables = perfdb.load_default()
    bf16 = perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "bf16", 8192, 8192, H100_BW, H100_BF16)
    fp8 = perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "fp8", 8192, 8192, H100_BW, 2 * H100_BF16)
    assert abs(float(bf16(8192)) - float(fp8(8192))) > 0.05


def test_moe_eta_counts_touched_local_experts():
    """DeepSeek-V3 shape, H200 fp8_block, EP 8, T = 16 tokens: bytes = 32 × (1 − (1 − 8/256)^16) experts
    × 3 × 7168 × 2048 B; FLOPs 6 × 16 × 8 × 7168 × 2048 / 8 (memory-bound)."""
    tables = perfdb.load_default()
    curve = perfdb.moe_curve(tables, "h200_sxm", "trtllm", "fp8_block", 7168, 2048, 8, 256, 1, 8, H200_BW, H200_FP8)
    r = rows("moe", gpu="h200_sxm", backend="trtllm", dtype="fp8_block", num_tokens=16, hidden_size=7168,
             inter_size=2048, topk=8, num_experts=256, moe_tp=1, moe_ep=8, distribution="power_law_1.01")[0]
    touched = 32 * (1 - (1 - 8 / 256) ** 16)
    sol = max(touched * 3 * 7168 * 2048 / H200_BW, 6 * 16 * 8 * 7168 * 2048 / 8 / H200_FP8)
    assert_allclose(curve(16), sol / float(r["latency_s"]), rtol=1e-12)


def test_decode_attention_eta_is_bytes_over_bandwidth_time():
    """H100 TensorRT-LLM, 8 query / 1 KV head of 128, bf16 KV, batch 1, context 2048: memory-bound,
    η = 2048 × 2 × 128 × 2 B / BW / t."""
    tables = perfdb.load_default()
    grid = perfdb.decode_attention_grid(tables, "h100_sxm", "trtllm", "bf16", False, 8, 1, 128, H100_BW, H100_BF16)
    r = rows("attention_decode", gpu="h100_sxm", backend="trtllm", kv_dtype="bf16", batch=1, context_tokens=2048,
             num_heads=8, num_kv_heads=1, head_dim=128)[0]
    assert_allclose(grid(1, 2048), 2048 * 2 * 128 * 2 / H100_BW / float(r["latency_s"]), rtol=1e-12)


def test_collectives_use_the_engines_custom_allreduce_as_measured():
    tables = perfdb.load_default()
    curves = perfdb.collective_curves(tables, "h100_sxm", "trtllm")
    r = rows("comm", gpu="h100_sxm", library="custom_allreduce:TRTLLM", op="all_reduce", num_gpus=2,
             message_bytes=1024)[0]
    assert_allclose(curves[("all_reduce", 2)](1024), float(r["latency_s"]), rtol=1e-12)
    assert "TRTLLM" in curves[("all_reduce", 2)].source


def test_table_rows_drive_the_step_and_a_gpu_without_tables_falls_back():
    table = latency_from_names("llama-3.1-8b", "h100-sxm", isl=1024, osl=64, batch=16, engine="trtllm")
    assert any("per-kernel tables (NVIDIA aiconfigurator" in n for n in table.assumptions)
    flat = latency_from_names("llama-3.1-8b", "mi300x", isl=1024, osl=64, batch=16, engine="vllm")
    assert any("no per-kernel table for mi300x" in n for n in flat.assumptions)
    # an explicit efficiency bypasses the tables: every operator at that η
    forced = latency_from_names("llama-3.1-8b", "h100-sxm", isl=1024, osl=64, batch=1, engine="trtllm",
                                efficiencies=Efficiencies(eta_mem=0.5, eta_flops=0.5))
    assert not any("per-kernel tables" in n for n in forced.assumptions)


def test_measured_gemm_latency_is_reproduced_at_its_shape():
    """One measured GEMM alone (every other operator zero): the operator's time is the row's latency."""
    from kvplan.calc.efficiency import Flat
    from kvplan.calc.operators import OperatorEfficiencies, Parallel, Shapes, operator_pass
    from kvplan.calc.roofline import Machine, model_cost
    from kvplan.cards.loader import load_model
    from kvplan.engines import get_profile

    cost = model_cost(load_model("llama-3.1-8b"), get_profile("vllm"))
    n, k = 768, 4096
    tables = perfdb.load_default()
    curve = perfdb.gemm_curve(tables, "h100_sxm", "trtllm", "bf16", n, k, H100_BW, H100_BF16)
    # a one-layer "model" whose attention projections are one n × k GEMM, bf16 (2 B per parameter)
    shapes = Shapes(attention_params=n * k, mlp_params=0.0, layers=1.0, hidden=k)
    flat = Flat(1.0, 1.0)
    effs = OperatorEfficiencies(curve, flat, flat, flat, flat, flat, overhead_base_s=0.0)
    m = Machine("h100", "bf16", H100_BW, H100_BF16, 1.0, 1.0, 0.0)
    for tokens in (1, 4096):
        step = operator_pass(cost, m, shapes=shapes, effs=effs, par=Parallel(), tokens=tokens, kv_bytes=0.0,
                             attention_flops=0.0, lm_head_rows=0, batch=tokens, context=1)
        r = rows("gemm", gpu="h100_sxm", backend="trtllm", dtype="bf16", m=tokens, n=n, k=k)[0]
        assert_allclose(np.maximum(step.op_memory_s[0], step.op_compute_s[0]), float(r["latency_s"]), rtol=1e-9)


def test_gb200_takes_b200s_tables_and_no_other_card_does():
    from kvplan.calc.perfdb import STAND_INS, load_default

    tables = load_default()
    assert tables.gpu_name("gb200") == tables.gpu_name("b200") == "b200_sxm"
    assert set(STAND_INS) == {"gb200"}
    assert tables.gpu_name("l40s") is None and tables.gpu_name("mi325x") is None
    assert tables.gpu_name("mi300x") == "mi300x"        # its own rows: AMD's aiter timings (kvplan/data/perf/aiter)


def test_mtp_draft_pass_pays_its_own_kernels_not_the_targets():
    """DeepSeek-V3: 3 dense + 58 MoE layers, 3 element-wise kernels per dense layer and 2 per MoE layer + 1
    (aiconfigurator models/llama.py, moe.py, deepseek.py): 9 + 116 + 1 = 126 kernels, 3 µs × 126 = 378 µs.
    An MTP head of 1 layer is 1/61 of the target's layers of each kind: 3 × 3/61 + 2 × 58/61 + 1 = 186/61
    kernels, 3 µs × 186/61 = 9.15 µs; no per-sequence host cost in the draft pass."""
    from kvplan.calc.operators import Parallel
    from kvplan.calc.roofline import decode_step, model_cost
    from kvplan.cards.loader import load_hardware, load_model
    from kvplan.engines import get_profile
    from kvplan.plans.sizing.latency import Efficiencies, resolve_machine
    from kvplan.plans.sizing.latency_ops import draft_pass, load_tables
    from kvplan.plans.sizing.perfmodel import operator_model

    card, hw = load_model("deepseek-v3"), load_hardware("h200")
    cost = model_cost(card, get_profile("trtllm"), "fp8", "fp8", tps=[8])
    notes: list[str] = []
    machine, _ = resolve_machine(hw, "fp8", "fp8", cost.layers, Efficiencies(), 8, moe_layers=cost.moe_layers)
    assert machine.step_overhead_s == pytest.approx(3e-6 * 126)
    fn, _effs, _ = operator_model(card, hw, cost, machine, "trtllm", False, False, Parallel(tp=8), notes,
                                  load_tables(), tps=[8])
    draft = cost.draft_layers(1.0)
    draft_fn = draft_pass(fn, card, draft)
    step = decode_step(draft, machine, 16.0, 1024.0, tp=8, pass_fn=draft_fn)
    assert float(step.overhead_s) == pytest.approx(3e-6 * 186 / 61, rel=1e-9)
    target = decode_step(cost, machine, 16.0, 1024.0, tp=8, pass_fn=fn)
    assert float(target.overhead_s) == pytest.approx(3e-6 * 126, rel=1e-9)


def test_moe_efficiency_at_an_unmeasured_ep_size_is_geometric_between_the_measured_ones():
    """EP16 is not kept for DeepSeek-V3's MoE shape on H200 (EP 1, 2, 4, 8 and 32 are): its η at every measured
    token count is η_EP8^(1/2) × η_EP32^(1/2) (w = ln 2 / ln 4 = 1/2); a measured EP size (EP4, EP8) is taken as
    measured, and so is a measured TP split of the experts (moe_tp 4)."""
    from kvplan.calc.perfdb import load_default, moe_curve

    tables = load_default()
    args = ("h200_sxm", "trtllm", "fp8_block", 7168, 2048, 8, 256)
    bw, peak = 4.8e12, 1979e12
    ep8 = moe_curve(tables, *args, 1, 8, bw, peak)
    ep32 = moe_curve(tables, *args, 1, 32, bw, peak)
    ep16 = moe_curve(tables, *args, 1, 16, bw, peak)
    assert "moe_ep 8" in ep8.source and "moe_ep 32" in ep32.source and "geometric between" in ep16.source
    tokens = np.asarray(ep8.sizes)
    assert_allclose(ep16(tokens), ep8(tokens) ** 0.5 * ep32(tokens) ** 0.5, rtol=1e-12)
    assert moe_curve(tables, *args, 1, 8, bw, peak).eta == ep8.eta
    ep4 = moe_curve(tables, *args, 1, 4, bw, peak)
    assert ep4.source.endswith("moe_tp 1, moe_ep 4") and "geometric" not in ep4.source
    tp4 = moe_curve(tables, *args, 4, 1, bw, peak)
    assert tp4.source.endswith("moe_tp 4, moe_ep 1")
    assert tp4.eta != moe_curve(tables, *args, 8, 1, bw, peak).eta


# DeepGEMM README @55ab91f (H800 SXM5, NVCC 12.8), masked layout: 4 groups × m 256 of N 4096 × K 7168 at
# 932 TFLOPS and of N 7168 × K 2048 at 815 TFLOPS; 2 groups × m 512 at 1040 / 916 TFLOPS.
DSV3 = dict(hidden=7168, inter=2048, topk=8)
EXPERT_PARAMS = 3 * 7168 * 2048                     # gate + up + down of one routed expert
H100_FP8 = 1979e12


def _deepgemm_eta(groups, m, up_tflops, down_tflops):
    """By hand from the README row: t = Σ 2 G m N K / TFLOPS, η = kvplan's SOL (weights, FLOPs) / t."""
    t = 2 * groups * m * 4096 * 7168 / up_tflops + 2 * groups * m * 7168 * 2048 / down_tflops
    return max(groups * EXPERT_PARAMS * 1.0 / H100_BW, 2 * groups * m * EXPERT_PARAMS / H100_FP8) / t, t


def test_deepgemm_curve_is_the_readme_rows_in_kvplans_sol():
    """m = 256 per expert: t = 64.52 + 36.89 = 101.4 µs; weights 4 × 44.04 MB / 3.35 TB/s = 52.6 µs
    (memory term), η = 0.519. The curve's size is tokens entering the layer, n = m × slots / k, so
    with 256 + 32 slots m = 256 sits at n = 9216; t_op = SOL / η gives DeepGEMM's 101.4 µs back."""
    eta256, t256 = _deepgemm_eta(4, 256, 932e12, 815e12)
    assert t256 == pytest.approx(101.405e-6, rel=1e-4) and eta256 == pytest.approx(0.5186, abs=5e-4)
    curve = perfdb.deepgemm_curve("h100_sxm", "fp8_block", slots=288, bw=H100_BW, peak=H100_FP8, **DSV3)
    assert_allclose(curve(256 * 288 / 8), eta256, rtol=1e-12)
    sol = max(4 * EXPERT_PARAMS / H100_BW, 2 * 4 * 256 * EXPERT_PARAMS / H100_FP8)
    assert_allclose(sol / curve(9216), 101.405e-6, rtol=1e-4)
    eta512, _ = _deepgemm_eta(2, 512, 1040e12, 916e12)
    w = np.log(368 / 256) / np.log(2)                # m = 368 (DeepSeek's decode: 736 pairs on 2 experts)
    assert_allclose(curve(368 * 288 / 8), (1 - w) * eta256 + w * eta512, rtol=1e-12)
    assert curve.lo == 256 * 36 and curve.hi == 8192 * 36 and "55ab91f" in curve.source


def test_deepgemm_curve_only_where_its_rows_apply():
    """H800's die and HBM (H100 SXM tables), 128-block FP8, DeepSeek's 7168 × 2048 experts only; on H200 (the same
    tensor cores, 4.8 TB/s HBM3e) the η is the H800's, taken against the H800's SOL (3.35 TB/s, 1,978 TFLOPS):
    t = SOL_H200 × t_H800 / SOL_H800: the m = 256 row (memory-bound on H800, 4 × 44 MB / 3.35 TB/s = 52.6 µs) is
    compute-bound at 4.8 TB/s (45.6 µs of FLOPs at 1,979 TFLOPS), so it runs 45.6 / 52.6 of its H800 time; the
    m = 8192 row (compute-bound on both) keeps its time (× 1,978 / 1,979, the two cards' FP8 figures)."""
    ok = dict(slots=256, bw=H100_BW, peak=H100_FP8, **DSV3)
    assert perfdb.deepgemm_curve("h100_sxm", "fp8_block", **ok) is not None
    h200 = perfdb.deepgemm_curve("h200_sxm", "fp8_block", **{**ok, "bw": 4.8e12})
    h800 = perfdb.deepgemm_curve("h800_sxm", "fp8_block", **{**ok, "peak": 1978e12})
    assert h200.eta == h800.eta and "H200" in h200.source
    _, t256 = _deepgemm_eta(4, 256, 932e12, 815e12)
    sol256 = max(4 * EXPERT_PARAMS / 4.8e12, 2 * 4 * 256 * EXPERT_PARAMS / H100_FP8)
    assert_allclose(sol256 / h200(256 * 256 / 8), t256 * sol256 / (4 * EXPERT_PARAMS / 3.35e12), rtol=1e-12)
    t8192 = 2 * 4 * 8192 * 4096 * 7168 / 1346e12 + 2 * 4 * 8192 * 7168 * 2048 / 1214e12
    assert_allclose(2 * 4 * 8192 * EXPERT_PARAMS / H100_FP8 / h200(8192 * 256 / 8), t8192 * 1978 / 1979, rtol=1e-12)
    assert perfdb.deepgemm_curve("b200_sxm", "fp8_block", **ok) is None        # another die
    assert perfdb.deepgemm_curve("h100_sxm", "fp8", **ok) is None
    assert perfdb.deepgemm_curve("h100_sxm", "fp8_block", **{**ok, "hidden": 4096}) is None


def test_table_ep_rows_pay_for_every_token_of_the_instance():
    """Why wide EP does not read the table's EP rows: vLLM's and SGLang's EP32 rows (one rank fed all
    num_tokens, an expert map for its 8 experts) grow in proportion to the instance's tokens, 4,096 → 16,384
    about ×4, at ~30 TFLOPS of the rank's own work, where a DeepEP rank would get 1/32 of the pairs."""
    for backend in ("vllm", "sglang"):
        lat = {int(r["num_tokens"]): float(r["latency_s"]) for r in rows(
            "moe", gpu="h100_sxm", backend=backend, dtype="fp8_block", hidden_size=7168, num_experts=256, moe_tp=1,
            moe_ep=32, distribution="balanced")}
        assert lat[16384] / lat[4096] > 3.5
        assert 6 * 16384 * 8 * 7168 * 2048 / 32 / lat[16384] < 50e12


def test_wide_ep_moe_reads_deepgemm_in_node_ep_keeps_the_table():
    """moe_curve: DeepEP dispatch beyond one 8-GPU node → SGLang's measured DeepEP layer where measured (DeepSeek's
    256 experts), DeepGEMM where only its figures apply (Kimi-K2's 384 experts of the same 7168 × 2048 shape; on
    H200 its H800 η, transferred); EP 8 and TensorRT-LLM's own all-to-all (dispatch "generic") keep the measured
    table rows."""
    tables = perfdb.load_default()
    kimi = ("fp8_block", 7168, 2048, 8, 384, 1)
    wide = perfdb.moe_curve(tables, "h100_sxm", "vllm", *kimi, 144, H100_BW, H100_FP8, dispatch="deepep", redundant=0)
    assert "DeepGEMM" in wide.source and "/ 384" in wide.source
    h200 = perfdb.moe_curve(tables, "h200_sxm", "vllm", *kimi, 144, H200_BW, H100_FP8, dispatch="deepep")
    assert "DeepGEMM" in h200.source and "transferred to H200" in h200.source
    args = ("fp8_block", 7168, 2048, 8, 256, 1)
    measured = perfdb.moe_curve(tables, "h100_sxm", "vllm", *args, 144, H100_BW, H100_FP8, dispatch="deepep",
                                redundant=32)
    assert "DeepEP MoE layer measured" in measured.source
    assert "EP 144 between the measured EP 128 and 256" in measured.source
    for gpu, ep, dispatch in (("h100_sxm", 8, "deepep"), ("h100_sxm", 144, "generic"), ("h200_sxm", 8, "deepep")):
        bw = H100_BW if gpu == "h100_sxm" else H200_BW
        curve = perfdb.moe_curve(tables, gpu, "vllm", *args, ep, bw, H100_FP8, dispatch=dispatch)
        assert "aiconfigurator" in curve.source and "DeepEP MoE layer" not in curve.source


def test_wideep_curve_returns_the_measured_layer_and_interpolates_in_log_ep():
    """B200, decode (DeepEP low-latency), DeepSeek-V3's experts: at a measured (T, EP) the rank's SOL over η is the
    row's latency (worked from the CSV row: SOL = max(E / ep touched × 3 h i × 1 B / BW, 6 T k h i / ep / peak));
    EP 48 takes η^(1−w) η^w of EP 32 and EP 64 with w = ln(48/32) / ln 2; the prefill rows (DeepEP normal) are
    another curve; another expert count or a GPU without the rows has none."""
    tables = perfdb.load_default()
    bw, peak = 8e12, 4500e12                         # hardware_cards/b200.yaml
    shape = ("fp8_block", 7168, 2048, 8, 256)

    def row(ep, phase="decode", t=4096):
        (r,) = rows("moe_wideep", gpu="b200_sxm", phase=phase, moe_ep=ep, num_tokens=t)
        return float(r["latency_s"])

    def sol(t, ep):
        touched = 256 / ep * (1 - (1 - 8 / 256) ** t)
        return max(touched * EXPERT_PARAMS / bw, 6 * t * 8 * 7168 * 2048 / ep / peak)

    c32 = perfdb.wideep_curve(tables, "b200_sxm", *shape, 32, "decode", bw, peak)
    assert_allclose(sol(4096, 32) / c32(4096), row(32), rtol=1e-9)
    c48 = perfdb.wideep_curve(tables, "b200_sxm", *shape, 48, "decode", bw, peak)
    w = np.log(48 / 32) / np.log(2)
    eta32, eta64 = sol(4096, 32) / row(32), sol(4096, 64) / row(64)
    assert_allclose(c48(4096), eta32 ** (1 - w) * eta64 ** w, rtol=1e-9)
    pre = perfdb.wideep_curve(tables, "b200_sxm", *shape, 32, "prefill", bw, peak)
    assert_allclose(sol(4096, 32) / pre(4096), row(32, "prefill"), rtol=1e-9)
    assert perfdb.wideep_curve(tables, "b200_sxm", "fp8_block", 7168, 2048, 8, 384, 32, "decode", bw, peak) is None
    assert perfdb.wideep_curve(tables, "a100_sxm", *shape, 32, "decode", bw, peak) is None


def test_wide_ep_without_deepgemm_reads_the_ep1_rows_split_over_the_ranks():
    """B200 with an expert count neither SGLang's wide-EP rows nor DeepGEMM's figures cover (Kimi-K2's 384): a DeepEP
    rank at EP 16 reads the table's EP 1 power-law row of Kimi-K2's own shape, every expert local at T k / E tokens
    as DeepEP with EPLB gives it, and takes that row's measured time / 16. Worked from the CSV row itself at
    T = 4,096: the rank's SOL is max(24 local experts touched × 3 h i × 1 B / BW, 6 T k h i / 16 / peak), and
    SOL / η(T) is the row's latency / 16. On the table's EP rows (one rank handed all T tokens) the same rank took at
    least twice as long."""
    tables = perfdb.load_default()
    b200_bw, b200_fp8 = 8e12, 4500e12              # hardware_cards/b200.yaml
    (row,) = rows("moe", gpu="b200_sxm", backend="sglang", dtype="fp8_block", hidden_size=7168, num_experts=384,
                  moe_tp=1, moe_ep=1, distribution="power_law_1.01", num_tokens=4096)
    curve = perfdb.moe_curve(tables, "b200_sxm", "sglang", "fp8_block", 7168, 2048, 8, 384, 1, 16, b200_bw,
                             b200_fp8, dispatch="deepep")
    assert "DEEPEP_WITHOUT_DEEPGEMM" in curve.source and "moe_ep 1" in curve.source and "of 384" in curve.source
    touched = 384 / 16 * (1 - (1 - 8 / 384) ** 4096)
    sol = max(touched * EXPERT_PARAMS / b200_bw, 6 * 4096 * 8 * 7168 * 2048 / 16 / b200_fp8)
    assert_allclose(sol / curve(4096), float(row["latency_s"]) / 16, rtol=1e-9)
    table_ep = perfdb.moe_curve(tables, "b200_sxm", "sglang", "fp8_block", 7168, 2048, 8, 384, 1, 16, b200_bw,
                                b200_fp8, dispatch="table")
    assert sol / table_ep(4096) > 2 * sol / curve(4096)


@pytest.mark.parametrize("dp", [16, 32, 144])
def test_wide_ep_decode_experts_within_the_measured_deepep_band(dp):
    """DeepSeek-V3 on H100, attention DP = EP, 92 sequences per rank: the routed-expert GEMMs take their SOL (max of
    local weights / BW, rank FLOPs / peak) over an η inside the band SGLang's measured DeepEP decode layer gives at the
    measured EP sizes and token counts around (EP, 92 × EP) (worked from moe_wideep.csv's rows: η = the rank's SOL at
    the row's EP / its latency), never the table's EP32 rows (η ≈ 0.04 at these token counts)."""
    from kvplan.calc.operators import OP_NAMES
    from kvplan.plans import deployment

    redundant = (-256) % dp
    d = deployment.resolve("deepseek-v3", "h100-sxm", system="hgx-h100-8",
                           engine=deployment.EngineSettings(kv_dtype="fp8"),
                           parallel=deployment.Parallelism(tp=1, dp=dp, expert_parallel=True,
                                                           redundant_experts=redundant))
    pc = d.steps.decode(92 * dp, 4383)
    i = OP_NAMES.index("expert_gemms")
    t = float(np.max([np.ravel(pc.op_memory_s[i])[0], np.ravel(pc.op_compute_s[i])[0]]))
    local = (256 + redundant) / dp
    pairs = 92 * dp * 8 / dp
    sol = 58 * max(local * (1 - (1 - 8 / 256) ** (92 * dp)) * EXPERT_PARAMS / H100_BW,
                   2 * EXPERT_PARAMS * pairs / H100_FP8)
    measured = rows("moe_wideep", gpu="h100_sxm", phase="decode")
    eps = sorted({int(r["moe_ep"]) for r in measured if int(r["moe_ep"]) > 8})
    bracket = {max(e for e in eps if e <= dp) if dp >= eps[0] else eps[0], min(e for e in eps if e >= dp)}
    tokens = sorted({int(r["num_tokens"]) for r in measured})
    t_lo, t_hi = max(x for x in tokens if x <= 92 * dp), min(x for x in tokens if x >= 92 * dp)
    band = []
    for r in measured:
        e, n = int(r["moe_ep"]), int(r["num_tokens"])
        if e in bracket and n in (t_lo, t_hi):
            row_sol = max(256 / e * (1 - (1 - 8 / 256) ** n) * EXPERT_PARAMS / H100_BW,
                          6 * n * 8 * 7168 * 2048 / e / H100_FP8)
            band.append(row_sol / float(r["latency_s"]))
    assert len(band) >= 2
    assert min(band) * (1 - 1e-9) <= sol / t <= max(band) * (1 + 1e-9)
    assert sol / t > 0.2                              # the table's EP32 rows read η ≈ 0.04 here


def test_mla_prefill_with_an_fp8_cache_reads_the_bf16_attention_rows_over_fp8_kv():
    """Every MLA prefill row computes in BF16 (dtype bf16) over a bf16 or fp8 cache: an FP8-KV prefill is
    the kv_dtype fp8 rows (there are no dtype fp8 MLA prefill rows, where the reader used to fall back to
    the card's flat η). H100 vLLM (FlashMLA), 128 heads, batch 1, 4,096 tokens:
    η = 2 × 128 × (192 + 128) × 4096 × 4097 / 2 / peak / t."""
    tables = perfdb.load_default()
    assert not rows("mla_prefill", dtype="fp8")
    r = rows("mla_prefill", gpu="h100_sxm", backend="vllm", kv_dtype="fp8", num_heads=128, batch=1, isl_tokens=4096)[0]
    assert r["dtype"] == "bf16"
    curve = perfdb.prefill_attention_curve(tables, "h100_sxm", "vllm", "fp8", True, 128, 128, 192, H100_BW, H100_FP8)
    assert_allclose(curve(4096), 2 * 128 * 320 * 4096 * 4097 / 2 / H100_FP8 / float(r["latency_s"]), rtol=1e-12)
    assert "prefill attention bf16, KV fp8" in curve.source


def test_trtllm_runs_mxfp4_experts_with_mxfp8_activations_on_blackwell():
    # TensorRT-LLM examples/models/core/gpt_oss/README.md, "MoE Support Matrix": mxfp4 weights take bf16
    # activations on Hopper and mxfp8 on Blackwell, so its B200 expert GEMMs read aiconfigurator's
    # w4a8_mxfp4_mxfp8 kernel table; vLLM (default not established) and Hopper keep W4A16
    from kvplan.plans.deployment import EngineSettings, Parallelism, resolve

    def expert_source(hardware, engine):
        dep = resolve("gpt-oss-120b", hardware, parallel=Parallelism(tp=1), engine=EngineSettings(engine=engine))
        notes = " ".join(dep.step_notes)
        return notes[notes.index("expert GEMMs:"):].split(" MoE ")[0]

    assert expert_source("b200", "trtllm").endswith("w4a8_mxfp4_mxfp8")
    assert expert_source("b200", "vllm").endswith("w4a16_mxfp4")
    assert expert_source("h200", "trtllm").endswith("w4a16_mxfp4")

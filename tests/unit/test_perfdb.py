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
    assert tables.gpu_name("mi300x") is None and tables.gpu_name("l40s") is None


def test_mtp_draft_pass_pays_its_own_kernels_not_the_targets():
    """An MTP head of 1 layer: the launch floor is (3 × 1 + 1) / (3 × 61 + 1) of DeepSeek-V3's 61-layer floor
    (3 µs × 184 kernels = 552 µs → 3 µs × 4 = 12 µs), and no per-sequence host cost in the draft pass."""
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
    machine, _ = resolve_machine(hw, "fp8", "fp8", cost.layers, Efficiencies(), 8)
    assert machine.step_overhead_s == pytest.approx(3e-6 * (3 * 61 + 1))
    fn, _effs, _ = operator_model(card, hw, cost, machine, "trtllm", False, False, Parallel(tp=8), notes,
                                  load_tables(), tps=[8])
    draft = cost.draft_layers(1.0)
    draft_fn = draft_pass(fn, card, draft)
    step = decode_step(draft, machine, 16.0, 1024.0, tp=8, pass_fn=draft_fn)
    assert float(step.overhead_s) == pytest.approx(3e-6 * 4, rel=1e-9)
    target = decode_step(cost, machine, 16.0, 1024.0, tp=8, pass_fn=fn)
    assert float(target.overhead_s) == pytest.approx(3e-6 * 184, rel=1e-9)


def test_moe_efficiency_at_an_unmeasured_ep_size_is_geometric_between_the_measured_ones():
    """EP4 is not measured for DeepSeek-V3's MoE shape on H200 (EP1 and EP8 are): its η at every measured token
    count is η_EP1^(1/3) × η_EP8^(2/3) (w = ln 4 / ln 8 = 2/3); a measured EP size is taken as measured."""
    from kvplan.calc.perfdb import load_default, moe_curve

    tables = load_default()
    args = ("h200_sxm", "trtllm", "fp8_block", 7168, 2048, 8, 256)
    bw, peak = 4.8e12, 1979e12
    ep1 = moe_curve(tables, *args, 1, 1, bw, peak)
    ep8 = moe_curve(tables, *args, 1, 8, bw, peak)
    ep4 = moe_curve(tables, *args, 1, 4, bw, peak)
    assert "moe_ep 1" in ep1.source and "moe_ep 8" in ep8.source and "geometric between" in ep4.source
    tokens = np.asarray(ep8.sizes)
    assert_allclose(ep4(tokens), ep1(tokens) ** (1 / 3) * ep8(tokens) ** (2 / 3), rtol=1e-12)
    assert moe_curve(tables, *args, 1, 8, bw, peak).eta == ep8.eta

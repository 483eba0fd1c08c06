"""The H800 operator profile (DeepSeek's own H800 kernel figures) and two-batch overlap as two micro-batches.

Figures below are copied by hand from the READMEs the data file cites: deepseek-ai/DeepGEMM README @55ab91f
("Performance": dense GEMMs, grouped contiguous and masked) and deepseek-ai/FlashMLA README @082094b ("The dense
MLA decoding kernel achieves up to 3000 GB/s in memory-bound configuration and 660 TFLOPS in computation-bound
configuration on H800 SXM5"). H800 SXM: 3.35 TB/s HBM3, 1,978 TFLOPS FP8, 989 TFLOPS BF16 (the card).
"""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc import deepseek_kernels as dk
from kvplan.plans import deployment
from kvplan.plans.deployment import Parallelism
from kvplan.plans.sizing.efficiency import Efficiencies

BW, FP8, BF16 = 3.35e12, 1978e12, 989e12


def _rows():
    with dk.DATA.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_every_row_names_its_repository_commit_and_section():
    rows = _rows()
    assert len(rows) == 18 + 4 + 6 + 2
    for r in rows:
        assert r["repo"] in ("deepseek-ai/DeepGEMM", "deepseek-ai/FlashMLA")
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]) and r["section"].startswith("Performance")
        assert r["tflops"] or r["gb_per_s"]


@pytest.mark.parametrize("layout, groups, m, n, k, tflops", [
    ("dense", 1, 64, 2112, 7168, 206), ("dense", 1, 128, 7168, 16384, 645), ("dense", 1, 4096, 24576, 1536, 1125),
    ("dense", 1, 4096, 7168, 2048, 1168), ("contiguous", 8, 4096, 4096, 7168, 1346),
    ("contiguous", 4, 8192, 7168, 2048, 1214), ("masked", 4, 256, 4096, 7168, 932), ("masked", 1, 1024, 7168, 2048, 925),
])
def test_deepgemm_rows_as_printed(layout, groups, m, n, k, tflops):
    hits = [r for r in _rows() if r["layout"] == layout and float(r["m"]) == m and float(r["n"]) == n
            and float(r["k"]) == k and float(r["groups"]) == groups]
    assert len(hits) == 1 and float(hits[0]["tflops"]) == tflops


def test_flashmla_decode_is_the_readme_pair():
    flat = dk.flashmla_decode(BW, BF16)
    assert flat.eta_mem == pytest.approx(3000e9 / BW) and flat.eta_flops == pytest.approx(660e12 / BF16)


def test_mla_projection_curve_returns_deepgemms_times():
    """At M = 64 and 128 the four MLA projections take Σ 2 M N K / TFLOPS (the README's rows, by hand); kvplan's
    SOL / η gives back exactly that time. DeepSeek-V3's projections sum to 187,105,280 parameters per layer."""
    assert sum(n * k for n, k in dk.MLA_SHAPES) == 187_105_280
    curve = dk.dense_curve(tuple((61, n, k) for n, k in dk.MLA_SHAPES), BW, FP8, "MLA")
    params = 61 * 187_105_280
    for m, tf in ((64, (206, 289, 219, 336)), (128, (352, 535, 358, 645))):
        t = sum(61 * 2 * m * n * k / (x * 1e12) for (n, k), x in zip(dk.MLA_SHAPES, tf))
        sol = max(params / BW, 2 * m * params / FP8)
        assert sol / float(curve(m)) == pytest.approx(t, rel=1e-12)
    assert float(curve(32)) == float(curve(64)) and float(curve(16384)) == float(curve(4096))   # held outside


def test_unmeasured_dense_shapes_take_the_same_k_nearest_n():
    """DeepSeek-V3's 3 dense MLPs (36864 × 7168 gate+up) were not measured: the 4096 × 7168 row (same K) stands in."""
    curve = dk.dense_curve(((3, 36864, 7168),), BW, FP8, "dense MLP")
    assert "36864x7168 as 4096x7168" in curve.source
    t = 3 * 2 * 128 * 36864 * 7168 / 533e12
    assert max(3 * 36864 * 7168 / BW, 2 * 128 * 3 * 36864 * 7168 / FP8) / float(curve(128)) == pytest.approx(t)


def _h800(dp=144, kv="fp8", eta=None, perf_model="operators"):
    eff = Efficiencies(eta_mem=eta, eta_flops=eta) if eta else Efficiencies()
    return deployment.resolve("deepseek-v3", "h800", system="hgx-h800-8",
                              parallel=Parallelism(tp=1, dp=dp, expert_parallel=True, redundant_experts=32),
                              engine=deployment.EngineSettings(kv_dtype=kv, efficiencies=eff, perf_model=perf_model))


def test_h800_decode_attention_at_flashmla_figures_in_bf16():
    """92 sequences per rank at context 4,989 (DeepSeek's Little's-law occupancy): the MLA decode attention is
    max(KV bytes / 3000 GB/s, FLOPs / 660 TFLOPS) — FLOPs 2 × 128 heads × (576 + 512) per key and layer, the
    BF16 peak whatever the cache's dtype (day 6: 'core MLA computations ... use the BF16 format')."""
    from kvplan.calc.operators import OP_NAMES

    dep = _h800()
    p = dep.steps.decode(144 * 92, 4989)
    attention = float(np.maximum(p.op_memory_s, p.op_compute_s)[OP_NAMES.index("attention")])
    flops = 92 * 61 * 2 * 128 * (576 + 512) * 4989
    kv = 92 * 4989 * 61 * 576 * 1.0
    assert attention == pytest.approx(max(kv / 3000e9, flops / 660e12), rel=2e-3)
    assert any("FlashMLA" in n and "DeepGEMM" in n for n in dep.steps.notes)


def test_explicit_eta_and_roofline_bypass_the_profile():
    for dep in (_h800(eta=0.5), _h800(perf_model="roofline")):
        assert not any("DeepGEMM" in n for n in dep.steps.notes)


def test_other_cards_do_not_read_the_profile():
    dep = deployment.resolve("deepseek-v3", "h200", system="hgx-h200-8",
                             parallel=Parallelism(tp=1, dp=8, expert_parallel=True),
                             engine=deployment.EngineSettings(kv_dtype="fp8"))
    assert not any("deepseek_h800_kernels" in n for n in dep.steps.notes)


# --- two-batch overlap -----------------------------------------------------------------------------------------

def test_two_batch_overlap_without_communication_is_one_batch():
    """Nothing to hide (Llama-3.1-8B on one GPU: no all-reduce, no all-to-all) or nothing to split (one sequence per
    rank): the overlapped step is the plain step — day 6 splits a batch "to hide communication costs"."""
    dep = deployment.resolve("llama-3.1-8b", "h100-sxm", engine=deployment.EngineSettings(kv_dtype="bf16"))
    for batch in (1, 8, 64):
        assert float(dep.steps.with_machine(None, True).decode_s(batch, 1024)) == float(dep.steps.decode_s(batch, 1024))
    ds = _h800().steps.with_dp_imbalance(1.0)
    assert float(ds.with_machine(None, True).decode_s(144, 4096)) == float(ds.decode_s(144, 4096))


def test_two_micro_batches_read_the_weights_twice():
    """DeepSeek's decode layout at 92 sequences per rank: each half batch (46) touches both local experts and reads
    every dense weight, so the overlapped pass reads twice the weight bytes of one batch, the same KV."""
    steps = _h800().steps.with_dp_imbalance(1.0)
    one = steps.decode(144 * 92, 4989)
    two = steps.with_machine(None, True).decode(144 * 92, 4989)
    assert float(two.weight_bytes) == pytest.approx(2 * float(one.weight_bytes), rel=1e-9)
    assert float(two.kv_bytes) == pytest.approx(float(one.kv_bytes), rel=1e-12)
    assert float(two.time_s) < float(one.time_s)


@settings(max_examples=25, deadline=None)
@given(per_rank=st.integers(1, 256), context=st.integers(256, 32_768), prefill=st.booleans())
def test_two_batch_overlap_between_its_bounds(per_rank, context, prefill):
    """DeepSeek's layout on H800 (EP144 decode, EP32 prefill): the staged two-batch pass is never faster than
    the old upper bound max(one batch's kernels, its communication) + host time, and never slower than the two
    micro-batches run one after the other without any overlap (prefill: compute at 132/108 of the SMs' time);
    the host time (step overhead and an eager prefill forward's dispatch) is paid once per forward."""
    from kvplan.calc.overlap import PREFILL_COMPUTE_SM_SHARE

    dp = 32 if prefill else 144
    dep = _h800(dp=dp)
    fn = dep.steps.with_dp_imbalance(1.0).pass_fn       # balanced ranks (a PD pool's steps)
    shapes, effs, par, graphs, _ = fn.parts
    cost, machine = dep.cost, dep.machine
    if prefill:
        kw = dict(tokens=dp * context, kv_bytes=context * cost.kv_token_bytes(1), batch=dp,
                  attention_flops=dp * cost.prefill_attention_flops(0, context), lm_head_rows=dp, context=context,
                  phase="prefill")
    else:
        b = dp * per_rank
        kw = dict(tokens=b, kv_bytes=per_rank * cost.kv_sequence_bytes(context, 1), batch=b,
                  attention_flops=b * cost.decode_attention_flops(context), lm_head_rows=b, context=context,
                  phase="decode")
    serial = fn(cost, machine, tp=1, ep=dp, **kw)
    bound = fn(cost, machine, tp=1, ep=dp, overlap_comm=True, **kw)   # the planners' two-batch pass
    one = np.maximum(serial.op_memory_s, serial.op_compute_s).sum(axis=0)
    host = float(serial.overhead_s) + float(serial.dispatch_s)   # the step's host time, the eager-prefill dispatch
    lower = max(float(one), float(serial.comm_s)) + host         # once per forward (both micro-batches)
    half = {k: (v / 2 if k in ("tokens", "kv_bytes", "batch", "attention_flops", "lm_head_rows") else v)
            for k, v in kw.items()}
    h = fn(cost, machine, tp=1, ep=dp, **half)
    slow = 1 / PREFILL_COMPUTE_SM_SHARE if prefill else 1.0
    upper = 2 * (float(np.maximum(h.op_memory_s, h.op_compute_s * slow).sum(axis=0)) + float(h.comm_s)) + host
    assert lower * (1 - 1e-9) <= float(bound.time_s) <= upper * (1 + 1e-9)

"""The attention-DP lock-step factor λ_dp in the planners' step tables (aggregated) and PD's pools (balanced).

λ_dp(8) = 37,912 / 34,140 (TensorRT-LLM tech blog 10: DeepSeek-V3 DP8 + EP8 on 8×GB200, in-flight batching with
ADP balance, 34,140 tok/s of a balanced 37,912). λ_dp(N) = (1 + w) / (1 + w / N) through it: w = (λ8 − 1) /
(1 − λ8 / 8) = 0.110486 / 0.861189 = 0.128295, λ_dp(4) = 1.128295 / 1.032074 = 1.093231.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.plans.build import latency_from_names
from kvplan.plans.deployment import EngineSettings, Parallelism, resolve

LAMBDA_8 = 37_912 / 34_140                      # 1.110486...
LAMBDA_4 = 1.093231                             # by hand, module docstring


def _kernels(p):
    """Σ operators of one pass: the step less its communication and host terms (not overlapped)."""
    return np.asarray(p.time_s) - np.asarray(p.comm_s) - np.asarray(p.overhead_s)


@pytest.fixture(scope="module")
def dep8():
    return resolve("deepseek-v3", "h200", engine=EngineSettings(engine="trtllm", weights_dtype="fp8"),
                   parallel=Parallelism(tp=1, dp=8, expert_parallel=True))


def test_aggregated_steps_charge_lambda_dp_on_the_kernels_only(dep8):
    agg, bal = dep8.steps, dep8.steps.with_dp_imbalance(1.0)
    assert agg.dp_imbalance == pytest.approx(LAMBDA_8, rel=1e-12) and bal.dp_imbalance == 1.0
    batch, context = np.array([8.0, 512.0, 4096.0]), np.array([1024.0, 2048.0, 1024.0])
    a, b = agg.decode(batch, context), bal.decode(batch, context)
    assert_allclose(_kernels(a), LAMBDA_8 * _kernels(b), rtol=1e-9)
    assert_allclose(a.comm_s, b.comm_s, rtol=1e-12)
    assert_allclose(a.overhead_s, b.overhead_s, rtol=1e-12)
    # a prefill and a mixed chunk step of the aggregated instance carry it as well
    pa, pb = agg.prefill(8, 1024), bal.prefill(8, 1024)
    assert_allclose(_kernels(pa), LAMBDA_8 * _kernels(pb), rtol=1e-9)
    assert np.all(np.asarray(agg.mixed_chunk(64, 2048, 4096, 2048)[0])
                  > np.asarray(bal.mixed_chunk(64, 2048, 4096, 2048)[0]))
    assert any("λ_dp = 1.110 at dp 8" in n for n in agg.notes)
    assert not any("λ_dp = 1.110" in n for n in bal.notes) and any("λ_dp = 1 on these steps" in n for n in bal.notes)


def test_planner_steps_agree_with_kvplan_latency_at_dp_gt_1():
    """The step ``kvplan latency`` prints and the step table ``plan`` reads are one number (they differed by λ_dp)."""
    for dp, lam in ((8, LAMBDA_8), (4, LAMBDA_4)):
        row = latency_from_names("deepseek-v3", "h200", isl=1024, osl=64, batch=64 * dp, dp=dp, expert_parallel=True,
                                 weights_dtype="fp8", engine="trtllm").rows[0]
        assert row["dp_imbalance"] == pytest.approx(lam, rel=1e-6)
        dep = resolve("deepseek-v3", "h200", engine=EngineSettings(engine="trtllm", weights_dtype="fp8"),
                      parallel=Parallelism(tp=1, dp=dp, expert_parallel=True))
        assert dep.steps.dp_imbalance == pytest.approx(lam, rel=1e-6)
        assert float(dep.steps.decode_s(64 * dp, 1024)) == pytest.approx(row["decode_step_s"], rel=1e-6)


def test_one_rank_and_the_roofline_take_no_lambda_dp():
    one = resolve("deepseek-v3", "h200", engine=EngineSettings(engine="trtllm", weights_dtype="fp8"),
                  parallel=Parallelism(tp=8, dp=1, expert_parallel=True))
    assert one.steps.dp_imbalance == 1.0 and one.steps.with_dp_imbalance(1.0) is one.steps
    roof = resolve("deepseek-v3", "h200", engine=EngineSettings(engine="trtllm", weights_dtype="fp8",
                                                                perf_model="roofline"),
                   parallel=Parallelism(tp=1, dp=8, expert_parallel=True))
    assert roof.steps.with_dp_imbalance(1.0) is roof.steps


def test_pd_pools_step_balanced(dep8):
    """A PD decode pool mixes no context chunks: its decode table is the balanced step (λ_dp = 1)."""
    from kvplan.plans.pd.model import decode_table

    bal = dep8.steps.with_dp_imbalance(1.0)
    batch, step = decode_table(dep8.cost, dep8.machine, 1, 2048.0, 512 * 8, 8, False, steps=bal)
    assert_allclose(step, np.asarray(bal.decode_s(batch, 2048.0)), rtol=1e-12)
    assert np.all(step < np.asarray(dep8.steps.decode_s(batch, 2048.0)))


def test_pd_plan_says_its_pools_step_balanced():
    from kvplan.plans.pd.plan import plan_pd

    answer = plan_pd("deepseek-v3", "h200", system="hgx-h200-8", expert_parallel=True, prefill_tp=[1], decode_tp=[1],
                     prefill_dp=[8], decode_dp=[8], qps=2, isl=2048, osl=256, tpot="p50<=100ms",
                     settings=EngineSettings(kv_dtype="fp8", weights_dtype="fp8"), aggregated=False,
                     sensitivity=False)
    notes = " | ".join(answer.notes)
    # both pools' notes, merged by pd into one ("prefill and decode ...")
    assert "prefill and decode pool with attention DP: its ranks step balanced (λ_dp = 1)" in notes
    assert "λ_dp = 1.110 at dp 8" not in notes

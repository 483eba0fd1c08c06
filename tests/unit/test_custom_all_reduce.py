"""``--disable-custom-all-reduce``: the TP all-reduce at NCCL's measured latency instead of the engine's kernel.

Closed form (kvplan/data/perf/comm.csv, aiconfigurator's nccl-tests rows, A100 SXM, NCCL 2.27.3): an fp16
all-reduce of 4,096 elements (8,192 bytes) on 8 GPUs takes 21.27 µs (src_row 466). Llama-2-7B at TP 8 and batch 1
all-reduces hidden 4,096 bf16 values = 8,192 bytes, 2 per layer × 32 layers + 1 = 65 times per decode step:
65 × 21.27 µs = 1.38255 ms.
"""

from __future__ import annotations

import pytest

from kvplan.plans.build import latency_from_names

from ..conftest import json_rows

NCCL_8192_B_8_GPUS_S = 2.127e-05          # comm.csv: a100_sxm,nccl,2.27.3,nccl,all_reduce,fp16,8,4096,8192
ALL_REDUCES = 2 * 32 + 1


def test_nccl_all_reduce_by_closed_form():
    row = latency_from_names("llama-2-7b", "a100-80gb", isl=5, osl=2, batch=1, tp=8, custom_all_reduce=False).rows[0]
    assert row["decode_comm_s"] == pytest.approx(ALL_REDUCES * NCCL_8192_B_8_GPUS_S, rel=1e-9)


def test_the_custom_kernel_is_the_default_and_faster_at_small_messages():
    custom = latency_from_names("llama-2-7b", "a100-80gb", isl=5, osl=2, batch=1, tp=8).rows[0]
    nccl = latency_from_names("llama-2-7b", "a100-80gb", isl=5, osl=2, batch=1, tp=8, custom_all_reduce=False).rows[0]
    assert custom["decode_comm_s"] < 0.6 * nccl["decode_comm_s"]
    # the kernels are the same: only the communication term moves
    assert nccl["decode_step_s"] - custom["decode_step_s"] == pytest.approx(
        nccl["decode_comm_s"] - custom["decode_comm_s"], rel=1e-9)


def test_cli_flag_and_its_note(invoke):
    args = ("latency", "llama-2-7b", "a100-80gb", "--tp", "8", "--isl", "5", "--osl", "2", "--format", "json")
    res = invoke(*args, "--disable-custom-all-reduce")
    assert res.exit_code == 0, res.stderr
    assert json_rows(res)[0]["decode_comm_s"] == pytest.approx(ALL_REDUCES * NCCL_8192_B_8_GPUS_S, rel=1e-9)
    assert "TP all-reduce: NCCL (--disable-custom-all-reduce)" in res.stderr
    assert "NCCL (--disable-custom-all-reduce)" not in invoke(*args).stderr

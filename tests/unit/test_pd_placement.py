"""Supernode placements (seed §8) and the engineering checklist (§10) of ``kvplan pd``."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc.roofline import decode_step
from kvplan.calc.tiering import suffix_prefill_s
from kvplan.plans import deployment
from kvplan.plans.deployment import Parallelism
from kvplan.plans.pd.placement import fragmented
from kvplan.plans.pd.plan import plan_pd

CM = dict(expert_parallel=True, prefill_tp=[1], decode_tp=[1], prefill_dp=[32], decode_dp=[64], qps=100, isl=4383,
          osl=1211, cached_prefix_fraction=0.563, tpot="p50<=50ms", aggregated=False, sensitivity=False,
          settings=deployment.EngineSettings(kv_dtype="bf16", weights_dtype="bf16"))


@lru_cache(maxsize=None)
def _decode_deployment(model: str, system: str, dp: int):
    return deployment.resolve(model, system=system, parallel=Parallelism(tp=1, dp=dp, expert_parallel=True),
                              engine=deployment.EngineSettings(kv_dtype="fp8", weights_dtype="auto")
                              if system == "hgx-h800-8" else deployment.EngineSettings(kv_dtype="bf16",
                                                                                         weights_dtype="bf16"))


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from([("deepseek-v3", "cloudmatrix-384", 32), ("deepseek-v3", "cloudmatrix-384", 64),
                             ("kimi-k2", "cloudmatrix-384", 64), ("deepseek-v3", "hgx-h800-8", 8),
                             ("deepseek-v3", "hgx-h800-8", 32), ("deepseek-v3", "gb200-nvl72", 32),
                             ("kimi-k2", "gb200-nvl72", 64), ("deepseek-v3", "hgx-h200-8", 8)]),
       per_rank=st.integers(1, 256), context=st.integers(1, 32_768), node=st.sampled_from([1, 2, 4, 8]))
def test_decode_inside_the_domain_is_never_slower_than_across_nics(case, per_rank, context, node):
    """The same EP decode instance (same experts, batch, context) inside one scale-up domain steps no slower
    than assembled from ``node``-GPU pieces whose collectives cross the NIC (scale-up bandwidth ≥ NIC's);
    the prefill pass of one prompt per rank (DeepEP's normal kernels) likewise."""
    model, system, dp = case
    dep = _decode_deployment(model, system, dp)
    inside = dep.machine
    across = fragmented(inside, node)
    batch = per_rank * dp
    t_in = decode_step(dep.cost, inside, batch, context, tp=1, ep=dp).time_s
    t_out = decode_step(dep.cost, across, batch, context, tp=1, ep=dp).time_s
    assert np.all(t_in <= t_out * (1 + 1e-12))
    p_in = suffix_prefill_s(dep.cost, inside, 0.0, context, tp=1, dp=dp)
    p_out = suffix_prefill_s(dep.cost, across, 0.0, context, tp=1, dp=dp)
    assert np.all(p_in <= p_out * (1 + 1e-12))


def test_cloudmatrix_placements_pick_one_domain_with_the_locality_reason():
    rows = plan_pd("deepseek-v3", "cloudmatrix-384", placements=True, **CM).rows
    placed = {r["placement"]: r for r in rows if r["placement"]}
    assert set(placed) == {"one-domain", "partitions", "across-domains"}
    one, part, far = placed["one-domain"], placed["partitions"], placed["across-domains"]
    assert one["placement_picked"] and one["link_kind"] == "scale_up" and part["link_kind"] == far["link_kind"] == "nic"
    # the KV over the 392 GB/s UB link is exposed less than over the 50 GB/s × 0.87 RDMA plane
    assert one["exposed_transfer_s"] < part["exposed_transfer_s"]
    assert one["link_bandwidth_bytes_per_s"] == pytest.approx(392e9)
    assert part["link_bandwidth_bytes_per_s"] == pytest.approx(50e9 * 0.87)
    # spread over 8-NPU nodes the EP64 all-to-all leaves the UB plane: never fewer GPUs, never faster steps
    assert far["total_gpus"] >= one["total_gpus"]
    assert far["first_decode_step_s"] >= one["first_decode_step_s"]
    assert "P and D in one scale-up domain" in one["placement_reason"]
    assert rows[0]["xpyd"] == one["xpyd"]  # auto planned the same unit over the scale-up link


def test_h800_nodes_cannot_hold_the_day6_unit_in_one_domain():
    rows = plan_pd("deepseek-v3", "h800", system="hgx-h800-8", expert_parallel=True, prefill_tp=[1], decode_tp=[1],
                   prefill_dp=[32], decode_dp=[144], redundant_experts=32, qps=1605.4, isl=4383, osl=1211,
                   cached_prefix_fraction=0.563, tpot="p50<=50ms", settings=deployment.EngineSettings(kv_dtype="fp8"),
                   aggregated=False, sensitivity=False, checklist=True).rows
    placed = {r["placement"]: r for r in rows if r["placement"]}
    assert placed["one-domain"]["placement_fits"] is False
    assert "more than the 8-GPU scale-up domain" in placed["one-domain"]["placement_reason"]
    assert rows[0]["link_kind"] == "nic"
    figures = rows[0]["checklist"]
    # 2. the KV decode reads per GPU per step = SLO batch / 144 ranks × KV per request, over HBM × η: on H800 the
    # decode attention runs at FlashMLA's published "up to 3000 GB/s" (its README), the step model's own η_mem
    dep = deployment.resolve("deepseek-v3", "h800", system="hgx-h800-8",
                             parallel=Parallelism(tp=1, dp=144, expert_parallel=True, redundant_experts=32),
                             engine=deployment.EngineSettings(kv_dtype="fp8"))
    context = 4383 + 1211 / 2
    per_request = float(dep.layout.sequence_bytes(4383 + 1211 / 2, per_gpu=True))
    assert figures["decode_kv_read_bytes_per_gpu"] == pytest.approx(rows[0]["decode_batch_at_slo"] / 144 * per_request,
                                                                    rel=1e-9)
    assert figures["decode_kv_read_s"] == pytest.approx(
        figures["decode_kv_read_bytes_per_gpu"] / 3000e9, rel=1e-9)
    assert context == pytest.approx(4988.5)
    assert figures["migration_keeps_up"] is True and figures["needs_supernode"] is False
    assert figures["concurrency_headroom"] > 1


def test_checklist_and_placements_through_the_cli(invoke):
    args = ["pd", "deepseek-v3", "cloudmatrix-384", "--enable-expert-parallel", "--prefill-dp", "32", "--decode-dp",
            "64", "--qps", "100", "--isl", "4383", "--osl", "1211", "--cached-prefix-fraction", "0.563",
            "--weights-dtype", "bf16", "--kv-dtype", "bf16", "--tpot", "p50<=50ms", "--no-aggregated",
            "--no-sensitivity", "--checklist"]
    table = invoke(*args)
    assert table.exit_code == 0, table.stderr
    assert "checklist (seed §10):" in table.stdout and "6. supernode:" in table.stdout
    rows = json.loads(invoke(*args, "--format", "json").stdout)
    assert [r["scenario"] for r in rows] == ["base", "placement: one-domain", "placement: partitions",
                                             "placement: across-domains"]
    assert all(set(r) == set(rows[0]) for r in rows)
    assert rows[0]["checklist"]["needs_supernode"] is True  # across 8-NPU nodes the same SLOs take more NPUs

"""The fleet model's fast paths give the plain computation's values bit for bit (kvplan plan's speed, issue #13).

- stepwait.ttft_cdf's branches drop the tandem wait's terms that their probabilities zero: equal to
  tails.wait_plus_service_cdf composed as the module docstring writes it;
- the moments' columns interpolated at once equal numpy's interp column by column;
- the point below the answer, evaluated at the SLOs' statistics only, has the full evaluation's values there;
- the KV bytes per token over an array of tp are the per-tp values.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from kvplan.calc import tails
from kvplan.calc.cost import model_cost
from kvplan.cards.loader import load_model
from kvplan.engines import get_profile
from kvplan.plans.fleet import stepwait
from kvplan.plans.fleet.aggregated import parse_slo, plan_aggregated
from kvplan.plans.fleet.plan import fleet_workload


def test_ttft_cdf_branches_are_the_tandem_wait_composed():
    rng = np.random.default_rng(3)
    service = np.unique(rng.lognormal(-2, 1, 300))
    weights = rng.random(service.size)
    weights /= weights.sum()
    heavy = stepwait.heavy_tail(rng.lognormal(-3, 1.5, 1024), 0.3, 0.5, 3, 0.2)
    x = np.concatenate([np.exp(rng.uniform(-6, 3, 40)), service[:5], service[:5] + 0.2, [0.0, -1.0]])
    for c1, th1, c2, th2, cap in itertools.product([0.0, 1e-200, 0.3, 1.0], [0.0, 0.01, 0.0100000000001, math.inf],
                                                   [0.0, 1e-13, 0.2], [1e-3, 0.01, math.inf], [None, heavy]):
        shifted = None if cap is None else (lambda v, cap=cap: cap(v + 0.2))
        base = tails.wait_plus_service_cdf(x, service, c1, th1, 0.0, 0.0, cap, weights)
        plain = base if c2 <= 1e-12 else (1 - c2) * base + c2 * tails.wait_plus_service_cdf(
            x, service + 0.2, c1, th1, 1.0, th2, shifted, weights)
        fast = stepwait.ttft_cdf(service, weights, (c1, th1), (c2, th2), 0.2, cap)(x)
        assert np.array_equal(fast, plain), (c1, th1, c2, th2, cap is not None)


def test_moments_interpolated_at_once_are_numpys_interp():
    workload = fleet_workload(qps=20, isl="1k:4k", osl="200:800", sample_requests=5_000)
    plan = plan_aggregated("llama-3.1-8b", "h100-sxm", workload, [parse_slo("ttft", "p99<=2s")])
    f = plan.figures
    grid = f.b_grid
    batches = np.concatenate([grid[:4], grid[-2:], [0.5, 1.5, 7.3, 123.4, grid[-1] + 10], np.linspace(1, grid[-1], 17)])
    plain = np.stack([np.interp(batches, grid, column) for column in np.asarray(f.moments).T], axis=-1)
    assert np.array_equal(f.step_and_moments(batches)[1], plain)
    for i, b in enumerate(batches):  # one batch at a time (the occupancy iteration)
        assert np.array_equal(f.step_and_moments(np.array([b]))[1], plain[i:i + 1])


def test_the_point_below_has_the_full_evaluations_slo_statistics():
    slos = [parse_slo("ttft", "p90<=1.2s"), parse_slo("tpot", "p99<=200ms")]
    plan = plan_aggregated("llama-3.1-8b", "h100-sxm", fleet_workload(qps=5, isl="16k", osl="100",
                                                                      sample_requests=5_000), slos)
    below, full = plan.below, plan.setup["model"].evaluate(plan.instances - 1)
    assert plan.binding_constraint == "tpot_slo" and below.failures == full.failures == ["tpot_slo"]
    assert set(below.ttft) == set(below.tpot) == {"mean", "meets", "p90", "p99"}  # the SLOs' statistics only
    assert all(below.ttft[k] == full.ttft[k] for k in below.ttft) and all(below.tpot[k] == full.tpot[k]
                                                                          for k in below.tpot)


def test_kv_token_bytes_over_an_array_of_tp():
    cost = model_cost(load_model("llama-3.1-70b"), get_profile("vllm"), tps=(1, 2, 4, 8))
    tp = np.array([[1, 2], [8, 4], [2, 2.0]])
    assert np.array_equal(cost.kv_token_bytes(tp), np.vectorize(lambda t: float(cost.kv_token_bytes(int(t))))(tp))

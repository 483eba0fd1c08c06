"""The slope a Poisson occupancy sees, E[f(B + 1) − f(B)] with B ~ Poisson(b) (kvplan.plans.fleet.figures).

Worked by hand:
- a line f(k) = 3 + 0.5 k has slope 0.5 at every mean;
- f(k) = k²: E[(B + 1)² − B²] = 2 E[B] + 1 = 2b + 1;
- a step of 1 between k = 16 and 17 (a CUDA-graph bucket edge): E[f(B + 1) − f(B)] = P(B = 16)
  = e^−16 · 16^16 / 16! = 0.0992175 at b = 16 (16^16 = 18,446,744,073,709,551,616; 16! = 20,922,789,888,000;
  e^−16 = 1.12535175e−7), and at b = 4, P(B = 16) = e^−4 · 4^16 / 16! = 0.0183156 × 4,294,967,296 / 16! = 3.7598e−6.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.plans.fleet.figures import poisson_slope, poisson_support, poisson_weights

K = np.arange(0.0, poisson_support(40.0) + 2.0)


def test_a_line_has_its_own_slope_at_every_mean():
    assert poisson_slope([0.0, 0.5, 3.0, 16.0, 40.0], 3 + 0.5 * K) == pytest.approx([0.5] * 5, rel=1e-12)


def test_a_square_has_slope_two_b_plus_one():
    means = np.array([0.5, 3.0, 16.0, 40.0])
    assert poisson_slope(means, K**2) == pytest.approx(2 * means + 1, rel=1e-9)


def test_a_bucket_edge_is_spread_over_the_occupancy():
    edge = (K >= 17).astype(float)
    slope = poisson_slope([16.0, 4.0], edge)
    assert slope[0] == pytest.approx(0.0992175, rel=1e-5)
    assert slope[1] == pytest.approx(3.7598e-6, rel=1e-4)


def test_the_slope_moves_continuously_with_the_mean():
    # the secant over b ± √b jumped as the edge crossed its ends; the Poisson slope does not
    edge = (K >= 17).astype(float)
    means = np.linspace(8.0, 30.0, 2201)
    slope = poisson_slope(means, edge)
    assert np.max(np.abs(np.diff(slope))) < 1e-3


def test_weights_are_a_distribution_and_zero_mean_sits_at_zero():
    w = poisson_weights([0.0, 2.5, 40.0], K.size)
    assert w.sum(axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-9)
    assert w[0, 0] == 1.0 and w[0, 1:].sum() == 0.0


def test_an_infinite_value_is_left_out():
    f = np.where(K > 30, np.inf, K.copy())
    assert poisson_slope([5.0], f)[0] == pytest.approx(1.0, rel=1e-9)

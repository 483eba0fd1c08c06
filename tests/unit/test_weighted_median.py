"""kvplan.sim.engine.weighted_median, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.sim.engine import weighted_median


@pytest.mark.parametrize(("values", "weights", "median"), [
    ([3.0, 1.0, 2.0], [1, 1, 1], 2.0),          # the middle of three
    ([5.0, 1.0], [1, 3], 1.0),                  # three quarters of the weight at 1
    ([0.008, 0.4, 0.2], [1584, 4, 4], 0.008),   # a wave: 1,584 decode steps and 8 stalls
    ([1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1], 2.0),  # an even count: the lower median
])
def test_weighted_median(values, weights, median):
    assert weighted_median(np.asarray(values), np.asarray(weights, dtype=float)) == median

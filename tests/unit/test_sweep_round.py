"""The sweep's max_concurrency is kvplan fit's ``round(concurrency, 4)``, computed for a whole seq axis at once."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.plans.check.sweep import round_4


def _python(values) -> list[float]:
    return [round(float(v), 4) for v in values]


def test_round_4_is_pythons_round_on_ties_and_edges():
    # halves at the 4th decimal (ties), values whose ×10⁴ lands near a half, huge and infinite values
    values = [0.0, 5e-5, 1.00005, 2.00005, 0.00015, 12345.67885, 0.12345, 2.5e-5, 1e-9, 1e300, 2.0**60 / 3,
              math.inf, 7.77775, 123456789.00005, 3.14159265]
    assert round_4(np.array(values)).tolist() == _python(values)


def test_round_4_is_pythons_round_on_grids():
    rng = np.random.default_rng(7)
    for values in (rng.uniform(0, 1e6, 200_000), rng.lognormal(0, 8, 200_000), np.arange(0, 20_000) / 20_000.0,
                   np.round(rng.uniform(0, 100, 100_000), 5)):
        assert round_4(values).tolist() == _python(values)


@settings(max_examples=200, derandomize=True, database=None)
@given(st.lists(st.floats(min_value=0, allow_nan=False), min_size=1, max_size=50))
def test_round_4_property(values):
    assert round_4(np.array(values)).tolist() == _python(values)

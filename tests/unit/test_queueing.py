"""Little's law and the queueing formulas against values worked by hand."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc.queueing import (erlang_b, erlang_c, littles_law_concurrency, mean_wait_s, min_servers,
                                  wait_quantile_s)


def test_littles_law():
    # 400 requests/s each in the system for 10 s → 4,000 in flight
    assert littles_law_concurrency(400, 10.0) == 4000


def test_mm1_is_rho():
    # M/M/1: P(wait) = ρ; E[Wq] = ρ / (μ − λ) = 0.5 / 0.5 = 1 s
    assert_allclose(erlang_c(1, 0.5), 0.5)
    assert_allclose(mean_wait_s(1, 0.5, 1.0), 1.0)


def test_mm2_by_hand():
    # a = 1, c = 2: B = (1/2) / (1 + 1 + 1/2) = 0.2; C = 0.2 / (1 − 0.5 × 0.8) = 1/3; Wq = C / (2 − 1)
    assert_allclose(erlang_b(2, 1.0), 0.2)
    assert_allclose(erlang_c(2, 1.0), 1 / 3)
    assert_allclose(mean_wait_s(2, 1.0, 1.0), 1 / 3)


def test_erlang_c_table_value():
    # 10 servers, 8 Erlangs: C = 0.4092 (standard Erlang-C tables)
    assert_allclose(erlang_c(10, 8.0), 0.4092, atol=5e-4)


def test_mm1_quantile_closed_form():
    # P(W > t) = 0.5 e^(−0.5 t): p99 = ln(0.5 / 0.01) / 0.5 = 2 ln 50
    assert_allclose(wait_quantile_s(0.99, 1, 0.5, 1.0), 2 * math.log(50))
    # below the probability of waiting at all, the quantile is zero
    assert wait_quantile_s(0.4, 1, 0.5, 1.0) == 0.0


def test_allen_cunneen_md1_is_pollaczek_khinchine():
    # M/D/1 (cs² = 0): Wq = λ S² / (2 (1 − ρ)) = 0.5 × 1 / (2 × 0.5) = 0.5, exact for one server
    assert_allclose(mean_wait_s(1, 0.5, 1.0, ca2=1.0, cs2=0.0), 0.5)


def test_unstable_queue_is_infinite():
    assert np.isinf(mean_wait_s(2, 3.0, 1.0))
    assert np.isinf(wait_quantile_s(0.5, 2, 2.0, 1.0))


def test_min_servers_by_hand():
    # λ = 1, S = 1: c = 2 gives p99 = ln((1/3)/0.01) / 1 = 3.51 s; c = 3 gives C = 1/11 → ln(9.09)/2 = 1.10 s
    assert min_servers(1.0, 1.0, 0.99, 4.0) == 2
    assert min_servers(1.0, 1.0, 0.99, 2.0) == 3
    assert_allclose(wait_quantile_s(0.99, 3, 1.0, 1.0), math.log((1 / 11) / 0.01) / 2, rtol=1e-9)


@settings(max_examples=80, deadline=None)
@given(c=st.integers(1, 64), load_frac=st.floats(0.05, 0.95), s=st.floats(0.01, 10), p=st.floats(0.5, 0.999))
def test_more_servers_never_wait_longer(c, load_frac, s, p):
    lam = load_frac * c / s
    assert wait_quantile_s(p, c + 1, lam, s) <= wait_quantile_s(p, c, lam, s) + 1e-12
    assert mean_wait_s(c + 1, lam, s) <= mean_wait_s(c, lam, s) + 1e-12


@settings(max_examples=60, deadline=None)
@given(c=st.integers(1, 32), s=st.floats(0.01, 10), p=st.floats(0.5, 0.99), a=st.floats(0.1, 0.9),
       extra=st.floats(0.0, 0.09))
def test_more_load_never_waits_less(c, s, p, a, extra):
    lam = a * c / s
    assert wait_quantile_s(p, c, lam * (1 + extra), s) >= wait_quantile_s(p, c, lam, s) - 1e-12

"""Engine start-up logs of vLLM, SGLang and TensorRT-LLM, reproduced with kvplan.

The records (source URL, quoted log lines, public inputs, tolerance and its reason) live in
``tests/validation/engine_logs.py`` so that ``benchmarks/make_validation.py`` publishes the
same figures; each test id is the record's key.
"""

from __future__ import annotations

import pytest

from tests.validation.engine_logs import LOGS, _vllm_10517

pytestmark = pytest.mark.validation


def _id(log) -> str:
    return log.key


@pytest.mark.parametrize("log", LOGS, ids=_id)
def test_logged_figure_reproduced(log):
    """kvplan's figure is within the log's own rounding, or the documented gap is pinned."""
    value = log.kvplan()
    if log.agrees:
        assert abs(value - log.logged) <= log.tolerance, (
            f"{log.key} ({log.source}): logged {log.logged:,} {log.unit}, kvplan {value:,} "
            f"(tolerance ±{log.tolerance}: {log.tolerance_reason})")
    else:
        assert abs(value - log.logged) > log.tolerance, f"{log.key} now agrees: update the record"
        assert value - log.logged == log.documented_error, (log.key, log.disagreement)


@pytest.mark.parametrize("log", LOGS, ids=_id)
def test_record_quotes_its_figure_and_cites_its_source(log):
    assert log.source.startswith("https://github.com/")
    text = " ".join(log.quote)
    shown = {f"{log.logged:,.0f}", f"{log.logged:.0f}", f"{log.logged:.2f}", f"{log.logged:g}"}
    assert any(s in text for s in shown), f"{log.key}: the quoted lines do not show {log.logged}"
    assert log.tolerance_reason and log.inputs


def test_at_least_six_independent_logs_across_the_three_engines():
    sources = {(log.engine, log.source) for log in LOGS}
    assert {engine for engine, _ in sources} == {"vllm", "sglang", "trtllm"}
    assert len({source for _, source in sources}) >= 6


def test_vllm_10517_refuses_29000_and_accepts_20000():
    """vLLM #10517: 1.56x at 20000 starts; at 29000 the KV cache holds 23,648 tokens (0.82x) and start-up fails."""
    ok, bad = _vllm_10517(20000, 17.06), _vllm_10517(29000, 17.98)
    assert ok["fits"] and ok["max_concurrency"] == pytest.approx(1.56, abs=0.01)
    assert not bad["fits"] and bad["max_concurrency"] == pytest.approx(0.82, abs=0.01)

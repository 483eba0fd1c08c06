"""Huge or tiny but accepted values compute without a numpy RuntimeWarning; values past the range are refused.

A hardware card with ``hbm_bandwidth_bytes_per_s: 1e-300`` (finite, positive) once gave infinite
step times, NaN percentiles and numpy "overflow encountered in divide" / "invalid value" warnings
in latency, plan and pd; ``kvplan plan --concurrency`` on it did not finish. Cards now bound their
rates and times (1 MB/s to 1 EB/s, 1 MFLOP/s to 1 ZFLOP/s, efficiency >= 0.001, latencies and the
step overhead <= 1 h): the tests run every planner at both ends of those ranges with warnings
turned into errors, and check the refusals just outside them.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import yaml

from kvplan.cards import schema

from .corpus import CALIBRATION, HARDWARE
from .harness import assert_refused, run_inprocess, run_subprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None}


def _card(tmp_path, name: str, slow: bool) -> str:
    card = json.loads(json.dumps(HARDWARE))
    card.pop("field_sources", None)
    card.pop("aliases", None)
    card["name"] = name
    rate = schema.MIN_RATE_BYTES_PER_S if slow else schema.MAX_RATE_BYTES_PER_S
    card["hbm_bandwidth_bytes_per_s"] = rate
    card["peak_flops_per_s"] = {k: schema.MIN_FLOPS_PER_S if slow else schema.MAX_FLOPS_PER_S
                                for k in card["peak_flops_per_s"]}
    card["efficiency"] = ({"memory_bandwidth": schema.MIN_EFFICIENCY, "flops": schema.MIN_EFFICIENCY,
                           "step_overhead_s": schema.MAX_LATENCY_S} if slow
                          else {"memory_bandwidth": 1.0, "flops": 1.0, "step_overhead_s": 0.0})
    for link in ("scale_up", "host_link"):
        card[link] = {**card[link], "bandwidth_bytes_per_s": rate,
                      "latency_s": schema.MAX_LATENCY_S if slow else 0.0,
                      "efficiency": schema.MIN_EFFICIENCY if slow else 1.0}
    directory = tmp_path / "cards" / "hardware_cards"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.yaml").write_text(yaml.safe_dump(card, sort_keys=False), encoding="utf-8")
    return str(tmp_path / "cards")


def _quiet_run(args):
    """``kvplan ARGS`` with every RuntimeWarning an error (one would surface as an internal error, exit 2)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_inprocess(args, env=NO_CI, timeout_s=60)
    runtime = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not runtime, runtime
    return res


WORKLOAD = ("--qps", "1", "--isl", "1k", "--osl", "100")
COMMANDS = {
    "latency": lambda hw: ("latency", "llama-3.1-8b", hw, "--isl", "1k", "--osl", "100", "--batch", "1,64"),
    "latency-max": lambda hw: ("latency", "llama-3.1-8b", hw, "--isl", "1k", "--osl", "100", "--batch", "max"),
    "latency-tp8": lambda hw: ("latency", "llama-3.1-8b", hw, "--isl", "1k", "--osl", "100", "--tp", "8"),
    "latency-ep": lambda hw: ("latency", "deepseek-v3", hw, "--dp", "8", "--enable-expert-parallel", "--isl", "1k",
                              "--osl", "1k", "--batch", "16"),
    "plan": lambda hw: ("plan", "llama-3.1-8b", hw, *WORKLOAD),
    "plan-tp8": lambda hw: ("plan", "llama-3.1-8b", hw, *WORKLOAD, "--tp", "8"),
    "plan-concurrency": lambda hw: ("plan", "llama-3.1-8b", hw, "--concurrency", "1,8", "--isl", "1k", "--osl", "100"),
    "pd": lambda hw: ("pd", "llama-3.1-8b", hw, *WORKLOAD),
    "route": lambda hw: ("route", "--rate", "1", "--isl", "1k", "--osl", "100", "--sample", "200", "llama-3.1-8b",
                         hw, "--instances", "1,2"),
}


@pytest.mark.parametrize("slow", [True, False], ids=["slowest-card", "fastest-card"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_planners_at_the_ends_of_a_cards_range_compute_without_warnings(tmp_path, command, slow):
    name = "edge-slow" if slow else "edge-fast"
    cards = _card(tmp_path, name, slow)
    res = _quiet_run([*COMMANDS[command](name), "--cards", cards, "-f", "json"])
    assert res.exit_code in (0, 1), res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    if slow and command.startswith("latency"):
        rows = json.loads(res.stdout)
        assert rows and all(math.isfinite(r["tpot_s"]) and r["tpot_s"] > 1.0 for r in rows if "tpot_s" in r)
    if slow and command in ("plan", "plan-tp8"):
        assert res.exit_code == 1  # nothing that slow meets the default SLOs: the answer is no, not a NaN


@pytest.mark.parametrize("field,value,needle", [
    ("hbm_bandwidth_bytes_per_s", 1e-300, "greater than or equal to 1000000"),
    ("hbm_bandwidth_bytes_per_s", 1e300, "less than or equal to 1000000000000000000"),
    ("peak_flops_per_s", {"bf16": 1e-300}, "peak_flops_per_s.bf16: must be between 1e+06 and 1e+21"),
    ("efficiency", {"memory_bandwidth": 1e-300}, "efficiency.memory_bandwidth"),
    ("efficiency", {"step_overhead_s": 1e300}, "efficiency.step_overhead_s"),
    ("scale_up", {"name": "x", "bandwidth_bytes_per_s": 1e-300}, "scale_up.bandwidth_bytes_per_s"),
    ("host_link", {"name": "x", "bandwidth_bytes_per_s": 6.4e10, "latency_s": 1e300}, "host_link.latency_s"),
])
def test_a_card_figure_past_the_range_is_refused(tmp_path, field, value, needle):
    card = json.loads(json.dumps(HARDWARE))
    card.pop("field_sources", None)
    card[field] = value
    path = tmp_path / "hw.yaml"
    path.write_text(yaml.safe_dump(card, sort_keys=False), encoding="utf-8")
    res = _quiet_run(["latency", "llama-3.1-8b", path, "--isl", "1k", "--osl", "100"])
    assert_refused(res)
    assert needle in res.stderr.splitlines()[0]


def test_every_shipped_card_is_inside_the_range():
    res = run_inprocess(["cards", "validate", "-f", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) > 40 and all(r["valid"] in (True, "yes") for r in rows)


def test_calibrating_to_times_no_card_may_hold_is_refused(tmp_path):
    # measurements in the wrong unit (10^4 too slow) imply eta ~ 7e-5: the overlay card could not be loaded
    lines = CALIBRATION.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    scaled = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        for i, key in enumerate(header):
            if key.endswith("_s") and cells[i]:
                cells[i] = repr(float(cells[i]) * 1e4)
        scaled.append(",".join(cells))
    measured = tmp_path / "slow.csv"
    measured.write_text("\n".join(scaled) + "\n", encoding="utf-8")
    card = tmp_path / "card.yaml"
    res = _quiet_run(["calibrate", "llama-3.1-8b", "h100-sxm", measured, "--card-out", card])
    assert_refused(res, outputs=[card])
    assert "outside what a hardware card holds (efficiency >= 0.001" in res.stderr.splitlines()[0]


def test_a_multi_turn_window_too_large_to_draw_is_refused_before_allocating():
    # 10,000 turns 10^9 s apart at 1 request/s: 1.3e13 turn arrivals (it reached 19.5 GB before)
    res = run_subprocess(["plan", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "1k", "--osl", "100",
                          "--turns", "10000", "--think-time", "1e9s"], env=NO_CI, timeout_s=30)
    assert_refused(res)
    assert "turn arrivals), more than the 16,777,216 kvplan draws" in res.stderr.splitlines()[0]


def test_a_vanishing_rate_is_refused_with_a_short_message():
    res = _quiet_run(["plan", "llama-3.1-8b", "h100-sxm", "--qps", "1e-300", "--isl", "1k", "--osl", "100"])
    assert_refused(res)
    assert res.stderr.splitlines()[0] == "Error: trace 'synthetic' spans 3.16e+297 years of arrivals"
    assert "--qps" in res.stderr.splitlines()[1]

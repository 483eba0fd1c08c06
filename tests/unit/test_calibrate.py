"""``kvplan calibrate``: the fit recovers known efficiencies; bad CSVs name the line and column.

Measured times here are written from the closed form by hand (bytes, FLOPs of Llama-3.1-8B),
with chosen η_mem, η_flops and overhead; the fit must give those values back.

``tests/data/calibration/llama-3.1-8b-h100-sxm-synthetic.csv`` is synthetic (not measured):
kvplan's roofline for llama-3.1-8b bf16 tp 1 on h100-sxm with η_mem 0.7, η_flops 0.6 and a
200 µs step overhead. ``missing-column.csv`` (a misspelt ``step_time``), ``non-numeric.csv``
(``context`` = "abc" on line 3) and ``both-kinds.csv`` are broken on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from kvplan.cards.loader import load_hardware
from kvplan.errors import InputError
from kvplan.plans.sizing.calibrate import read_measurements
from kvplan.plans.build import calibrate_from_names, latency_from_names
from kvplan.plans.sizing.latency import Efficiencies

from ..conftest import DATA

CAL = DATA / "calibration"
# Llama-3.1-8B config.json: 8,030,261,248 parameters, hidden 4096, 32 layers, 32 heads, 8 KV heads of 128,
# vocab 128256, untied embeddings.
P, VH, LAYERS = 8_030_261_248, 128_256 * 4_096, 32
KV_TOKEN = LAYERS * 2 * 8 * 128 * 2
BW, PEAK = 3.35e12, 989.5e12   # H100 SXM datasheet


def decode_terms(batch, context):
    """(memory, compute) seconds at η = 1 of the dense GEMMs and of attention in one decode step."""
    dense = ((P - VH) * 2 / BW, batch * (2 * (P - 2 * VH) + 2 * VH) / PEAK)
    attention = (batch * context * KV_TOKEN / BW, batch * LAYERS * 4 * 32 * 128 * context / PEAK)
    return dense, attention


def prefill_terms(isl):
    dense = ((P - VH) * 2 / BW, (2 * (P - 2 * VH) * isl + 2 * VH) / PEAK)
    attention = (isl * KV_TOKEN / BW, LAYERS * 2 * 32 * 256 * isl * (isl + 1) / 2 / PEAK)
    return dense, attention


def roofline(terms, eta_mem, eta_flops, overhead):
    """Each operator class at its own roofline, summed: Σ max(memory / η_mem, compute / η_flops) + overhead."""
    return sum(max(m / eta_mem, c / eta_flops) for m, c in terms) + overhead


def write_measurements(path, eta_mem, eta_flops, overhead):
    lines = ["batch,context,step_time_s,isl,ttft_s"]
    for batch in (1, 4, 16, 64, 256):
        for context in (1000, 6000):
            lines.append(f"{batch},{context},{roofline(decode_terms(batch, context), eta_mem, eta_flops, overhead)!r},,")
    for isl in (300, 1500, 6000):
        lines.append(f"1,,,{isl},{roofline(prefill_terms(isl), eta_mem, eta_flops, overhead)!r}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_recovers_known_efficiencies(tmp_path):
    csv_path = write_measurements(tmp_path / "m.csv", 0.72, 0.58, 150e-6)
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", csv_path)
    assert_allclose([cal.fit.eta_mem, cal.fit.eta_flops, cal.fit.step_overhead_s], [0.72, 0.58, 150e-6], rtol=1e-9)
    assert set(cal.fit.fitted) == {"eta_mem", "eta_flops", "step_overhead_s"}
    assert max(abs(r["relative_error"]) for r in cal.result.rows) < 1e-9
    assert {r["bound"] for r in cal.result.rows} == {"memory", "compute"}


def test_shipped_synthetic_csv_gives_its_generating_values_back():
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", CAL / "llama-3.1-8b-h100-sxm-synthetic.csv")
    assert_allclose([cal.fit.eta_mem, cal.fit.eta_flops, cal.fit.step_overhead_s], [0.7, 0.6, 200e-6], rtol=1e-6)
    assert "RMS relative error 0.00%" in cal.result.verdict


def test_noisy_measurements_fit_with_residuals(tmp_path):
    rng = np.random.default_rng(7)
    path = write_measurements(tmp_path / "m.csv", 0.8, 0.7, 100e-6)
    lines = path.read_text().splitlines()
    noisy = [lines[0]]
    for line in lines[1:]:
        cells = line.split(",")
        k = 2 if cells[2] else 4
        cells[k] = repr(float(cells[k]) * (1 + rng.normal(0, 0.02)))
        noisy.append(",".join(cells))
    path.write_text("\n".join(noisy) + "\n")
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", path)
    assert abs(cal.fit.eta_mem - 0.8) < 0.05 and abs(cal.fit.eta_flops - 0.7) < 0.05
    rel = np.array([r["relative_error"] for r in cal.result.rows])
    assert 0 < np.sqrt(np.mean(rel ** 2)) < 0.05
    for r in cal.result.rows:
        assert r["residual_s"] == pytest.approx(r["measured_s"] - r["predicted_s"])


def test_efficiency_without_binding_rows_is_kept_and_said(tmp_path):
    path = tmp_path / "decode_only.csv"
    rows = ["batch,context,step_time_s"]
    for batch in (1, 2, 8):
        rows.append(f"{batch},2000,{roofline(decode_terms(batch, 2000), 0.75, 1.0, 80e-6)!r}")
    path.write_text("\n".join(rows) + "\n")
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", path)
    assert cal.fit.eta_mem == pytest.approx(0.75, rel=1e-9)
    assert "eta_flops" not in cal.fit.fitted and cal.fit.eta_flops == pytest.approx(0.75)   # kvplan default kept
    assert any("eta_flops not determined" in note for note in cal.result.assumptions)
    assert "not determined" in cal.card.field_sources["efficiency.flops"]


def test_efficiencies_stay_physical(tmp_path):
    """Times faster than the peak roofline clamp η at 1 instead of writing an invalid card."""
    path = tmp_path / "fast.csv"
    rows = ["batch,context,step_time_s"]
    for batch in (1, 8):
        (m_dense, _), (m_attention, _) = decode_terms(batch, 2000)
        rows.append(f"{batch},2000,{(m_dense + m_attention) * 0.9!r}")
    path.write_text("\n".join(rows) + "\n")
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", path)
    assert cal.fit.eta_mem == 1.0 and cal.fit.step_overhead_s >= 0


def test_overlay_card_is_a_valid_hardware_card_latency_accepts(tmp_path):
    csv_path = write_measurements(tmp_path / "m.csv", 0.72, 0.58, 150e-6)
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", csv_path, name="h100-sxm-lab")
    card_path = tmp_path / "h100-sxm-lab.yaml"
    card_path.write_text(cal.card_yaml())
    hw = load_hardware(str(card_path))
    assert hw.name == "h100-sxm-lab" and hw.efficiency.memory_bandwidth == pytest.approx(0.72)
    assert hw.hbm_bandwidth_bytes_per_s == BW and hw.aliases == []
    assert any("kvplan calibrate" in s for s in hw.source)
    via_card = latency_from_names("llama-3.1-8b", str(card_path), isl=1000, osl=64, batch=4).rows[0]
    via_flags = latency_from_names("llama-3.1-8b", "h100-sxm", isl=1000, osl=64, batch=4,
                                   efficiencies=Efficiencies(0.72, 0.58, 150e-6)).rows[0]
    assert via_card["decode_step_s"] == pytest.approx(via_flags["decode_step_s"], rel=1e-6)
    assert via_card["decode_step_s"] == pytest.approx(roofline(decode_terms(4, 1000), 0.72, 0.58, 150e-6), rel=1e-6)


@pytest.mark.parametrize(("name", "pattern"), [
    ("missing-column.csv", r"missing column 'step_time_s' or 'ttft_s'"),
    ("non-numeric.csv", r"line 3: column 'context': not a number \('abc'\)"),
    ("both-kinds.csv", r"line 2: needs exactly one of step_time_s or ttft_s \(both given\)"),
])
def test_bad_csv_names_the_line_and_column(name, pattern):
    with pytest.raises(InputError, match=pattern):
        read_measurements(CAL / name)


def test_more_bad_csvs(tmp_path):
    cases = {
        "context,step_time_s\n1024,0.01\n": "missing column 'batch'",
        "batch,step_time_s\n1,0.01\n": "missing column 'context'",
        "batch,isl,ttft_s\n1,,0.2\n": "line 2: column 'isl' is empty",
        "batch,context,step_time_s\n0,1024,0.01\n": "line 2: column 'batch': must be a positive whole number",
        "batch,context,step_time_s\n1,1024,-1\n": "line 2: column 'step_time_s': must be > 0",
        "batch,context,step_time_s\n": "no measurement rows",
        "batch,context,step_time_s\n1,1024,nan\n": "not a finite number",
    }
    for i, (text, pattern) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.csv"
        path.write_text(text)
        with pytest.raises(InputError, match=pattern):
            read_measurements(path)
    with pytest.raises(InputError, match="no file"):
        read_measurements(tmp_path / "absent.csv")


# --------------------------------------------------------------------------- telling the truth


def test_an_efficiency_at_its_bound_is_warned(tmp_path):
    """Llama-3.1-8B bf16 reads ~16 GB per step: 4.8 ms at H100's 3.35 TB/s. Rows measured at 2 ms are
    faster than physics allows, so η_mem lands on its bound of 1 and the command says so."""
    path = tmp_path / "too-fast.csv"
    path.write_text("batch,context,step_time_s\n1,1000,0.002\n2,1000,0.00201\n4,2000,0.00203\n")
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", path)
    assert cal.fit.eta_mem == pytest.approx(1.0)
    assert any("η_mem = 1.0000 sits at its bound" in n for n in cal.result.assumptions)


def test_holdout_scores_rows_it_did_not_fit(tmp_path):
    src = CAL / "llama-3.1-8b-h100-sxm-synthetic.csv"
    lines = src.read_text().splitlines()
    header, body = lines[0], lines[1:]
    cal = calibrate_from_names("llama-3.1-8b", "h100-sxm", src, holdout=0.3)      # every 4th row held out
    sets = [r["set"] for r in cal.result.rows]
    assert sets == ["held out" if (i + 1) % 4 == 0 else "fit" for i in range(len(body))]
    train_only = tmp_path / "train.csv"
    train_only.write_text("\n".join([header] + [row for i, row in enumerate(body) if (i + 1) % 4 != 0]) + "\n")
    alone = calibrate_from_names("llama-3.1-8b", "h100-sxm", train_only)
    assert (cal.fit.eta_mem, cal.fit.eta_flops, cal.fit.step_overhead_s) == pytest.approx(
        (alone.fit.eta_mem, alone.fit.eta_flops, alone.fit.step_overhead_s), rel=1e-9)
    assert "held out (3 rows, not fitted): median |error|" in cal.result.verdict
    assert all(r["error_pct"] == pytest.approx(r["relative_error"] * 100) for r in cal.result.rows)
    with pytest.raises(InputError, match="--holdout"):
        calibrate_from_names("llama-3.1-8b", "h100-sxm", src, holdout=0.9)

"""benchmarks/gpu_decode.py: its GPU-free paths (CI has no GPU): shapes, byte counts, dry run, clean exit."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.calc.kv import kv_layout
from kvplan.cards.loader import load_hardware, load_model
from kvplan.engines import get_profile
from kvplan.errors import KvplanError

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_decode.py"
pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def gpu_decode():
    spec = importlib.util.spec_from_file_location("gpu_decode", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mistral-7b-v0.1", "llama-3.1-70b"])
def test_workload_reads_the_cards_weights_and_kv(gpu_decode, model):
    """Weights read per step = params − the embedding table; KV = kvplan's bytes for the batch."""
    card = load_model(model)
    shape = gpu_decode.shape_from_card(card)
    assert shape.weight_bytes() == (card.params_total - card.vocab_size * card.hidden_size) * 2
    layout = kv_layout(card, get_profile("ideal"), "auto")
    for batch, context in [(1, 1), (8, 4096), (3, 100_000)]:
        assert shape.kv_bytes(batch, context) == batch * float(layout.sequence_bytes(context))


def test_qwen3_workload_omits_only_the_qk_norms(gpu_decode):
    card = load_model("qwen3-8b")
    shape = gpu_decode.shape_from_card(card)
    missing = (card.params_total - card.vocab_size * card.hidden_size) * 2 - shape.weight_bytes()
    assert missing == 36 * 2 * 128 * 2  # q_norm and k_norm (head_dim each) per layer, bf16


@pytest.mark.parametrize("model", ["mixtral-8x7b", "deepseek-v3", "qwen3-next-80b-a3b"])
def test_non_dense_cards_are_refused(gpu_decode, model):
    with pytest.raises(KvplanError):
        gpu_decode.shape_from_card(load_model(model))


def test_dry_run_writes_a_table_with_versions(gpu_decode, tmp_path):
    out = tmp_path / "decode.md"
    rc = gpu_decode.main(["--dry-run", "--batch", "1", "2", "--context", "8", "16", "--reps", "1", "--warmup", "0",
                          "--output", str(out)])
    text = out.read_text()
    assert rc == 0
    assert "| torch |" in text and "| kvplan |" in text and "h100-sxm" in text
    rows = [line for line in text.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 4
    assert all("kvplan" in line or "roofline" in line for line in rows)


def test_roofline_fallback_without_the_latency_plan(gpu_decode, monkeypatch):
    """Without kvplan.plans.sizing.latency the estimate is (weights − embedding + KV) / bandwidth."""
    monkeypatch.setitem(sys.modules, "kvplan.plans.sizing.latency", None)
    card, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    estimate = gpu_decode.kvplan_estimate(card, hw, batch=4, context=2048)
    kv = 4 * 2048 * 131_072
    assert estimate.method.startswith("roofline")
    assert estimate.step_s == pytest.approx((15_009_849_344 + kv) / 3.35e12)


def test_latency_plan_estimate_is_used_when_present(gpu_decode):
    pytest.importorskip("kvplan.plans.sizing.latency")
    estimate = gpu_decode.kvplan_estimate(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), batch=1, context=1024)
    assert estimate.method == "kvplan.plans.sizing.latency"
    assert estimate.floor_s is not None and 0 < estimate.floor_s <= estimate.step_s


def test_exits_cleanly_without_a_gpu():
    """No CUDA device visible: a message on stderr, exit status 0, nothing on stdout."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0
    assert "No CUDA GPU found" in proc.stderr or "needs torch" in proc.stderr
    assert proc.stdout == ""

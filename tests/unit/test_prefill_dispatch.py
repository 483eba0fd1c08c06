"""The engine's prefill dispatch, worked by hand: once per request, in TTFT, in no step.

NVIDIA aiconfigurator (commit 095f58a, sdk/backends/vllm_backend.py ``_prefill_dispatch_overhead_ms``) charges a
vLLM prefill ``num_layers × 0.8`` ms, added once per request to TTFT (sdk/backends/base_backend.py:
``_ttft_per_request = _prefill_step_ms × ⌈ISL / ctx_tokens⌉ + _prefill_dispatch_overhead_ms``), never to the mix
or generation steps. Llama-3.1-8B has 32 decoder layers (config.json num_hidden_layers 32), so every vLLM request's
TTFT carries 32 × 0.8 ms = 25.6 ms, whatever its length and however many forwards its prompt takes; SGLang (vLLM's
figure standing in) the same; TensorRT-LLM none. Step times, TPOT and the prefill's GPU time do not change.
Under ``--enforce-eager`` (no CUDA graphs) the dispatch is a term of every prefill and mixed forward instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.calc.operators import OperatorEfficiencies, eager_dispatch_s
from kvplan.calc.efficiency import Flat
from kvplan.errors import InputError
from kvplan.plans.build import latency_from_names
from kvplan.plans.deployment import EngineSettings, resolve
from kvplan.plans.sizing.efficiency import Efficiencies
from kvplan.sim.config import SimConfig
from kvplan.sim.engine import simulate
from kvplan.sim.opsteps import build_operator_step_model

LAYER_S = 0.8e-3                 # aiconfigurator's figure, per layer
LLAMA_8B_DISPATCH_S = 0.0256     # 32 layers × 0.8 ms, by hand
NONE = Efficiencies(prefill_overhead_s=0.0)


def _row(engine="vllm", isl=2048, batch=1, efficiencies=None, **kw):
    return latency_from_names("llama-3.1-8b", "h100-sxm", isl=isl, osl=2, batch=batch, engine=engine,
                              efficiencies=efficiencies, **kw).rows[0]


def test_vllm_request_pays_32_layers_times_0_8_ms_once_in_its_ttft():
    with_term, without = _row(), _row(efficiencies=NONE)
    assert with_term["request_dispatch_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    assert with_term["ttft_s"] - without["ttft_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9)
    # the prefill's GPU time, the decode step and TPOT do not carry it
    assert with_term["prefill_s"] == without["prefill_s"]
    assert with_term["decode_step_s"] == without["decode_step_s"] and with_term["tpot_s"] == without["tpot_s"]
    assert with_term["prefill_dispatch_s"] == 0.0 and without["request_dispatch_s"] == 0.0


def test_tensorrt_llm_pays_none():
    row = _row("trtllm")
    assert row["request_dispatch_s"] == 0.0 and row["prefill_dispatch_per_layer_s"] == 0.0
    assert row["ttft_s"] == _row("trtllm", efficiencies=NONE)["ttft_s"]


@pytest.mark.parametrize(("engine", "isl"), [("vllm", 256), ("vllm", 512), ("vllm", 513), ("sglang", 256)])
def test_every_request_pays_it_whatever_its_length(engine, isl):
    """aiconfigurator's term has no condition on the prompt's length or the engine's graph sizes."""
    assert _row(engine, isl=isl)["ttft_s"] - _row(engine, isl=isl, efficiencies=NONE)["ttft_s"] == pytest.approx(
        LLAMA_8B_DISPATCH_S, rel=1e-9)


def test_once_per_request_not_per_forward():
    for kw, passes in ((dict(batch=4), 1), (dict(chunk_size=1024), 2)):     # 4 prompts in one pass; one in two
        row, off = _row(**kw), _row(efficiencies=NONE, **kw)
        assert row["prefill_passes"] == passes
        assert row["ttft_s"] - off["ttft_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9)
        assert row["prefill_s"] == off["prefill_s"]


def test_override_and_explain_name_the_term():
    row = _row("trtllm", efficiencies=Efficiencies(prefill_overhead_s=1e-3))
    assert row["request_dispatch_s"] == pytest.approx(32 * 1e-3, rel=1e-12)
    result = latency_from_names("llama-3.1-8b", "h100-sxm", isl=2048, osl=2, batch=1, engine="vllm")
    lines = [x for x in result.explain if "prefill dispatch" in x]
    assert len(lines) == 2 and "TTFT = prefill + first decode step + prefill dispatch" in lines[0]
    assert "32 layers × 800.0 µs = 25.60 ms once per request, added to its TTFT" in lines[1]
    assert "aiconfigurator" in lines[1]
    notes = [n for n in result.assumptions if "prefill dispatch:" in n]
    assert len(notes) == 1 and "32 layers × 0.8 ms = 25.6 ms once per request" in notes[0] and "095f58a" in notes[0]


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_bad_override_is_an_input_error(bad):
    with pytest.raises(InputError, match="--prefill-overhead"):
        _row(efficiencies=Efficiencies(prefill_overhead_s=bad))


def test_planners_read_the_same_term_and_no_step_carries_it():
    """``plan``/``pd``/``tier``/``route`` read Deployment.steps: d beside the steps, the steps without it."""
    dep = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm"))
    off = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm", efficiencies=NONE))
    assert dep.steps.request_dispatch_s == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    assert off.steps.request_dispatch_s == 0.0
    assert float(dep.steps.prefill(1, 2048).time_s) == float(off.steps.prefill(1, 2048).time_s)
    assert float(dep.steps.mixed_chunk(64, 2048, 2048, 1024)[1]) == float(off.steps.mixed_chunk(64, 2048, 2048, 1024)[1])
    assert float(dep.steps.decode_s(64, 2048)) == float(off.steps.decode_s(64, 2048))
    table, table_off = build_operator_step_model(dep.steps, 1024, 2048.0), build_operator_step_model(off.steps, 1024, 2048.0)
    assert table.request_dispatch_s == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    assert table.eager_s(513) == 0.0 and table.step_s(600, 1, 0.0, 0.0) == table_off.step_s(600, 1, 0.0, 0.0)


@pytest.mark.parametrize("closed", [None, 2])
def test_the_replay_shifts_every_ttft_by_d_and_no_tpot(closed):
    """Open loop: each request reaches the scheduler d after it arrives, so the same schedule runs d later (every
    TTFT + d, the same TPOTs and steps); closed loop (2 in flight): the two sent at 0 shift by d, the third is sent
    when one ends (d later) and reaches the engine d after that, so the run lasts about d longer (the third meets
    the second at another point of its decode)."""
    dep = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm"))
    off = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm", efficiencies=NONE))
    arrival, isl, osl = np.array([0.0, 0.05, 0.3]), np.array([2048, 700, 3000]), np.array([16, 40, 8])
    kv = dep.layout.sequence_bytes(isl + osl, per_gpu=True)
    config = SimConfig(instances=1, max_batch=64, chunk_tokens=2048, kv_pool_bytes=dep.pool.bytes_per_gpu,
                       warmup_fraction=0.0, cooldown_fraction=0.0, concurrency=closed)
    runs = [simulate(arrival, isl, osl, kv, build_operator_step_model(d.steps, 2048 + 64, 2048.0), config)
            for d in (dep, off)]
    shifted = 3 if closed is None else 2     # closed loop: the third is sent when one ends, itself d later
    assert runs[0].ttft_s[:shifted] - runs[1].ttft_s[:shifted] == pytest.approx([LLAMA_8B_DISPATCH_S] * shifted,
                                                                                rel=1e-9)
    assert runs[0].makespan_s > runs[1].makespan_s + 0.9 * LLAMA_8B_DISPATCH_S
    if closed is None:
        assert runs[0].tpot_s == pytest.approx(runs[1].tpot_s, rel=1e-12) and runs[0].steps == runs[1].steps


def _effs(per_layer):
    flat = Flat(0.8, 0.75)
    return OperatorEfficiencies(flat, flat, flat, flat, flat, flat, 0.0, dispatch_per_layer_s=per_layer)


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 200), more=st.integers(0, 100), tokens=st.integers(1, 1 << 16),
       extra=st.integers(0, 1 << 16))
def test_dispatch_never_decreases_with_layers_or_tokens(layers, more, tokens, extra):
    """The --enforce-eager per-forward term: L × t on every prefill / mixed forward, none on decode."""
    effs = _effs(LAYER_S)
    for phase in ("prefill", "mixed"):
        base = float(eager_dispatch_s(effs, phase, tokens, layers))
        assert float(eager_dispatch_s(effs, phase, tokens, layers + more)) >= base
        assert float(eager_dispatch_s(effs, phase, tokens + extra, layers)) >= base
        assert base in (0.0, pytest.approx(layers * LAYER_S, rel=1e-12))
    assert float(eager_dispatch_s(effs, "decode", tokens, layers)) == 0.0


@settings(max_examples=15, deadline=None)
@given(isl=st.integers(16, 16384), batch=st.integers(1, 8), engine=st.sampled_from(["vllm", "sglang", "trtllm"]))
def test_the_dispatch_adds_exactly_d_to_ttft_at_any_prompt(isl, batch, engine):
    """TTFT with the term − without it is the engine's d (0 for TensorRT-LLM) at any length and batch, and the
    prefill's GPU time is the same."""
    row, off = _row(engine, isl=isl, batch=batch), _row(engine, isl=isl, batch=batch, efficiencies=NONE)
    d = 0.0 if engine == "trtllm" else LLAMA_8B_DISPATCH_S
    assert row["ttft_s"] - off["ttft_s"] == pytest.approx(d, rel=1e-9, abs=1e-12)
    assert row["prefill_s"] == off["prefill_s"]


@pytest.mark.parametrize("command", ["latency", "plan", "pd"])
@pytest.mark.parametrize(("value", "message"), [("-1ms", "duration must be >= 0"), ("fast", "cannot read a duration"),
                                                ("5", "has no unit"), ("7200s", "at most 1 h")])
def test_bad_prefill_overhead_flag_exits_2_with_error_and_hint(invoke, command, value, message):
    extra = [] if command == "latency" else ["--qps", "1", "--isl", "2k", "--osl", "64"]
    result = invoke(command, "llama-3.1-8b", "h100-sxm", *extra, "--prefill-overhead", value)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr and "Hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_cli_flag_reaches_the_plan(invoke):
    """``kvplan plan --prefill-overhead 0`` answers without the term; the default adds vLLM's d to every TTFT
    statistic of the closed form and to none of TPOT's."""
    import json

    def row(*flags):
        res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "2k", "--osl", "64", *flags,
                     "--format", "json")
        assert res.exit_code in (0, 1), res.stderr
        return json.loads(res.stdout)[0]

    on, off = row(), row("--prefill-overhead", "0")
    assert on["total_gpus"] == off["total_gpus"]
    for stat in ("mean", "p50", "p99"):
        assert on[f"ttft_{stat}_s"] - off[f"ttft_{stat}_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-6)
        assert on[f"tpot_{stat}_s"] == pytest.approx(off[f"tpot_{stat}_s"], rel=1e-12)


def test_the_roofline_charges_none_and_says_so():
    given = _row(perf_model="roofline", efficiencies=Efficiencies(prefill_overhead_s=1e-3))
    plain = _row(perf_model="roofline")
    assert given["prefill_s"] == plain["prefill_s"] and given["ttft_s"] == plain["ttft_s"]
    assert given["prefill_dispatch_s"] == 0.0
    result = latency_from_names("llama-3.1-8b", "h100-sxm", isl=2048, osl=2, batch=1, perf_model="roofline")
    assert any("no eager-prefill dispatch on the roofline" in n for n in result.assumptions)


def test_the_fleet_model_shares_a_steps_dispatch_among_its_packed_prompts():
    """Closed form under --enforce-eager: a prompt's chunks add X (kernels) and Y (their steps' eager dispatch) to
    the decoders' time; k prompts packed into a step share its Y: E[X + Y/k] and E[(X + Y/k)²] = E[X²] + 2 E[XY]/k
    + E[Y²]/k². With CUDA graphs (the default) no step carries a dispatch: Y = 0."""
    from kvplan.plans.fleet.figures import _chunk_dispatch
    from kvplan.plans.fleet.model import interference

    moments = [0.0, 0.0, 0.0, 2.0, 5.0, 0.0, 1.0, 1.5, 2.2, 0.0]
    assert interference(moments, 1.0) == pytest.approx((3.0, 5.0 + 4.4 + 1.5))
    assert interference(moments, 2.0) == pytest.approx((2.5, 5.0 + 2.2 + 0.375))
    eager = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(
        engine="vllm", efficiencies=Efficiencies(enforce_eager=True))).steps
    graphs = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm")).steps
    d = LLAMA_8B_DISPATCH_S
    batch, prompts, chunk = np.full(4, 64.0), np.array([2048.0, 300.0, 1500.0, 1448.0]), np.full(4, 1000.0)
    # every chunk's step is eager without graphs: 2,048 = 1,000 + 1,000 + 48 → 3 steps; 300 → 1; 1,500 and 1,448 → 2
    assert _chunk_dispatch(eager, batch, prompts, chunk) == pytest.approx([3 * d, d, 2 * d, 2 * d])
    assert _chunk_dispatch(graphs, batch, prompts, chunk) == pytest.approx([0.0] * 4)

"""The host dispatch of an eager prefill forward, worked by hand.

NVIDIA aiconfigurator (commit 095f58a, sdk/backends/vllm_backend.py ``_prefill_dispatch_overhead_ms``) charges a
vLLM prefill ``num_layers × 0.8`` ms. Llama-3.1-8B has 32 decoder layers (config.json num_hidden_layers 32), so an
eager vLLM prefill forward pays 32 × 0.8 ms = 25.6 ms; vLLM V1 replays its piecewise CUDA graphs for forwards of
at most its largest captured size (512 tokens: [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16)), so a
256-token prompt pays none; SGLang's graphs are for decode batches only, so its 256-token extend pays 25.6 ms;
TensorRT-LLM pays none; a decode step (a graph replay) pays none. The term is once per forward: a batch of four
2,048-token prompts in one pass pays 25.6 ms once, a 2,048-token prompt in two 1,024-token passes pays it twice.
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
from kvplan.sim.opsteps import build_operator_step_model

LAYER_S = 0.8e-3                 # aiconfigurator's figure, per layer
LLAMA_8B_DISPATCH_S = 0.0256     # 32 layers × 0.8 ms, by hand
NONE = Efficiencies(prefill_overhead_s=0.0)


def _row(engine="vllm", isl=2048, batch=1, efficiencies=None, **kw):
    return latency_from_names("llama-3.1-8b", "h100-sxm", isl=isl, osl=2, batch=batch, engine=engine,
                              efficiencies=efficiencies, **kw).rows[0]


def test_vllm_prefill_of_2048_tokens_pays_32_layers_times_0_8_ms():
    with_term, without = _row(), _row(efficiencies=NONE)
    assert with_term["prefill_dispatch_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    assert with_term["prefill_s"] - without["prefill_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9)
    assert with_term["ttft_s"] - without["ttft_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9)
    # the decode step replays a CUDA graph: no dispatch, the same step and TPOT
    assert with_term["decode_step_s"] == without["decode_step_s"]
    assert with_term["tpot_s"] == without["tpot_s"]
    assert without["prefill_dispatch_s"] == 0.0


def test_tensorrt_llm_pays_none():
    row = _row("trtllm")
    assert row["prefill_dispatch_s"] == 0.0 and row["prefill_dispatch_per_layer_s"] == 0.0
    assert row["prefill_s"] == _row("trtllm", efficiencies=NONE)["prefill_s"]


def test_the_graph_sizes_decide_which_forwards_are_eager():
    # vLLM: 512 tokens replay the largest piecewise graph, 513 run eagerly
    assert _row(isl=512)["prefill_dispatch_s"] == 0.0
    assert _row(isl=513)["prefill_dispatch_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    assert _row(isl=256)["prefill_dispatch_s"] == 0.0
    # SGLang: every extend forward, however short
    assert _row("sglang", isl=256)["prefill_dispatch_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)


def test_once_per_forward_not_per_request():
    batched = _row(batch=4)                                     # 4 × 2,048 tokens in one pass
    assert batched["prefill_passes"] == 1
    assert batched["prefill_dispatch_s"] == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    chunked = _row(chunk_size=1024)                             # one prompt in two passes of 1,024
    assert chunked["prefill_passes"] == 2
    assert chunked["prefill_dispatch_s"] == pytest.approx(2 * LLAMA_8B_DISPATCH_S, rel=1e-12)


def test_override_and_explain_name_the_term():
    row = _row("trtllm", efficiencies=Efficiencies(prefill_overhead_s=1e-3))
    assert row["prefill_dispatch_s"] == pytest.approx(32 * 1e-3, rel=1e-12)
    result = latency_from_names("llama-3.1-8b", "h100-sxm", isl=2048, osl=2, batch=1, engine="vllm")
    lines = [x for x in result.explain if "prefill dispatch" in x]
    assert len(lines) == 1 and "1 eager pass(es) × 32 layers × 800.0 µs = 25.60 ms" in lines[0]
    assert "aiconfigurator" in lines[0]
    notes = [n for n in result.assumptions if "prefill dispatch" in n]
    assert len(notes) == 1 and "32 layers × 0.8 ms = 25.6 ms" in notes[0] and "095f58a" in notes[0]


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_bad_override_is_an_input_error(bad):
    with pytest.raises(InputError, match="--prefill-overhead"):
        _row(efficiencies=Efficiencies(prefill_overhead_s=bad))


def test_planners_read_the_same_step():
    """``plan``/``pd``/``tier`` read Deployment.steps: its prefill carries the same term as ``kvplan latency``."""
    dep = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm"))
    off = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm", efficiencies=NONE))
    pre, pre_off = dep.steps.prefill(1, 2048), off.steps.prefill(1, 2048)
    assert float(pre.time_s) - float(pre_off.time_s) == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9)
    assert float(pre.time_s) == pytest.approx(_row()["prefill_s"], rel=1e-9)
    # a mixed chunk step of 64 decoders + a 1,024-token chunk (1,088 tokens) is eager; of 64 + 256 it is not
    mean, total = dep.steps.mixed_chunk(64, 2048, 2048, 1024)
    mean_off, total_off = off.steps.mixed_chunk(64, 2048, 2048, 1024)
    assert float(total) - float(total_off) == pytest.approx(2 * LLAMA_8B_DISPATCH_S, rel=1e-9)
    assert float(dep.steps.mixed_chunk(64, 2048, 256, 256)[1]) == float(off.steps.mixed_chunk(64, 2048, 256, 256)[1])
    assert float(dep.steps.decode_s(64, 2048)) == float(off.steps.decode_s(64, 2048))
    # the replay's step table: E[n] is 25.6 ms above 512 tokens, 0 at or below
    table = build_operator_step_model(dep.steps, 1024, 2048.0)
    assert table.eager_s(512) == 0.0 and table.eager_s(513) == pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-12)
    table_off = build_operator_step_model(off.steps, 1024, 2048.0)
    assert table.step_s(600, 1, 0.0, 0.0) - table_off.step_s(600, 1, 0.0, 0.0) == pytest.approx(
        LLAMA_8B_DISPATCH_S, rel=1e-9)
    assert table.decode_base_s(64) == table_off.decode_base_s(64)


def _effs(per_layer, above):
    flat = Flat(0.8, 0.75)
    return OperatorEfficiencies(flat, flat, flat, flat, flat, flat, 0.0, dispatch_per_layer_s=per_layer,
                                eager_above_tokens=above)


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 200), more=st.integers(0, 100), tokens=st.integers(1, 1 << 16),
       extra=st.integers(0, 1 << 16), above=st.sampled_from([0.0, 512.0, 8192.0]))
def test_dispatch_never_decreases_with_layers_or_tokens(layers, more, tokens, extra, above):
    effs = _effs(LAYER_S, above)
    for phase in ("prefill", "mixed"):
        base = float(eager_dispatch_s(effs, phase, tokens, layers))
        assert float(eager_dispatch_s(effs, phase, tokens, layers + more)) >= base
        assert float(eager_dispatch_s(effs, phase, tokens + extra, layers)) >= base
        assert base in (0.0, pytest.approx(layers * LAYER_S, rel=1e-12))
    assert float(eager_dispatch_s(effs, "decode", tokens, layers)) == 0.0


@settings(max_examples=15, deadline=None)
@given(isl=st.integers(16, 16384), extra=st.integers(1, 4096), engine=st.sampled_from(["vllm", "sglang", "trtllm"]))
def test_the_dispatch_adds_to_ttft_never_less_for_a_longer_prompt(isl, extra, engine):
    """TTFT with the term ≥ without it, and what the term adds never shrinks as the prompt grows.

    (TTFT itself is not asserted monotone here: the per-kernel curves already make a 9-token prefill slower than
    a 16-token one, before and without this term.)"""
    dep = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine=engine))
    off = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine=engine, efficiencies=NONE))

    def added(s):
        return float(np.asarray(dep.steps.prefill(1, s).time_s)) - float(np.asarray(off.steps.prefill(1, s).time_s))

    short, long = added(isl), added(isl + extra)
    assert short >= -1e-12 and long >= short - 1e-12
    assert short in (pytest.approx(0.0, abs=1e-12), pytest.approx(LLAMA_8B_DISPATCH_S, rel=1e-9))


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
    """``kvplan plan --prefill-overhead 0`` answers with the steps of no dispatch; the default charges vLLM's."""
    import json

    def ttft(*flags):
        res = invoke("plan", "llama-3.1-8b", "h100-sxm", "--qps", "1", "--isl", "2k", "--osl", "64", *flags,
                     "--format", "json")
        assert res.exit_code in (0, 1), res.stderr
        return json.loads(res.stdout)[0]["ttft_p50_s"]

    assert ttft() - ttft("--prefill-overhead", "0") == pytest.approx(LLAMA_8B_DISPATCH_S, rel=0.05)


def test_the_roofline_charges_none_and_says_so():
    given = _row(perf_model="roofline", efficiencies=Efficiencies(prefill_overhead_s=1e-3))
    plain = _row(perf_model="roofline")
    assert given["prefill_s"] == plain["prefill_s"] and given["prefill_dispatch_s"] == 0.0
    result = latency_from_names("llama-3.1-8b", "h100-sxm", isl=2048, osl=2, batch=1, perf_model="roofline")
    assert any("no eager-prefill dispatch on the roofline" in n for n in result.assumptions)


def test_the_fleet_model_shares_a_steps_dispatch_among_its_packed_prompts():
    """Closed form: a prompt's chunks add X (kernels) and Y (their steps' eager dispatch) to the decoders' time;
    k prompts packed into a step share its Y: E[X + Y/k] and E[(X + Y/k)²] = E[X²] + 2 E[XY]/k + E[Y²]/k²."""
    from kvplan.plans.fleet.figures import _chunk_dispatch
    from kvplan.plans.fleet.model import interference

    moments = [0.0, 0.0, 0.0, 2.0, 5.0, 0.0, 1.0, 1.5, 2.2, 0.0]
    assert interference(moments, 1.0) == pytest.approx((3.0, 5.0 + 4.4 + 1.5))
    assert interference(moments, 2.0) == pytest.approx((2.5, 5.0 + 2.2 + 0.375))
    steps = resolve("llama-3.1-8b", "h100-sxm", engine=EngineSettings(engine="vllm")).steps
    d = LLAMA_8B_DISPATCH_S
    # 64 decoders beside chunks of 1,000 tokens: 2,048 = 1,000 + 1,000 + 48 (the last step 112 tokens: graphed)
    y = _chunk_dispatch(steps, np.array([64.0, 64.0, 64.0, 64.0]), np.array([2048.0, 300.0, 1500.0, 1448.0]),
                        np.array([1000.0, 1000.0, 1000.0, 1000.0]))
    assert y == pytest.approx([2 * d, 0.0, 2 * d, d])     # 1,448: the last step 448 + 64 = 512 tokens is graphed

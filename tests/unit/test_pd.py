"""``kvplan pd`` as a library: the KV transfer on the real link, pool sizing, DistServe, monotonicity."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from kvplan.calc.disagg import occupancy_quantile, rate_matched_xpyd, sojourn_quantile_s
from kvplan.calc.queueing import wait_quantile_s
from kvplan.calc.roofline import model_cost, prefill
from kvplan.calc.transfer import exposed_transfer_s
from kvplan.cards.loader import load_hardware, load_model, load_system
from kvplan.engines import get_profile
from kvplan.errors import InfeasibleError, InputError, MissingFigureError
from kvplan.plans.sizing.latency import Efficiencies, resolve_machine
from kvplan.plans.pd.plan import PDSettings, plan_pd
from kvplan.plans.links import Side
from kvplan.plans.pd.link import LinkOverride, path_kind, resolve_link
from kvplan.plans.pd.model import prefill_service_s, workload_from_inputs

GiB = 2**30
KV_128K_LLAMA70B = 131_072 * 327_680  # 80 layers × 8 KV heads × (128 + 128) × 2 B per token


def one(**kw) -> dict:
    """The disaggregated row of one plan_pd call (no aggregated alternative, no sensitivity)."""
    kw.setdefault("aggregated", False)
    kw.setdefault("sensitivity", False)
    model = kw.pop("model", "llama-3.1-70b")
    hardware = kw.pop("hardware", "h200")
    return plan_pd(model, hardware, **kw).rows[0]


# --------------------------------------------------------------------------- the transfer, closed form


def _128k(placement: str, **kw) -> dict:
    """One 128k-token Llama-3.1-70B request, 1P1D at TP2/TP2 on DGX H200 nodes, almost no load."""
    return one(system="hgx-h200-8", placement=placement, qps=1e-4, isl="128k", osl=2, allow_long_context=True,
               prefill_tp=[2], decode_tp=[2], prefill_instances=1, decode_instances=1, ttft="p50<=60s",
               tpot="p50<=1s", **kw)


def test_128k_llama70b_kv_over_rdma_is_half_a_second():
    """40 GiB of bf16 KV at Mooncake's 87 GB/s: 2 sending ranks × 50 GB/s ConnectX-7 × 0.87 = 87 GB/s → 0.494 s."""
    row = _128k("cross-node")
    assert row["kv_transfer_bytes"] == KV_128K_LLAMA70B == 40 * GiB
    assert row["link_kind"] == "nic" and row["links_per_transfer"] == 2
    assert_allclose(row["link_bandwidth_bytes_per_s"], 43.5e9)
    assert_allclose(row["kv_transfer_s"], KV_128K_LLAMA70B / 87e9)
    assert_allclose(row["kv_transfer_s"], 0.49, atol=0.01)


def test_128k_llama70b_kv_over_nvlink_is_fifty_milliseconds():
    """Same request inside the node: 2 × 450 GB/s NVLink (the H200 card has no efficiency figure) = 900 GB/s."""
    row = _128k("same-node")
    assert row["link_kind"] == "scale_up"
    assert_allclose(row["kv_transfer_s"], KV_128K_LLAMA70B / 900e9)
    assert_allclose(row["kv_transfer_s"], 0.0477, atol=0.001)


def test_layerwise_overlap_exposes_only_the_unhidden_part():
    """Prefill of 128k tokens (~28 s at TP2) hides all but the last layer's share of a 0.49 s transfer; a
    link of 0.5 GB/s per GPU (2 links: 43 s) is exposed by transfer − (L−1)/L × prefill. TTFT = prefill + exposed
    + first step + the engine's prefill dispatch."""
    for placement, kw in (("cross-node", {}), ("cross-node", {"link_bandwidth_bytes_per_s": 0.5e9,
                                                              "link_efficiency": 1.0})):
        row = _128k(placement, **kw)
        transfer, pre = row["kv_transfer_s"], row["prefill_s"]
        assert_allclose(row["exposed_transfer_s"], exposed_transfer_s(transfer, pre, 80))
        if transfer < pre:
            assert_allclose(row["exposed_transfer_s"], transfer / 80)
        else:
            assert_allclose(row["exposed_transfer_s"], transfer - 79 / 80 * pre)
        # at 1e-4 req/s nobody waits: the median TTFT is its four terms exactly (vLLM's prefill dispatch, 80 layers ×
        # 0.8 ms once per request, beside the prefill's service, not in it)
        assert row["prefill_dispatch_s"] == pytest.approx(80 * 0.8e-3, rel=1e-12)
        assert_allclose(row["ttft_p50_s"], pre + row["exposed_transfer_s"] + row["first_decode_step_s"]
                        + row["prefill_dispatch_s"], rtol=1e-9)
    assert transfer > pre  # the second case is the exposed one


def test_link_latency_is_always_exposed_and_missing_latency_is_a_note():
    fast = _128k("same-node")
    slow = _128k("same-node", link_latency_s=2e-3)
    assert_allclose(slow["kv_transfer_s"] - fast["kv_transfer_s"], 2e-3)
    assert_allclose(slow["exposed_transfer_s"] - fast["exposed_transfer_s"], 2e-3)
    notes = plan_pd("llama-3.1-70b", "h200", system="hgx-h200-8", qps=1, isl="8k", osl=64, placement="same-node",
                    aggregated=False, sensitivity=False).assumptions
    assert any("no fixed latency per P→D transfer" in n for n in notes)


def test_bytes_follow_the_decode_layout_and_dtype():
    bf16 = _128k("same-node")
    fp8 = _128k("same-node", settings=PDSettings(kv_dtype="fp8"))
    assert fp8["kv_transfer_bytes"] == bf16["kv_transfer_bytes"] / 2
    assert_allclose(fp8["kv_transfer_s"], bf16["kv_transfer_s"] / 2)


def test_cached_prefix_shortens_prefill_not_the_transfer():
    base = one(system="hgx-h200-8", qps=1, isl="32k", osl=128, prefill_tp=[4], decode_tp=[4], prefill_instances=4,
               decode_instances=1, ttft="p99<=10s", tpot="p99<=100ms")
    half = one(system="hgx-h200-8", qps=1, isl="32k", osl=128, prefill_tp=[4], decode_tp=[4], prefill_instances=4,
               decode_instances=1, ttft="p99<=10s", tpot="p99<=100ms", cached_prefix_fraction=0.5)
    assert half["kv_transfer_bytes"] == base["kv_transfer_bytes"]
    # the uncached second half attends to the whole prefix (attention ∝ S²), so it costs more than half
    assert 0.5 * base["prefill_s"] < half["prefill_s"] < base["prefill_s"]
    assert half["ttft_p99_s"] < base["ttft_p99_s"]


def test_prefill_service_with_nothing_cached_is_the_roofline_prefill():
    card, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    cost = model_cost(card, get_profile("vllm"), tps=[1, 2])
    machine, _ = resolve_machine(hw, "bf16", "bf16", cost.layers, Efficiencies(), 2)
    for tp in (1, 2):
        assert_allclose(prefill_service_s(cost, machine, [512, 8192], 0.0, tp),
                        prefill(cost, machine, 1, [512, 8192], tp=tp).time_s)


# --------------------------------------------------------------------------- links and placement


def test_link_choice_follows_the_placement():
    h100 = Side(load_hardware("h100-sxm"), load_system("hgx-h100-8"))
    assert path_kind("auto", h100, h100, 8) == "scale_up"
    assert path_kind("auto", h100, h100, 9) == "nic"
    assert path_kind("cross-node", h100, h100, 2) == "nic"
    pairs = Side(load_hardware("h100-pcie"), load_system("h100-pcie-8-cxl-example"))
    assert path_kind("auto", pairs, pairs, 2) == "scale_up"      # an NVLink-bridged pair
    assert path_kind("auto", pairs, pairs, 4) == "host_link"     # the rest of the node: PCIe
    assert path_kind("same-node", pairs, pairs, 4) == "host_link"
    h20 = Side(load_hardware("h20"), load_system("h20-8"))
    assert path_kind("auto", h100, h20, 2) == "nic"              # heterogeneous pools never share a node
    with pytest.raises(InputError, match="cannot share a node"):
        path_kind("same-node", h100, h20, 2)


def test_link_figures_come_from_the_system_card():
    h100 = Side(load_hardware("h100-sxm"), load_system("hgx-h100-8"))
    nvlink = resolve_link("scale_up", h100, h100)
    assert_allclose(nvlink.bandwidth_bytes_per_s, 450e9 * 0.84)
    nic = resolve_link("nic", h100, h100)
    assert_allclose(nic.bandwidth_bytes_per_s, 50e9 * 0.87)
    assert_allclose(resolve_link("nic", h100, h100, LinkOverride(bandwidth_scale=0.25)).bandwidth_bytes_per_s,
                    50e9 * 0.87 / 4)


def test_a_link_without_bandwidth_is_an_error_naming_the_card():
    # the CXL example box has no NIC figure in its sources (gb200-nvl72 and l40s-pcie-8 now carry theirs)
    box = Side(load_hardware("h100-pcie"), load_system("h100-pcie-8-cxl-example"))
    with pytest.raises(MissingFigureError,
                       match=r"h100-pcie-8-cxl-example has no nic link.*system_cards/h100-pcie-8-cxl-example.yaml"):
        resolve_link("nic", box, box)


def test_system_nics_per_gpu_from_their_sources():
    """DGX GB200 user guide: 4 ConnectX-7 400G per 4-GPU tray (50 GB/s per GPU); the MLPerf L40S box: 2x 10GbE
    shared by 8 GPUs (0.3125 GB/s per GPU). Neither source gives an efficiency: line rate, said by the command."""
    assert load_system("gb200-nvl72").nic.bandwidth_bytes_per_s == 400e9 / 8
    assert load_system("l40s-pcie-8").nic.bandwidth_bytes_per_s == 2 * 10e9 / 8 / 8
    assert load_system("gb200-nvl72").nic.efficiency is None and load_system("l40s-pcie-8").nic.efficiency is None
    assert load_system("h100-pcie-8-cxl-example").nic is None



def test_a_decode_system_without_a_nic_is_an_error_naming_the_card(tmp_path):
    """Heterogeneous P/D needs both systems' NICs; a system card without one is named in the error."""
    card = tmp_path / "h20-8-no-nic.yaml"
    card.write_text(
        "name: h20-8-no-nic\naccelerator: h20\naccelerators: 8\nscale_up_domain: 8\n"
        "source: [test card]\nscale_up: {name: NVLink, bandwidth_bytes_per_s: 450.0e+9}\n"
    )
    with pytest.raises(MissingFigureError, match="h20-8-no-nic has no nic"):
        one(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", decode_hardware="h20",
            decode_system=str(card), qps=1, isl="2k", osl=64)


def test_h100_prefill_h20_decode_runs_on_the_shipped_cards():
    """h20-8 carries its NIC (4 x 400 Gb/s per node, Ant Group's H20 nodes): 25 GB/s per GPU, the lesser side."""
    h100, h20 = Side(load_hardware("h100-sxm"), load_system("hgx-h100-8")), Side(load_hardware("h20"), load_system("h20-8"))
    assert_allclose(load_system("h20-8").nic.bandwidth_bytes_per_s * 8, 4 * 400e9 / 8)
    assert resolve_link("nic", h100, h20).bandwidth_bytes_per_s <= 25e9
    row = one(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", decode_hardware="h20",
              decode_system="h20-8", qps=1, isl="2k", osl=64)
    assert row["kv_transfer_s"] > 0


# --------------------------------------------------------------------------- pools


def test_staging_and_link_utilisation_closed_forms():
    """Fixed 2P1D: staging = (λ/y)·transfer·bytes per GPU; utilisation = λ·bytes / (min(P, D) GPUs × bw)."""
    row = one(system="hgx-h200-8", placement="cross-node", qps=3, isl="16k", osl=128, prefill_tp=[2], decode_tp=[4],
              prefill_instances=2, decode_instances=1, ttft="p99<=10s", tpot="p99<=100ms")
    per_gpu = row["kv_transfer_bytes"] / 4
    assert_allclose(row["decode_staging_bytes_per_gpu"], 3 * row["kv_transfer_s"] * per_gpu)
    assert row["links_per_transfer"] == 2
    assert_allclose(row["link_utilization"], 3 * row["kv_transfer_bytes"] / (min(2 * 2, 1 * 4) * 43.5e9))


def test_a_saturated_link_is_infeasible_and_the_search_adds_instances():
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", placement="cross-node", qps=20,
              isl="16k", osl=64, link_bandwidth_bytes_per_s=2e9, link_efficiency=1.0, ttft="p99<=8s",
              tpot="p99<=100ms", prefill_tp=[1], decode_tp=[1])
    fixed = one(prefill_instances=4, decode_instances=1, **kw)
    assert fixed["link_utilization"] >= 1 and not fixed["feasible"] and "link" in fixed["reason"]
    planned = one(**kw)
    assert planned["feasible"] and planned["link_utilization"] < 1


def test_fixed_length_ttft_is_the_erlang_wait_plus_the_request():
    """One ISL bin: the TTFT quantile is wait_quantile_s (Erlang-C, Allen–Cunneen) + prefill + exposed + first step
    + link wait + the engine's prefill dispatch (32 layers × 0.8 ms once per request; not in the queue's service)."""
    row = one(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", qps=12, isl="4k", osl=128,
              prefill_tp=[1], decode_tp=[1], prefill_instances=2, decode_instances=1, ttft="p99<=4s",
              tpot="p99<=100ms")
    wait = float(wait_quantile_s(0.99, 2, 12, row["prefill_s"], 1.0, 0.0))
    assert row["prefill_dispatch_s"] == pytest.approx(32 * 0.8e-3, rel=1e-12)
    assert_allclose(row["ttft_p99_s"], wait + row["prefill_s"] + row["exposed_transfer_s"]
                    + row["first_decode_step_s"] + row["link_wait_s"] + row["prefill_dispatch_s"], rtol=1e-9)


def test_sojourn_quantile_of_a_mixture_brackets_its_parts():
    # P(W + X > t) over two sizes: between the quantile of the smaller and that of the larger alone
    mixed = sojourn_quantile_s(0.9, 2, 3.0, 0.3, [0.2, 0.4], ca2=1.0, cs2=0.25)
    low = sojourn_quantile_s(0.9, 2, 3.0, 0.3, [0.2], ca2=1.0, cs2=0.25)
    high = sojourn_quantile_s(0.9, 2, 3.0, 0.3, [0.4], ca2=1.0, cs2=0.25)
    assert low < mixed < high
    assert math.isinf(sojourn_quantile_s(0.9, 1, 5.0, 0.3, [0.3]))  # ρ = 1.5: unstable
    assert_allclose(occupancy_quantile(0.5, 40.0), 40.0)
    assert occupancy_quantile(0.99, 40.0, ca2=3.0) > occupancy_quantile(0.99, 40.0)


def test_trace_workload_bins_keep_the_mean_and_use_the_gaps_scv():
    import numpy as np

    from kvplan.plans.fleet.aggregated import FleetWorkload
    from kvplan.workload.summary import summarise
    from kvplan.workload.traces import make_trace, read_trace

    from ..conftest import DATA

    trace = read_trace(DATA / "traces" / "mooncake_conversation_head200.jsonl")
    w = workload_from_inputs(None, None, None, None, trace)
    assert w.isl.size <= 200 and abs(float(w.weights.sum()) - 1) < 1e-12
    assert_allclose(w.isl_mean, trace.isl.mean())
    assert w.isl_max == trace.isl.max() and w.osl_max == trace.osl.max()
    # the one estimator: pd, plan (FleetWorkload) and kvplan workload read the same ca² from a trace
    assert w.arrival_scv == FleetWorkload.from_trace(trace).arrival_scv
    assert_allclose(w.arrival_scv, summarise(trace)["interarrival_cv"] ** 2)
    # gaps 1, 0, 0, 3 (three requests in one tick at t = 1): mean 1, Var = (0 + 1 + 1 + 4) / 4 = 1.5 → ca² = 1.5
    arrivals = np.array([0.0, 1.0, 1.0, 1.0, 4.0])
    w = workload_from_inputs(None, None, None, None, make_trace(arrivals, np.full(5, 100), np.full(5, 10)))
    assert_allclose(w.arrival_scv, 1.5)
    assert_allclose(w.rate_per_s, 4 / 4.0)
    assert any("50% of requests share the timestamp" in n for n in w.notes)


# --------------------------------------------------------------------------- DistServe (OSDI'24 §2.3, Figure 1)


DISTSERVE = dict(model="opt-13b", hardware="a100-80gb", system="hgx-a100-8", isl=512, osl=64, ttft="p90<=0.4s",
                 tpot="p90<=0.04s", prefill_tp=[1], decode_tp=[1])


def test_distserve_rate_matching_gives_2p1d():
    """Paper: prefill-only 5.6 req/s, decode-only 10 req/s per A100 → 2P1D, min(2 × 5.6, 10) / 3 = 3.3 req/s/GPU."""
    x, y, goodput = rate_matched_xpyd(5.6, 10.0)
    assert (x, y) == (2, 1)
    assert_allclose(goodput, 10 / 3)
    assert rate_matched_xpyd(10.0, 5.6)[:2] == (1, 2)


def test_distserve_kvplan_own_model_also_matches_2p1d():
    """kvplan's roofline predicts faster phases than the paper measured, in about the same proportion."""
    row = one(qps=10, settings=PDSettings(perf_model="roofline"), **DISTSERVE)
    assert row["rate_matched_xpyd"] == "2P1D"
    assert row["prefill_goodput_per_gpu"] > 5.6 and row["decode_goodput_per_gpu"] > 10
    assert 1.5 < row["decode_goodput_per_gpu"] / row["prefill_goodput_per_gpu"] < 2.5
    # at the rate one decode GPU sustains in kvplan's model, the planner itself picks 2P1D
    busy = one(qps=0.95 * row["decode_goodput_per_gpu"], settings=PDSettings(perf_model="roofline"), **DISTSERVE)
    assert busy["xpyd"] == "2P1D" and busy["feasible"]


def test_distserve_per_operator_model_is_closer_to_the_paper_than_the_roofline():
    """The default per-operator model (A100 kernel tables) is nearer both measured phase rates (5.6 and 10 req/s
    per A100) than the roofline: 12.9 / 19.3 against 14.8 / 32.2. Its decode/prefill ratio is 1.49 (paper 1.79),
    so rate matching alone gives 1P1D; the calibrated test below reproduces the paper's 2P1D."""
    ops = one(qps=10, **DISTSERVE)
    roof = one(qps=10, settings=PDSettings(perf_model="roofline"), **DISTSERVE)
    for key, paper in (("prefill_goodput_per_gpu", 5.6), ("decode_goodput_per_gpu", 10.0)):
        assert paper < ops[key] < roof[key]
    assert 1.2 < ops["decode_goodput_per_gpu"] / ops["prefill_goodput_per_gpu"] < 2.5


def test_distserve_calibrated_to_the_paper_plans_2p1d_at_10_rps():
    """η fitted so one A100 prefills 5.6 req/s and decodes 10 req/s (docs/examples/distserve-opt13b.md)."""
    settings_ = PDSettings(efficiencies=Efficiencies(eta_mem=0.485, eta_flops=0.369))
    row = one(qps=10, settings=settings_, **DISTSERVE)
    assert_allclose(row["prefill_goodput_per_gpu"], 5.6, rtol=0.02)
    assert_allclose(row["decode_goodput_per_gpu"], 10.0, rtol=0.02)
    assert row["decode_goodput_per_gpu"] >= 10.0  # one decode GPU carries the whole 10 req/s
    assert row["xpyd"] == "2P1D" and row["total_gpus"] == 3
    assert_allclose(row["goodput_per_gpu"], 10 / 3)


# --------------------------------------------------------------------------- errors


def test_weights_that_fit_nowhere_are_infeasible():
    with pytest.raises(InfeasibleError, match=r"does not fit the prefill hardware l40s at any TP in \[1, 2, 4, 8\]"):
        one(model="llama-3.1-405b", hardware="l40s-pcie-8", qps=1, isl="2k", osl=64)
    with pytest.raises(InfeasibleError, match="decode hardware l40s"):
        one(model="llama-3.1-405b", hardware="h200", system="hgx-h200-8", decode_hardware="l40s",
            link_bandwidth_bytes_per_s=50e9, qps=1, isl="2k", osl=64)


def test_unmeetable_slos_name_the_binding_constraint_and_the_best_value():
    result = plan_pd("llama-3.1-8b", "h100-sxm", system="hgx-h100-8", qps=1, isl="32k", osl=64, ttft="p99<=10ms",
                     tpot="p99<=100ms", aggregated=False, sensitivity=False)
    row = result.rows[0]
    assert result.failed and not row["feasible"]
    assert row["binding_constraint"] == "ttft_slo" and row["best_achievable_ttft_s"] > 0.01
    assert "TTFT p99 ≤ 10.00 ms is unattainable" in result.verdict
    tpot = plan_pd("llama-3.1-8b", "h100-sxm", qps=1, isl="2k", osl=64, ttft="p99<=10s", tpot="p99<=1ms",
                   aggregated=False, sensitivity=False).rows[0]
    assert tpot["binding_constraint"] == "tpot_slo" and tpot["best_achievable_tpot_s"] > 1e-3


def test_bad_inputs():
    with pytest.raises(InputError, match="cached-prefix-fraction"):
        one(qps=1, isl="2k", osl=64, cached_prefix_fraction=1.0)
    with pytest.raises(InputError, match="unknown placement"):
        one(qps=1, isl="2k", osl=64, placement="same-rack")
    with pytest.raises(InputError, match="no workload"):
        one(isl="2k", osl=64)
    with pytest.raises(InputError, match="go together"):
        one(qps=1, isl="2k", osl=64, prefill_instances=2)
    with pytest.raises(InputError, match="max_context"):
        one(qps=1, isl="128k", osl=64)


# --------------------------------------------------------------------------- monotonic behaviour


FAST = settings(max_examples=6, deadline=None)
SMALL = dict(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", qps=4.0, ttft="p99<=8s",
             tpot="p99<=60ms")


@FAST
@given(isl=st.integers(2048, 16384), more=st.integers(1024, 16384), osl=st.integers(64, 256))
def test_longer_inputs_with_short_outputs_never_shift_the_ratio_toward_decode(isl, more, osl):
    """P:D from the per-GPU rates (prefill GPUs needed per decode GPU) never falls as prompts grow, when a
    prompt's prefill work grows with its length. A fixed cost per prompt (vLLM's eager-prefill dispatch,
    32 × 0.8 ms here) makes the prefill affine in ISL and the ratio may then fall, so it is set to 0 here."""
    from kvplan.plans.deployment import EngineSettings
    from kvplan.plans.sizing.efficiency import Efficiencies

    no_dispatch = EngineSettings(efficiencies=Efficiencies(prefill_overhead_s=0.0))
    rows = [one(isl=n, osl=osl, prefill_tp=[1], decode_tp=[1], settings=no_dispatch, **SMALL) for n in (isl, isl + more)]
    ratio = [r["decode_goodput_per_gpu"] / r["prefill_goodput_per_gpu"] for r in rows]
    assert ratio[1] >= ratio[0] * (1 - 1e-9)
    assert rows[1]["prefill_gpus"] >= rows[0]["prefill_gpus"]


@FAST
@given(bw=st.floats(5e9, 500e9), slower=st.floats(1.05, 20.0), isl=st.integers(1024, 32768))
def test_a_slower_link_never_lowers_ttft(bw, slower, isl):
    kw = dict(isl=isl, osl=128, prefill_tp=[2], decode_tp=[2], prefill_instances=3, decode_instances=1,
              link_efficiency=1.0, placement="cross-node", **SMALL)
    fast = one(link_bandwidth_bytes_per_s=bw, **kw)
    slow = one(link_bandwidth_bytes_per_s=bw / slower, **kw)
    assert slow["kv_transfer_s"] > fast["kv_transfer_s"]
    for stat in ("mean", "p50", "p90", "p99"):  # None: unbounded (a saturated link or prefill queue)
        slow_s, fast_s = (r[f"ttft_{stat}_s"] for r in (slow, fast))
        assert (math.inf if slow_s is None else slow_s) >= (math.inf if fast_s is None else fast_s) * (1 - 1e-12)


@FAST
@given(limit_ms=st.floats(25.0, 120.0), tighter=st.floats(0.5, 0.95), isl=st.integers(1024, 16384))
def test_a_tighter_tpot_never_needs_fewer_decode_gpus(limit_ms, tighter, isl):
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", system="hgx-h100-8", qps=8.0, isl=isl, osl=256,
              ttft="p99<=8s")
    loose = one(tpot=f"p99<={limit_ms}ms", **kw)
    tight = one(tpot=f"p99<={limit_ms * tighter}ms", **kw)
    if loose["feasible"] and tight["feasible"]:
        assert tight["decode_gpus"] >= loose["decode_gpus"]
    assert not (tight["feasible"] and not loose["feasible"])

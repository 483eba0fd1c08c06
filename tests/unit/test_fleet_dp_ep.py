"""``kvplan plan`` searches attention DP and expert parallelism for MoE models (vLLM's -tp/-dp/--enable-expert-parallel).

- DeepSeek-V3 on H200: TP8 replicates the MLA latent on every GPU of an instance, attention DP
  gives each rank its own pool, so the search picks a DP/EP shape when it needs fewer GPUs (a decode-heavy
  2k/2k load; at 8k/1k TP8's faster prefill wins);
- pins (``--tp 1 --dp 8``, ``--enable-expert-parallel``) plan one shape; multi-node EP is searched
  over the system's NIC and skipped without one; redundant experts follow pd's rule;
- bad combinations are an Error/Hint pair, exit 2;
- pd's aggregated alternative runs the same search, and equals ``kvplan plan`` at its shape;
- pd compares cost, not GPU counts, when ``--gpu-cost`` prices both hardware.
"""

from __future__ import annotations

import pytest

from kvplan.cards.loader import load_hardware, load_model, load_system
from kvplan.errors import InputError
from kvplan.plans.fleet.aggregated import Shape
from kvplan.plans.fleet.model import Slo
from kvplan.plans.fleet.plan import fleet_workload, plan
from kvplan.plans.fleet.search import candidate_shapes
from kvplan.plans.pd.report import plan_cost
from kvplan.plans.pd.result import PdPlan, PoolFigures

from ..conftest import json_rows

SLOS = [Slo("ttft", "p99", 3.0), Slo("tpot", "p99", 0.06)]
DEEPSEEK = ["--qps", "10", "--isl", "2k", "--osl", "2k", "--ttft", "p99<=3s", "--tpot", "p99<=60ms"]


@pytest.fixture(scope="module")
def deepseek_search():
    workload = fleet_workload(qps=10, isl="2k", osl="2k", sample_requests=20_000)
    return plan("deepseek-v3", "h200", workload, SLOS, scale=())


def test_deepseek_v3_on_h200_picks_attention_dp_with_ep_when_it_needs_fewer_gpus(deepseek_search):
    main, *others = deepseek_search.rows
    assert main["feasible"] and main["dp"] > 1 and main["expert_parallel"] and main["ep"] == main["tp"] * main["dp"]
    (tp8,) = [r for r in others if r["kind"] == "candidate" and (r["tp"], r["dp"]) == (8, 1)]
    assert tp8["feasible"] and not tp8["expert_parallel"]
    assert main["total_gpus"] < tp8["total_gpus"]
    # every DP shape counts GPUs as instances × tp × dp, and its batch as DP ranks × batch per rank
    assert main["total_gpus"] == main["instances"] * main["tp"] * main["dp"]
    assert main["batch_per_instance"] == main["dp"] * main["batch_per_rank"]
    assert any("parallelism searched" in n and "dp=8" in n for n in deepseek_search.assumptions)


def test_multi_node_ep_is_searched_over_the_nic(deepseek_search):
    """hgx-h200-8 has an 8-GPU domain and a NIC: tp=1 dp=16 (EP16) spans two nodes per instance."""
    (wide,) = [r for r in deepseek_search.rows if r["kind"] == "candidate" and (r["tp"], r["dp"]) == (1, 16)]
    assert wide["ep"] == 16
    if wide["feasible"]:
        assert wide["nodes"] == 2 * wide["instances"]


def test_multi_node_ep_is_skipped_without_a_nic():
    card, hw = load_model("deepseek-v3"), load_hardware("h200")
    no_nic = load_system("hgx-h200-8").model_copy(update={"nic": None})
    shapes, dropped = candidate_shapes(card, hw, [1], [1], no_nic, [8, 16])
    assert [(s.tp, s.dp, s.ep) for s in shapes] == [(1, 8, 8)]
    assert any("tp=1 dp=16 skipped" in d and "no NIC" in d for d in dropped)


def test_redundant_experts_make_ep_divide_the_experts_as_pd_does():
    """Mixtral has 8 routed experts: EP16 needs R = (−8) mod 16 = 8 replicas ((8 + 8) / 16 = 1 per rank)."""
    card, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    shapes, _ = candidate_shapes(card, hw, [1], [1], load_system("hgx-h100-8"), [4, 16])
    assert {(s.dp, s.redundant_experts) for s in shapes} == {(4, 0), (16, 8)}
    assert all(s.expert_parallel for s in shapes)


def test_dense_models_are_not_searched_over_dp():
    card, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    shapes, _ = candidate_shapes(card, hw, [1, 2], [1], load_system("hgx-h100-8"))
    assert all(s.dp == 1 and not s.expert_parallel for s in shapes)
    with pytest.raises(InputError, match="dense model"):
        candidate_shapes(card, hw, [1], [1], None, [2])


def test_pins_plan_one_shape(invoke):
    rows = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", "1", "--dp", "8", *DEEPSEEK, "--scale", "2",
                            "--format", "json"))
    assert [r["kind"] for r in rows] == ["plan", "scale"]
    assert (rows[0]["tp"], rows[0]["dp"], rows[0]["ep"], rows[0]["expert_parallel"]) == (1, 8, 8, True)
    assert rows[0]["total_gpus"] == rows[0]["instances"] * 8
    ep8 = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", "8", "--enable-expert-parallel", *DEEPSEEK,
                           "--scale", "2", "--format", "json"))[0]
    assert (ep8["tp"], ep8["dp"], ep8["ep"], ep8["expert_parallel"]) == (8, 1, 8, True)
    listed = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", "1,2", "--dp", "4,8", *DEEPSEEK, "--scale", "2",
                              "--format", "json"))
    assert {(r["tp"], r["dp"]) for r in listed if r["kind"] in ("plan", "candidate")} == {(1, 4), (1, 8), (2, 4),
                                                                                          (2, 8)}


@pytest.mark.parametrize(("model", "args", "message"), [
    ("llama-3.1-8b", ["--dp", "2"], "--dp: llama-3.1-8b is a dense model"),
    ("llama-3.1-8b", ["--enable-expert-parallel"], "--enable-expert-parallel: llama-3.1-8b is a dense model"),
    ("deepseek-v3", ["--tp", "1", "--dp", "3"], "3 GPUs neither divide a 8-GPU node nor span whole nodes"),
    ("deepseek-v3", ["--tp", "1", "--dp", "8", "--ep-redundant-experts", "5"], "does not divide deepseek-v3's 256"),
    ("deepseek-v3", ["--dp", "0"], "--dp values must be whole numbers >= 1"),
    ("llama-3.1-8b", ["--tp", "1", "--ep-redundant-experts", "2"], "dense model"),
    ("deepseek-v3", ["--ep-redundant-experts", "-1"], "--ep-redundant-experts must be a whole number >= 0"),
    ("deepseek-v3", ["--tp", "8", "--ep-redundant-experts", "8"], "--ep-redundant-experts needs expert parallelism"),
    ("deepseek-v3", ["--dp-imbalance", "3"], "--dp-imbalance 3 exceeds dp 2, the smallest attention-DP size searched"),
    ("deepseek-v3", ["--tp", "1", "--dp", "8", "--dp-imbalance", "0.5"], "--dp-imbalance must be >= 1"),
    ("deepseek-v3", ["--tp", "1", "--dp", "8", "--dp-imbalance", "inf"], "--dp-imbalance must be >= 1"),
])
def test_bad_parallel_combinations_exit_2_with_error_and_hint(invoke, model, args, message):
    res = invoke("plan", model, "h200", "--qps", "5", "--isl", "1k", "--osl", "100", *args, "--format", "json")
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    first, *rest = res.stderr.splitlines()
    assert first.startswith("Error: ") and message in first, first
    assert rest and rest[0].startswith("Hint: ") and "Traceback" not in res.stderr


def test_pd_aggregated_alternative_is_plans_dp_ep_answer(invoke):
    """DeepSeek-V3: pd compares against the best aggregated DP/EP plan, which equals kvplan plan at that shape."""
    rows = json_rows(invoke("pd", "deepseek-v3", "h200", *DEEPSEEK, "--no-sensitivity", "--format", "json"))
    (agg,) = [r for r in rows if r["mode"] == "aggregated"]
    assert agg["feasible"] and agg["prefill_dp"] > 1 and agg["prefill_ep"] == agg["prefill_tp"] * agg["prefill_dp"]
    pinned = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", agg["prefill_tp"], "--dp", agg["prefill_dp"],
                              *DEEPSEEK, "--scale", "2", "--format", "json"))[0]
    assert agg["total_gpus"] == pinned["total_gpus"]
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        assert agg[key] == pytest.approx(pinned[key], rel=1e-9), key


def test_plan_cost_worked_by_hand():
    """3 prefill × TP2 on H100 at 2.4 + 1 decode × TP8 on H20 at 1.0 = 6 × 2.4 + 8 × 1.0 = 22.4 per hour;
    aggregated 3 × TP4 on H100 = 12 × 2.4 = 28.8 per hour."""
    prices = {"h100-sxm": 2.4, "h20": 1.0}
    common = {"scenario": "base", "model": "llama-3.1-70b", "qps": 5.0, "arrival_scv": 1.0, "isl_mean": 4096.0,
              "osl_mean": 512.0, "cached_prefix_fraction": 0.0, "ttft_slo": "p99<=2s", "tpot_slo": "p99<=80ms"}
    pd = PdPlan(**common, mode="disaggregated", prefill_hardware="h100-sxm", decode_hardware="h20", feasible=True,
                prefill=PoolFigures(instances=3, tp=2, gpus=6), decode=PoolFigures(instances=1, tp=8, gpus=8),
                total_gpus=14)
    agg = PdPlan(**common, mode="aggregated", prefill_hardware="h100-sxm", decode_hardware="h100-sxm", feasible=True,
                 prefill=PoolFigures(instances=3, tp=4), decode=PoolFigures(instances=3, tp=4), total_gpus=12)
    assert plan_cost(pd, prices) == pytest.approx(22.4)
    assert plan_cost(agg, prices) == pytest.approx(28.8)
    assert plan_cost(pd, {"h100-sxm": 2.4}) is None
    assert plan_cost(PdPlan(**{**common, "mode": "disaggregated", "prefill_hardware": "h100-sxm",
                               "decode_hardware": "h20"}), prices) is None  # infeasible: no cost


H100_H20 = ["pd", "llama-3.1-70b", "h100-sxm", "--decode-hardware", "h20", "--qps", "5", "--isl", "4k", "--osl",
            "512", "--ttft", "p99<=2s", "--tpot", "p99<=80ms", "--no-sensitivity"]


def _pd(invoke, *extra):
    res = invoke(*H100_H20, *extra, "--format", "json")
    rows = json_rows(res)
    (dis,) = [r for r in rows if r["mode"] == "disaggregated"]
    (agg,) = [r for r in rows if r["mode"] == "aggregated"]
    return dis, agg


def test_pd_between_different_hardware_compares_cost_when_priced(invoke):
    """H100 prefill + H20 decode vs aggregated H100: GPU counts first, then prices that make PD the cheaper."""
    dis, agg = _pd(invoke)
    assert dis["feasible"] and agg["feasible"] and dis["cost_per_hour"] is None
    text = invoke(*H100_H20).stdout
    assert "GPU counts compared across h100-sxm and h20" in " ".join(text.split())
    # price H100 at 1 and H20 below (A − P) / D: P + D·x < A, so disaggregation is the cheaper by hand
    p, d, a = dis["prefill_gpus"], dis["decode_gpus"], agg["total_gpus"]
    if a <= p:
        pytest.skip("aggregated needs no more GPUs than PD's prefill pool alone: no price makes PD cheaper")
    x = 0.5 * (a - p) / d
    prices = f"h100-sxm=1,h20={x:.6g}"
    dis_c, agg_c = _pd(invoke, "--gpu-cost", prices)
    assert dis_c["cost_per_hour"] == pytest.approx(dis_c["prefill_gpus"] * 1 + dis_c["decode_gpus"] * float(f"{x:.6g}"))
    assert agg_c["cost_per_hour"] == pytest.approx(agg_c["total_gpus"] * 1.0)
    assert dis_c["cost_per_hour"] < agg_c["cost_per_hour"]
    text = " ".join(invoke(*H100_H20, "--gpu-cost", prices).stdout.split())
    assert "disaggregation wins by" in text and "costs compared (--gpu-cost), not GPU counts" in text


def test_deepseek_v3_qps_sweep_with_the_dp_ep_search_is_monotone():
    """The cheapest shape's GPUs never fall as the rate rises (each shape's count is monotone, so is their minimum):
    the issue's 8k/1k sweep, and a decode-heavy 2k/2k one where attention DP with EP is the cheapest shape."""
    from kvplan.plans.fleet.search import search_shapes

    card, hw, system = load_model("deepseek-v3"), load_hardware("h200"), load_system("hgx-h200-8")
    shapes = []
    for isl, osl in (("8k", "1k"), ("2k", "2k")):
        gpus = []
        for qps in (1, 5, 10, 20, 40):
            workload = fleet_workload(qps=qps, isl=isl, osl=osl, sample_requests=20_000)
            best = search_shapes(card, hw, workload, SLOS, system=system).best
            assert best.feasible, (isl, osl, qps, best.reason)
            gpus.append(best.total_gpus)
            shapes.append(best.shape.label())
        assert gpus == sorted(gpus), (isl, osl, gpus, shapes)
    assert any("dp=" in s for s in shapes), shapes


def test_closed_loop_runs_the_dp_ep_layout(invoke):
    """--concurrency with -tp 1 -dp 8: one instance of 8 GPUs, EP 8, each DP rank a simulated engine."""
    rows = json_rows(invoke("plan", "deepseek-v3", "h200", "--isl", "3200", "--osl", "800", "--concurrency", "4,32",
                            "--tp", "1", "--dp", "8", "--sim-requests", "200", "--format", "json"))
    assert [(r["concurrency"], r["tp"], r["dp"], r["ep"], r["gpus"]) for r in rows] == [(4, 1, 8, 8, 8), (32, 1, 8, 8, 8)]
    assert rows[1]["output_tokens_per_s"] > rows[0]["output_tokens_per_s"]
    assert rows[1]["littles_law_concurrency"] == pytest.approx(32, rel=0.15)


def test_dp_imbalance_override_reaches_the_plans_steps(invoke):
    # plan charges λ_dp on a dp > 1 instance's steps as latency does; --dp-imbalance overrides it.
    # Default at dp 8: TensorRT-LLM tech blog 10's 37,912 / 34,140 = 1.1105 (kvplan.plans.sizing.perfmodel).
    from kvplan.plans.deployment import EngineSettings, Parallelism, resolve

    par = Parallelism(tp=1, dp=8, expert_parallel=True)
    default = resolve("deepseek-v3", "h200", parallel=par)
    balanced = resolve("deepseek-v3", "h200", parallel=par, engine=EngineSettings(dp_imbalance=1.0))
    assert default.steps.dp_imbalance == pytest.approx(37_912 / 34_140, rel=1e-9)
    assert balanced.steps.dp_imbalance == 1.0
    gpus, tpot = {}, {}
    for lam in ("1", None, "1.2"):
        extra = [] if lam is None else ["--dp-imbalance", lam]
        row = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", "1", "--dp", "8", *DEEPSEEK, "--scale", "2",
                               *extra, "--format", "json"))[0]
        gpus[lam] = row["total_gpus"]
        closed = json_rows(invoke("plan", "deepseek-v3", "h200", "--tp", "1", "--dp", "8", "--isl", "1k", "--osl",
                                  "200", "--concurrency", "64", "--sim-requests", "128", *extra, "--format", "json"))[0]
        tpot[lam] = closed["tpot_p50_s"]
    assert gpus["1"] <= gpus[None] <= gpus["1.2"]       # a slower step never needs fewer GPUs
    assert tpot["1"] < tpot[None] < tpot["1.2"]          # the same closed loop, slower steps

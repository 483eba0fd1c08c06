"""The fleet-sizing cases that once gave untrustworthy answers, run with the exact commands a user types.

- GPUs fell as load rose (DeepSeek-V3 on H200, TP8): the sweep must be monotone, and the binding
  constraint a user SLO or a named resource, never an internal limit of the model.
- A plan its own replay breaks was called feasible: with a trace (or ``--simulate``) the replay's
  percentiles meet every SLO, or the command exits 1 with both figures.
"""

from __future__ import annotations

import json
import re

import pytest

from ..conftest import TRACES_DIR

ALLOWED = {"ttft_slo", "tpot_slo", "kv_capacity", "memory", "max_num_seqs", "max_num_batched_tokens", "link", "none"}
SECONDS = {"ms": 1e-3, "s": 1.0}


def plan_row(invoke, *args):
    res = invoke("plan", *args, "--format", "json")
    assert res.exit_code in (0, 1), res.stderr
    return res, json.loads(res.stdout)[0]


def test_deepseek_v3_qps_sweep_is_monotone_and_bound_by_slos_or_resources(invoke):
    gpus = []
    for qps in (1, 5, 10, 20, 25, 30, 40):
        res, row = plan_row(invoke, "deepseek-v3", "h200", "--tp", "8", "--isl", "8k", "--osl", "1k",
                            "--ttft", "p99<=3s", "--tpot", "p99<=60ms", "--qps", str(qps), "--scale", "2")
        assert res.exit_code == 0 and row["feasible"], (qps, row["reason"])
        assert row["binding_constraint"] in ALLOWED, (qps, row["binding_constraint"])
        assert row["ttft_p99_s"] <= 3 and row["tpot_p99_s"] <= 0.06
        if row["binding_constraint"] != "none":
            assert row["binding_detail"].startswith(f"at N − 1 = {row['instances'] - 1} instance")
        gpus.append(row["total_gpus"])
    assert gpus == sorted(gpus), gpus
    # the old internal limit (MAX_GAIN) asked for 16/64/128/256/112/384/512; a TP8 instance holds 78
    # sequences of 9k tokens, so 5 req/s no longer needs 8 instances averaging 4.9 sequences each. Those
    # figures are the one-η roofline's (the per-operator default prices DeepSeek's MoE steps slower)
    roof = [plan_row(invoke, "deepseek-v3", "h200", "--tp", "8", "--isl", "8k", "--osl", "1k", "--ttft", "p99<=3s",
                     "--tpot", "p99<=60ms", "--qps", str(qps), "--scale", "2", "--perf-model", "roofline")[1]
            for qps in (5, 40)]
    assert roof[0]["total_gpus"] < 64 and roof[1]["total_gpus"] < 512


def test_deepseek_v3_qps_sweep_with_the_parallelism_search_is_monotone(invoke):
    # the same sweep without --tp: plan searches TP and attention DP × EP (18 shapes); the cheapest feasible
    # fleet is a minimum over shapes of GPU counts each non-decreasing in load, so it never falls either
    gpus = []
    for qps in (1, 5, 10, 20, 25, 30, 40):
        res, row = plan_row(invoke, "deepseek-v3", "h200", "--isl", "8k", "--osl", "1k", "--ttft", "p99<=3s",
                            "--tpot", "p99<=60ms", "--qps", str(qps), "--scale", "2", "--sample", "20000")
        assert res.exit_code == 0 and row["feasible"], (qps, row["reason"])
        assert row["binding_constraint"] in ALLOWED and row["ttft_p99_s"] <= 3 and row["tpot_p99_s"] <= 0.06
        gpus.append(row["total_gpus"])
    assert gpus == sorted(gpus), gpus


def test_azure_code_trace_meets_its_slos_in_its_own_replay(invoke):
    res, row = plan_row(invoke, "llama-3.1-8b", "h100-sxm", "--trace", TRACES_DIR / "AzureLLMInferenceTrace_code.csv",
                        "--ttft", "p99<=1s", "--tpot", "p99<=30ms", "--simulate", "--scale", "2")
    if res.exit_code == 1:
        assert not row["feasible"] and "replay" in row["reason"] and "closed form" in row["reason"]
        return
    assert row["feasible"] and row["sized_by"] == "replay"
    assert row["sim_ttft_p99_s"] <= 1.0 and row["sim_tpot_p99_s"] <= 0.030
    # the closed form alone planned 2 instances, whose replay gives TPOT p99 165 ms: the replay grows it
    assert row["closed_form_instances"] == 2 and row["instances"] > 2
    assert row["binding_constraint"] == "tpot_slo" and "replay gives TPOT p99" in row["binding_detail"]


def test_mooncake_conversation_trace_meets_its_slos_in_its_own_replay(invoke):
    args = ("llama-3.1-70b", "h100-sxm", "--tp", "8", "--trace", TRACES_DIR / "conversation_trace.jsonl",
            "--ttft", "p99<=10s", "--tpot", "p99<=100ms", "--scale", "2")
    res, row = plan_row(invoke, *args)
    assert res.exit_code == 0 and row["feasible"] and row["sized_by"] == "replay"
    assert row["sim_ttft_p99_s"] <= 10 and row["sim_tpot_p99_s"] <= 0.100
    # vLLM's prefill dispatch (80 layers × 0.8 ms once per request, in TTFT only) leaves the closed form at 5, as
    # without it (--prefill-overhead 0): the TPOT SLO binds, which the term does not touch; the replay grows either
    assert row["closed_form_instances"] == 5 and row["instances"] > 5
    res0, row0 = plan_row(invoke, *args, "--prefill-overhead", "0")
    assert res0.exit_code == 0 and row0["closed_form_instances"] == 5 and row0["instances"] > 5
    assert row["sim_ttft_p99_s"] > row0["sim_ttft_p99_s"]
    # with a budget the replay cannot meet: exit 1, the simulated and the closed-form figures both named
    res, row = plan_row(invoke, *args, "--max-gpus", "40")
    assert res.exit_code == 1 and not row["feasible"]
    assert "own replay breaks the SLO: at 5 instances" in row["reason"]
    assert re.search(r"TPOT p99 [\d.]+ ms > 100\.00 ms \(closed form [\d.]+ ms\)", row["reason"]), row["reason"]
    assert "Error: infeasible: the plan's own replay breaks the SLO" in res.stderr
    # the closed form's figure is the step model's: 91.87 ms at 4 instances on the one-η roofline
    res, row = plan_row(invoke, *args, "--max-gpus", "40", "--perf-model", "roofline")
    assert res.exit_code == 1 and "at 4 instances (the closed form's fleet)" in row["reason"]
    assert "(closed form 91.87 ms)" in row["reason"]


@pytest.mark.parametrize("flag", ["--no-simulate"])
def test_a_trace_without_replay_is_sized_by_the_closed_form(invoke, flag):
    res, row = plan_row(invoke, "llama-3.1-8b", "h100-sxm", "--trace", TRACES_DIR / "AzureLLMInferenceTrace_code.csv",
                        "--ttft", "p99<=1s", "--tpot", "p99<=30ms", flag, "--scale", "2")
    assert res.exit_code == 0 and row["sized_by"] == "closed_form" and "sim_tpot_p99_s" not in row
    assert row["instances"] == row["closed_form_instances"] == 2


def rows_of(invoke, *args):
    res = invoke("plan", *args, "--format", "json")
    assert res.exit_code in (0, 1), res.stderr
    return res, json.loads(res.stdout)


LLAMA70_20QPS = ("llama-3.1-70b", "h100-sxm", "--qps", "20", "--isl", "1k:4k", "--osl", "200:800",
                 "--ttft", "p99<=2s", "--tpot", "p90<=50ms", "--scale", "2", "--sample", "20000")


def test_plan_searches_parallelism_when_no_tp_is_given(invoke):
    # --tp 1 used to be the default: a 70B model's 131 GiB of bf16 weights do not fit one 80 GB GPU
    res, rows = rows_of(invoke, *LLAMA70_20QPS)
    assert res.exit_code == 0
    best, others = rows[0], [r for r in rows if r["kind"] == "candidate"]
    assert best["kind"] == "plan" and best["feasible"] and best["pp"] == 1
    assert sorted(r["tp"] for r in [best, *others]) == [1, 2, 4, 8]
    tp1 = next(r for r in others if r["tp"] == 1)
    assert not tp1["feasible"] and tp1["binding_constraint"] == "memory"
    feasible = [r["total_gpus"] for r in others if r["feasible"]]
    assert feasible and all(best["total_gpus"] <= g for g in feasible)
    # the chosen shape is the one a pinned run gives, and the scale-out rows keep it
    res, pinned = rows_of(invoke, *LLAMA70_20QPS, "--tp", str(best["tp"]))
    assert pinned[0]["total_gpus"] == best["total_gpus"] and not [r for r in pinned if r["kind"] == "candidate"]
    assert [r["gpus_per_instance"] for r in rows if r["kind"] == "scale"] == [best["gpus_per_instance"]]


def test_a_tp_list_is_searched_and_one_value_pins_it(invoke):
    res, rows = rows_of(invoke, *LLAMA70_20QPS, "--tp", "2,4,8")
    assert res.exit_code == 0 and sorted(r["tp"] for r in rows if r["kind"] in ("plan", "candidate")) == [2, 4, 8]
    res, rows = rows_of(invoke, *LLAMA70_20QPS, "--tp", "8")
    assert res.exit_code == 0 and [r["kind"] for r in rows] == ["plan", "scale"] and rows[0]["tp"] == 8
    bad = invoke("plan", *LLAMA70_20QPS, "--tp", "2,x")
    assert bad.exit_code == 2 and "Error: --tp values must be whole numbers >= 1 (got 'x')" in bad.stderr


def test_pipeline_stages_are_added_where_the_weights_need_them(invoke):
    # Llama-3.1-405B in bf16 is 811 GB of weights: no TP within one 8-GPU H100 node holds it
    res, rows = rows_of(invoke, "llama-3.1-405b", "h100-sxm", "--qps", "2", "--isl", "2k", "--osl", "256",
                        "--ttft", "p99<=5s", "--tpot", "p90<=100ms", "--scale", "2", "--sample", "5000")
    assert res.exit_code == 0
    best = rows[0]
    assert best["feasible"] and (best["tp"], best["pp"]) == (8, 2)
    assert all(r["binding_constraint"] == "memory" for r in rows if r["kind"] == "candidate" and r["pp"] == 1)


def test_gpu_cost_gives_cost_per_hour_and_per_million_output_tokens(invoke):
    args = ("llama-3.1-70b", "h100-sxm", "--qps", "20", "--isl", "1k", "--osl", "200", "--ttft", "p99<=2s",
            "--tpot", "p90<=50ms", "--scale", "2", "--sample", "5000", "--gpu-cost", "h100-sxm=2.4,h20=1.0")
    res, rows = rows_of(invoke, *args)
    assert res.exit_code == 0
    for row in rows:
        if row.get("feasible"):
            # G GPUs × 2.4 per GPU-hour over (λ × 200 output tokens × 3,600 s) per hour, per million tokens
            rate = row.get("rate_per_s", 20.0)
            assert row["fleet_cost_per_hour"] == pytest.approx(row["total_gpus"] * 2.4)
            assert row["cost_per_million_output_tokens"] == pytest.approx(
                row["total_gpus"] * 2.4 / (rate * 200 * 3600) * 1e6)
    table = invoke("plan", *args, "--format", "markdown")
    assert "cost: fleet per hour / per million output tokens" in table.stdout
    bad = invoke("plan", *args[:-1], "h100-sxm=cheap")
    assert bad.exit_code == 2 and "Error: --gpu-cost: 'cheap' is not a number" in bad.stderr


def test_tier_keeps_the_hot_path_in_hbm(invoke):
    # the stability bound alone gave 6 nodes whose decode KV (89.6 GiB/GPU) exceeded the HBM budget (54.7 GiB then);
    # the fleet is now kvplan plan's, grown (if needed) until the p99 decode batch's KV fits HBM
    args = ("tier", "llama-3.1-70b", "--system", "hgx-h100-8", "--qps", "5", "--isl", "8k", "--osl", "512",
            "--turns", "4", "--think-time", "30s", "--shared-prefix", "2k", "--no-pd", "--format", "json")
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    summary = next(r for r in json.loads(res.stdout) if "active_kv_fits_hbm" in r)
    assert summary["active_kv_fits_hbm"] and summary["active_kv_spilled_bytes_per_gpu"] == 0
    # vLLM's budget on one TP8 GPU: 79.65 GiB × 0.9 − weights 16.43 − activation 5.14 − non-torch 3.58 = 46.54 GiB;
    # the activation is the sampler's 10.5 × 1,024 × 128,256 × 4 B at vLLM V1's max_num_seqs 1,024 on an H100
    # (vllm/engine/arg_utils.py: >= 70 GiB, not an A100; it was 1.28 GiB at the old fixed 256)
    assert summary["hbm_kv_budget_bytes_per_gpu"] == pytest.approx(46.54 * 2**30, rel=2e-4)
    assert summary["active_kv_p99_bytes_per_gpu"] <= summary["hbm_kv_budget_bytes_per_gpu"]
    assert summary["tpot_penalty_p99_s"] == 0
    assert summary["nodes"] == summary["nodes_min_hbm"]
    # the spill stays available as an explicit what-if (200 sequences held per instance): its TPOT penalty
    res = invoke(*args, "--nodes", str(summary["nodes"]), "--decode-batch", "200")
    assert res.exit_code == 1
    spilled = next(r for r in json.loads(res.stdout) if "active_kv_fits_hbm" in r)
    assert not spilled["active_kv_fits_hbm"] and spilled["tpot_penalty_p50_s"] > 0.1
    text = invoke(*args[:-2], "--nodes", str(summary["nodes"]), "--decode-batch", "200", "--format", "markdown")
    assert "A what-if: vLLM and SGLang preempt rather than stream decode KV from host memory" in text.stdout


def test_pd_on_a_hardware_card_plans_across_nodes_of_its_usual_system(invoke):
    # without --system it used to stay in one 8-GPU NVLink domain ("the longest request's KV does not fit one
    # decode instance"); h100-sxm's usual system is hgx-h100-8, whose NIC carries KV between nodes
    args = ("pd", "llama-3.1-70b", "h100-sxm", "--trace", TRACES_DIR / "conversation_trace.jsonl",
            "--ttft", "p99<=10s", "--tpot", "p99<=100ms", "--no-sensitivity", "--format", "json")
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    best = json.loads(res.stdout)[0]
    assert best["mode"] == "disaggregated" and best["feasible"] and best["link_kind"] == "nic"
    # at the gaps' ca² = 9.2 (the one estimator); the split (6P1D with one representative GEMM shape per layer group,
    # 3P2D with each GEMM at its own shape: a tie at 32 GPUs either way) is the step model's, so the check is that
    # the pools it names are the GPUs it counts, more than one 8-GPU node
    pools = best["prefill_instances"] * best["prefill_tp"] + best["decode_instances"] * best["decode_tp"]
    assert best["xpyd"] == f"{best['prefill_instances']}P{best['decode_instances']}D"
    assert best["total_gpus"] == pools > 8 and best["arrival_scv"] == pytest.approx(9.2, abs=0.01)
    assert "Note: no --system: assumed hgx-h100-8, the usual system of h100-sxm" in res.stderr
    explicit = json.loads(invoke(*args, "--system", "hgx-h100-8").stdout)[0]
    assert (explicit["xpyd"], explicit["total_gpus"]) == (best["xpyd"], best["total_gpus"])


def test_every_usual_system_is_a_shipped_card_of_that_accelerator():
    from kvplan.cards.loader import card_files, load_hardware, load_system

    named = 0
    for path in card_files("hardware"):
        hw = load_hardware(path.stem)
        if hw.usual_system:
            named += 1
            assert load_system(hw.usual_system).accelerator == hw.name
            assert "usual_system" in hw.field_sources  # every figure has its source beside it
    assert named >= 9


def test_plan_reports_whole_nodes(invoke):
    res, rows = rows_of(invoke, *LLAMA70_20QPS, "--tp", "4")
    row = rows[0]
    assert row["system"] == "hgx-h100-8" and row["accelerators_per_node"] == 8
    # two TP4 instances per 8-GPU node: ⌈instances / 2⌉ nodes
    assert row["nodes"] == -(-row["instances"] // 2)


def test_outputs_of_one_token_have_no_tpot_and_meet_a_tpot_slo(invoke):
    """OSL 1: every request ends with its first token, so there is no TPOT (vLLM's benchmark counts TPOT over
    requests with more than one output token); a TPOT SLO holds vacuously, the replay runs, tier sizes its fleet."""
    base = ("llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "1", "--qps", "1", "--ttft", "p99<=2s",
            "--tpot", "p90<=50ms", "--tp", "1")
    res, row = plan_row(invoke, *base)
    assert res.exit_code == 0 and row["feasible"] and row["binding_constraint"] == "none", row["reason"]
    assert row["tpot_p90_s"] is None and row["ttft_p99_s"] <= 2
    res, row = plan_row(invoke, *base, "--simulate", "--explain")
    assert res.exit_code == 0 and row["feasible"] and row["sim_tpot_p90_s"] is None, res.stderr
    assert "internal error" not in res.stderr
    res = invoke("tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--qps", "5", "--isl", "8k", "--osl", "1",
                 "--format", "json")
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    assert [row["tpot_s"] for row in rows if "tpot_s" in row] == [None]  # the total row carries the fleet


def test_tpot_percentiles_never_fall_below_the_step_of_a_batch_of_one(invoke):
    """A request's TPOT is at least the decode step of a batch of one (every other term adds to it); at 1 req/s
    with two output tokens almost no request meets another, so the median is that step, as the replay has it."""
    args = ("llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "2", "--qps", "1", "--ttft", "p99<=2s", "--tp", "1")
    res, row = plan_row(invoke, *args, "--simulate")
    assert res.exit_code == 0
    lat = json.loads(invoke("latency", "llama-3.1-8b", "h100-sxm", "--isl", "1k", "--osl", "2", "--batch", "1",
                            "--format", "json").stdout)[0]
    assert row["tpot_p50_s"] >= lat["decode_step_s"] * 0.97  # the step at the mean decode context, not 1k exactly
    assert abs(row["tpot_p50_s"] - row["sim_tpot_p50_s"]) <= 0.02 * row["sim_tpot_p50_s"]

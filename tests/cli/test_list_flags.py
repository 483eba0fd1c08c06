"""Every list flag refuses an empty item the same way, and the expert-parallel flags are bounded.

An empty item (``--concurrency 8,,16``, a trailing ``--seq 4k,``) was once skipped silently by
some flags and read as an error by others; now every comma-separated flag reads its items through
``kvplan.units.split_items``: exit 2, ``Error:`` naming the flag, ``Hint:`` with the list
without its empty items.
"""

from __future__ import annotations

import pytest

from ..conftest import ROOT
from ..hostile.harness import assert_refused, run_inprocess, run_subprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None, "COLUMNS": "120"}
M, HW = "llama-3.1-8b", "h100-sxm"
WORKLOAD = ["--qps", "2", "--isl", "2k", "--osl", "256"]
SLOS = ["--ttft", "p99<=2s", "--tpot", "p99<=50ms"]
PASS = ROOT / "examples" / "plans" / "llama70b-h100-pass.yaml"

# (command line before the flag, flag, list with an empty item, what the hint suggests)
LIST_FLAGS = [
    (["size", M], "--seq", "4k,,8k", "4k,8k"),
    (["size", M], "--seq", "4k,", "4k"),
    (["size", M], "--batch", ",1,8", "1,8"),
    (["size", M], "--kv-dtype", "bf16,,fp8", "bf16,fp8"),
    (["size", M], "--tp", "1,,2", "1,2"),
    (["size", M], "--engine", "vllm,,sglang", "vllm,sglang"),
    (["fit", M, HW], "--max-model-len", "8k,,16k", "8k,16k"),
    (["fit", M, HW], "--tp", "1, ,2", "1,2"),
    (["fit", M, HW], "--kv-cache-dtype", "fp8,", "fp8"),
    (["latency", M, HW], "--batch", "1,,8", "1,8"),
    (["latency", M, HW], "--isl", "1k,,2k", "1k,2k"),
    (["plan", M, HW, "--isl", "2k", "--osl", "256"], "--concurrency", "8,,16", "8,16"),
    (["plan", M, HW, *WORKLOAD, *SLOS], "--tp", "1,,2", "1,2"),
    (["plan", M, HW, *WORKLOAD, *SLOS], "--pp", "1,", "1"),
    (["plan", M, HW, *WORKLOAD, *SLOS], "--scale", "2,,5", "2,5"),
    (["plan", M, HW, *WORKLOAD, *SLOS], "--gpu-cost", "h100-sxm=2.4,", "h100-sxm=2.4"),
    (["pd", M, HW, *WORKLOAD, *SLOS], "--prefill-tp", "1,,2", "1,2"),
    (["pd", M, HW, *WORKLOAD, *SLOS], "--decode-tp", "1,,2", "1,2"),
    (["pd", "mixtral-8x7b", HW, *WORKLOAD, *SLOS, "--enable-expert-parallel"], "--prefill-dp", "1,,2", "1,2"),
    (["pd", "mixtral-8x7b", HW, *WORKLOAD, *SLOS, "--enable-expert-parallel"], "--decode-dp", "2,", "2"),
    (["pd", M, HW, *WORKLOAD, *SLOS], "--gpu-cost", ",h100-sxm=2.4", "h100-sxm=2.4"),
    (["workload", "--rate", "5", "--osl", "256", "--sample", "300"], "--isl", "p50=1k,,p99=8k", "p50=1k,p99=8k"),
    (["workload", *WORKLOAD, "--sample", "300"], "--cache-tokens", "1M,,3M", "1M,3M"),
    (["route", M, HW, "--rate", "5", "--isl", "2k", "--osl", "256"], "--instances", "2,,4", "2,4"),
    (["route", M, HW, "--rate", "5", "--isl", "2k", "--osl", "256"], "--policy", "random,,round-robin",
     "random,round-robin"),
    (["report", PASS], "--concurrency", "1,,8", "1,8"),
    (["report", PASS], "--gpu-cost", "h100-sxm=2.4,,", "h100-sxm=2.4"),
]


@pytest.mark.parametrize("before,flag,value,suggested", LIST_FLAGS,
                         ids=[f"{b[0]} {f} {v!r}" for b, f, v, _ in LIST_FLAGS])
def test_an_empty_list_item_is_refused_naming_the_flag(tmp_path, before, flag, value, suggested):
    out = tmp_path / ("report" if before[0] == "report" else "out.json")
    args = [*before, flag, value, "--out" if before[0] == "report" else "-o", out]
    res = run_inprocess(args, env=NO_CI)
    assert_refused(res, outputs=[out])
    error, hint = next((line, nxt) for line, nxt in zip(res.stderr.splitlines(), res.stderr.splitlines()[1:])
                       if line.startswith("Error:"))
    assert "empty item" in error and value in error, error
    named = {"--kv-cache-dtype": "--kv-dtype"}.get(flag, flag)  # an alias is named by the flag it stands for
    assert named in error or before[0] == "workload", error  # workload's --isl: named by its grammar
    assert f"did you mean '{suggested}'?" in hint, hint


def test_the_same_list_without_the_empty_item_is_accepted():
    res = run_inprocess(["size", M, "--seq", "4k, 8k", "--format", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    assert '"seq_len": 4096' in res.stdout and '"seq_len": 8192' in res.stdout


def test_a_list_of_only_commas_is_an_empty_list():
    res = run_inprocess(["size", M, "--kv-dtype", ",,"], env=NO_CI)
    assert_refused(res)
    assert "empty --kv-dtype list" in res.stderr


# --- expert-parallel bounds: the hottest rank holds at most everything ---------------------------

MOE = ["mixtral-8x7b", HW]  # 8 routed experts, top-2 (model_cards/mixtral-8x7b.yaml)


def _refused_naming(tmp_path, args, needle):
    """The command is refused (exit 2, Error:/Hint:, nothing at -o) and its message names ``needle``."""
    out = tmp_path / "out.json"
    res = run_inprocess([*args, "-o", out], env=NO_CI)
    assert_refused(res, outputs=[out])
    assert needle in res.stderr, res.stderr


@pytest.mark.parametrize("args,needle", [
    # EP 2 holds at most 8 × (2 − 1) = 8 replicas (every expert on both ranks)
    (["latency", *MOE, "--enable-expert-parallel", "--tp", "2", "--ep-redundant-experts", "10"],
     "EP size 2 holds at most 8 replicas"),
    (["latency", *MOE, "--enable-expert-parallel", "--tp", "2", "--ep-redundant-experts", "1" + "0" * 20],
     "EP size 2 holds at most 8 replicas"),
    (["plan", *MOE, *WORKLOAD, *SLOS, "--enable-expert-parallel", "--ep-redundant-experts", "1" + "0" * 20],
     "ranks hold at most"),
    (["pd", *MOE, *WORKLOAD, *SLOS, "--enable-expert-parallel", "--ep-redundant-experts", "1" + "0" * 20],
     "ranks hold at most"),
    # λ = hottest rank's routed pairs / mean ≤ EP size (all of them on one rank): 1e308 gave Infinity
    (["latency", *MOE, "--enable-expert-parallel", "--tp", "2", "--expert-imbalance", "1e308"],
     "--expert-imbalance 1e+308 exceeds EP size 2"),
    (["latency", *MOE, "--enable-expert-parallel", "--tp", "2", "--expert-imbalance", "2.5"],
     "--expert-imbalance 2.5 exceeds EP size 2"),
])
def test_expert_parallel_values_beyond_what_the_ranks_hold_are_refused(tmp_path, args, needle):
    _refused_naming(tmp_path, args, needle)


def test_the_bounds_themselves_are_accepted():
    # 8 redundant over EP 2: every expert on both ranks; λ = 2: every routed token on one of 2 ranks
    res = run_inprocess(["latency", *MOE, "--enable-expert-parallel", "--tp", "2", "--ep-redundant-experts", "8",
                         "--expert-imbalance", "2", "--format", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    assert "Infinity" not in res.stdout


def test_plan_skips_the_shapes_that_cannot_hold_the_replicas():
    # 8 redundant experts: tp=1 (one rank, no room for replicas) is skipped, EP 4 and 8 are searched
    res = run_inprocess(["plan", *MOE, *WORKLOAD, *SLOS, "--enable-expert-parallel", "--ep-redundant-experts", "8",
                         "--format", "json"], env=NO_CI)
    assert res.exit_code == 0, res.stderr
    assert "plan tp=1 skipped: --ep-redundant-experts 8: ep = 1 ranks hold at most 0 replicas" in res.stderr


@pytest.mark.parametrize("args,needle", [
    # 2 req/s × 1e308 overflowed to an infinite rate, refused as "--qps must be > 0 (got inf)"
    (["plan", M, HW, *WORKLOAD, "--scale", "1e308"], "--scale 1e308 is more than the 1,000,000× kvplan accepts"),
    # a closed loop over 10⁹ instances allocated until MemoryError
    (["plan", M, HW, "--isl", "2k", "--osl", "256", "--concurrency", "8", "--instances", "1000000000"],
     "--instances 1000000000 is more than the 100,000 kvplan accepts"),
])
def test_plan_multipliers_and_instances_are_bounded(tmp_path, args, needle):
    _refused_naming(tmp_path, args, needle)


@pytest.mark.parametrize("command", [["plan", M, HW, *WORKLOAD], ["workload", *WORKLOAD]])
def test_a_million_token_shared_prefix_is_refused_before_allocating(tmp_path, command):
    # 100,000 sampled requests × (999,999 + 2k) tokens / 512-token blocks = 195M block ids: 79 s and 7.9 GB
    # before plan said "exceeds the context"; now refused by the block budget, in a child limited to 2 GiB
    out = tmp_path / "out.json"
    res = run_subprocess([*command, "--shared-prefix", "999999", "-o", out], env=NO_CI, timeout_s=30)
    assert_refused(res, outputs=[out])
    assert "prompt blocks of 512 tokens, more than the 33,554,432 kvplan keeps in memory" in res.stderr, res.stderr


def test_pd_names_the_reserves_when_they_not_the_weights_leave_no_kv_memory():
    # 1e9 tokens per step: vLLM's activation peak, not llama-3.1-8b's 1.87 GiB of weights at tp=8, fills the GPU
    res = run_inprocess(["pd", M, HW, *WORKLOAD, *SLOS, "--no-sensitivity", "--chunk-size", "1e9"], env=NO_CI)
    assert_refused(res, code=1)
    assert "the weights take 1.87 GiB per GPU of 79.65 GiB, the engine's reserves take" in res.stderr, res.stderr
    assert "(activation peak" in res.stderr
    heavy = run_inprocess(["pd", "llama-3.1-405b", HW, *WORKLOAD, *SLOS, "--prefill-tp", "1", "--decode-tp", "1"],
                          env=NO_CI)
    assert_refused(heavy, code=1)  # the weights alone: no reserves named
    assert "the weights take 755.96 GiB per GPU of 79.65 GiB and leave no KV memory" in heavy.stderr


def test_every_input_file_a_readme_example_names_ships_with_the_repository():
    # a fresh clone runs the README's examples as written: '--trace conversation_trace.jsonl' named a file
    # that was nowhere in the checkout (the traces ship in examples/traces/)
    import re
    import shlex

    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    named = []
    for line in text.splitlines():
        if not line.startswith("$ kvplan "):
            continue
        words = shlex.split(line[2:].split("  #")[0])
        for before, word in zip(["kvplan", *words], words):
            if before in ("-o", "--output", "--out", "--chart", "--junit", "--card-out"):
                continue  # written, not read
            if re.search(r"\.(jsonl|csv|ya?ml|json|parquet)$", word):
                named.append(word)
    assert named, "the README's examples read no file"
    missing = [w for w in named if not (ROOT / w).is_file()]
    assert not missing, f"README examples read files that are not in the repository: {missing}"


@pytest.mark.parametrize("signame,code", [("SIGTERM", 128 + 15), ("SIGINT", 130)])
def test_a_signal_during_a_real_sweep_leaves_no_temporary_file(tmp_path, signame, code):
    # the case: a sweep killed while it writes left a 20-40 MB .tmp beside the target
    import os
    import signal
    import subprocess
    import sys
    import time

    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-8b, llama-3.1-70b]\nhardware: [h100-sxm, a100-80gb]\n"
                    "seq: {start: 1k, stop: 128k, num: 1000}\nbatch: {start: 1, stop: 256, num: 100}\n"
                    "kv_dtype: [bf16, fp8]\ntp: [1, 2, 4, 8]\n", encoding="utf-8")  # 3.2M points: seconds to write
    target = tmp_path / "out.csv"
    sig = getattr(signal, signame)
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "sweep", grid, "-o", target], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.csv*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before its temporary file was seen"
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml"], "a file was left behind"
    assert "Traceback" not in stderr

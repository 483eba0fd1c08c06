"""Property-based fuzz (hypothesis) over every command's flags, read from the commands themselves.

For each of latency, plan, pd, tier, route, workload, check, report and sweep, the options are
read from the command (its click parameters: every option that takes a value, plus the on/off
flags), and each example sets one or two of them, as ``--flag=VALUE``, on a small valid command
line: numbers at their edges (0, negative, NaN, infinities, 1e308, 30-digit integers), numbers with
junk units, lists (``,``, ``1,,2``, ``1,2,4``), enum-like words, control characters and long
strings. check, report and sweep take few flags, so their files are fuzzed too: a plan file's
numeric fields, a grid's axes.

Whatever the value, kvplan either answers (exit 0 or 1, finite figures in its JSON, byte and
token counts non-negative when it says yes) or refuses as the hostile corpus requires: exit 2,
exactly one ``Error:`` line followed by a ``Hint:``, no traceback, never an internal error,
nothing left at the output path, within the time limit. ``derandomize=True``: the same examples
on every run (CI is reproducible); a few examples per command keep the whole file to about a
minute or two.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .corpus import ROOT, ROUTE_TRACE
from .harness import assert_refused, run_inprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None, "COLUMNS": "120"}
# KVPLAN_FUZZ_SCALE=20 (and KVPLAN_FUZZ_RANDOM=1 for fresh examples) searches longer by hand
SCALE = max(float(os.environ.get("KVPLAN_FUZZ_SCALE", "1")), 0.1)
EXAMPLES = round(14 * SCALE)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("KVPLAN_FUZZ_RANDOM") != "1",
                database=None, print_blob=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TIMEOUT_S = 60.0
M, HW = "llama-3.1-8b", "h100-sxm"
# a plan file that checks and reports in about a second (one GPU, no closed loop)
SMALL_PLAN = {"name": "fuzz-small", "model": M, "hardware": HW,
              "engine": {"name": "vllm", "tensor_parallel_size": 1, "max_model_len": "8k", "kv_cache_dtype": "fp8",
                         "max_num_seqs": 64},
              "workload": {"qps": 2, "isl": "2k", "osl": 256},
              "slo": {"ttft": "p99<=2s", "tpot": "p99<=50ms"},
              "assertions": [{"kv_fits": True}, "ttft_s <= 2s"]}


def _small_plan(tmp: Path, plan: dict | None = None) -> Path:
    path = tmp / "plan.yaml"
    path.write_text(yaml.safe_dump(plan or SMALL_PLAN, sort_keys=False), encoding="utf-8")
    return path

# a small valid command line per command (fast), and the option that names its output file
BASE: dict[str, tuple[list, str, str]] = {
    "latency": ([M, HW, "--isl", "1k", "--osl", "16"], "-o", "json"),
    "plan": ([M, HW, "--qps", "2", "--isl", "2k", "--osl", "256", "--tp", "1", "--sample", "1000"], "-o", "json"),
    "pd": ([M, HW, "--qps", "2", "--isl", "2k", "--osl", "256", "--prefill-tp", "1", "--decode-tp", "1",
            "--no-sensitivity", "--no-aggregated"], "-o", "json"),
    "tier": ([M, "--system", "hgx-h100-8", "--qps", "1", "--isl", "2k", "--osl", "128", "--sample", "500", "--no-pd"],
             "-o", "json"),
    "route": ([ROUTE_TRACE, "--cache-tokens", "1M"], "-o", "json"),
    "workload": (["--rate", "5", "--isl", "2k", "--osl", "256", "--sample", "1000"], "-o", "json"),
    "check": (["--format", "json"], "-o", "json"),  # after the plan file (_small_plan)
    "report": ([], "--out", "report"),
    "sweep": ([], "-o", "csv"),  # the grid file comes first (written per example)
}
# options not fuzzed: the output (set by the test), help, card directories (a path to a folder)
SKIPPED = {"--help", "--output", "--out", "--cards"}


def _options(command: str) -> tuple[list[str], list[str]]:
    """(options taking a value, on/off flags) of ``command``, by their first long name."""
    import typer

    from kvplan.cli import build_app

    group = typer.main.get_command(build_app([command]))
    cmd = group.commands[command]
    valued, flags = [], []
    for param in cmd.params:
        names = [o for o in getattr(param, "opts", []) if o.startswith("--")]
        if not names or param.param_type_name != "option" or names[0] in SKIPPED:
            continue
        (flags if param.is_flag else valued).append(names[0])
    return sorted(set(valued)), sorted(set(flags))


OPTIONS = {command: _options(command) for command in BASE}

numbers = st.one_of(
    st.sampled_from(["0", "-1", "-0", "nan", "NaN", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e999", "2e-320",
                     "9" * 30, str(2**63), str(2**64 + 1), "0.5", "1.0", "1", "2", "8", "1e9", "0x10", "1_000"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.from_regex(r"\A-?[0-9]{1,25}(\.[0-9]{1,5})?(e[+-]?[0-9]{1,4})?"
                  r"(k|K|m|M|G|GiB|GB|MB|TB|ms|us|s|h|x|%|tok|Gbps|GB/s|/s)?\Z", fullmatch=True),
)
words = st.one_of(
    st.sampled_from(["", " ", ",", ",,", "1,,2", "1,2,4", "a,b", "auto", "vllm", "VLLM", "sglang", "bf16", "fp8",
                     "int4", "mean", "peak", "azure", "mooncake", "csv", "json", "table", "markdown", "xml",
                     "p99<=2s", "p99<=50", "p50<=0ms", "p101<=1s", "same-node", "nic", "round-robin", "prefix-aware",
                     "timestamp=a,isl=b,osl=c", "h100-sxm=2.4", "h100-sxm=-1", "h100-sxm=nan", "x=1",
                     "1k:8k", "8k:1k", "mean=1k,p99=8k", "p50=1k,p90=3k,p99=8k", "0:0", "1M", "10M,3M",
                     "::warning::x", "a\nb", "\x1b[31m", "../../etc/passwd", "x" * 300, "é", "\u202e"]),
    st.text(max_size=20),
)
values = st.one_of(numbers, words)


def _value(text: str) -> str:
    return text.replace("\x00", "")  # argv cannot carry NUL


def _check(res, output: Path | None) -> None:
    shown = f"kvplan {' '.join(res.args)[:400]}\nstderr: {res.stderr[-1500:]}"
    assert res.exit_code in (0, 1, 2), shown
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, shown
    assert "internal error" not in res.stderr, shown
    assert res.seconds < TIMEOUT_S, shown
    if res.exit_code == 2:
        assert_refused(res, outputs=[output] if output is not None else [])
        return
    if output is None or not output.exists() or output.suffix != ".json":
        return
    rows = json.loads(output.read_text(encoding="utf-8"))
    for row in rows if isinstance(rows, list) else [rows]:
        if not isinstance(row, dict):
            continue
        for key, value in row.items():
            if isinstance(value, float):
                assert not math.isnan(value), (key, value, shown)
            if (res.exit_code == 0 and isinstance(value, (int, float)) and not isinstance(value, bool)
                    and key.endswith(("_bytes", "_tokens"))):
                assert value >= 0, (key, value, shown)


def _run(command: str, settings_: list[tuple[str, str | None]], tmp: Path, head: list | None = None):
    base, out_flag, suffix = BASE[command]
    inputs = list(tmp.iterdir())  # the grid or plan file the example wrote
    output = tmp / f"out.{suffix}"
    args = [command, *(head or []), *base]
    for flag, value in settings_:
        args.append(flag if value is None else f"{flag}={_value(value)}")
    cwd = os.getcwd()
    os.chdir(tmp)  # a fuzzed value that names a file (--chart=x, --junit=1_000) lands in the example's folder
    try:
        res = run_inprocess([*args, out_flag, output], env=NO_CI, timeout_s=TIMEOUT_S)
    finally:
        os.chdir(cwd)
    _check(res, output)
    if res.exit_code == 2:  # refused: nothing written anywhere, the fuzzed file names included
        assert sorted(p.name for p in tmp.iterdir()) == sorted(p.name for p in inputs), (res.args, list(tmp.iterdir()))
    return res


def _settings(command: str):
    valued, flags = OPTIONS[command]
    one = st.tuples(st.sampled_from(valued), values) if valued else st.nothing()
    switch = st.tuples(st.sampled_from(flags), st.none()) if flags else st.nothing()
    return st.lists(st.one_of(one, one, switch), min_size=1, max_size=2)


def test_every_command_has_fuzzable_options():
    for command in BASE:
        valued, flags = OPTIONS[command]
        assert valued or flags, command
    assert {"--rate", "--isl", "--tp", "--sim-requests", "--perf-model", "--engine"} <= set(OPTIONS["plan"][0])
    assert {"--prefill-dp", "--link-bandwidth"} <= set(OPTIONS["pd"][0]) and "--two-batch-overlap" in OPTIONS["pd"][1]
    assert {"--gpu-cost", "--concurrency"} <= set(OPTIONS["report"][0])


def _flags_test(command: str, examples: int):
    @settings(FUZZ, max_examples=max(1, round(examples * SCALE)))
    @given(data=st.data())
    def test(tmp_path_factory, data):
        tmp = tmp_path_factory.mktemp("fuzz")
        head = [_small_plan(tmp)] if command in ("check", "report") else None
        _run(command, data.draw(_settings(command), label="flags"), tmp, head=head)

    test.__name__ = f"test_fuzz_{command}_flags"
    return test


# examples per command: fewer where one valid run costs seconds (report writes charts, plan searches)
test_fuzz_latency_flags = _flags_test("latency", 14)
test_fuzz_plan_flags = _flags_test("plan", 14)
test_fuzz_pd_flags = _flags_test("pd", 14)
test_fuzz_tier_flags = _flags_test("tier", 14)
test_fuzz_route_flags = _flags_test("route", 14)
test_fuzz_workload_flags = _flags_test("workload", 14)
test_fuzz_check_flags = _flags_test("check", 8)
test_fuzz_report_flags = _flags_test("report", 6)


GRID = {"models": [M], "hardware": [HW], "seq": ["1k", "8k"], "batch": [1, 8], "kv_dtype": ["bf16"], "tp": [1, 2]}
grid_values = st.one_of(values, st.lists(values, min_size=0, max_size=3),
                        st.lists(st.one_of(st.integers(-(2**70), 2**70), st.floats()), min_size=1, max_size=3),
                        st.fixed_dictionaries({"start": values, "stop": values, "num": values}))


@FUZZ
@given(field=st.sampled_from(["seq", "batch", "tp", "pp", "kv_dtype", "engine", "models", "hardware"]),
       value=grid_values, switch=st.sampled_from([[], ["--strict"], ["-v"]]))
def test_fuzz_sweep_grid_and_flags(tmp_path_factory, field, value, switch):
    tmp = tmp_path_factory.mktemp("fuzz")
    grid = dict(GRID, **{field: value})
    path = tmp / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    _run("sweep", [(flag, None) for flag in switch], tmp, head=[path])


PLAN_FIELDS = [("engine", "tensor_parallel_size"), ("engine", "max_model_len"), ("engine", "gpu_memory_utilization"),
               ("engine", "block_size"), ("engine", "max_num_seqs"), ("engine", "max_num_batched_tokens"),
               ("engine", "kv_cache_dtype"), ("engine", "name"), ("workload", "qps"), ("workload", "isl"),
               ("workload", "osl"), ("workload", "concurrency"), ("slo", "ttft"), ("slo", "tpot")]


@settings(FUZZ, max_examples=max(1, round(10 * SCALE)))
@given(field=st.sampled_from(PLAN_FIELDS), value=st.one_of(values, st.integers(-(2**70), 2**70), st.floats()))
def test_fuzz_plan_file_fields(tmp_path_factory, field, value):
    tmp = tmp_path_factory.mktemp("fuzz")
    plan = json.loads(json.dumps(SMALL_PLAN))
    plan[field[0]][field[1]] = value
    _run("check", [], tmp, head=[_small_plan(tmp, plan)])

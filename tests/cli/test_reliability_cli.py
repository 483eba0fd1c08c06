"""Reliability of the command line: the error boundary, CI escaping and output files.

Each test runs the exact command a user would type, through ``kvplan.cli.main`` (the real
entry point), and checks the exit code, the ``Error:``/``Hint:`` pair and the files.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from ..conftest import ROOT
from ..hostile.harness import assert_refused, run_inprocess

PLANS = ROOT / "examples" / "plans"
PASS, FAIL = PLANS / "llama70b-h100-pass.yaml", PLANS / "llama70b-h100-fail.yaml"
NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None}


def kvplan(*args, env=None):
    return run_inprocess(args, env={**NO_CI, **(env or {})})


def _typo(tmp_path, field: str, value: str):
    text = PASS.read_text(encoding="utf-8")
    lines = [f"{field}: {value}" if line.startswith(f"{field}:") else line for line in text.splitlines()]
    path = tmp_path / f"typo-{field}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the check/report crash


@pytest.mark.parametrize("field,value,suggestion", [
    ("model", "llama-3.1-70bb", "llama-3.1-70b"),
    ("hardware", "h100-sxmm", "h100-sxm"),
])
def test_check_with_a_mistyped_card_name_exits_2_with_did_you_mean(tmp_path, field, value, suggestion):
    plan = _typo(tmp_path, field, value)
    res = kvplan("check", plan)  # kvplan check typo.yaml
    assert_refused(res)
    assert res.stderr.splitlines()[0] == f"Error: {plan}: unknown {field} '{value}'"
    assert f"'{suggestion}'" in res.stderr.splitlines()[1]


@pytest.mark.parametrize("field,value", [("model", "llama-3.1-70bb"), ("hardware", "h100-sxmm")])
def test_report_with_a_mistyped_card_name_exits_2(tmp_path, field, value):
    plan = _typo(tmp_path, field, value)
    out = tmp_path / "report"
    res = kvplan("report", plan, "--out", out)  # kvplan report typo.yaml --out report
    assert_refused(res, outputs=[out])
    assert res.stderr.startswith(f"Error: {plan}: unknown {field} '{value}'\nHint: did you mean")


def test_check_with_a_mistyped_system_name_exits_2(tmp_path):
    plan = tmp_path / "pd.yaml"
    plan.write_text(textwrap.dedent("""\
        model: llama-3.1-70b
        system: hgx-h100-8x
        engine: {name: vllm, tensor_parallel_size: 8, max_model_len: 32k}
        assertions: [kv_fits == true]
        """), encoding="utf-8")
    res = kvplan("check", plan)
    assert_refused(res)
    assert "hgx-h100-8x" in res.stderr


# --------------------------------------------------------------------------- the error boundary


def test_an_unexpected_exception_is_an_internal_error_exit_2(monkeypatch):
    import kvplan.cli.size as size_cli

    def boom(*args, **kwargs):
        raise ValueError("something the code did not expect")

    monkeypatch.setattr(size_cli, "size_from_names", boom)
    res = kvplan("size", "llama-3.1-8b")
    assert_refused(res)
    assert res.stderr.splitlines()[0] == "Error: internal error: ValueError: something the code did not expect"
    assert "KVPLAN_DEBUG=1" in res.stderr.splitlines()[1]


def test_kvplan_debug_lets_the_traceback_through(monkeypatch):
    import kvplan.cli.size as size_cli

    def boom(*args, **kwargs):
        raise ValueError("unexpected")

    monkeypatch.setattr(size_cli, "size_from_names", boom)
    with pytest.raises(ValueError, match="unexpected"):
        kvplan("size", "llama-3.1-8b", env={"KVPLAN_DEBUG": "1"})


@pytest.mark.parametrize("error", [RecursionError, MemoryError, OverflowError])
def test_interpreter_limits_exit_2_not_1(monkeypatch, error):
    import kvplan.cli.size as size_cli

    def boom(*args, **kwargs):
        raise error("limit")

    monkeypatch.setattr(size_cli, "size_from_names", boom)
    res = kvplan("size", "llama-3.1-8b")
    assert_refused(res)
    assert error.__name__ in res.stderr


@pytest.mark.parametrize("args", [
    ("size", "llama-3.1-8b", "--pp", "abc"),
    ("size", "llama-3.1-8b", "--no-such-option"),
    ("size",),
    ("latency", "llama-3.1-8b", "h100-sxm", "--spec-k", "x"),
    ("no-such-command",),
])
def test_usage_errors_are_one_error_and_one_hint(args):
    res = kvplan(*args)
    assert_refused(res)
    assert res.stderr.splitlines()[1].startswith("Hint: see 'kvplan")


# --------------------------------------------------------------------------- CI injection


def _plan_with_assertion(tmp_path, assertion: str, name: str = "plan.yaml"):
    path = tmp_path / name
    text = PASS.read_text(encoding="utf-8")
    head = text[: text.index("assertions:")]
    path.write_text(head + "assertions:\n  - " + repr_yaml(assertion) + "\n", encoding="utf-8")
    return path


def repr_yaml(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


GHA = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": None}


def _no_command_lines(res, allowed_prefix: str = "::error file=") -> None:
    for stream in (res.stdout, res.stderr):
        for line in stream.splitlines():
            stripped = line.lstrip()
            if stripped.startswith("::") or stripped.startswith("##["):
                assert line.startswith(allowed_prefix), f"workflow command from user text: {line!r}"


def test_an_assertion_with_a_newline_cannot_print_a_workflow_command(tmp_path):
    plan = _plan_with_assertion(tmp_path, "kv_fits == true\n::warning title=x::injected")
    res = kvplan("check", plan, env=GHA)  # kvplan check plan.yaml, under GitHub Actions
    assert res.exit_code == 2
    _no_command_lines(res, allowed_prefix="\x00")
    assert res.stderr.count("\n") == 2 and "\\n::warning" in res.stderr


def test_a_plan_file_name_with_a_newline_stays_on_its_line(tmp_path):
    plan = tmp_path / "a\n::warning::injected.yaml"
    plan.write_text(FAIL.read_text(encoding="utf-8"), encoding="utf-8")
    res = kvplan("check", plan, env=GHA)
    assert res.exit_code == 1
    _no_command_lines(res)
    assert "a\\n::warning::injected.yaml" in res.stdout.splitlines()[0]
    annotations = [line for line in res.stderr.splitlines() if line.startswith("::error")]
    assert annotations and all("%0A" in line and "\n" not in line for line in annotations)
    assert all("file=" + str(tmp_path).replace(":", "%3A").replace(",", "%2C") in line for line in annotations)


def test_annotations_escape_percent_cr_lf_and_property_colons_commas(tmp_path):
    from kvplan.textsafe import gha_data, gha_property

    assert gha_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert gha_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    plan = tmp_path / "x,y:z%.yaml"
    plan.write_text(FAIL.read_text(encoding="utf-8"), encoding="utf-8")
    res = kvplan("check", plan, env=GHA)
    annotations = [line for line in res.stderr.splitlines() if line.startswith("::error")]
    assert annotations and all("x%2Cy%3Az%25.yaml" in line for line in annotations)


def test_the_job_summary_keeps_user_text_on_its_line(tmp_path):
    summary = tmp_path / "summary.md"
    plan = tmp_path / "p|`<b>\n# title.yaml"
    plan.write_text(FAIL.read_text(encoding="utf-8"), encoding="utf-8")
    res = kvplan("check", plan, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert res.exit_code == 1
    text = summary.read_text(encoding="utf-8")
    assert not any(line.startswith("# title") for line in text.splitlines())
    heading = next(line for line in text.splitlines() if line.startswith("### "))
    assert heading.startswith("### `` ") and heading.endswith("\\n# title.yaml ``")  # a code span, on one line


def test_the_guard_neutralises_command_lines_from_any_user_text():
    from kvplan.textsafe import CommandGuard

    import io

    sink = io.StringIO()
    guard = CommandGuard(sink)
    guard.write("ok\n::warning::x\n  ::error::y\n##[group]z\n:")
    guard.write(":set-output\n")
    guard.allow("::error file=a::kvplan's own\n")
    guard.flush()
    assert sink.getvalue().splitlines() == ["ok", "\\::warning::x", "\\  ::error::y", "\\##[group]z",
                                            "\\::set-output", "::error file=a::kvplan's own"]


# --------------------------------------------------------------------------- output files


def test_output_files_follow_the_umask(tmp_path):
    out = tmp_path / "size.json"
    old = os.umask(0o022)
    try:
        res = kvplan("size", "llama-3.1-8b", "-o", out)
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


@pytest.mark.parametrize("suffix,check", [
    (".csv", lambda t: t.startswith("model,")),
    (".json", lambda t: t.lstrip().startswith("[")),
    (".md", lambda t: t.startswith("### ")),
    (".markdown", lambda t: t.startswith("### ")),
    (".txt", lambda t: "┃" in t or "│" in t),
])
def test_the_format_follows_the_output_extension(tmp_path, suffix, check):
    out = tmp_path / f"size{suffix}"
    res = kvplan("size", "llama-3.1-8b", "-o", out)
    assert res.exit_code == 0, res.stderr
    assert check(out.read_text(encoding="utf-8")), out.read_text(encoding="utf-8")[:200]


def test_format_flag_wins_over_the_extension(tmp_path):
    out = tmp_path / "size.csv"
    res = kvplan("size", "llama-3.1-8b", "-o", out, "--format", "json")
    assert res.exit_code == 0 and out.read_text(encoding="utf-8").lstrip().startswith("[")


def test_a_fifo_target_is_refused_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    res = kvplan("size", "llama-3.1-8b", "-o", fifo)
    assert_refused(res)
    assert "FIFO" in res.stderr and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_directory_target_is_refused(tmp_path):
    res = kvplan("size", "llama-3.1-8b", "-o", tmp_path)
    assert_refused(res)
    assert list(tmp_path.iterdir()) == []


def test_dev_null_is_written_through_not_replaced():
    before = os.stat("/dev/null")
    res = kvplan("size", "llama-3.1-8b", "-o", "/dev/null")
    assert res.exit_code == 0, res.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_dev_stdout_is_written_through_the_open_stream():
    res = kvplan("size", "llama-3.1-8b", "-o", "/dev/stdout", "--format", "csv")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("model,")


def test_a_symlink_to_a_file_keeps_the_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    res = kvplan("size", "llama-3.1-8b", "-o", link)
    assert res.exit_code == 0, res.stderr
    assert link.is_symlink() and real.read_text(encoding="utf-8").lstrip().startswith("[")


def test_a_symlink_loop_target_is_refused(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    res = kvplan("size", "llama-3.1-8b", "-o", loop)
    assert_refused(res)


def test_check_writes_junit_and_output_all_or_none(tmp_path):
    junit = tmp_path / "junit.xml"
    bad = tmp_path / "missing-dir" / "out.txt"
    res = kvplan("check", PASS, "--junit", junit, "-o", bad)  # a failing -o leaves no --junit behind
    assert_refused(res, outputs=[junit, bad])
    assert list(tmp_path.iterdir()) == []


def test_check_junit_and_output_both_land(tmp_path):
    junit, out = tmp_path / "junit.xml", tmp_path / "out.json"
    res = kvplan("check", PASS, "--junit", junit, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert junit.read_text(encoding="utf-8").startswith("<?xml") and out.read_text(encoding="utf-8").startswith("[")


def test_tier_chart_is_not_left_when_output_fails(tmp_path):
    chart = tmp_path / "tiers.png"
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    res = kvplan("tier", "llama-3.1-8b", "--system", "hgx-h100-8", "--qps", "1", "--isl", "2k", "--osl", "128",
                 "--sample", "200", "--no-pd", "--chart", chart, "-o", fifo)
    assert_refused(res, outputs=[chart])


ROUTE_TINY = ROOT / "tests" / "data" / "traces" / "tiny_mooncake.jsonl"
ROUTE_ARGS = ("route", ROUTE_TINY, "--instances", "1,2", "--policy", "round-robin", "--cache-tokens", "50k")


def test_route_chart_is_not_left_when_output_fails(tmp_path):
    chart = tmp_path / "route.png"
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    res = kvplan(*ROUTE_ARGS, "--chart", chart, "-o", fifo)  # kvplan route tiny.jsonl ... --chart route.png -o FIFO
    assert_refused(res, outputs=[chart])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_route_chart_is_not_left_when_output_directory_is_missing(tmp_path):
    chart = tmp_path / "route.png"
    res = kvplan(*ROUTE_ARGS, "--chart", chart, "-o", tmp_path / "missing-dir" / "out.json")
    assert_refused(res, outputs=[chart])
    assert list(tmp_path.iterdir()) == []


def test_route_output_is_not_left_when_chart_fails(tmp_path):
    out = tmp_path / "out.json"
    res = kvplan(*ROUTE_ARGS, "--chart", tmp_path / "missing-dir" / "route.png", "-o", out)
    assert_refused(res, outputs=[out])
    assert list(tmp_path.iterdir()) == []


def test_route_chart_and_output_both_land(tmp_path):
    chart, out = tmp_path / "route.png", tmp_path / "out.json"
    res = kvplan(*ROUTE_ARGS, "--chart", chart, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["instances"] for r in json.loads(out.read_text(encoding="utf-8"))] == [1, 2]
    assert f"Wrote {chart}" in res.stderr and f"Wrote {out}" in res.stderr


def test_calibrate_card_out_is_not_left_when_output_fails(tmp_path):
    measurements = ROOT / "tests" / "data" / "calibration"
    csv = sorted(measurements.glob("*.csv"))[0]
    card = tmp_path / "card.yaml"
    res = kvplan("calibrate", "llama-3.1-8b", "h100-sxm", csv, "--card-out", card, "-o", tmp_path / "no" / "x.json")
    assert_refused(res, outputs=[card])


def test_interrupted_writes_leave_no_temporary_file(tmp_path):
    from kvplan.outputs import OutputSet

    def interrupted(handle):
        handle.write("partial")
        raise KeyboardInterrupt

    outputs = OutputSet()
    outputs.add(tmp_path / "a.txt", "whole")
    outputs.add_writer(tmp_path / "b.txt", interrupted)
    with pytest.raises(KeyboardInterrupt):
        outputs.commit()
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_just_after_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    # a Ctrl-C that lands between the file's creation and its name reaching the writer (inside mkstemp, before
    # it returns) left the temporary file behind; the name is now recorded before the file is made
    import kvplan.outputs as outputs_module

    real_open = os.open

    def open_then_interrupted(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    outputs = outputs_module.OutputSet()
    outputs.add(tmp_path / "a.txt", "whole")
    monkeypatch.setattr(outputs_module.os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        outputs.commit()
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_sigterm_while_writing_removes_the_temporary_file(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from kvplan.cli import _terminate
        from kvplan.outputs import OutputSet
        signal.signal(signal.SIGTERM, _terminate)
        def slow(handle):
            handle.write("x" * 1_000_000)
            handle.flush()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        outputs = OutputSet()
        outputs.add_writer({str(tmp_path / 'out.csv')!r}, slow)
        outputs.commit()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + 15, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_sweep_and_report_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        csv = tmp_path / "sweep.csv"
        res = kvplan("sweep", ROOT / "examples" / "grids" / "dense.yaml", "-o", csv)
        assert res.exit_code == 0, res.stderr
        report = tmp_path / "report"
        res = kvplan("report", PASS, "--out", report)
        assert res.exit_code == 0, res.stderr
    finally:
        os.umask(old)
    assert stat.S_IMODE(csv.stat().st_mode) == 0o644
    assert stat.S_IMODE(report.stat().st_mode) == 0o755
    assert stat.S_IMODE((report / "report.md").stat().st_mode) == 0o644


def test_sweep_to_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    res = kvplan("sweep", ROOT / "examples" / "grids" / "dense.yaml", "-o", fifo)
    assert_refused(res)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

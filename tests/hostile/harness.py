"""Run the kvplan command line on hostile input and check how it refuses.

``run_inprocess`` calls ``kvplan.cli.main`` (the real entry point: usage errors, the error
boundary, the stream guard) in this process with stdout/stderr captured; ``run_subprocess``
runs ``python -m kvplan`` in a child with a wall-clock timeout and an address-space limit
(``RLIMIT_AS``), for inputs that could hang or allocate without bound.

``assert_refused`` is the contract every hostile case must meet: exit 2, exactly one
``Error:`` line and one ``Hint:`` line right after it on stderr, no traceback, nothing left at
any output path (no temporary file beside it either).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT_BYTES = 2 * 2**30
TIMEOUT_S = 30.0


@dataclass
class Outcome:
    args: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float


class _Capture(io.StringIO):
    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("captured")


class _Timeout(BaseException):
    """Raised by the alarm in an in-process run that takes too long (BaseException: not caught as an error)."""


def _alarm(signum, frame):
    raise _Timeout()


def run_inprocess(args, env: dict | None = None, stdin: str = "", timeout_s: float = TIMEOUT_S) -> Outcome:
    """``kvplan ARGS`` through ``kvplan.cli.main`` in this process, stopped after ``timeout_s`` (SIGALRM)."""
    import signal

    from kvplan.cli import main

    args = [str(a) for a in args]
    out, err = _Capture(), _Capture()
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    saved = sys.argv, sys.stdout, sys.stderr, sys.stdin
    code = 0
    start = time.perf_counter()
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.argv = ["kvplan", *args]
        sys.stdin = io.StringIO(stdin)
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                sys.stdout, sys.stderr = out, err
                try:
                    main()
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _Timeout:
            raise AssertionError(f"kvplan {' '.join(args)[:200]} did not finish within {timeout_s} s") from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    finally:
        sys.argv, sys.stdout, sys.stderr, sys.stdin = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Outcome(args, code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def _limit_memory() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_subprocess(args, env: dict | None = None, timeout_s: float = TIMEOUT_S, cwd: Path | None = None) -> Outcome:
    """``python -m kvplan ARGS`` in a child limited to ``MEMORY_LIMIT_BYTES`` and ``timeout_s``."""
    args = [str(a) for a in args]
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True,
                              timeout=timeout_s, env=child_env, cwd=cwd, preexec_fn=_limit_memory,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"kvplan {' '.join(args)[:200]} did not finish within {timeout_s} s") from exc
    return Outcome(args, proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def assert_refused(outcome: Outcome, outputs=(), code: int = 2) -> None:
    """Exit ``code``; one ``Error:`` line followed by one ``Hint:`` line; no traceback; no output file."""
    shown = f"kvplan {' '.join(outcome.args)[:300]}\nstdout: {outcome.stdout[-800:]}\nstderr: {outcome.stderr[-1500:]}"
    assert outcome.exit_code == code, f"exit {outcome.exit_code}, expected {code}\n{shown}"
    lines = outcome.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("Error:")]
    assert len(errors) == 1, f"{len(errors)} Error: lines\n{shown}"
    assert errors[0] + 1 < len(lines) and lines[errors[0] + 1].startswith("Hint: "), f"no Hint: after Error:\n{shown}"
    assert sum(line.startswith("Hint:") for line in lines) >= 1
    assert "Traceback" not in outcome.stderr and "Traceback" not in outcome.stdout, shown
    assert len(lines[errors[0]]) <= 2100 and len(lines[errors[0] + 1]) <= 3100, "message not bounded"
    for path in outputs:
        path = Path(path)
        assert not path.exists() or path.is_char_device(), f"{path} was left behind\n{shown}"
        leftovers = [p.name for p in path.parent.glob(f".{path.name}*")] if path.parent.is_dir() else []
        assert not leftovers, f"temporary files left beside {path}: {leftovers}\n{shown}"

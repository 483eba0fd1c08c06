"""Shared fixtures: the CLI runner and the location of the shipped real traces.

Self-contained tests: an audit hook (PEP 578) refuses every ``open()`` and every folder listing
(``os.listdir``, ``os.scandir``, ``glob``) of a path beside the repository (anything under the
repository's parent directory that is not inside the repository, the interpreter's prefix,
site-packages or the temporary directory), so a test that reads a folder beside the checkout or a
sibling checkout fails here as it would on a fresh clone, even where the test swallows the error
(the session's exit status is set at its end).
``.ci/run`` runs the suite this way; ``KVPLAN_TESTS_MAY_READ_OUTSIDE=1`` turns the hook off.
"""

from __future__ import annotations

import json
import os
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
TRACES_DIR = ROOT / "examples" / "traces"  # the real traces, shipped with attribution (examples/traces/README.md)


def _allowed_roots() -> tuple[str, ...]:
    roots = {str(ROOT), sys.prefix, sys.base_prefix,
             sys.exec_prefix, *site.getsitepackages(), site.getusersitepackages(),
             *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib"))}
    roots |= {os.path.realpath(r) for r in list(roots)}
    return tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots if r))


OUTSIDE = os.path.realpath(ROOT.parent).rstrip(os.sep) + os.sep
ALLOWED = _allowed_roots()
# a checkout directly in the temporary directory: pytest's and tempfile's own folders there are fine
TEMP_IS_PARENT = os.path.realpath(tempfile.gettempdir()).rstrip(os.sep) + os.sep == OUTSIDE
OUTSIDE_READS: list[str] = []


# opening a file, and listing a folder (a glob over a folder beside the checkout finds nothing on a
# fresh clone, so a test parametrized over it would pass with no cases)
WATCHED_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob"})


def _audit(event: str, args) -> None:
    if event not in WATCHED_EVENTS or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(args[0])
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    full = os.path.normpath(path) + os.sep
    if TEMP_IS_PARENT and full[len(OUTSIDE):].startswith(("pytest-of-", "tmp")):
        return
    if full.startswith(OUTSIDE) and not full.startswith(ALLOWED):
        real = os.path.realpath(path) + os.sep
        if real.startswith(ALLOWED):
            return
        OUTSIDE_READS.append(path)
        raise PermissionError(f"tests must not read outside the repository: {path}")


if os.environ.get("KVPLAN_TESTS_MAY_READ_OUTSIDE") != "1":
    sys.addaudithook(_audit)


def pytest_sessionfinish(session, exitstatus):
    if OUTSIDE_READS:
        shown = "\n  ".join(dict.fromkeys(OUTSIDE_READS))
        sys.stderr.write(f"\nFiles outside the repository were opened by the tests:\n  {shown}\n")
        session.exitstatus = 1


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def invoke(runner):
    """Run the kvplan CLI; returns the click Result (stdout and stderr kept apart)."""
    from kvplan.cli import app

    def _invoke(*args: str, **kwargs):
        return runner.invoke(app, [str(a) for a in args], **kwargs)

    return _invoke


def json_rows(result) -> list[dict]:
    assert result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


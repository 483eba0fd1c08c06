"""Shared fixtures: the CLI runner and the location of the shipped real traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
TRACES_DIR = ROOT / "examples" / "traces"  # the real traces, shipped with attribution (examples/traces/README.md)


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

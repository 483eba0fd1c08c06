"""Properties of the command line as a whole: entry points, imports, documentation."""

from __future__ import annotations

import re
import subprocess
import sys

from ..conftest import ROOT


def test_python_m_kvplan_runs():
    out = subprocess.run([sys.executable, "-m", "kvplan", "size", "deepseek-v3", "--seq", "1", "--format", "csv"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[1].split(",")[0] == "deepseek-v3"


def test_size_and_help_do_not_import_pandas():
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kvplan.cli import app\n"
        "r = CliRunner().invoke(app, ['size', 'llama-3.1-70b', '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "print('pandas' in sys.modules, 'matplotlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_command_is_documented_in_the_readme():
    from typer.main import get_command

    from kvplan.cli import app

    readme = (ROOT / "README.md").read_text()
    group = get_command(app)
    for name in group.commands:
        assert re.search(rf"`kvplan {re.escape(name)}\b", readme), f"kvplan {name} is not in README.md"


def test_library_has_no_cli_imports():
    """The library never imports typer, rich or kvplan.cli (DESIGN.md §1)."""
    for path in (ROOT / "kvplan").rglob("*.py"):
        rel = path.relative_to(ROOT / "kvplan")
        if rel.parts[0] in ("cli", "report") or rel.name == "__main__.py":
            continue
        text = path.read_text()
        for banned in ("import typer", "from typer", "import rich", "from rich", "kvplan.cli"):
            assert banned not in text, f"{rel} uses {banned}"

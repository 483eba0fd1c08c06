"""Properties of the command line as a whole: entry points, imports, documentation."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys

import pytest

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


def test_size_by_repo_id_skips_the_plugin_scan_and_reads_one_card():
    """`kvplan size` loads no importlib.metadata (pydantic's plugin scan, disabled) and, for a Hugging
    Face repo id, parses only the card whose text holds it, not every shipped card."""
    probe = (
        "import sys, runpy, io, contextlib\n"
        "import kvplan.inputs as inputs\n"
        "parsed = []\n"
        "real = inputs.load_yaml\n"
        "def counting(text, source, *a, **k):\n"
        "    parsed.append(str(source)); return real(text, source, *a, **k)\n"
        "inputs.load_yaml = counting\n"
        "import kvplan.cards.loader as loader\n"
        "loader.load_yaml = counting\n"
        "sys.argv = ['kvplan', 'size', 'meta-llama/Llama-3.1-70B-Instruct', '--format', 'json']\n"
        "out = io.StringIO()\n"
        "try:\n"
        "    with contextlib.redirect_stdout(out): runpy.run_module('kvplan', run_name='__main__')\n"
        "except SystemExit as e: assert e.code == 0, e.code\n"
        "import json\n"
        "print(json.loads(out.getvalue())[0]['model'], 'importlib.metadata' in sys.modules,\n"
        "      sorted({p.rsplit('/', 1)[-1] for p in parsed}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    model, metadata, parsed = out.stdout.split(maxsplit=2)
    assert model == "llama-3.1-70b"
    assert metadata == "False"
    assert parsed.strip() == "['llama-3.1-70b.yaml']"


def _openblas_threads_seen(env: dict) -> tuple[str, str]:
    """(OPENBLAS_NUM_THREADS when numpy is first imported under kvplan's main, numpy imported before main)."""
    probe = (
        "import builtins, os, sys, io, contextlib\n"
        "seen = []\n"
        "real = builtins.__import__\n"
        "def spy(name, *a, **k):\n"
        "    if name == 'numpy' and not seen:\n"
        "        seen.append(os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n"
        "    return real(name, *a, **k)\n"
        "import kvplan.cli as cli\n"
        "before = 'numpy' in sys.modules\n"
        "builtins.__import__ = spy\n"
        "sys.argv = ['kvplan', 'size', 'llama-3.1-8b', '--seq', '8k', '--format', 'json']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        cli.main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(seen[0], before)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    seen, before = out.stdout.split()
    return seen, before


def test_numpy_starts_with_one_openblas_thread_unless_the_user_says():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _openblas_threads_seen(env) == ("1", "False")  # set before numpy is first imported
    assert _openblas_threads_seen({**env, "OPENBLAS_NUM_THREADS": "4"}) == ("4", "False")


def _gc_during_command(argv: list[str], entry: bool = True) -> str:
    """(collector enabled, objects frozen) before main(), when the command's callback starts and after main();
    ``entry``: main() is the program's entry point (its ``__main__`` imported it, as ``python -m kvplan`` does)."""
    probe = (
        "import functools, gc, io, contextlib, sys\n"
        "import kvplan.cli as cli, kvplan.cli.size as size, kvplan.cli.sweep as sweep\n"
        f"{'from kvplan.cli import main' if entry else 'main = None'}\n"
        "seen = []\n"
        "def spy(real):\n"
        "    @functools.wraps(real)\n"
        "    def probe(*a, **k):\n"
        "        seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "        return real(*a, **k)\n"
        "    return probe\n"
        "size.size_command = spy(size.size_command)\n"
        "sweep.sweep_command = spy(sweep.sweep_command)\n"
        "seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        f"sys.argv = {['kvplan', *argv]!r}\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        "        cli.main()\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == (2 if sys.argv[1] == '--bad-flag' else 0), exc.code\n"
        "seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "print(seen)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_main_pauses_the_collector_for_start_up_only(tmp_path):
    """main() as the entry point pauses the cyclic collector while it starts; each command runs with it on again,
    the start-up's objects frozen (gc.freeze); a library, test or other program calling main() is left as it is."""
    from kvplan.cli import main, pause_gc, settle_gc

    before = (gc.isenabled(), gc.get_freeze_count())
    pause_gc()
    settle_gc()
    assert (gc.isenabled(), gc.get_freeze_count()) == before      # not under main(): nothing happens
    size = ["size", "llama-3.1-8b", "--seq", "8k", "--format", "json"]
    assert _gc_during_command(size) == "[(True, False), (True, True), (True, True)]"
    assert _gc_during_command(size, entry=False) == "[(True, False), (True, False), (True, False)]"
    assert _gc_during_command(["--bad-flag"]) == "[(True, False), (True, False)]"   # a usage error: resumed on exit
    with pytest.raises(SystemExit):
        main()  # called by a test: never paused, nothing frozen
    assert (gc.isenabled(), gc.get_freeze_count()) == before
    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: [1024, 2048]\nbatch: [1, 8]\n")
    out = tmp_path / "out.csv"
    assert _gc_during_command(["sweep", str(grid), "-o", str(out)]) == "[(True, False), (True, True), (True, True)]"
    assert len(out.read_text().splitlines()) == 5


def test_parquet_sweep_does_not_import_pyarrow_parquet_or_its_filesystems(tmp_path):
    """The sweep writes Parquet through the core writer: pyarrow.parquet and pyarrow.fs (S3, TLS) stay unloaded."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nseq: [1024]\nbatch: [1, 2]\n")
    out = tmp_path / "out.parquet"
    probe = (
        "import sys, io, contextlib\n"
        "import kvplan.cli as cli\n"
        f"sys.argv = ['kvplan', 'sweep', {str(grid)!r}, '-o', {str(out)!r}]\n"
        "with contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        "        cli.main()\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "print('pyarrow' in sys.modules, 'pyarrow.parquet' in sys.modules, 'pyarrow.fs' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["True", "False", "False"]
    assert out.read_bytes()[:4] == b"PAR1"


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

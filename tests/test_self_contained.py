"""The suite reads nothing beside the repository (the audit hook in conftest.py)."""

from __future__ import annotations

import os

import pytest

from . import conftest


@pytest.mark.skipif(os.environ.get("KVPLAN_TESTS_MAY_READ_OUTSIDE") == "1", reason="guard turned off by the user")
def test_opening_a_file_beside_the_repository_is_refused():
    beside = conftest.ROOT.parent / "a-folder-beside-the-repository" / "anything.csv"
    before = len(conftest.OUTSIDE_READS)
    with pytest.raises(PermissionError, match="outside the repository"):
        open(beside, encoding="utf-8")
    assert conftest.OUTSIDE_READS[before:] == [str(beside)]
    del conftest.OUTSIDE_READS[before:]  # this probe is not a violation


def test_files_inside_the_repository_and_tmp_can_be_read(tmp_path):
    assert (conftest.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (tmp_path / "x").write_text("ok", encoding="utf-8")
    assert (tmp_path / "x").read_text(encoding="utf-8") == "ok"


@pytest.mark.skipif(os.environ.get("KVPLAN_TESTS_MAY_READ_OUTSIDE") == "1", reason="guard turned off by the user")
@pytest.mark.parametrize("lister", [os.listdir, os.scandir, lambda p: __import__("glob").glob(os.path.join(p, "*"))])
def test_listing_a_folder_beside_the_repository_is_refused(lister):
    # a test parametrized over a glob of a folder beside the checkout runs no case on a fresh clone
    beside = str(conftest.ROOT.parent / "a-folder-beside-the-repository")
    before = len(conftest.OUTSIDE_READS)
    with pytest.raises(PermissionError, match="outside the repository"):
        lister(beside)
    assert conftest.OUTSIDE_READS[before:] and all(p.startswith(beside) for p in conftest.OUTSIDE_READS[before:])
    del conftest.OUTSIDE_READS[before:]  # this probe is not a violation


def test_a_swallowed_read_beside_the_repository_still_fails_the_run(tmp_path):
    # the run's exit status, not the test's: a child pytest over one test that catches the PermissionError
    import subprocess
    import sys

    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_swallowed():\n    try:\n        open(%r)\n    except OSError:\n        pass\n"
                     % str(conftest.ROOT.parent / "beside" / "x.csv"), encoding="utf-8")
    conf = tmp_path / "conftest.py"
    conf.write_text((conftest.ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
                    .replace('ROOT = Path(__file__).resolve().parent.parent', f'ROOT = Path({str(conftest.ROOT)!r})'),
                    encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "KVPLAN_TESTS_MAY_READ_OUTSIDE"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout and "Files outside the repository were opened" in proc.stderr

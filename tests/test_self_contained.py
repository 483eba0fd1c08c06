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

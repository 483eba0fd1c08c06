"""Hostile input across every command and file kind: each case is refused cleanly.

Every case (tests/hostile/corpus.py) must exit 2 with exactly one ``Error:`` line and a
``Hint:`` line, no traceback, nothing left at any output path, within the time limit and,
for the cases that could allocate without bound, within an address-space limit.
"""

from __future__ import annotations

import pytest

from .corpus import build
from .harness import assert_refused, run_inprocess, run_subprocess

NO_CI = {"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None, "KVPLAN_DEBUG": None, "COLUMNS": "120"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return {case.id: case for case in build(root)}


def _ids():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        return [case.id for case in build(Path(tmp))]


CASE_IDS = _ids()


def test_the_corpus_is_large():
    assert len(CASE_IDS) >= 200 and len(set(CASE_IDS)) == len(CASE_IDS)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_hostile_input_is_refused(corpus, case_id):
    case = corpus[case_id]
    if case.isolate:
        outcome = run_subprocess(case.args, env=NO_CI, timeout_s=30)
    else:
        outcome = run_inprocess(case.args, env=NO_CI)
    assert_refused(outcome, outputs=case.outputs)
    assert outcome.seconds < 30

"""The README's console examples are what kvplan prints today.

Each ``$ kvplan …`` line of a ```console block is run (from the repository root, as a reader
would); every table row shown under it must be a row of the output with the README's cells in
order (the README leaves columns out and writes ``...`` for more), every ``Verdict:`` / text line
must be in the output (``…`` in the README elides), and an ``$ echo $?`` line's figure is the
command's exit code. Commands without ``--format`` run with ``--format markdown`` (the same figures,
as table rows rather than a terminal's boxes). A model change that moves a README figure fails
here until the README says the new one.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _examples() -> list[tuple[str, list[str], list[str], int | None]]:
    """(command line, table rows, text lines, expected exit code) for each ``$ kvplan`` of a console block."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        lines = block.replace("\\\n", " ").splitlines()
        current = None
        for line in lines:
            if line.startswith("$ kvplan "):
                current = [line[2:], [], [], None]
                found.append(current)
            elif line.startswith("$ echo $?"):
                continue
            elif current is not None and re.fullmatch(r"\d+", line.strip()):
                current[3] = int(line.strip())
            elif current is not None and line.startswith("|"):
                current[1].append(line)
            elif current is not None and line.strip():
                current[2].append(line.strip())
    return [tuple(e) for e in found]


EXAMPLES = _examples()


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _is_subsequence(wanted: list[str], cells: list[str]) -> bool:
    it = iter(cells)
    return all(any(c == w for c in it) for w in wanted)


def _text_chunks(lines: list[str]) -> list[str]:
    """README prose lines joined into paragraphs (a line that starts with ``Verdict:`` starts
    one paragraph), split at ``…`` (elided text), whitespace normalised."""
    chunks = []
    for paragraph in re.split(r"\n(?=Verdict:)", "\n".join(lines)):
        for part in paragraph.split("…"):
            part = " ".join(part.split())
            if part:
                chunks.append(part)
    return chunks


def test_the_readme_has_console_examples():
    assert len(EXAMPLES) >= 8
    assert all(rows or text or code is not None or "--format json" in cmd for cmd, rows, text, code in EXAMPLES)


@pytest.mark.parametrize("command, rows, text, code", EXAMPLES, ids=[e[0][:60] for e in EXAMPLES])
def test_readme_example_is_what_kvplan_prints(invoke, monkeypatch, command, rows, text, code):
    monkeypatch.chdir(ROOT)
    args = shlex.split(command, comments=True)[1:]
    if "--format" not in args:
        args += ["--format", "markdown"]
    result = invoke(*args)
    assert result.exit_code == (0 if code is None else code), (command, result.stderr[-2000:])
    out_rows = [_cells(line) for line in result.stdout.splitlines() if line.startswith("|")]
    for row in rows:
        wanted = [c for c in _cells(row) if c not in ("...", "")]
        assert any(_is_subsequence(wanted, cells) for cells in out_rows), (
            f"README row not printed by `{command}`:\n{row}\nprinted rows:\n" +
            "\n".join("| " + " | ".join(c) + " |" for c in out_rows[:40]))
    printed = " ".join(result.stdout.replace("**", "").split())
    for chunk in _text_chunks(text):
        assert chunk in printed, f"README text not printed by `{command}`:\n{chunk}\n\nprinted:\n{printed[:3000]}"

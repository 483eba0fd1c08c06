"""Writing the tables' byte-range index (``index.csv``, read by :func:`kvplan.calc.perfcsv.load_index`).

For each table kvplan reads by GPU (:data:`kvplan.calc.perfcsv.INDEXED`), the table's size in bytes and every run
of consecutive lines that share their first four cells, with the run's byte range. Derived from the tables alone;
``benchmarks/index_perf_data.py`` writes it, tests/unit/test_perf_index.py checks it. Not imported by a command.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.calc.perfcsv import INDEX_HEADER, INDEXED


def runs(data: bytes) -> list[tuple[tuple[str, ...], int, int]]:
    """Each run of consecutive body lines of a table's bytes that share their first four cells: (the four cells,
    start byte, end byte past the run's last line and its newline)."""
    out: list = []
    pos = data.find(b"\n") + 1
    while 0 < pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end + 1
        key = tuple(data[pos:end].decode("utf-8").rstrip("\n").split(",", 4)[:4])
        if out and out[-1][0] == key and out[-1][2] == pos:
            out[-1] = (key, out[-1][1], end)
        else:
            out.append((key, pos, end))
        pos = end
    return out


def index_text(directory: Path) -> str:
    """The ``index.csv`` of a directory of tables (:data:`INDEXED` where present), as written."""
    lines = [INDEX_HEADER]
    for name in INDEXED:
        path = directory / f"{name}.csv"
        if path.exists():
            data = path.read_bytes()
            lines += [",".join([name, str(len(data)), *key, str(a), str(b)]) for key, a, b in runs(data)]
    return "\n".join(lines) + "\n"


__all__ = ["index_text", "runs"]

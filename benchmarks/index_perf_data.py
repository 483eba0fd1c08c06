"""Write ``index.csv`` beside the per-kernel tables (kvplan/data/perf and its aiter/ and rccl/ directories).

Usage: ``python benchmarks/index_perf_data.py`` (after any of the compact_*.py scripts rewrote a table;
``--check`` only reports whether the shipped indexes match the tables, exit 1 if not).

The index holds, for each table kvplan reads by GPU (:data:`kvplan.calc.perfcsv.INDEXED`), the table's size in
bytes and every run of consecutive lines that share their first four cells (gpu, backend, backend_version and
the fourth column), with the run's byte range: a command seeks to its GPU's, backend's and dtype's lines
instead of reading and searching the whole file (kvplan/calc/perfcsv.py). It is derived from the tables alone
and holds no figure of its own; tests/unit/test_perf_index.py checks it against them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvplan.calc.perfcsv import INDEX  # noqa: E402
from kvplan.calc.perfindex import index_text  # noqa: E402
from kvplan.calc.perfdb import DATA, EXTRA  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 where an index is out of date")
    args = ap.parse_args()
    stale = 0
    for directory in (DATA, *(DATA / d for d in EXTRA)):
        text, path = index_text(directory), directory / INDEX
        same = path.exists() and path.read_text(encoding="utf-8") == text
        if args.check:
            stale += not same
            print(f"{path}: {'in sync' if same else 'out of date'}")
        elif not same:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"{path}: written, {text.count(chr(10)) - 1} runs")
        else:
            print(f"{path}: unchanged")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

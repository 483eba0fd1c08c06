"""``kvplan sweep GRID.yaml -o FILE``: size/fit (and decode latency) over a Cartesian grid."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli import pause_gc, settle_gc
from kvplan.cli.options import (CardsOpt, SweepOutputOpt, cards_dirs, note)
from kvplan.errors import InputError

MAX_LISTED_REASONS = 5


class _Progress:
    """A rich progress bar on stderr, shown only on a terminal and only once a stage passes 1 s."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = time.perf_counter()
        self.enabled = sys.stderr.isatty()
        self.bar = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.start < 1.0:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _one_malloc_arena() -> None:
    """glibc only: the sweep's threads (evaluation, formatting, writing) share one malloc arena that keeps
    the memory they free for the next block.

    A block is allocated on one thread and freed on another; with an arena per thread (glibc's
    default) the freed pages are not reused by the thread that allocates next, and every block
    faults in fresh pages. ``mallopt(M_ARENA_MAX, 1)`` (mallopt(3); the MALLOC_ARENA_MAX tunable)
    before the threads start: on the 4M-point grid of benchmarks/bench_sweep.py to Parquet,
    ~70,000 → ~50,000 page faults, 0.32 → 0.26 s system time, peak RSS ~220 → ~198 MiB (median of
    alternated runs). Then a block's arrays (0.8 MB each) come from that arena's heap, not fresh
    mappings (``M_MMAP_THRESHOLD`` 32 MiB, glibc's largest), and the heap keeps up to 256 MiB of
    freed top (``M_TRIM_THRESHOLD``) instead of handing it back to the kernel between blocks, growing
    64 MiB at a time (``M_TOP_PAD``, address space only): ~46,000 → ~35,000 page faults on the same
    grid, peak RSS unchanged (~230 MiB). Elsewhere (another libc) nothing happens.
    """
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        # malloc.h: M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD
        for option, value in ((-8, 1), (-3, 32 << 20), (-1, 256 << 20), (-2, 64 << 20)):
            mallopt(option, value)
    except (OSError, AttributeError, TypeError):
        pass


def sweep_command(
    grid: Annotated[Path, typer.Argument(help="Grid file (YAML): models, hardware, seq, batch, kv_dtype, tp, pp, engine.")],
    output: SweepOutputOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on the first invalid combination instead of skipping it.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every default the latency columns took.")] = False,
    cards: CardsOpt = None,
) -> None:
    """Evaluate size and fit (and decode latency) at every grid point, vectorised; one row per point."""
    pause_gc()  # until the set-up is done (settle_gc below)
    from kvplan.plans.check.sweep import load_grid, sweep_stream
    from kvplan.plans.check.sweep_write import output_format, write_sweep

    output_format(output)  # refuse a bad path or a missing pyarrow before any work
    spec = load_grid(grid)
    start = time.perf_counter()
    result = sweep_stream(spec, cards=cards_dirs(cards), strict=strict)
    if result.empty():
        reasons = "; ".join(r for r, _ in result.skipped[:MAX_LISTED_REASONS])
        raise InputError(f"no valid point in {grid}: {reasons}", "fix the grid (see the reasons), or pass fewer values")
    settle_gc()  # imports, cards and the first block are done: later collections need not walk them
    if output is not None:
        _one_malloc_arena()
    progress = _Progress(f"evaluating and writing {spec.points:,} points")
    try:
        write_sweep(result, output, progress=lambda done, _: progress(done, spec.points), stream=sys.stdout)
    finally:
        progress.close()
    written = time.perf_counter() - start
    for text in result.notes:
        note(text)
    if verbose:
        for text in result.latency_notes:
            note(text)
    elif result.latency_notes:
        note(f"the latency columns take {len(result.latency_notes)} kvplan defaults where the hardware "
             "cards lack a figure (η_flops, step overhead, link latency); --verbose lists them")
    for reason, points in result.skipped[:MAX_LISTED_REASONS]:
        note(f"skipped {points:,} points: {reason}")
    if len(result.skipped) > MAX_LISTED_REASONS:
        rest = sum(n for _, n in result.skipped[MAX_LISTED_REASONS:])
        note(f"skipped {rest:,} more points for {len(result.skipped) - MAX_LISTED_REASONS} more reasons")
    where = f"Wrote {output}" if output is not None else "Wrote"
    typer.echo(f"{where}: {result.rows:,} rows of {spec.points:,} grid points "
               f"({result.skipped_points:,} skipped) in {written:.2f} s ({result.rows / max(written, 1e-9) / 1e6:.2f} M points/s)",
               err=True)

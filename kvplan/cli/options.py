"""Options shared by every command (defined once as ``Annotated`` aliases) and the output path.

Data goes to stdout (or ``-o FILE``, written whole or not at all); notes and errors go to
stderr. Errors a user can fix print ``Error: …`` and ``Hint: …`` and exit 2; a result that
answers "no" (does not fit, a failed check, an infeasible plan) exits 1.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kvplan.errors import KvplanError
from kvplan.report.render import FORMATS, render, write_atomic
from kvplan.result import Result

FormatOpt = Annotated[str, typer.Option("--format", "-f", help=f"Output format: {', '.join(FORMATS)}.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to FILE (whole or not at all).")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="Print the formulas with the card's numbers.")]
CardsOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--cards", help="Extra card directory (repeatable); also KVPLAN_CARDS_PATH."),
]
SeqOpt = Annotated[str, typer.Option("--seq", "--max-model-len", help="Tokens per sequence; list: 4k,32k,128k (k=1024).")]
BatchOpt = Annotated[str, typer.Option("--batch", "-b", help="Concurrent sequences; list: 1,8,64.")]
KVDtypeOpt = Annotated[str, typer.Option("--kv-dtype", "--kv-cache-dtype", help="auto, bf16, fp16, fp8, int8, int4, fp4, … (list allowed).")]
TPOpt = Annotated[str, typer.Option("--tp", "--tensor-parallel-size", help="Tensor-parallel size (list allowed).")]
PPOpt = Annotated[int, typer.Option("--pp", "--pipeline-parallel-size", help="Pipeline-parallel size.")]
EngineOpt = Annotated[str, typer.Option("--engine", help="vllm, sglang, trtllm, hf or ideal (list allowed).")]
BlockOpt = Annotated[Optional[int], typer.Option("--block-size", help="Tokens per KV block (engine default).")]
EtaMemOpt = Annotated[Optional[float], typer.Option("--eta-mem", help="Memory-bandwidth efficiency (overrides the card).")]
EtaFlopsOpt = Annotated[Optional[float], typer.Option("--eta-flops", help="FLOPS efficiency (overrides the card).")]
SystemOpt = Annotated[Optional[str], typer.Option(
    "--system", help="System card around the hardware (node / supernode links, tiers), e.g. hgx-h100-8.")]
StepOverheadOpt = Annotated[Optional[str], typer.Option(
    "--step-overhead", help="Fixed time per forward pass, e.g. 300us (overrides the card).")]


def handle_errors(func):
    """Turn KvplanError into 'Error: … / Hint: …' on stderr and its exit code (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                raise
            typer.echo(f"Error: {exc.message}", err=True)
            if exc.hint:
                typer.echo(f"Hint: {exc.hint}", err=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def emit(result: Result, fmt: str, output: Path | None, explain: bool = False) -> None:
    """Render ``result`` and print or write it; exit 1 when the result answers 'no'."""
    text = render(result, fmt, explain=explain)
    if output is not None:
        write_atomic(output, text)
        typer.echo(f"Wrote {output}", err=True)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if fmt != "markdown":
        for note in result.assumptions:
            typer.echo(f"Note: {note}", err=True)
        if explain and fmt in ("json", "csv"):
            typer.echo("\n".join(result.explain), err=True)
        if result.verdict and fmt in ("json", "csv"):
            typer.echo(f"Verdict: {result.verdict}", err=True)
    if result.failed:
        raise typer.Exit(1)


def efficiencies(eta_mem: float | None, eta_flops: float | None, step_overhead: str | None = None):
    """The ``--eta-mem/--eta-flops/--step-overhead`` flags as latency Efficiencies (None = the card's)."""
    from kvplan.plans.sizing.latency import Efficiencies
    from kvplan.units import parse_seconds

    overhead = None if step_overhead is None else parse_seconds(step_overhead)
    return Efficiencies(eta_mem=eta_mem, eta_flops=eta_flops, step_overhead_s=overhead)


def cards_dirs(cards: list[Path] | None) -> tuple[Path, ...]:
    return tuple(cards or ())

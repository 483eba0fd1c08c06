"""The ``kvplan`` command line: one module per command, wired here.

Each command's module (and the library code behind it) is imported only when that command
runs: ``kvplan size`` does not pay for the fleet simulator's imports. ``app`` (the whole
command tree, used by tests and ``--help``) is built on first access.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
from typing import Annotated

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from kvplan.errors import KvplanError

# command name -> (module, attribute); an attribute ending in "app" is a sub-command group
COMMANDS: dict[str, tuple[str, str]] = {
    "size": ("kvplan.cli.size", "size_command"),
    "fit": ("kvplan.cli.fit", "fit_command"),
    "latency": ("kvplan.cli.latency", "latency_command"),
    "calibrate": ("kvplan.cli.latency", "calibrate_command"),
    "workload": ("kvplan.cli.workload", "workload_command"),
    "plan": ("kvplan.cli.plan", "plan_command"),
    "pd": ("kvplan.cli.pd", "pd_command"),
    "tier": ("kvplan.cli.tier", "tier_command"),
    "route": ("kvplan.cli.route", "route_command"),
    "check": ("kvplan.cli.check", "check_command"),
    "schema": ("kvplan.cli.check", "schema_command"),
    "report": ("kvplan.cli.report", "report_command"),
    "sweep": ("kvplan.cli.sweep", "sweep_command"),
    "cards": ("kvplan.cli.cards", "app"),
}

HELP = "Analytical KV-cache capacity planner for LLM inference: size, fit, latency, plan, PD and tiers."


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__

        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


def build_app(names: list[str] | None = None) -> typer.Typer:
    """A Typer app with the named commands (all of them by default).

    Help is click's plain layout (``rich_markup_mode=None``): it wraps to the terminal and
    always prints whole option names, where the boxed layout truncates them below ~100 columns.
    ``--install-completion`` / ``--show-completion`` are typer's shell completion.
    """
    root = typer.Typer(name="kvplan", help=HELP, no_args_is_help=True, pretty_exceptions_enable=False,
                       add_completion=True, rich_markup_mode=None, cls=Boundary)

    @root.callback()
    def _root(
        version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                              help="Print kvplan's version and exit.")] = False,
        quiet: Annotated[bool, typer.Option(
            "--quiet", help="No Note lines on stderr (also KVPLAN_QUIET=1; may follow the command too).")] = False,
    ) -> None:
        """Analytical KV-cache capacity planner for LLM inference."""
        from kvplan.cli.options import set_quiet

        set_quiet(quiet)

    for name in names or list(COMMANDS):
        module, attribute = COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if attribute == "app":
            for info in target.registered_commands:
                info.callback = checked(info.callback)
            root.add_typer(target, name=name)
        else:
            root.command(name)(checked(target))
    return root


DEFAULT_HINT = "run the command with --help to see what it accepts"
DEBUG_HINT = "this is a bug in kvplan: rerun with KVPLAN_DEBUG=1 for the traceback and report it"


class Boundary(TyperGroup):
    """The command line's one error boundary: every command runs inside the root group's ``invoke``.

    No traceback reaches the user, and nothing but "the answer is no" exits 1:

    - ``InfeasibleError`` (the answer is no): ``Error: …`` / ``Hint: …`` on stderr, exit 1;
      its silent form ``AnswerNo`` (the output already says so) only exits 1.
    - any other ``KvplanError``: ``Error: …`` / ``Hint: …``, exit 2.
    - an input too deep or too large for the interpreter (RecursionError, MemoryError,
      OverflowError): exit 2 with a hint to make it smaller.
    - anything else is a bug: ``Error: internal error: …`` and exit 2, never 1.
      ``KVPLAN_DEBUG=1`` lets the traceback through instead.

    ``main()`` and every caller of ``app`` (tests included) pass through it.
    """

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                raise
            _refuse(exc.message, exc.hint, exc.exit_code)
        except (RecursionError, MemoryError, OverflowError) as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                raise
            what = ("is nested too deeply" if isinstance(exc, RecursionError) else
                    "is too large for memory" if isinstance(exc, MemoryError) else "holds a number too large")
            _refuse(f"an input {what} ({type(exc).__name__})", "make the input smaller or simpler")
        except Exception as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                raise
            _refuse(f"internal error: {type(exc).__name__}: {exc}", DEBUG_HINT)


def _refuse(message: str, hint: str | None, code: int = 2) -> None:
    """``Error: …`` and ``Hint: …`` (each one line, user text escaped), then exit ``code``.

    An ``AnswerNo`` has no message (the command's output already says "no"): it only exits.
    """
    from kvplan.textsafe import one_line

    if message:
        typer.echo(f"Error: {one_line(message, 2000)}", err=True)
        typer.echo(f"Hint: {one_line(hint or DEFAULT_HINT, 3000)}", err=True)
    raise typer.Exit(code)


def checked(func):
    """``func`` with its numeric options checked against their ranges before any work (once)."""
    if getattr(func, "_kvplan_checked", False):
        return func

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from kvplan.cli.options import check_flag_values

        check_flag_values(kwargs)
        settle_gc()
        return func(*args, **kwargs)

    wrapper._kvplan_checked = True
    return wrapper


def __getattr__(name: str):
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module 'kvplan.cli' has no attribute {name!r}")


_IN_MAIN = False  # main() runs as the program's entry point: the command line, not a library or test caller
_STARTING = False  # main() paused the cyclic garbage collector for the start-up (settle_gc resumes it)


def settle_gc() -> None:
    """Resume the cyclic garbage collector that ``main()`` paused for the start-up, sparing what exists now.

    Start-up creates tens of thousands of objects (modules, functions, classes, pydantic schemas)
    that live until the process ends and frees almost none; each collection on the way
    (generations 1 and 2) walks all of them again. ``gc.freeze()`` moves every object alive now
    out of the collector's reach (reference counting still frees them), so later collections walk
    only what the command itself makes; a command calls this again once its own set-up is done (the
    sweep: after its lazy imports, cards and first block, where a full collection walked ~27 ms of
    start-up objects mid-run). Only while ``main()`` runs as the program's entry point (never for a
    library, a test or another program calling it: their objects are left as they are); elsewhere
    nothing happens.
    """
    global _STARTING
    if not _IN_MAIN:
        return
    gc.freeze()
    if _STARTING:
        _STARTING = False
        gc.enable()


def pause_gc() -> None:
    """Pause the cyclic garbage collector again for a command's own set-up (its lazy imports), until
    its :func:`settle_gc`; only in a process ``main()`` runs."""
    global _STARTING
    if _IN_MAIN and gc.isenabled():
        _STARTING = True
        gc.disable()


def _skip_plugin_scan() -> None:
    """With pydantic plugins disabled, do not import the module that would scan for them.

    ``pydantic.plugin._loader`` imports ``importlib.metadata`` (and with it ``email``, ``socket``,
    …) at its top, about 8 ms, only for ``get_plugins`` to return ``()`` when
    ``PYDANTIC_DISABLE_PLUGINS`` is set. A stand-in whose ``get_plugins`` returns ``()`` is put
    in its place, only then and only if pydantic has not loaded it yet.
    """
    name = "pydantic.plugin._loader"
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true") or name in sys.modules:
        return
    import types

    stand_in = types.ModuleType(name, "kvplan: pydantic plugins disabled (PYDANTIC_DISABLE_PLUGINS)")
    stand_in.get_plugins = lambda: ()
    sys.modules[name] = stand_in


def main() -> None:
    """Run the command line: the error boundary for what Typer itself refuses, and signals.

    Usage errors (an unknown option, a value Typer cannot convert, a missing argument) are
    printed as one ``Error:`` line and a ``Hint:`` line and exit 2. SIGTERM is turned into an
    exit (143) that unwinds like Ctrl-C (130), so temporary output files are removed.
    Under GitHub Actions stdout and stderr are guarded: no user text starts a workflow command.
    As the program's entry point it pauses the cyclic garbage collector until the command starts
    (:func:`settle_gc`), and resumes it on the way out whatever happened.
    """
    global _IN_MAIN, _STARTING
    paused = _is_entry_point() and gc.isenabled()
    if paused:  # resumed by settle_gc when the command starts
        _IN_MAIN = _STARTING = True
        gc.disable()
    try:
        _main()
    finally:
        if paused:
            if _STARTING:  # the command never started (a usage error): resume the collector here
                gc.enable()
            _IN_MAIN = _STARTING = False


def _is_entry_point() -> bool:
    """True when ``main`` is this program's entry point (``python -m kvplan``, the ``kvplan`` script: their
    ``__main__`` module imported it), not a call from a library, a test or another program."""
    return getattr(sys.modules.get("__main__"), "main", None) is main


def _main() -> None:
    import signal

    from kvplan.textsafe import guarded

    sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except (ValueError, OSError):  # not the main thread
        pass
    # pydantic looks up plugins through importlib.metadata (email, socket, …) when the first card model
    # is built: about a tenth of `kvplan size`. The command line uses none; a user's setting stands.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # numpy's OpenBLAS starts a thread per core when numpy is imported: ~55 ms of CPU and ~40 ms of wall
    # of `import numpy` on 2 cores (best of 9: 147 → 92 ms CPU). kvplan's array work is element-wise;
    # its BLAS calls (small matrix products, a 3-column least squares) gain nothing from threads, and
    # the sweep's own threads would compete with them. One thread, unless the user set a number.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _skip_plugin_scan()
    if "--quiet" in sys.argv[2:]:  # `kvplan pd … --quiet` means what `kvplan --quiet pd …` does
        sys.argv = [sys.argv[0], "--quiet"] + [a for a in sys.argv[1:] if a != "--quiet"]
    first = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if sys.argv[1:2] == ["--quiet"] and len(sys.argv) > 2 and sys.argv[2] in COMMANDS:
        app = build_app([sys.argv[2]])
    else:
        app = build_app([first]) if first in COMMANDS and sys.argv[1] == first else build_app()
    try:
        code = app(standalone_mode=False, prog_name="kvplan")
    except TyperException as exc:
        code = _usage_error(exc, first if first in COMMANDS else None)
    except typer.Abort:
        code = 130
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code if isinstance(code, int) else 0)


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _usage_error(exc: Exception, command: str | None) -> int:
    """Typer's own refusals (usage errors) as 'Error: … / Hint: …', exit 2."""
    from kvplan.textsafe import one_line

    if type(exc).__name__ == "NoArgsIsHelpError" and getattr(exc, "ctx", None) is not None:
        sys.stdout.write(exc.ctx.get_help() + "\n")
        return 0
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    where = f"kvplan {command} --help" if command else "kvplan --help"
    sys.stderr.write(f"Error: {one_line(message)}\nHint: see '{where}'\n")
    return 2

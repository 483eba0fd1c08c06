"""The thin command line, read from its code (ast) and run.

- one error boundary: no module under ``kvplan/cli/`` but ``__init__`` catches a ``KvplanError``
  (or a subclass, or ``Exception`` wholesale) or exits by itself;
- shared options defined once: an ``Annotated`` option alias used by two or more commands is
  defined in ``kvplan/cli/options.py`` and nowhere else;
- one way to exit 1: every command that can answer "no" reaches exit code 1 through the
  boundary's one exit (``kvplan.cli._refuse``), and only there.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import kvplan.errors as errors_module
from kvplan.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "kvplan" / "cli"
DATA = Path(__file__).resolve().parent.parent / "data"
MODULES = sorted(p for p in CLI.glob("*.py") if p.name != "__init__.py")
KVPLAN_ERRORS = {name for name, obj in vars(errors_module).items()
                 if inspect.isclass(obj) and issubclass(obj, errors_module.KvplanError)}
BROAD = {"Exception", "BaseException"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return {"<bare except>"}
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    return {p.attr if isinstance(p, ast.Attribute) else getattr(p, "id", "?") for p in parts}


def test_the_errors_module_is_read():
    assert {"KvplanError", "InputError", "InfeasibleError", "AnswerNo"} <= KVPLAN_ERRORS


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_command_module_catches_kvplan_errors(path):
    caught = [(h.lineno, sorted(_names(h.type) & (KVPLAN_ERRORS | BROAD | {"<bare except>"})))
              for h in ast.walk(_tree(path)) if isinstance(h, ast.ExceptHandler)]
    assert [c for c in caught if c[1]] == [], f"{path.name} has its own error handling: {caught}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_command_module_exits_by_itself(path):
    exits = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if name in ("Exit", "Abort", "SystemExit") or (owner in ("sys", "os") and name in ("exit", "_exit")):
                exits.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.FunctionDef) and any("error" in ast.unparse(d) for d in node.decorator_list):
            exits.append((node.lineno, f"@{[ast.unparse(d) for d in node.decorator_list]} {node.name}"))
    assert exits == [], f"{path.name} exits or decorates errors itself: {exits}"


def _aliases() -> dict[str, list[str]]:
    """Module-level ``X = Annotated[...]`` aliases: name -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for path in MODULES:
        for node in _tree(path).body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)
                    and getattr(node.value.value, "id", "") == "Annotated"):
                for target in node.targets:
                    found.setdefault(target.id, []).append(path.name)
    return found


def _command_functions() -> dict[str, ast.FunctionDef]:
    """Every command's function (COMMANDS and the ``cards`` sub-commands), by command name."""
    found = {}
    for name, (module, attribute) in COMMANDS.items():
        tree = _tree(ROOT / (module.replace(".", "/") + ".py"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            if node.name == attribute:
                found[name] = node
            elif attribute == "app" and any("command" in ast.unparse(d) for d in node.decorator_list):
                found[f"{name} {node.name}"] = node
    return found


def test_every_command_function_is_found():
    commands = _command_functions()
    assert set(COMMANDS) - {"cards"} <= set(commands) and sum(k.startswith("cards ") for k in commands) == 4


def test_options_used_by_two_commands_are_defined_once_in_options_py():
    aliases = _aliases()
    users: dict[str, set[str]] = {}
    for command, func in _command_functions().items():
        for arg in func.args.args + func.args.kwonlyargs:
            if isinstance(arg.annotation, ast.Name) and arg.annotation.id in aliases:
                users.setdefault(arg.annotation.id, set()).add(command)
    shared = {alias for alias, who in users.items() if len(who) >= 2}
    assert len(shared) >= 20, sorted(shared)  # the test reads real aliases, not nothing
    misplaced = {alias: aliases[alias] for alias in shared if aliases[alias] != ["options.py"]}
    assert misplaced == {}, f"shared option aliases outside options.py (or defined twice): {misplaced}"
    twice = {alias: where for alias, where in aliases.items() if len(where) > 1}
    assert twice == {}


def _option_flags(annotation: ast.AST | None, param: str) -> tuple[str, frozenset[str]] | None:
    """(type, flags) of ``Annotated[T, typer.Option("--a", "-b", …)]``; None for anything else."""
    if not (isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", "") == "Annotated"):
        return None
    kind, *extras = annotation.slice.elts
    for extra in extras:
        if isinstance(extra, ast.Call) and ast.unparse(extra.func) in ("typer.Option", "Option"):
            flags = {a.value for a in extra.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            return ast.unparse(kind), frozenset(flags or {"--" + param.replace("_", "-")})
    return None


def option_places(sources: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """Where each option is written, by (type, flag): ``options.py:Alias`` or ``plan.py:plan_command(qps)``.

    Module-level ``Annotated`` aliases and the options written inline in a function's parameters
    both count; an option is the same one when it has the same type and shares a flag.
    """
    places: dict[tuple[str, str], list[str]] = {}

    def add(key, where):
        if key is not None:
            for flag in key[1]:
                places.setdefault((key[0], flag), []).append(where)

    for module, text in sources.items():
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                add(_option_flags(node.value, node.targets[0].id), f"{module}:{node.targets[0].id}")
            elif isinstance(node, ast.FunctionDef):
                for arg in node.args.args + node.args.kwonlyargs:
                    add(_option_flags(arg.annotation, arg.arg), f"{module}:{node.name}({arg.arg})")
    return places


def written_twice(places: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """Options written in two or more places, one of them outside options.py."""
    return {key: where for key, where in places.items()
            if len(where) >= 2 and not all(w.startswith("options.py:") for w in where)}


def test_the_option_reader_finds_an_option_written_twice():
    sources = {
        "options.py": 'A = Annotated[int, typer.Option("--a", "-a")]\nB = Annotated[str, typer.Option("--a")]\n',
        "one.py": 'def f(x: Annotated[int, typer.Option("-a", help="other words")] = 1,\n'
                  '      y: Annotated[str, typer.Option("--y")] = "", z: A = 1): pass\n',
        "two.py": 'def g(y: Annotated[str, typer.Option("--y", "--why")] = "",\n'
                  '      w: Annotated[float, typer.Option("--y")] = 0.0, v: Annotated[bool, typer.Option()] = 0): pass\n',
    }
    twice = written_twice(option_places(sources))
    assert twice == {("int", "-a"): ["options.py:A", "one.py:f(x)"], ("str", "--y"): ["one.py:f(y)", "two.py:g(y)"]}
    assert option_places(sources)[("bool", "--v")] == ["two.py:g(v)"]


def test_an_option_is_written_once_in_options_py():
    """The same option (type and a flag) in two commands, or beside an options.py alias, is written twice."""
    sources = {path.name: path.read_text(encoding="utf-8") for path in sorted(CLI.glob("*.py"))}
    places = option_places(sources)
    assert len(places) > 100  # the reader sees the real options
    assert written_twice(places) == {}


PLANS = ROOT / "examples" / "plans"
HEAD200 = DATA / "traces" / "mooncake_conversation_head200.jsonl"
NO_CASES = {
    "fit": ("fit", "llama-3.1-70b", "h100-sxm", "--max-model-len", "128k", "--batch", "4", "--tp", "2"),
    "plan": ("plan", "llama-3.1-8b", "h100-sxm", "--qps", "5", "--isl", "1k", "--osl", "100", "--tpot", "p99<=1ms"),
    "pd": ("pd", "llama-3.1-405b", "l40s-pcie-8", "--qps", "1", "--isl", "2k", "--osl", "64"),
    "tier": ("tier", "llama-3.1-405b", "h100-sxm", "--tp", "1", "--trace", HEAD200),
    "check": ("check", PLANS / "llama70b-h100-fail.yaml"),
}


@pytest.mark.parametrize("command", sorted(NO_CASES))
def test_every_no_exits_1_through_the_one_boundary(command, invoke, monkeypatch):
    import kvplan.cli as cli

    codes: list[int] = []
    original = cli._refuse

    def recording(message, hint, code):
        codes.append(code)
        original(message, hint, code)

    monkeypatch.setattr(cli, "_refuse", recording)
    result = invoke(*NO_CASES[command], env={"GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None})
    assert result.exit_code == 1, result.stderr
    assert codes == [1]
    assert "Traceback" not in result.stderr


def test_an_unexpected_exception_is_an_internal_error_exit_2(invoke, monkeypatch):
    import kvplan.cli.size as size_module

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(size_module, "size_from_names", broken, raising=True)
    result = invoke("size", "llama-3.1-8b")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-2:] == [
        "Error: internal error: ZeroDivisionError: boom",
        "Hint: this is a bug in kvplan: rerun with KVPLAN_DEBUG=1 for the traceback and report it"]
    monkeypatch.setenv("KVPLAN_DEBUG", "1")
    assert isinstance(invoke("size", "llama-3.1-8b").exception, ZeroDivisionError)

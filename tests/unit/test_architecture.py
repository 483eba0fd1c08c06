"""The house, read from the code: the import graph (function-level imports included), layers, module sizes.

Layers, top to bottom (DESIGN.md §1): cli → report → plans → sim → calc → workload → cards → ground
(units, errors, engines, result). An import may point down or sideways within a layer, never up,
and never round in a circle. ``if TYPE_CHECKING:`` blocks are annotations, not imports, and are
left out; the package face (``kvplan/__init__.py``, ``__main__``) is the entry point and may
reach anything.
"""

from __future__ import annotations

import ast

from ..conftest import ROOT

LAYERS = {"cli": 7, "report": 6, "plans": 5, "sim": 4, "calc": 3, "workload": 2, "cards": 1}
ENTRY = {"kvplan", "kvplan.__main__"}
MAX_LINES = 500


def _module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict:
    return {_module_name(p): p for p in sorted((ROOT / "kvplan").rglob("*.py"))}


def _imports(tree: ast.AST, known: set[str]) -> set[str]:
    """kvplan modules imported anywhere in ``tree`` (module level or inside functions), TYPE_CHECKING aside."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("kvplan"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("kvplan"))
    return {m for m in found if m in known}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(ast.parse(path.read_text()), known) - {name} for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def test_the_circle_finder_finds_circles_and_only_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_graph_sees_function_level_imports():
    tree = ast.parse("def f():\n    from kvplan.calc.kv import kv_layout\n"
                     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kvplan.cli import app\n")
    assert _imports(tree, {"kvplan.calc.kv", "kvplan.cli"}) == {"kvplan.calc.kv"}


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_no_import_up_a_layer():
    graph = import_graph()
    up = sorted((m, d) for m, deps in graph.items() if m not in ENTRY for d in deps if layer(d) > layer(m))
    assert up == []


def test_report_imports_neither_calc_nor_sim_and_cards_import_no_math():
    graph = import_graph()
    report = sorted((m, d) for m, deps in graph.items() if m.startswith("kvplan.report")
                    for d in deps if d.startswith(("kvplan.calc", "kvplan.sim")))
    cards = sorted((m, d) for m, deps in graph.items() if m.startswith("kvplan.cards")
                   for d in deps if d.startswith(("kvplan.calc", "kvplan.sim", "kvplan.plans", "kvplan.workload")))
    assert report == [] and cards == []


def test_no_module_over_500_lines():
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_planners_read_the_typed_pool_not_each_others_rows():
    """The KV pool is ``Deployment.pool``; no module multiplies fit's row keys to rebuild it."""
    offenders = [name for name, path in _modules().items()
                 if 'row["num_blocks"] * row["block_bytes_per_gpu"]' in path.read_text()
                 or "fit_row[\"num_blocks\"]" in path.read_text()]
    assert offenders == []


CAPABILITIES = ("sizing", "fleet", "pd", "tiers", "route", "check")


def sideways_from_sizing(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from ``plans/sizing`` into another capability subpackage (sizing is the lowest planner)."""
    others = tuple(f"kvplan.plans.{c}" for c in CAPABILITIES if c != "sizing")
    return sorted((m, d) for m, deps in graph.items() if m.startswith("kvplan.plans.sizing")
                  for d in deps if d.startswith(others))


def test_sizing_imports_no_other_planner():
    """size, fit, latency and calibrate sit below fleet, pd, tiers, route and check; links live in plans/links.py."""
    assert sideways_from_sizing({"kvplan.plans.sizing.latency_ops": {"kvplan.plans.pd.link", "kvplan.plans.links"}}) \
        == [("kvplan.plans.sizing.latency_ops", "kvplan.plans.pd.link")]
    assert sideways_from_sizing(import_graph()) == []


def test_sizing_planners_load_no_card():
    """size, fit, latency and calibrate take deployments (plans/build.py builds them); no sizing module loads a card."""
    graph = import_graph()
    loaders = sorted((m, d) for m, deps in graph.items() if m.startswith("kvplan.plans.sizing")
                     for d in deps if d == "kvplan.cards.loader")
    assert loaders == []
    assert "kvplan.cards.loader" in graph["kvplan.plans.build"]  # the builder is where the cards are read

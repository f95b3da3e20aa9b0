"""The package reads like the book: imports point one way and nothing imports in a circle.

``make test`` runs import-linter's contracts (``.importlinter``: the parts as layers, matplotlib
and ipywidgets kept out of the model and log parts); these tests run the same contracts from
pytest and add what a layers contract cannot see: a cycle between two modules of one part, and a
module that re-exports a name (``from a import b as b``) instead of its callers importing it from
where it lives.
Every import counts — at module level, inside a function, or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in sorted(graph.modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_module_imports_in_a_circle():
    graph = grimp.build_graph("llminfer")
    assert len(graph.modules) > 90  # the whole package was read
    assert _cycles(graph) == []


def test_a_cycle_is_found_when_there_is_one():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    assert _cycles(graph) == []
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_the_import_contracts_are_kept(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    status = lint_imports(config_filename=str(REPO / ".importlinter"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "2 kept, 0 broken" in out


def _reexports(source: str) -> list[str]:
    """Names a module imports as themselves (``from a import b as b``): Python's idiom for "this
    name is exported from here too", which ruff lets through as used."""
    tree = ast.parse(source)
    return [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
        if alias.asname == alias.name
    ]


def test_no_module_reexports_a_name_to_keep_an_old_path():
    # a package's __init__ is its index (the lazy top-level API), so it may; a module may not:
    # its callers import a moved name from where it lives now (issue 20)
    found = {
        str(path.relative_to(REPO)): names
        for path in sorted((REPO / "llminfer").rglob("*.py"))
        if path.name != "__init__.py" and (names := _reexports(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_a_reexport_is_found_when_there_is_one():
    assert _reexports("from llminfer.sim.speculative import speculative_table as speculative_table")
    assert _reexports("import math as math") == ["math"]
    assert _reexports("from llminfer.sim import speculative as spec\nimport math") == []

"""The import graph of `headwater` and `bench`, read statically: no cycles, and the layers' rules.

Every `import` and `from ... import` in a module's source counts, wherever it stands (module level,
inside a function, under `if TYPE_CHECKING:`): an import moved into a function still couples the
two modules, it only hides the cycle from the interpreter until the function runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("headwater", "bench")
# headwater's runtime path: what `headwater run` and the embedded engine import
RUNTIME = ("headwater.cli", "headwater.engine", "headwater.spark", "headwater.connectors", "headwater.events",
           "headwater.config")
# used by the tests, the demo and the benchmarks only
DEV_ONLY = ("headwater.devservers", "headwater.demo")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def module_files() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imported_names(module: str, path: Path) -> Iterable[str]:
    """Every dotted name `module` imports: `import a.b` gives a.b; `from a import b` gives a.b and a
    (b may be a module or a name in a)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            yield origin
            yield from (f"{origin}.{alias.name}" for alias in node.names)


def is_within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """module -> the modules of PACKAGES it imports (a name resolves to the module that defines it)."""
    files = module_files()
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(module, path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = frozenset(targets)
    return graph


def import_cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a) through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, frozenset[str]], group: set[str]) -> list[str]:
    """The shortest cycle through the group's first module, by breadth-first search inside the group."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group always has one


def direct_imports(prefix: str) -> dict[str, set[str]]:
    """The modules under `prefix` and what each imports directly."""
    return {m: set(targets) for m, targets in import_graph().items() if is_within(m, prefix)}


def reachable(starts: Iterable[str]) -> dict[str, str]:
    """Every module imported, directly or not, from `starts`, with the module that imports it."""
    graph = import_graph()
    seen: dict[str, str] = {}
    todo = list(starts)
    while todo:
        v = todo.pop()
        for w in graph[v]:
            if w not in seen:
                seen[w] = v
                todo.append(w)
    return seen


def offending(prefix: str, forbidden: str) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in direct_imports(prefix).items()
                  for t in targets if is_within(t, forbidden))


# ------------------------------------------------------------------------------------- the checks


def test_the_graph_is_read():
    graph = import_graph()
    assert "headwater.spark.parquet" in graph["headwater.spark.sinks"]  # registers the parquet sink
    assert "headwater.connectors.postgres.source" in graph
    assert "bench.contenders" in graph["bench.__main__"]


def test_imports_count_wherever_they_stand(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text("from typing import TYPE_CHECKING\n"
                    "from . import sibling\n"
                    "from ..other import thing\n"
                    "if TYPE_CHECKING:\n    import pkg.typed\n"
                    "def f():\n    from pkg.late import name\n")
    names = set(imported_names("pkg.sub.mod", path))
    assert {"pkg.sub.sibling", "pkg.other.thing", "pkg.typed", "pkg.late.name"} <= names


def test_the_cycle_finder_names_a_cycle():
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a", "d"}), "d": frozenset()}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_no_import_cycles():
    cycles = [" -> ".join(c) for c in import_cycles(import_graph())]
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_the_connector_contract_knows_no_connector():
    assert offending("headwater.connectors.base", "headwater.connectors.postgres") == []


def test_configuration_knows_no_connector():
    assert offending("headwater.config", "headwater.connectors") == []


def test_spark_knows_no_database():
    assert offending("headwater.spark", "headwater.connectors.postgres") == []


def test_the_runtime_path_leaves_out_the_dev_servers_and_the_demo():
    runtime = [m for m in import_graph() if any(is_within(m, p) for p in RUNTIME)]
    assert runtime
    found = reachable(runtime)
    leaks = sorted(f"{found[m]} imports {m}" for m in found if any(is_within(m, p) for p in DEV_ONLY))
    assert leaks == []

"""The import contracts in pyproject.toml hold, and no package has an import cycle (type hints included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("frost_core", "frost_tui", "frost_plugins")
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

def test_import_contracts_hold():
    result = subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """The imports that close a cycle, one per line with where they are."""
    lines = []
    for importer in component:
        for imported in component:
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']} -> {imported}: {detail['line_contents']}")
    return "\n".join(lines)


def test_no_import_cycles():
    graph = grimp.build_graph(*PACKAGES)  # TYPE_CHECKING imports count: a cycle in the hints is one in the design
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n\n".join(describe(graph, component) for component in found)


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y", line_number=1, line_contents="import a.y")
    graph.add_import(importer="a.y", imported="a.x", line_number=1, line_contents="import a.x")
    graph.add_import(importer="a.z", imported="a.x", line_number=1, line_contents="import a.x")
    assert cycles(graph) == [["a.x", "a.y"]]

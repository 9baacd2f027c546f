"""What we import we declare, and the Textual we run on is inside the range pyproject.toml allows."""

import ast
import sys
from importlib.metadata import packages_distributions, requires, version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
OURS = {"frost_core", "frost_plugins", "frost_tui", "core", "plugins"}


def _requirements() -> dict[str, Requirement]:
    return {Requirement(text).name.lower(): Requirement(text) for text in requires("frost-tui")}


def _imported_top_levels(folder: Path) -> set[str]:
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_third_party_module_we_import_is_a_declared_dependency():
    declared = _requirements()
    distributions = packages_distributions()
    undeclared = set()
    for folder in ("core", "frost_tui", "plugins"):
        for name in _imported_top_levels(ROOT / folder) - OURS - set(sys.stdlib_module_names):
            if not any(dist.lower() in declared for dist in distributions.get(name, [name])):
                undeclared.add(name)
    assert not undeclared, f"imported but not declared in pyproject.toml: {sorted(undeclared)}"


def test_the_installed_textual_is_inside_the_declared_range():
    textual = _requirements()["textual"]
    assert any(spec.operator == "<" for spec in textual.specifier), "Textual needs an upper bound on its major"
    assert textual.specifier.contains(version("textual")), f"textual {version('textual')} is outside {textual}"

"""`frost_core`'s public surface: every name it lists resolves, and type checkers see the same names."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import frost_core

INIT = Path(frost_core.__file__)


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """What the `if TYPE_CHECKING:` block imports: public name -> (module, name there)."""
    tree = ast.parse(INIT.read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.asname or alias.name: (statement.module, alias.name)
            for statement in block.body for alias in statement.names}


def test_type_checkers_see_exactly_the_public_names():
    assert sorted(_type_checking_imports()) == frost_core.__all__


def test_every_public_name_is_the_object_its_module_defines():
    for name, (module, attribute) in _type_checking_imports().items():
        assert getattr(frost_core, name) is getattr(importlib.import_module(module), attribute), name


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        frost_core.NoSuchThing  # noqa: B018


def test_the_plugin_reference_names_only_public_names():
    """docs/plugins.md's reference says `from frost_core import ...` for every name its table lists."""
    doc = (INIT.parents[1] / "docs" / "plugins.md").read_text()
    section = doc.split("\n## Reference", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    names = {name for cell in first_cells for name in re.findall(r"`([A-Za-z_]\w*)", cell)}
    assert "Plugin" in names
    assert names - set(frost_core.__all__) == set()

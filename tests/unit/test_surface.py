"""`frost_core`'s public surface: every name it lists resolves, and type checkers see the same names."""

from __future__ import annotations

import ast
import importlib
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

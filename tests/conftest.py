"""Each test folder is a kind, and each kind is a marker: `pytest -m "unit or scenario"` runs the fast ones."""

from pathlib import Path

import pytest

KINDS = ("unit", "scenario", "process", "multinode", "tui", "e2e")
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(item.fspath).relative_to(HERE).parts[0]
        if folder in KINDS:
            item.add_marker(getattr(pytest.mark, folder))

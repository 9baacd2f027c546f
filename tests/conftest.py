"""Each test folder is a kind, and each kind is a marker: `pytest -m "unit or scenario"` runs the fast ones."""

import compileall
from pathlib import Path

import pytest

KINDS = ("unit", "scenario", "process", "multinode", "tui", "e2e")
HERE = Path(__file__).parent
PACKAGES = (HERE.parent / "core", HERE.parent / "frost_tui")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the project's modules once, for the hundreds of processes the tests start.

    An editable install leaves compiling to the first import, and where PYTHONDONTWRITEBYTECODE is set (CI
    machines set it) no import writes what it compiled: every node, CLI call and guest would compile some
    160 modules from source again, a quarter of a second each. The files written here are read instead.
    """
    for package in PACKAGES:
        compileall.compile_dir(package, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(item.fspath).relative_to(HERE).parts[0]
        if folder in KINDS:
            item.add_marker(getattr(pytest.mark, folder))

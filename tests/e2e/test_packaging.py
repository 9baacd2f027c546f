"""The design card's folders install under names that cannot collide, as a wheel and as an editable install."""

import ast
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import importlib, importlib.util, json, pkgutil, frost_core, frost_core.config, frost_plugins, frost_tui, frost_tui.cli
# Every module must be importable from the install: a folder without __init__.py would be left out.
for package in (frost_core, frost_tui):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
print(json.dumps({
    "bare_core": importlib.util.find_spec("core") is not None,
    "bare_plugins": importlib.util.find_spec("plugins") is not None,
    "core_file": frost_core.config.__file__,
}))
"""


def make_venv(where: Path) -> Path:
    """A fresh venv that borrows our dependencies (pip and setuptools too) through a .pth file.

    No download is needed, and the build uses the same setuptools as the development venv.
    """
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                      text=True).strip()
    Path(purelib, "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def check_install(python: Path, cwd: Path) -> dict:
    import json

    out = subprocess.check_output([python, "-c", CHECK], cwd=cwd, text=True)
    result = json.loads(out.splitlines()[-1])
    help_text = subprocess.check_output([python.parent / "frost-tui", "--help"], cwd=cwd, text=True)
    assert "usage: frost-tui" in help_text
    return result


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["wheel", "editable"])
def test_installs_under_distinct_import_names(tmp_path, mode):
    python = make_venv(tmp_path / "venv")
    if mode == "wheel":
        # Built from a clean copy: setuptools never empties a checkout's build/, so a module
        # that was moved away would still ship from there.
        source = tmp_path / "source"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache"))
        subprocess.check_call([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                               "-w", tmp_path / "dist", source])
        (wheel,) = (tmp_path / "dist").glob("frost_tui-*.whl")
        subprocess.check_call([python, "-m", "pip", "install", "-q", "--no-deps", wheel])
    else:
        subprocess.check_call([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ROOT])
    result = check_install(python, cwd=tmp_path)
    assert not result["bare_core"] and not result["bare_plugins"]
    if mode == "wheel":
        assert "site-packages/frost_core/config.py" in result["core_file"]
    else:
        assert result["core_file"] == str(ROOT / "core" / "config.py")


def test_core_never_imports_textual():
    """The node must run headless and stay testable without the UI framework."""
    offenders = []
    for path in (ROOT / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("textual", "frost_tui")]
    assert offenders == []


def test_importing_the_node_does_not_load_textual():
    code = "import sys, frost_core.node.wiring, frost_core.node.headless; print('textual' in sys.modules)"
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "False"

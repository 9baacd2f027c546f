"""core/ must never import Textual: the node runs headless on servers without a UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"

IMPORT_ALL = """
import importlib, pkgutil, sys
import frost_core
failed = []
for module in pkgutil.walk_packages(frost_core.__path__, "frost_core."):
    try:
        importlib.import_module(module.name)
    except ImportError as error:   # a module another engineer is still writing
        failed.append(module.name)
leaked = sorted(name for name in sys.modules if name == "textual" or name.startswith("textual."))
print("LEAKED" if leaked else "CLEAN", leaked[:3])
"""


def test_importing_every_core_module_loads_no_textual():
    result = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=60)
    assert "CLEAN" in result.stdout, result.stdout + result.stderr


def test_no_core_source_mentions_a_textual_import():
    offenders = [
        str(path) for path in CORE.rglob("*.py")
        if any(line.lstrip().startswith(("import textual", "from textual")) for line in path.read_text().splitlines())
    ]
    assert offenders == []

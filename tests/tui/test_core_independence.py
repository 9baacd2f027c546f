"""core/ must never load Textual, not even through a library: the node runs headless on servers without a UI.

The import contract in pyproject.toml (tests/unit/test_layers.py) forbids core's own imports of
Textual; this run-time check also catches one that comes in through a third-party package.
"""

from __future__ import annotations

import json
import subprocess
import sys

IMPORT_ALL = """
import importlib, json, pkgutil, sys, traceback
import frost_core
failed = {}
for module in pkgutil.walk_packages(frost_core.__path__, "frost_core."):
    try:
        importlib.import_module(module.name)
    except Exception:
        failed[module.name] = traceback.format_exc(limit=-3)
for name in frost_core.__all__:
    try:
        getattr(frost_core, name)
    except Exception:
        failed["frost_core." + name] = traceback.format_exc(limit=-3)
leaked = sorted(name for name in sys.modules if name == "textual" or name.startswith("textual."))
print(json.dumps({"failed": failed, "leaked": leaked[:3]}))
"""


def test_every_core_module_imports_and_none_loads_textual():
    result = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["failed"] == {}, "\n".join(f"{name}:\n{trace}" for name, trace in outcome["failed"].items())
    assert outcome["leaked"] == []

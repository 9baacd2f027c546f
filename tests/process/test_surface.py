"""The public surface loads lazily: a guest child that imports `frost_core` stays light until it lowers itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
HEAVY = ("trio", "psutil", "textual", "cryptography")

# What a guest child and a plugin worker import before they lower their priority, then a bundled
# plugin loaded the way the child loads it (it imports the author API through `frost_core`).
GUEST_START = """
import json, sys
import frost_core.guest.child, frost_core.plugin.worker
from frost_core.plugin.loader import load_plugin_file
load_plugin_file(sys.argv[1])
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def test_a_guest_child_and_its_plugin_leave_trio_psutil_and_textual_unloaded():
    # -P as the supervisor starts the child: the working directory is not on the path
    result = subprocess.run([sys.executable, "-P", "-c", GUEST_START, str(PLUGINS / "mandelbrot.py")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "frost_core" in loaded
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


"""A guest reads a plugin and the modules it names before dropping its user, then runs it from memory."""

from __future__ import annotations

import shutil
import sys
import textwrap

from frost_core.guest.preload import import_named_modules, read_plugin
from frost_core.plugin.loader import load_plugin_file

PACKAGE_INIT = textwrap.dedent(
    """
    import colorsys
    from frost_core import Done, Output, Plugin, WorkUnit
    from .helpers import double
    import frostlocalhelper

    class Folder(Plugin):
        name = "folder"
        version = "1"

        def start(self, unit):
            return {"i": double(unit.data["n"])}

        def step(self, state):
            return Done(state["i"])

        def progress(self, state):
            return 0.0

        def split(self, params):
            return [WorkUnit(0, {"n": 2}, 1 << 20, 1.0)]

        def combine(self, params, results):
            return Output(b"", "text/plain", "out.txt")

    plugin = Folder()
    """
)


def test_a_plugin_folder_runs_from_what_was_read_after_its_files_are_gone(tmp_path):
    folder = tmp_path / "folder_plugin"
    folder.mkdir()
    (folder / "__init__.py").write_text(PACKAGE_INIT.replace("import frostlocalhelper\n", ""))
    (folder / "helpers.py").write_text("def double(n):\n    return 2 * n\n")
    sources = read_plugin(folder)
    shutil.rmtree(folder)  # as a guest that dropped its user finds the folder: out of reach
    plugin = load_plugin_file(folder, sources)
    assert plugin.step(plugin.start(plugin.split({})[0])).result == 4


def test_the_modules_a_plugin_names_are_imported_without_running_it_but_not_its_own(tmp_path):
    sys.modules.pop("colorsys", None)
    sys.modules.pop("frostlocalhelper", None)
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "__init__.py").write_text(PACKAGE_INIT + "raise SystemExit('plugin code ran')\n")
    (folder / "frostlocalhelper.py").write_text("raise SystemExit('plugin code ran')\n")
    sys.path.insert(0, str(folder))  # as if the plugin's own module shadowed an installed one
    try:
        imported = import_named_modules(read_plugin(folder), folder)
    finally:
        sys.path.remove(str(folder))
    assert "colorsys" in imported and "colorsys" in sys.modules  # the standard library's: the owner's code
    assert "frost_core" in imported
    assert "frostlocalhelper" not in imported and "frostlocalhelper" not in sys.modules


def test_modules_that_act_when_imported_are_left_for_the_plugin_to_import_as_itself(tmp_path):
    """Imported as root before the drop, `unittest.__main__` would run a test program, `antigravity` a browser."""
    plugin = tmp_path / "actor.py"
    plugin.write_text("import antigravity\nimport unittest.__main__\nimport this\nimport idlelib.idle\nimport json\n")
    for name in ("antigravity", "unittest.__main__", "this", "idlelib.idle"):
        sys.modules.pop(name, None)
    imported = import_named_modules(read_plugin(plugin), tmp_path)
    assert imported == ("json",)
    assert not {"antigravity", "unittest.__main__", "this", "idlelib.idle"} & set(sys.modules)

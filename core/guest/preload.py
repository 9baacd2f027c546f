"""A plugin's code and the modules it names, read while the guest may still read them: it runs them after dropping its user.

A root node's guest becomes an unprivileged user before any plugin code runs, and that user may
not reach the interpreter's library or the plugin file (both under /root, 0700, on a pyenv
install). So the child reads the plugin's files into memory and imports the modules they
import by name (the standard library, frost_core, installed packages: the owner's code, never a
module of the plugin's own folder) before it drops; the plugin then runs from memory.
Codecs, which Python imports by name on first use, are imported too (`import_codecs`). A module
the plugin imports only at run time, by a computed name, is not found after the drop.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

from frost_core.api.errors import PluginError
from frost_core.plugin.loader import code_files

# Modules that act when imported rather than define: a plugin naming one must not get root to act
# for it. Every `__main__` module is such a script too (`unittest.__main__` runs a test program).
ACT_ON_IMPORT = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib.idle", "turtledemo"})


def read_plugin(path: str | Path) -> dict[str, bytes]:
    """The bytes of a plugin file, or of every file in a plugin folder, by resolved path."""
    path = Path(path).resolve()
    try:
        files = code_files(path) if path.is_dir() else [path]
        return {str(file): file.read_bytes() for file in files}
    except OSError as error:
        raise PluginError(f"{path}: cannot read the plugin: {error.strerror}") from None


def import_named_modules(sources: dict[str, bytes], plugin_root: Path) -> tuple[str, ...]:
    """Import every module the plugin's sources name in an import statement, except the plugin's own; returns those imported.

    Nothing of the plugin runs: its sources are parsed, not executed. A module that cannot be
    imported is left for the plugin's own import to report.
    """
    imported = []
    for name in _named_modules(sources):
        if _acts_on_import(name) or _is_plugin_module(name, plugin_root):
            continue
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
            imported.append(name)
    return tuple(imported)


def import_codecs() -> None:
    """Import every codec of the standard library: Python looks them up by name only when first used
    (`socket.create_connection` needs idna, a plugin's `decode("latin-1")` its codec), after the drop.

    About 60 ms on a loaded machine, so only a guest that will switch users pays it, and a warm
    spare pays it before it is needed.
    """
    import encodings

    for module in pkgutil.iter_modules(encodings.__path__):
        with contextlib.suppress(ImportError):  # mbcs and oem exist on Windows only
            importlib.import_module(f"encodings.{module.name}")


def _named_modules(sources: dict[str, bytes]) -> list[str]:
    names: dict[str, None] = {}
    for path, source in sources.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError):
            continue  # the loader reports it, with its line
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(dict.fromkeys(alias.name for alias in node.names))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names[node.module] = None
                # `from package import submodule` imports a module the package may not import itself.
                names.update(dict.fromkeys(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"))
    return list(names)


def _acts_on_import(name: str) -> bool:
    parts = name.split(".")
    return "__main__" in parts or any(".".join(parts[:i]) in ACT_ON_IMPORT for i in range(1, len(parts) + 1))


def _is_plugin_module(name: str, plugin_root: Path) -> bool:
    """Whether `name`'s top-level module would come from the plugin's own folder (plugin code, not the owner's)."""
    top = name.partition(".")[0]
    if top in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return True
    if spec is None:
        return True
    locations = [spec.origin or "", *(spec.submodule_search_locations or ())]
    return any(Path(location).resolve().is_relative_to(plugin_root) for location in locations if location)

"""Load a plugin file or folder into this process, and hash its code.

Only throwaway validation workers and guest subprocesses import plugin code; the node never
does. `frost_core.plugin.registry` re-exports both functions.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import re
import sys
import sysconfig
import traceback
from pathlib import Path

from frost_core.api.errors import PluginError
from frost_core.plugin.api import Plugin, check_plugin
from frost_core.plugin.gang import GangPlugin, check_gang_plugin

IGNORED_NAMES = ("__pycache__",)
IGNORED_SUFFIXES = (".pyc", ".pyo")
_load_count = itertools.count()
_CORE_DIR = Path(__file__).resolve().parents[1]
_STDLIB_DIR = Path(sysconfig.get_paths()["stdlib"]).resolve()
_PACKAGE_DIRS = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}


def content_hash(path: str | Path) -> str:
    """The sha256 (hex) identifying a plugin's code.

    For a file, the hash of its bytes (so `sha256sum` agrees). For a folder, the hash over its
    files in sorted order, each as relative path, NUL, size, NUL, bytes; byte-code caches are
    skipped because importing writes them.
    """
    path = Path(path)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if not path.is_dir():
        raise PluginError(f"{path}: no such plugin file or folder")
    digest = hashlib.sha256()
    for file in sorted(code_files(path), key=lambda f: f.relative_to(path).as_posix()):
        data = file.read_bytes()
        digest.update(f"{file.relative_to(path).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def load_plugin_file(path: str | Path, sources: dict[str, bytes] | None = None) -> Plugin | GangPlugin:
    """Import a plugin module (a .py file, or a folder with __init__.py) and return its `plugin`
    (a unit `Plugin` or a `GangPlugin`).

    `sources` (resolved path -> bytes) serves the plugin's files from memory: a guest read them
    before it became a user that may not read them (see `frost_core.guest.preload`).
    Raises PluginError naming the file and the reason: syntax error, failed import, an
    exception at import, no `plugin` object, or declarations that break the API.
    """
    path = Path(path).resolve()
    name = author_file_name(path)
    is_dir = str(path / "__init__.py") in sources if sources is not None else path.is_dir()
    if is_dir:
        init = path / "__init__.py"
        if sources is None and not init.is_file():
            raise PluginError(f"{name}: a plugin folder needs an __init__.py")
        module_name = _module_name(path, is_dir=True)
        loader = None if sources is None else _MemoryLoader(module_name, str(init), sources)
        spec = importlib.util.spec_from_file_location(module_name, init, loader=loader,
                                                      submodule_search_locations=[str(path)])
        if sources is not None:
            sys.meta_path.insert(0, _MemoryFinder(module_name, path, sources))
    elif (str(path) in sources if sources is not None else path.is_file()) and path.suffix == ".py":
        module_name = _module_name(path, is_dir=False)
        loader = None if sources is None else _MemoryLoader(module_name, str(path), sources)
        spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    else:
        raise PluginError(f"{name}: not a .py file or a folder")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # lets dataclasses and relative imports inside the plugin work
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise PluginError(f"{author_file_name(Path(exc.filename or name))}:{exc.lineno}: syntax error: {exc.msg}") from None
    except PluginError as exc:
        raise PluginError(f"{name}: {exc.message}") from None
    except (Exception, SystemExit) as exc:  # plugin code may raise anything; report it, never crash
        raise PluginError(f"{name}: importing raised {describe_exception(exc)}") from None
    if not hasattr(module, "plugin"):
        raise PluginError(f"{name}: defines no module-level `plugin` (write `plugin = MyPlugin()`)")
    try:
        if isinstance(module.plugin, GangPlugin):
            return check_gang_plugin(module.plugin)
        return check_plugin(module.plugin)
    except PluginError as exc:
        raise PluginError(f"{name}: {exc.message}") from None


def describe_exception(exc: BaseException) -> str:
    """`Type: message (at grep.py:58)`: the innermost line of the plugin's own code.

    Frames inside frost_core (`open_input`, say) and the standard library are skipped, and only
    the file's name is given: the author edits their file, not wherever it was installed or copied.
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _runtime_file(f.filename)]
    where = f" (at {author_file_name(Path(frames[-1].filename))}:{frames[-1].lineno})" if frames else ""
    message = str(exc)
    return f"{type(exc).__name__}{': ' + message if message else ''}{where}"


def author_file_name(path: Path) -> str:
    """The name the plugin's author knows a file by: less the hash suffix of a copy the node keeps."""
    return re.sub(r"-[0-9a-f]{12}(?=\.py$|$)", "", path.name)


def _runtime_file(filename: str) -> bool:
    """frost_core's own code or the standard library's (installed packages are not: plugins live there)."""
    path = Path(filename)
    if path.is_relative_to(_CORE_DIR) or filename.startswith("<frozen"):
        return True
    return path.is_relative_to(_STDLIB_DIR) and not any(path.is_relative_to(p) for p in _PACKAGE_DIRS)


def code_files(folder: Path) -> list[Path]:
    return [
        f
        for f in folder.rglob("*")
        if f.is_file()
        and not any(part in IGNORED_NAMES for part in f.relative_to(folder).parts)
        and f.suffix not in IGNORED_SUFFIXES
    ]


def _module_name(path: Path, *, is_dir: bool) -> str:
    stem = re.sub(r"\W", "_", path.name if is_dir else path.stem)
    return f"frost_plugin_{stem}_{next(_load_count)}"


class _MemoryLoader(importlib.machinery.SourceFileLoader):
    """Source from the bytes read earlier, never from disk; no byte-code cache (no file times to check it by)."""

    def __init__(self, fullname: str, path: str, sources: dict[str, bytes]) -> None:
        super().__init__(fullname, path)
        self.sources = sources

    def get_data(self, path: str) -> bytes:
        try:
            return self.sources[path]
        except KeyError:
            raise OSError(errno.ENOENT, "not among the plugin files read before the guest dropped its user",
                          path) from None

    def path_stats(self, path: str) -> dict:
        raise OSError(errno.ENOENT, "plugin files served from memory have no times", path)


class _MemoryFinder(importlib.abc.MetaPathFinder):
    """Finds the submodules of a plugin folder among the bytes read earlier (its folder may be closed now)."""

    def __init__(self, name: str, root: Path, sources: dict[str, bytes]) -> None:
        self.name = name
        self.root = root
        self.sources = sources

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.name + "."):
            return None
        parts = fullname.split(".")[1:]
        package = self.root.joinpath(*parts)
        for file, locations in ((package / "__init__.py", [str(package)]), (package.with_suffix(".py"), None)):
            if str(file) in self.sources:
                return importlib.util.spec_from_file_location(
                    fullname, file, loader=_MemoryLoader(fullname, str(file), self.sources),
                    submodule_search_locations=locations)
        return None

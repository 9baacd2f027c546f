"""Find plugins (bundled, installed entry points, owner-added, fetched from the cluster), validate
each in a throwaway subprocess, and remember the verdicts by content hash so a restart is quick.

The node never imports plugin code: it hashes files, reads package metadata and asks
`frost_core.plugin.worker` subprocesses. A plugin that fails to import or breaks the API is
listed as broken with its file and the reason.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from frost_core.api.errors import PluginError
from frost_core.plugin.api import API_VERSION, Param
from frost_core.plugin.archive import unpack_plugin
from frost_core.plugin.calls import ask_worker
from frost_core.plugin.loader import IGNORED_NAMES, IGNORED_SUFFIXES, content_hash, load_plugin_file

log = logging.getLogger("frost.plugins")

__all__ = ["ENTRY_POINT_GROUP", "PluginInfo", "PluginRegistry", "content_hash", "load_plugin_file", "preferred"]

ENTRY_POINT_GROUP = "frost_tui.plugins"
SOURCES = ("bundled", "entry-point", "added", "cluster")
VALIDATE_TIMEOUT = 30.0
CACHE_FILE = "plugin-validation.json"
ADDED_DIR = "plugins"
ADDED_INDEX = "added.json"
CLUSTER_DIR = "cluster"
"""Under the added plugins: one folder per content hash holding the code a master sent."""
_HASH = re.compile(r"[0-9a-f]{64}")
_PRECEDENCE = {"added": 3, "entry-point": 2, "bundled": 1, "cluster": 0}


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """What the node knows about one plugin without importing it."""

    name: str
    version: str
    hash: str
    source: str
    path: str
    ok: bool
    error: str | None
    description: str = ""
    params: tuple[Param, ...] = ()
    origin: str = ""  # an added plugin: the file or folder the owner added (and edits); `path` is the node's copy
    gang: bool = False  # a GangPlugin: its assignments are p members that step together

    @property
    def shown_path(self) -> str:
        """Where the plugin's author finds it: the added original, a bundled file inside frost_plugins,
        never the node's own copy nor wherever frost-tui happens to be installed."""
        if self.origin:
            return self.origin
        if self.source == "bundled":
            return f"frost_plugins/{Path(self.path).name}"
        return self.path

    def to_plain(self) -> dict:
        """JSON/CBOR form, as `frost-tui plugins --json` prints it."""
        return {
            "name": self.name,
            "version": self.version,
            "hash": self.hash,
            "source": self.source,
            "ok": self.ok,
            "error": self.error,
            "path": self.path,
            "description": self.description,
            "params": [param.to_plain() for param in self.params],
            "gang": self.gang,
        }


class _Listed(Protocol):
    name: str
    source: str
    ok: bool


ListedPlugin = TypeVar("ListedPlugin", bound=_Listed)


def preferred(plugins: Iterable[ListedPlugin], name: str) -> ListedPlugin | None:
    """Of the plugins called `name`, the one `submit` runs; None if none of them works.

    Added beats entry-point beats bundled beats fetched from a master, and of two added copies the later add: an
    owner who edits a plugin and adds it again runs the new code, while the old copy stays for the assignments
    that still name its hash."""
    working = [plugin for plugin in plugins if plugin.name == name and plugin.ok]
    return max(reversed(working), key=lambda plugin: _PRECEDENCE[plugin.source]) if working else None


@dataclasses.dataclass(frozen=True)
class _Candidate:
    """A place a plugin may live, before it is hashed and validated."""

    source: str
    path: str
    label: str  # the name to list when validation never learns the real one
    problem: str | None = None
    origin: str = ""


class PluginRegistry:
    """The plugins this node can run; `scan` (or `scan_async` in the node) refreshes the list.

    `data_dir` holds the validation cache and, under `plugins/`, the owner-added copies and
    (under `plugins/cluster/<hash>/`) the code fetched from masters.
    """

    def __init__(self, data_dir: Path, *, timeout: float = VALIDATE_TIMEOUT, bundled_dir: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.timeout = timeout
        self.bundled_dir = bundled_dir if bundled_dir is not None else _bundled_folder()
        self._infos: tuple[PluginInfo, ...] | None = None
        self._cache: dict[str, dict] | None = None
        self._saving = trio.Lock()
        self._scans_started = 0
        self._scan_published = 0   # the newest scan whose list is the one shown

    def plugins(self) -> tuple[PluginInfo, ...]:
        """The list from the last scan (empty before the first)."""
        return self._infos or ()

    def scan(self) -> list[PluginInfo]:
        """Blocking scan for the CLI; inside the node use `scan_async`."""
        return trio.run(self.scan_async)

    async def scan_async(self) -> list[PluginInfo]:
        """Find and validate every plugin, in parallel worker subprocesses, without blocking trio.

        Scans may overlap (the owner adds a plugin while the start-up scan still runs): a scan
        that began earlier never replaces the list of one that began later.
        """
        self._scans_started += 1
        this_scan = self._scans_started
        candidates = await trio.to_thread.run_sync(self._candidates)
        infos: list[PluginInfo | None] = [None] * len(candidates)
        limiter = trio.CapacityLimiter(max(2, os.cpu_count() or 2))

        async def check(position: int, candidate: _Candidate) -> None:
            async with limiter:
                infos[position] = await self._check(candidate)

        async with trio.open_nursery() as nursery:
            for position, candidate in enumerate(candidates):
                nursery.start_soon(check, position, candidate)
        async with self._saving:  # concurrent scans (an add during a scan) write one at a time
            await trio.to_thread.run_sync(self._save_cache, dict(self._cache or {}))
        found = tuple(info for info in infos if info is not None)
        if this_scan > self._scan_published:
            self._infos, self._scan_published = found, this_scan
        return list(found)

    def add(self, path: str | Path) -> PluginInfo:
        """Blocking `add_async` for the CLI."""
        return trio.run(self.add_async, path)

    async def add_async(self, path: str | Path) -> PluginInfo:
        """Copy a plugin file or folder into the data dir (so its code cannot change under its
        hash), validate it and keep it listed, even when broken so the owner sees why.

        Re-adding from the same place replaces an earlier broken copy; working earlier copies
        stay, since running assignments may refer to them by hash.
        """
        source = Path(path).expanduser().resolve()
        try:
            copy = await trio.to_thread.run_sync(self._copy_in, source)
        except OSError as error:  # unreadable, a broken link inside a folder, a full disk
            raise PluginError(f"{source}: cannot be copied into the data dir: {error.strerror or error}") from error
        info = await self._check(_Candidate("added", str(copy), _label(copy), origin=str(source)))
        await trio.to_thread.run_sync(self._record_added, copy, source, info.ok)
        await self.scan_async()
        return info

    async def add_cluster_async(self, archive: bytes, expected_hash: str) -> PluginInfo:
        """Keep plugin code a peer sent, if it really has the hash we asked for; validate and list it.

        Kept on disk by hash, so a restart finds it and the same code is never fetched twice,
        and listed even when broken, so the owner sees why a guest could not run.
        """
        copy = await trio.to_thread.run_sync(self._unpack_in, archive, expected_hash)
        info = await self._check(_Candidate("cluster", str(copy), _label(copy)))
        await self.scan_async()
        return info

    def remove(self, name: str) -> list[PluginInfo]:
        """Blocking `remove_async` for the CLI."""
        return trio.run(self.remove_async, name)

    async def remove_async(self, name: str) -> list[PluginInfo]:
        """Forget every copy of plugin `name` the owner added or a master sent, working or broken.

        Its files go from the data dir, so a broken one no longer warns at the next start. A
        bundled or installed plugin is not ours to delete: PluginError says where it comes from.
        """
        infos = await self.scan_async() if self._infos is None else list(self._infos)
        matches = [info for info in infos if info.name == name]
        removable = [info for info in matches if info.source in ("added", "cluster")]
        if not removable:
            if matches:
                where = ("is bundled with frost-tui" if matches[0].source == "bundled"
                         else "comes from an installed package (uninstall the package)")
                raise PluginError(f"plugin {name!r} {where}; only plugins added with l or `frost-tui plugins add` "
                                  "can be removed")
            known = ", ".join(sorted({i.name for i in infos if i.source in ("added", "cluster")})) or "none"
            raise PluginError(f"no added plugin is called {name!r} (added: {known})")
        await trio.to_thread.run_sync(self._forget, [Path(info.path) for info in removable])
        await self.scan_async()
        return removable

    def _forget(self, copies: list[Path]) -> None:
        names = {copy.name for copy in copies}
        _write_json(self._added_dir / ADDED_INDEX, [e for e in self._read_index() if e["copy"] not in names])
        for copy in copies:
            _remove(copy.parent if copy.parent.parent == self._cluster_dir else copy)

    def get(self, name: str) -> PluginInfo:
        """The working plugin called `name` (`preferred`)."""
        infos = self._current()
        chosen = preferred(infos, name)
        if chosen is not None:
            return chosen
        matches = [info for info in infos if info.name == name]
        if matches:
            raise PluginError(f"plugin {name!r} is broken: {matches[-1].error}")
        known = ", ".join(sorted({info.name for info in infos if info.ok})) or "none"
        raise PluginError(f"unknown plugin {name!r} (available: {known})")

    def by_hash(self, code_hash: str) -> PluginInfo:
        """The working plugin whose code has this content hash."""
        matches = [info for info in self._current() if info.hash == code_hash]
        for info in matches:
            if info.ok:
                return info
        if matches:
            raise PluginError(f"plugin {matches[0].name!r} ({code_hash[:12]}) is broken: {matches[0].error}")
        raise PluginError(f"no plugin with code hash {code_hash[:12]} is installed here")

    def _current(self) -> tuple[PluginInfo, ...]:
        if self._infos is None:
            if trio.lowlevel.in_trio_run():
                raise PluginError("the plugin registry has not been scanned yet (await scan_async() first)")
            self.scan()
        assert self._infos is not None
        return self._infos

    async def _check(self, candidate: _Candidate) -> PluginInfo:
        """Hash and validate one candidate, from the cache when its code was seen before."""
        if candidate.problem:
            return _broken(candidate, "", candidate.problem)
        try:
            code_hash = await trio.to_thread.run_sync(content_hash, candidate.path)
        except (PluginError, OSError) as exc:
            return _broken(candidate, "", f"{candidate.path}: {exc}")
        if self._cache is None:
            self._cache = await trio.to_thread.run_sync(self._load_cache)
        verdict = self._cache.get(code_hash)
        if verdict is None:
            verdict, lasting = await self._validate(candidate, code_hash)
            if lasting:
                self._cache[code_hash] = verdict
        if not verdict["ok"]:
            return _broken(candidate, code_hash, verdict["error"], verdict.get("name"))
        return PluginInfo(
            name=verdict["name"],
            version=verdict["version"],
            hash=code_hash,
            source=candidate.source,
            path=candidate.path,
            ok=True,
            error=None,
            description=verdict["description"],
            params=tuple(Param.from_plain(plain) for plain in verdict["params"]),
            origin=candidate.origin,
            gang=verdict.get("gang", False),
        )

    async def _validate(self, candidate: _Candidate, code_hash: str) -> tuple[dict, bool]:
        """Ask a worker; the verdict lasts (is cached) unless the worker timed out or died."""
        try:
            reply = await ask_worker({"op": "validate", "path": candidate.path}, timeout=self.timeout, label=candidate.label)
        except PluginError as exc:
            return {"ok": False, "error": exc.message}, False
        if not reply["ok"]:
            name = reply.get("name")
            return {"ok": False, "error": str(reply.get("error")), "name": name if isinstance(name, str) else None}, True
        try:
            params = [Param.from_plain(plain).to_plain() for plain in reply["params"]]
            verdict = {
                "ok": True,
                "name": str(reply["name"]),
                "version": str(reply["version"]),
                "description": str(reply["description"]),
                "params": params,
                "gang": reply.get("gang", False) is True,
            }
        except (KeyError, TypeError, PluginError) as exc:
            return {"ok": False, "error": f"the validation worker sent a malformed description: {exc}"}, False
        return verdict, True

    def _candidates(self) -> list[_Candidate]:
        bundled = [
            _Candidate("bundled", str(file), file.stem)
            for file in sorted(self.bundled_dir.glob("*.py"))
            if not file.name.startswith("_")
        ]
        entry_points = [_entry_point_candidate(ep) for ep in sorted(_entry_points(), key=lambda ep: ep.name)]
        added = [
            _Candidate("added", str(self._added_dir / entry["copy"]), _label(Path(entry["copy"])),
                       origin=str(entry.get("origin", "")))
            for entry in self._read_index()
        ]
        cluster = [
            _Candidate("cluster", str(plugin), _label(plugin))
            for home in sorted(self._cluster_dir.glob("*"))
            if _HASH.fullmatch(home.name)
            for plugin in sorted(home.iterdir())
        ]
        return bundled + entry_points + added + cluster

    @property
    def _added_dir(self) -> Path:
        return self.data_dir / ADDED_DIR

    @property
    def _cluster_dir(self) -> Path:
        return self._added_dir / CLUSTER_DIR

    def _unpack_in(self, archive: bytes, expected_hash: str) -> Path:
        """Unpack into a temporary folder and rename it to the hash only once the code matches it,
        so `cluster/<hash>` either holds exactly that code or does not exist."""
        if not _HASH.fullmatch(expected_hash):
            raise PluginError(f"{expected_hash[:80]!r} is not a content hash (64 lowercase hex digits)")
        home = self._cluster_dir / expected_hash
        if home.is_dir():  # fetched before, or by a concurrent fetch; but a disk can be meddled with
            if _cluster_copy_hash(home) == expected_hash:
                return next(home.iterdir())
            shutil.rmtree(home, ignore_errors=True)
        try:
            self._cluster_dir.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".arriving-", dir=self._cluster_dir))
        except OSError as exc:
            raise PluginError(f"could not store plugin code {expected_hash[:12]}: {exc}") from exc
        try:
            plugin = unpack_plugin(archive, staging)
            actual = content_hash(plugin)
            if actual != expected_hash:
                raise PluginError(
                    f"the plugin code received as {expected_hash[:12]} hashes to {actual[:12]}: "
                    "damaged or tampered with on the way, so it was thrown away"
                )
            staging.chmod(0o755)
            try:
                os.rename(staging, home)
            except OSError:
                if not home.is_dir():
                    raise
        except OSError as exc:
            raise PluginError(f"could not store plugin code {expected_hash[:12]}: {exc}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return next(home.iterdir())

    def _copy_in(self, source: Path) -> Path:
        """Copy a plugin under a name that carries its hash; verify the copy hashes the same."""
        if source.is_dir():
            if not (source / "__init__.py").is_file():
                raise PluginError(f"{source}: a plugin folder needs an __init__.py")
        elif not source.is_file():
            raise PluginError(f"{source}: no such plugin file or folder")
        elif source.suffix != ".py":
            raise PluginError(f"{source}: a plugin file must be a .py file")
        code_hash = content_hash(source)
        name = f"{source.stem if source.is_file() else source.name}-{code_hash[:12]}{'.py' if source.is_file() else ''}"
        target = self._added_dir / name
        if target.exists():
            return target
        self._added_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".adding-", dir=self._added_dir))
        try:
            staged = staging / name
            if source.is_dir():
                shutil.copytree(source, staged, ignore=shutil.ignore_patterns(*IGNORED_NAMES, *(f"*{s}" for s in IGNORED_SUFFIXES)))
            else:
                shutil.copyfile(source, staged)
            if content_hash(staged) != code_hash:
                raise PluginError(f"{source}: the plugin changed while it was being copied; add it again")
            os.replace(staged, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target

    def _record_added(self, copy: Path, origin: Path, ok: bool) -> None:
        """Append to the added index; drop broken copies from the same origin (nothing can use them)."""
        entries = []
        for entry in self._read_index():
            if entry["copy"] == copy.name:
                continue
            if entry["origin"] == str(origin) and not entry.get("ok", True):
                _remove(self._added_dir / entry["copy"])
                continue
            entries.append(entry)
        entries.append({"copy": copy.name, "origin": str(origin), "ok": ok})
        _write_json(self._added_dir / ADDED_INDEX, entries)

    def _read_index(self) -> list[dict]:
        path = self._added_dir / ADDED_INDEX
        try:
            entries = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise PluginError(f"{path}: the list of added plugins is unreadable: {exc}") from exc
        return [e for e in entries if isinstance(e, dict) and isinstance(e.get("copy"), str) and "/" not in e["copy"]]

    def _load_cache(self) -> dict[str, dict]:
        try:
            stored = json.loads((self.data_dir / CACHE_FILE).read_text())
        except (OSError, ValueError):
            return {}  # a missing or damaged cache only costs a re-validation
        if not isinstance(stored, dict) or stored.get("api") != API_VERSION or not isinstance(stored.get("verdicts"), dict):
            return {}
        return stored["verdicts"]

    def _save_cache(self, verdicts: dict[str, dict]) -> None:
        """Keep the scan's verdicts for the next start; a disk that refuses them (full) costs only that start's
        rescan of every plugin."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            _write_json(self.data_dir / CACHE_FILE, {"api": API_VERSION, "verdicts": verdicts})
        except OSError as error:
            log.warning("the plugin scan's verdicts are not kept for the next start: %s", error)


def _broken(candidate: _Candidate, code_hash: str, error: str, name: str | None = None) -> PluginInfo:
    return PluginInfo(
        name=name or candidate.label,
        version="",
        hash=code_hash,
        source=candidate.source,
        path=candidate.path,
        ok=False,
        error=error,
        origin=candidate.origin,
    )


def _cluster_copy_hash(home: Path) -> str | None:
    """The content hash of what `cluster/<hash>` holds, if it holds exactly one plugin."""
    inside = list(home.iterdir())
    return content_hash(inside[0]) if len(inside) == 1 else None


def _label(path: Path) -> str:
    """A plugin's name until validation tells the real one: its file name, less our hash suffix."""
    return re.sub(r"-[0-9a-f]{12}$", "", path.stem if path.suffix == ".py" else path.name)


def _bundled_folder() -> Path:
    spec = importlib.util.find_spec("frost_plugins")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def _entry_points() -> Sequence[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def _entry_point_candidate(entry_point: importlib.metadata.EntryPoint) -> _Candidate:
    """Locate an entry point's module without running any of its code (not even parents')."""
    where = f"entry point {entry_point.name!r} = {entry_point.value!r}"
    if ":" in entry_point.value:
        return _Candidate("entry-point", "", entry_point.name, f"{where}: give a module whose `plugin` is the plugin, not an attribute")
    path = _locate_module(entry_point.value)
    if path is None:
        return _Candidate("entry-point", "", entry_point.name, f"{where}: cannot find the module's source file")
    return _Candidate("entry-point", str(path), entry_point.name)


def _locate_module(module: str) -> Path | None:
    """The .py file or package folder of a dotted module name; only finders run, no module code."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    if not rest:
        return Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
    folders = [Path(p) for p in spec.submodule_search_locations or ()]
    for part in rest[:-1]:
        folders = [folder / part for folder in folders if (folder / part / "__init__.py").is_file()]
    for folder in folders:
        if (folder / f"{rest[-1]}.py").is_file():
            return folder / f"{rest[-1]}.py"
        if (folder / rest[-1] / "__init__.py").is_file():
            return folder / rest[-1]
    return None


def _write_json(path: Path, value: object) -> None:
    """Replace a small JSON file atomically, so a crash leaves the old or the new one."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(json.dumps(value, indent=1, sort_keys=True))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

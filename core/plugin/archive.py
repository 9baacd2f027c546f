"""A plugin's code as one deterministic byte string, and the careful unpacking of one from a peer.

The archive is canonical CBOR: `{"format": 1, "files": [[path, bytes], ...]}` sorted by path,
each path relative to the folder the plugin sits in, so its first part is the plugin's own file
or folder name (`squares.py`, or `geometry/__init__.py`, `geometry/helper.py`). It holds exactly
the files `content_hash` covers, so the unpacked tree hashes like the original. The format has
no way to say "link", "mode" or "owner": unpacking only ever creates plain files and folders.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.plugin.loader import IGNORED_NAMES, IGNORED_SUFFIXES, code_files
from frost_core.wire.codec import decode_strict, encode

__all__ = ["MAX_ARCHIVE_BYTES", "MAX_ARCHIVE_FILES", "PluginArchive", "pack_plugin", "read_archive", "unpack_plugin"]

ARCHIVE_FORMAT = 1
MAX_ARCHIVE_BYTES = 16 * 1024 * 1024
"""Largest archive sent or accepted; plugins are code, and big data belongs in parameters."""
MAX_ARCHIVE_FILES = 1000
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
"""Longest single file or folder name most Linux file systems accept."""
_NESTING = 3
"""CBOR nesting of the format itself (map, files array, entry); it never needs more."""


@dataclasses.dataclass(frozen=True)
class PluginArchive:
    """A checked archive: `root` is the plugin's file or folder name, `files` its (path, bytes)."""

    root: str
    files: tuple[tuple[str, bytes], ...]


def pack_plugin(path: str | os.PathLike[str]) -> bytes:
    """The archive of a plugin file or folder, ready to send.

    Symbolic links are refused rather than followed: shipping a link's target could hand a
    peer a file from outside the plugin (an entry-point package linking to the owner's files).
    """
    path = Path(path)
    if path.is_dir():
        for inside in path.rglob("*"):
            relative = inside.relative_to(path)
            if inside.is_symlink() and not _ignored(relative.parts):
                raise PluginError(f"{inside}: is a symbolic link; a plugin shipped across the cluster holds plain files only")
        files = [(f"{path.name}/{file.relative_to(path).as_posix()}", file) for file in code_files(path)]
    elif path.is_file() and path.suffix == ".py":
        files = [(path.name, path)]
    else:
        raise PluginError(f"{path}: not a plugin file (.py) or folder")
    if len(files) > MAX_ARCHIVE_FILES:
        raise PluginError(f"{path}: {len(files)} files, over the limit of {MAX_ARCHIVE_FILES} for shipping a plugin")
    entries = []
    total = 0
    for name, file in sorted(files):
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise PluginError(f"{file}: cannot be read for shipping: {exc.strerror or exc}") from exc
        total += len(data)
        if total > MAX_ARCHIVE_BYTES:
            raise PluginError(f"{path}: more than {MAX_ARCHIVE_BYTES} bytes of code, too big to ship")
        entries.append([name, data])
    archive = encode({"format": ARCHIVE_FORMAT, "files": entries})
    read_archive(archive)  # what we send must pass the checks the receiver makes (names, layout)
    return archive


def read_archive(archive: bytes) -> PluginArchive:
    """Decode and check an archive from a peer without touching the disk.

    Anything wrong raises PluginError naming the problem: not our format, too big, too many
    files, an absolute path, `..`, an empty or over-long name, a duplicate path, a path that is
    both a file and a folder, byte-code caches (not covered by the content hash, so they could
    smuggle code past it), or a layout that is not one .py file or one folder with __init__.py.
    """
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise PluginError(f"the plugin archive is {len(archive)} bytes, over the limit of {MAX_ARCHIVE_BYTES}")
    try:
        value = decode_strict(archive, max_depth=_NESTING)
    except ProtocolError as exc:
        raise PluginError(f"the plugin archive is not valid: {exc.message}") from None
    if not isinstance(value, dict) or type(value.get("format")) is not int or not isinstance(value.get("files"), list):
        raise PluginError("the plugin archive is not a map with a 'format' number and a 'files' list")
    if value["format"] != ARCHIVE_FORMAT:
        raise PluginError(f"the plugin archive is in format {value['format']}; this node reads format {ARCHIVE_FORMAT}")
    entries = value["files"]
    if not entries:
        raise PluginError("the plugin archive holds no files")
    if len(entries) > MAX_ARCHIVE_FILES:
        raise PluginError(f"the plugin archive holds {len(entries)} files, over the limit of {MAX_ARCHIVE_FILES}")
    files: list[tuple[str, bytes]] = []
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], bytes)):
            raise PluginError("the plugin archive has an entry that is not a [path, bytes] pair")
        files.append((_checked_path(entry[0]), entry[1]))
    files.sort()
    _check_tree([path for path, _ in files])
    return PluginArchive(root=files[0][0].split("/")[0], files=tuple(files))


def unpack_plugin(archive: bytes, into: Path) -> Path:
    """Write a checked archive into the empty folder `into`; return the plugin's file or folder.

    Files are created exclusively and without following links, so even a folder someone
    prepared with traps cannot redirect a write.
    """
    checked = read_archive(archive)
    for path, data in checked.files:
        target = into.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
    return into / checked.root


def _checked_path(path: str) -> str:
    if not path or len(path) > MAX_PATH_CHARS:
        raise PluginError(f"the plugin archive has a path of {len(path)} characters (allowed: 1 to {MAX_PATH_CHARS})")
    if path.startswith("/"):
        raise PluginError(f"the plugin archive has an absolute path: {path[:80]!r}")
    if "\0" in path or "\\" in path:
        raise PluginError(f"the plugin archive has a path with a NUL or backslash: {path[:80]!r}")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PluginError(f"the plugin archive has a path with an empty, '.' or '..' part: {path[:80]!r}")
        if len(part.encode()) > MAX_NAME_BYTES:
            raise PluginError(f"the plugin archive has a name longer than {MAX_NAME_BYTES} bytes: {part[:40]!r}...")
    if _ignored(parts):
        raise PluginError(f"the plugin archive holds a byte-code cache, which its content hash does not cover: {path[:80]!r}")
    return path


def _check_tree(paths: list[str]) -> None:
    """Sorted, valid paths: one root, no duplicates, no file inside a file, a plugin's layout."""
    roots = {path.split("/")[0] for path in paths}
    if len(roots) != 1:
        raise PluginError(f"the plugin archive holds {len(roots)} top-level names; a plugin is one file or one folder")
    seen: set[str] = set()
    for path in paths:
        if path in seen:
            raise PluginError(f"the plugin archive holds {path[:80]!r} twice")
        seen.add(path)
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in seen:
                raise PluginError(f"the plugin archive uses {'/'.join(parts[:depth])[:80]!r} as both a file and a folder")
    [root] = roots
    if paths == [root]:
        if not root.endswith(".py"):
            raise PluginError(f"the plugin archive holds one file {root[:80]!r}, which is not a .py file")
    elif f"{root}/__init__.py" not in seen:
        raise PluginError(f"the plugin archive holds a folder {root[:80]!r} without an __init__.py")


def _ignored(parts: tuple[str, ...] | list[str]) -> bool:
    """Exactly what content_hash skips: parts named like byte-code folders, files with their suffixes."""
    return any(part in IGNORED_NAMES for part in parts) or Path(parts[-1]).suffix in IGNORED_SUFFIXES

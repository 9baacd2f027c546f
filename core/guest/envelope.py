"""What a guest's checkpoint and result bytes hold: the plugin's own bytes plus the unit's output files.

A unit's output files live in its scratch folder, and the scratch folder stays behind when the
unit moves or its host dies; so every checkpoint carries them, and the result brings them to
the master. The envelope is a canonical CBOR map of plain data, `{"state" | "result": bytes,
"files": {name: bytes}}`, so any host decodes it with the strict plain decoder and the same
contents always give the same bytes (and checkpoint hashes).
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

from frost_core.api.errors import PluginError
from frost_core.guest.state_codec import encode_state_pieces
from frost_core.plugin.limits import check_file_name
from frost_core.wire.codec import encode, encode_head

STATE = "state"
RESULT = "result"
_FILES = "files"
_LENGTHS = {24: struct.Struct(">B"), 25: struct.Struct(">H"), 26: struct.Struct(">I"), 27: struct.Struct(">Q")}


def pack(kind: str, payload: bytes, files: Mapping[str, bytes], limit: int) -> bytes:
    """Wrap the plugin's encoded state or result with the output files; PluginError over `limit`."""
    return b"".join(pack_pieces(kind, [payload], files, limit))


def pack_pieces(kind: str, payload: Sequence[bytes], files: Mapping[str, bytes], limit: int) -> list[bytes]:
    """`pack` before the join, for a payload given as pieces: they are placed by reference, not copied."""
    what = f"{kind} with its output files"
    entries = [
        (encode(kind), [encode_head(2, sum(len(piece) for piece in payload)), *payload]),
        (encode(_FILES), encode_state_pieces(dict(files), what)),
    ]
    entries.sort(key=lambda entry: (len(entry[0]), entry[0]))  # canonical: keys by length, then bytewise
    pieces = [encode_head(5, len(entries))]
    for key, value in entries:
        pieces.append(key)
        pieces.extend(value)
    size = sum(len(piece) for piece in pieces)
    if size > limit:
        raise PluginError(f"{what} is {size} bytes encoded, over the limit of {limit} bytes")
    return pieces


def unpack(kind: str, data: bytes | bytearray) -> tuple[bytes, dict[str, bytes]]:
    """(the plugin's encoded state or result, output files by name); PluginError if malformed."""
    payload, files = open_envelope(kind, data)
    return payload.tobytes(), files


def open_envelope(kind: str, data: bytes | bytearray | memoryview) -> tuple[memoryview, dict[str, bytes]]:
    """`unpack` with the payload left where it is: a view into `data`, which the state decoder reads in place.

    Only the canonical layout `pack` writes is accepted (the files map, then the payload, and
    nothing after it): any other bytes were not written by a frost node.
    """
    what = f"{kind} envelope"
    cursor = _Cursor(memoryview(data), what)
    try:
        if cursor.head(5) != 2:
            raise ValueError("a map of two entries expected")
        keys = sorted((encode(kind), encode(_FILES)), key=lambda key: (len(key), key))
        payload = memoryview(b"")
        files: dict[str, bytes] = {}
        for key in keys:
            if cursor.take(len(key)) != key:
                raise ValueError(f"key {key[1:].decode()!r} expected")
            if key[1:].decode() == _FILES:
                files = cursor.files()
            else:
                payload = cursor.take(cursor.head(2))
        if cursor.left:
            raise ValueError(f"{cursor.left} bytes after its end")
    except ValueError as error:
        raise PluginError(f"{what} must be a map of {kind!r} and 'files' as a frost node writes it: {error}") from None
    return payload, files


class _Cursor:
    """Reads CBOR items of known kinds off a view, each byte string as a view rather than a copy."""

    def __init__(self, view: memoryview, what: str) -> None:
        self._view, self._at, self._what = view, 0, what

    @property
    def left(self) -> int:
        return len(self._view) - self._at

    def take(self, size: int) -> memoryview:
        if size > self.left:
            raise ValueError("truncated")
        self._at += size
        return self._view[self._at - size : self._at]

    def head(self, major: int) -> int:
        """The argument of the next item, which must have major type `major` and a definite length."""
        initial = self.take(1)[0]
        if initial >> 5 != major:
            raise ValueError(f"CBOR major type {initial >> 5} where {major} belongs")
        info = initial & 0x1F
        if info < 24:
            return info
        if info not in _LENGTHS:
            raise ValueError("an indefinite or reserved length")
        return _LENGTHS[info].unpack(self.take(_LENGTHS[info].size))[0]

    def files(self) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for _ in range(self.head(5)):
            try:
                name = check_file_name(self.take(self.head(3)).tobytes().decode(), "output file")
            except UnicodeDecodeError:
                raise ValueError("an output file name that is not UTF-8") from None
            except PluginError as error:
                raise ValueError(error.message) from None
            if name in files:
                raise ValueError(f"output file {name!r} twice")
            files[name] = self.take(self.head(2)).tobytes()
        return files


def restore_outputs(folder: Path, files: Mapping[str, bytes]) -> None:
    """Put a checkpoint's output files back into a fresh output folder before the unit resumes."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / check_file_name(name, "output file")).write_bytes(content)

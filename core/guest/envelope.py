"""What a guest's checkpoint and result bytes hold: the plugin's own bytes plus the unit's output files.

A unit's output files live in its scratch folder, and the scratch folder stays behind when the
unit moves or its host dies; so every checkpoint carries them, and the result brings them to
the master. The envelope is a canonical CBOR map of plain data, `{"state" | "result": bytes,
"files": {name: bytes}}`, so any host decodes it with the strict plain decoder and the same
contents always give the same bytes (and checkpoint hashes).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from frost_core.api.errors import PluginError
from frost_core.guest.state_codec import encode_state
from frost_core.plugin.limits import check_file_name
from frost_core.plugin.plain import decode_plain

STATE = "state"
RESULT = "result"


def pack(kind: str, payload: bytes, files: Mapping[str, bytes], limit: int) -> bytes:
    """Wrap the plugin's encoded state or result with the output files; PluginError over `limit`."""
    return encode_state({kind: payload, "files": dict(files)}, f"{kind} with its output files", limit)


def unpack(kind: str, data: bytes) -> tuple[bytes, dict[str, bytes]]:
    """(the plugin's encoded state or result, output files by name); PluginError if malformed."""
    what = f"{kind} envelope"
    envelope = decode_plain(data, what)
    if not isinstance(envelope, dict) or set(envelope) != {kind, "files"}:
        raise PluginError(f"{what} must be a map of {kind!r} and 'files'")
    payload, files = envelope[kind], envelope["files"]
    if not isinstance(payload, bytes) or not isinstance(files, dict):
        raise PluginError(f"{what} holds a {type(payload).__name__} {kind} and {type(files).__name__} files")
    for name, content in files.items():
        check_file_name(name, "output file")
        if not isinstance(content, bytes):
            raise PluginError(f"{what}: output file {name!r} is a {type(content).__name__}, not bytes")
    return payload, files


def restore_outputs(folder: Path, files: Mapping[str, bytes]) -> None:
    """Put a checkpoint's output files back into a fresh output folder before the unit resumes."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / check_file_name(name, "output file")).write_bytes(content)

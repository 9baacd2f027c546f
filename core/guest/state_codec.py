"""Encode a plugin's state for a checkpoint with one copy of its bulk bytes, not three.

The bytes are exactly those of `plugin_api.encode_plain` (cbor2's canonical form: shortest
heads, map keys by length then bytewise), so hashes agree whichever encoder made them. The
difference is speed on big states: cbor2 grows its output buffer as it goes, copying the bulk
bytes several times, while here large byte strings are placed by reference into a list of
pieces that is joined once. On a desk machine every pass over a 100 MB state costs about as
much as writing it to disk, so this is what keeps a checkpoint close to the disk's own speed.
"""

from __future__ import annotations

import struct
from typing import Any

import cbor2

from frost_core.api.errors import PluginError
from frost_core.plugin.plain import check_plain

BY_REFERENCE_FROM = 4096
"""Byte strings at least this long are not copied into intermediate buffers."""


def encode_state(value: Any, what: str = "state", limit: int | None = None) -> bytes:
    """Check that `value` is plain data and encode it canonically; PluginError if not plain or over `limit`."""
    return b"".join(encode_state_pieces(value, what, limit))


def encode_state_pieces(value: Any, what: str = "state", limit: int | None = None) -> list[bytes]:
    """`encode_state` before the join: the pieces whose concatenation it is, long byte strings by reference.

    A checkpoint's pieces go to the pipe as they are (see `envelope.pack_pieces`), never joined.
    """
    check_plain(value, what)
    pieces: list[bytes] = []
    _encode_into(value, pieces)
    size = sum(len(piece) for piece in pieces)
    if limit is not None and size > limit:
        raise PluginError(f"{what} is {size} bytes encoded, over the limit of {limit} bytes")
    return pieces


def _encode_into(value: Any, pieces: list[bytes]) -> None:
    kind = type(value)
    if kind is bytes and len(value) >= BY_REFERENCE_FROM:
        pieces.append(_head(2, len(value)))
        pieces.append(value)
    elif (kind is dict or kind is list or kind is tuple) and _holds_bulk(value):
        if kind is dict:
            pieces.append(_head(5, len(value)))
            keyed = sorted(((cbor2.dumps(key, canonical=True), item) for key, item in value.items()),
                           key=lambda pair: (len(pair[0]), pair[0]))
            for encoded_key, item in keyed:
                pieces.append(encoded_key)
                _encode_into(item, pieces)
        else:
            pieces.append(_head(4, len(value)))
            for item in value:
                _encode_into(item, pieces)
    else:
        pieces.append(cbor2.dumps(value, canonical=True))


def _holds_bulk(value: Any) -> bool:
    """Whether a container holds a long byte string anywhere (depth is bounded by check_plain)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is bytes and len(item) >= BY_REFERENCE_FROM:
            return True
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
    return False


def _head(major: int, length: int) -> bytes:
    base = major << 5
    if length < 24:
        return bytes((base | length,))
    for extra, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if length < 1 << (8 * struct.calcsize(fmt)):
            return bytes((base | extra,)) + struct.pack(fmt, length)
    raise PluginError(f"a length of {length} does not fit CBOR")

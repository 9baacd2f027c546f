"""Plain data: the CBOR subset that crosses a process or a machine unchanged, checked and encoded canonically.

A unit's state, its result and its work-unit data are someone else's values; decoding refuses
tags, indefinite lengths and duplicate keys, so what arrives is exactly what was checked.
"""

from __future__ import annotations

import io
import mmap
from collections.abc import Callable
from typing import Any

import cbor2

from frost_core.api.errors import PluginError
from frost_core.plugin.limits import MAX_DEPTH, MAX_STATE_BYTES

_INT_MIN, _INT_MAX = -(2**64), 2**64 - 1  # what CBOR holds without bignum tags


def check_plain(value: object, what: str = "value") -> None:
    """Raise PluginError unless `value` is plain CBOR data that survives a round trip.

    Plain means None, bool, int (64-bit), float, str, bytes, lists (tuples become lists) and
    maps with str or int keys. Anything else would change or vanish on a migration.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise PluginError(f"{what} is nested deeper than {MAX_DEPTH} levels")
        if item is None or isinstance(item, (bool, str, bytes, float)):
            continue
        if isinstance(item, int):
            if not _INT_MIN <= item <= _INT_MAX:
                raise PluginError(f"{what} holds an integer beyond 64 bits; store it as bytes")
        elif isinstance(item, (list, tuple)):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise PluginError(f"{what} has a map key of type {type(key).__name__}; use str or int")
                stack.append((child, depth + 1))
        else:
            raise PluginError(f"{what} holds a {type(item).__name__}, which is not plain CBOR data")


def encode_plain(value: object, what: str = "state", limit: int = MAX_STATE_BYTES) -> bytes:
    """Check and encode plain data canonically; PluginError if it is not plain or too big."""
    check_plain(value, what)
    data = cbor2.dumps(value, canonical=True)
    if len(data) > limit:
        raise PluginError(f"{what} is {len(data)} bytes encoded, over the limit of {limit} bytes")
    return data


def decode_plain(data: bytes | mmap.mmap, what: str = "state", *, start: int = 0) -> Any:
    """Decode CBOR written by `encode_plain`: no tags, no indefinite lengths, plain types only.

    `start`: where the value begins in `data` (what follows it is ignored). The decoder reads
    a `bytes` object or a mapped file in place, so a long byte string inside is copied once,
    into its value; a bytearray or memoryview would be copied whole first.
    """
    stream = _MappedReader(data) if isinstance(data, mmap.mmap) else io.BytesIO(data)
    stream.seek(start)
    try:
        value = cbor2.CBORDecoder(
            stream,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            max_depth=MAX_DEPTH,
            semantic_decoders=_REFUSED_TAGS,
            tag_hook=_refuse_tag,
        ).decode()
    except (cbor2.CBORDecodeError, ValueError, RecursionError) as exc:
        raise PluginError(f"{what} is not valid plain CBOR: {exc}") from exc
    check_plain(value, what)
    return value


LIST_CHUNK = 1_000
"""Items per piece of a list a plugin's worker and the node pass whole (`encode_pieces`)."""


def encode_pieces(items: list, what: str, limit: int) -> list[bytes]:
    """`items` as plain CBOR pieces of LIST_CHUNK items each, to be encoded whole in a map. A 100,000-unit split
    decoded in one call held the interpreter 0.5 s, and with it the node's event loop, from a worker thread:
    the pieces are decoded one call each (`decode_pieces`), and its other threads run in between."""
    return [encode_plain(items[start:start + LIST_CHUNK], what, limit) for start in range(0, len(items), LIST_CHUNK)]


def decode_pieces(pieces: object, what: str, make: Callable[[Any], Any] = lambda item: item) -> list:
    """The list `encode_pieces` cut into `pieces`, each item passed through `make` as its piece is decoded (so a
    piece's plain maps are gone before the next is decoded: a 100,000-unit split held them all beside the
    units made of them, 43 MB more at its peak); PluginError if they are not its pieces."""
    if not isinstance(pieces, list) or not all(isinstance(piece, bytes) for piece in pieces):
        raise PluginError(f"{what} is not a list of encoded pieces")
    items: list = []
    for piece in pieces:
        part = decode_plain(piece, what)
        if not isinstance(part, list):
            raise PluginError(f"{what} has a piece that is not a list")
        items += map(make, part)
    return items


class _MappedReader:
    """A mapped file as the readable stream the decoder asks for (an mmap reads and seeks, but says neither)."""

    def __init__(self, mapping: mmap.mmap) -> None:
        self.read = mapping.read
        self.seek = mapping.seek
        self.tell = mapping.tell

    @staticmethod
    def readable() -> bool:
        return True

    @staticmethod
    def seekable() -> bool:
        return True


def _refuse_tag(*_args: object) -> None:
    raise ValueError("CBOR tags are not allowed in plugin data")


_REFUSED_TAGS = {tag: _refuse_tag for tag in (*range(1024), 55799)}  # every tag cbor2 knows

"""Strict CBOR: a canonical encoder and a decoder that refuses everything a hostile peer could abuse.

We decode with our own small decoder rather than cbor2 because the dangerous parts of CBOR
(semantic tags, shared references, indefinite lengths, huge declared lengths) are easier to
refuse than to disarm: every declared length is checked against the bytes actually present
before anything is allocated, so a five-byte header claiming 2**32 items costs nothing.
"""

import math
import struct
from typing import Any

from frost_core.api.errors import ProtocolError

DEFAULT_MAX_DEPTH = 16
"""Nesting cap: messages are shallow; a deep pile of arrays is only ever an attack on recursion."""

_MAX_UINT = 2**64 - 1
_MIN_NINT = -(2**64)

_pack_be16 = struct.Struct(">H").pack
_pack_be32 = struct.Struct(">I").pack
_pack_be64 = struct.Struct(">Q").pack
_pack_f16 = struct.Struct(">e").pack
_pack_f32 = struct.Struct(">f").pack
_pack_f64 = struct.Struct(">d").pack
_unpack_f16 = struct.Struct(">e").unpack_from
_unpack_f32 = struct.Struct(">f").unpack_from
_unpack_f64 = struct.Struct(">d").unpack_from


# ---------------------------------------------------------------------------------------------
# Encoding


def encode(obj: object) -> bytes:
    """Encode plain data (None, bool, int, float, str, bytes, list/tuple, dict) deterministically.

    Deterministic: shortest integer and length forms, the shortest float that keeps the value,
    map keys sorted by `canonical_key_order` (shorter encoded key first, then bytewise: RFC 7049
    §3.9's canonical order, which cbor2's `canonical=True` also writes). The same value always
    gives the same bytes, whichever encoder made them, so content hashes are stable.
    """
    out = bytearray()
    _encode_into(out, obj, 0)
    return bytes(out)


class Encoded(bytes):
    """One item's CBOR, encoded already: `encode` splices it as it is (each of a status's events, say, encoded
    once rather than at every call that carries it again)."""


def canonical_key_order(encoded_key: bytes) -> tuple[int, bytes]:
    """Sort key of a map key's encoding: length first, then bytewise (RFC 7049 §3.9).

    The one order of every CBOR map frost hashes (messages, plugin archives, checkpoint headers
    and states, results). It differs from RFC 8949's plain bytewise order only on maps that mix
    key types (1000 and "a"); cbor2, which encodes big states fast, writes only this one.
    """
    return len(encoded_key), encoded_key


def encode_into(out: bytearray, obj: object) -> None:
    """Append the encoding of `obj` to `out` (for encoders that assemble a message piecewise)."""
    cls = type(obj)
    if cls is str:  # the common message fields are encoded here without a further call
        raw = obj.encode()  # type: ignore[attr-defined]
        size = len(raw)
        if size < 24:
            out.append(0x60 | size)
        else:
            out += _head(3, size)
        out += raw
    elif cls is bytes:
        size = len(obj)  # type: ignore[arg-type]
        if size < 24:
            out.append(0x40 | size)
        else:
            out += _head(2, size)
        out += obj  # type: ignore[operator]
    elif cls is int and 0 <= obj < 24:  # type: ignore[operator]
        out.append(obj)  # type: ignore[arg-type]
    else:
        _encode_into(out, obj, 1)


def encode_head(major: int, value: int) -> bytes:
    """The initial bytes of an item: major type plus its argument in the shortest form."""
    return _head(major, value)


def _head(major: int, value: int) -> bytes:
    mt = major << 5
    if value < 24:
        return bytes((mt | value,))
    if value < 0x100:
        return bytes((mt | 24, value))
    if value < 0x10000:
        return bytes((mt | 25,)) + _pack_be16(value)
    if value < 0x100000000:
        return bytes((mt | 26,)) + _pack_be32(value)
    return bytes((mt | 27,)) + _pack_be64(value)


def _encode_float(value: float) -> bytes:
    if math.isnan(value):
        return b"\xf9\x7e\x00"
    try:
        half = _pack_f16(value)
        if _unpack_f16(half)[0] == value:
            return b"\xf9" + half
    except OverflowError:
        pass
    try:
        single = _pack_f32(value)
        if _unpack_f32(single)[0] == value:
            return b"\xfa" + single
    except OverflowError:
        pass
    return b"\xfb" + _pack_f64(value)


def _encode_into(out: bytearray, obj: object, depth: int) -> None:
    if depth > DEFAULT_MAX_DEPTH:
        raise ProtocolError(f"cannot encode: nesting deeper than {DEFAULT_MAX_DEPTH}")
    cls = type(obj)
    if cls is str:
        raw = obj.encode()  # type: ignore[attr-defined]
        size = len(raw)
        if size < 24:
            out.append(0x60 | size)
        else:
            out += _head(3, size)
        out += raw
    elif cls is int:
        if obj >= 0:  # type: ignore[operator]
            if obj < 24:  # type: ignore[operator]
                out.append(obj)  # type: ignore[arg-type]
            elif obj > _MAX_UINT:  # type: ignore[operator]
                raise ProtocolError(f"cannot encode integer {obj}: outside the 64-bit range")
            else:
                out += _head(0, obj)  # type: ignore[arg-type]
        else:
            if obj < _MIN_NINT:  # type: ignore[operator]
                raise ProtocolError(f"cannot encode integer {obj}: outside the 64-bit range")
            out += _head(1, -1 - obj)  # type: ignore[operator]
    elif cls is bytes or cls is bytearray or cls is memoryview:
        size = len(obj)  # type: ignore[arg-type]
        if size < 24:
            out.append(0x40 | size)
        else:
            out += _head(2, size)
        out += obj  # type: ignore[operator]
    elif obj is None:
        out.append(0xF6)
    elif cls is bool:
        out.append(0xF5 if obj else 0xF4)
    elif cls is float:
        out += _encode_float(obj)  # type: ignore[arg-type]
    elif cls is Encoded:
        out += obj  # type: ignore[operator]
    elif cls is list or cls is tuple:
        out += _head(4, len(obj))  # type: ignore[arg-type]
        for item in obj:  # type: ignore[attr-defined]
            _encode_into(out, item, depth + 1)
    elif cls is dict:
        pairs = []
        for key, value in obj.items():  # type: ignore[attr-defined]
            if type(key) is not str and type(key) is not int:
                raise ProtocolError(f"cannot encode map key {key!r}: keys must be str or int")
            encoded_key = bytearray()
            _encode_into(encoded_key, key, depth + 1)
            pairs.append((bytes(encoded_key), value))
        pairs.sort(key=lambda pair: canonical_key_order(pair[0]))
        out += _head(5, len(pairs))
        for encoded_key, value in pairs:
            out += encoded_key
            _encode_into(out, value, depth + 1)
    else:
        raise ProtocolError(f"cannot encode a {cls.__name__}: only plain data goes on the wire")


# ---------------------------------------------------------------------------------------------
# Decoding


def decode_strict(data: bytes | bytearray | memoryview, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Decode exactly one CBOR item from `data`, or raise ProtocolError naming the broken rule.

    Refused: any tag, indefinite lengths, undefined and other simple values, duplicate or
    non-(str|int) map keys, invalid UTF-8, nesting deeper than `max_depth`, truncated input and
    trailing bytes. Arrays come back as lists, maps as dicts.
    """
    raw = data if type(data) is bytes else bytes(data)
    try:
        if raw and 0xA0 <= raw[0] < 0xB8 and max_depth > 0:  # a message body: a small map
            value, pos = _map(raw, 1, raw[0] - 0xA0, max_depth - 1)
        else:
            value, pos = _item(raw, 0, max_depth)
    except _TooDeep:
        raise ProtocolError(f"nesting deeper than {max_depth} levels") from None
    if pos != len(raw):
        raise ProtocolError(f"trailing bytes: {len(raw) - pos} after the CBOR item")
    return value


class _TooDeep(Exception):
    """Raised deep in the recursion; decode_strict turns it into a ProtocolError naming the cap."""


def _truncated(what: str, count: int, remaining: int) -> ProtocolError:
    return ProtocolError(f"truncated: {what} needs {count} bytes but only {remaining} remain")


_WHAT = ("integer", "integer", "byte string", "text string", "array", "map", "tag", "simple value")


_UNPACK_ARGUMENT = {
    25: struct.Struct(">H").unpack_from,
    26: struct.Struct(">I").unpack_from,
    27: struct.Struct(">Q").unpack_from,
}


def _argument(data: bytes, pos: int, info: int, major: int) -> tuple[int, int]:
    """The argument of an item whose initial byte had `info` >= 24, and the position after it."""
    if info > 27:
        if info == 31:
            raise ProtocolError(f"indefinite length {_WHAT[major]} is not allowed")
        raise ProtocolError(f"reserved additional information {info} in {_WHAT[major]}")
    size = 1 << (info - 24)
    if pos + size > len(data):
        raise _truncated(_WHAT[major], size, len(data) - pos)
    if info == 24:
        return data[pos], pos + 1
    return _UNPACK_ARGUMENT[info](data, pos)[0], pos + size


def _text(data: bytes, pos: int, stop: int) -> str:
    try:
        return data[pos:stop].decode()
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"text string is not valid UTF-8: {exc.reason}") from None


def _item(data: bytes, pos: int, depth_left: int) -> tuple[Any, int]:
    """Decode the item at `pos`; return it and the position after it. `pos` only moves forward."""
    end = len(data)
    if pos >= end:
        raise ProtocolError("truncated: expected a CBOR item, found the end of the data")
    initial = data[pos]
    pos += 1
    if initial < 0x18:
        return initial, pos
    major, info = initial >> 5, initial & 0x1F
    if major == 7:
        return _simple(data, pos, info)
    if major == 6:
        raise ProtocolError("CBOR tags are not allowed (semantic tag found)")
    if info < 24:
        argument = info
    else:
        argument, pos = _argument(data, pos, info, major)
    if major == 3 or major == 2:
        stop = pos + argument
        if stop > end:
            raise _truncated(_WHAT[major], argument, end - pos)
        if major == 2:
            return data[pos:stop], stop
        return _text(data, pos, stop), stop
    if major == 0:
        return argument, pos
    if major == 1:
        return -1 - argument, pos
    if depth_left <= 0:
        raise _TooDeep
    if major == 4:
        return _array(data, pos, argument, depth_left - 1)
    return _map(data, pos, argument, depth_left - 1)


def _array(data: bytes, pos: int, count: int, depth_left: int) -> tuple[list, int]:
    if count > len(data) - pos:  # every item takes at least one byte
        raise _truncated("array", count, len(data) - pos)
    items = []
    append = items.append
    for _ in range(count):
        value, pos = _item(data, pos, depth_left)
        append(value)
    return items, pos


def _map(data: bytes, pos: int, count: int, depth_left: int) -> tuple[dict, int]:
    """A map, with its common pieces decoded inline (the hot loop of every message body).

    Keys that are short text strings, and values that are small integers or strings and byte
    strings of up to 255 bytes, are settled here without a call to `_item`; everything else
    goes through `_item`, which applies the same rules.
    """
    end = len(data)
    if 2 * count > end - pos:  # every key and value takes at least one byte
        raise _truncated("map", 2 * count, end - pos)
    result: dict = {}
    try:
        for _ in range(count):
            if pos >= end:
                raise ProtocolError("truncated: expected a CBOR item, found the end of the data")
            initial = data[pos]
            if 0x60 <= initial < 0x78:  # a text key shorter than 24 bytes
                stop = pos + initial - 0x5F
                if stop > end:
                    raise _truncated("text string", initial - 0x60, end - pos - 1)
                key: Any = data[pos + 1 : stop].decode()
                pos = stop
            else:
                key_at = pos
                key, pos = _item(data, pos, depth_left)
                if type(key) is not str and type(key) is not int:
                    raise ProtocolError(f"map key at byte {key_at} is a {type(key).__name__}; only str or int")
            if key in result:
                raise ProtocolError(f"duplicate map key {key!r}")
            if pos < end:
                initial = data[pos]
                if initial < 0x18:
                    result[key] = initial
                    pos += 1
                    continue
                major = initial >> 5
                if (major == 2 or major == 3) and (initial & 0x1F) <= 24:
                    if initial & 0x1F == 24:
                        if pos + 2 > end:
                            raise _truncated(_WHAT[major], 1, end - pos - 1)
                        start = pos + 2
                        stop = start + data[pos + 1]
                    else:
                        start = pos + 1
                        stop = start + (initial & 0x1F)
                    if stop > end:
                        raise _truncated(_WHAT[major], stop - start, end - start)
                    result[key] = data[start:stop] if major == 2 else data[start:stop].decode()
                    pos = stop
                    continue
            result[key], pos = _item(data, pos, depth_left)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"text string is not valid UTF-8: {exc.reason}") from None
    return result, pos


_FLOATS = {25: (2, _unpack_f16, "half float"), 26: (4, _unpack_f32, "single float"), 27: (8, _unpack_f64, "double float")}


def _simple(data: bytes, pos: int, info: int) -> tuple[Any, int]:
    if info == 20:
        return False, pos
    if info == 21:
        return True, pos
    if info == 22:
        return None, pos
    if info in _FLOATS:
        size, unpack, what = _FLOATS[info]
        if pos + size > len(data):
            raise _truncated(what, size, len(data) - pos)
        return unpack(data, pos)[0], pos + size
    if info == 31:
        raise ProtocolError("unexpected break code (indefinite lengths are not allowed)")
    if info == 23:
        raise ProtocolError("the undefined value is not allowed")
    raise ProtocolError(f"simple value {info} is not allowed")

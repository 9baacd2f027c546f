"""Strict CBOR: a canonical encoder and a decoder that refuses everything a hostile peer could abuse.

We decode with our own small decoder rather than cbor2 because the dangerous parts of CBOR
(semantic tags, shared references, indefinite lengths, huge declared lengths) are easier to
refuse than to disarm: every declared length is checked against the bytes actually present
before anything is allocated, so a five-byte header claiming 2**32 items costs nothing.
"""

import math
import struct
from typing import Any

from frost_core.errors import ProtocolError

DEFAULT_MAX_DEPTH = 16
"""Nesting cap: messages are shallow; a deep pile of arrays is only ever an attack on recursion."""

_MAX_UINT = 2**64 - 1
_MIN_NINT = -(2**64)

_pack_be16 = struct.Struct(">H").pack
_pack_be32 = struct.Struct(">I").pack
_pack_be64 = struct.Struct(">Q").pack
_unpack_be16 = struct.Struct(">H").unpack_from
_unpack_be32 = struct.Struct(">I").unpack_from
_unpack_be64 = struct.Struct(">Q").unpack_from
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

    Deterministic (RFC 8949 §4.2.1): shortest integer and length forms, the shortest float that
    keeps the value, map keys sorted by their encoded bytes. The same value always gives the same
    bytes, so content hashes of encoded state are stable across machines.
    """
    out = bytearray()
    _encode_into(out, obj, 0)
    return bytes(out)


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
        out += _head(3, len(raw))
        out += raw
    elif cls is int:
        if obj >= 0:  # type: ignore[operator]
            if obj > _MAX_UINT:  # type: ignore[operator]
                raise ProtocolError(f"cannot encode integer {obj}: outside the 64-bit range")
            out += _head(0, obj)  # type: ignore[arg-type]
        else:
            if obj < _MIN_NINT:  # type: ignore[operator]
                raise ProtocolError(f"cannot encode integer {obj}: outside the 64-bit range")
            out += _head(1, -1 - obj)  # type: ignore[operator]
    elif cls is bytes or cls is bytearray or cls is memoryview:
        out += _head(2, len(obj))  # type: ignore[arg-type]
        out += obj  # type: ignore[operator]
    elif obj is None:
        out.append(0xF6)
    elif cls is bool:
        out.append(0xF5 if obj else 0xF4)
    elif cls is float:
        out += _encode_float(obj)  # type: ignore[arg-type]
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
        pairs.sort(key=lambda pair: pair[0])
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
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    decoder = _Decoder(view, max_depth)
    value = decoder.item(0)
    if decoder.pos != len(view):
        raise ProtocolError(f"trailing bytes: {len(view) - decoder.pos} after the CBOR item")
    return value


class _Decoder:
    """One pass over the bytes; `pos` only moves forward, so decoding is linear in the input."""

    __slots__ = ("data", "pos", "end", "max_depth")

    def __init__(self, data: bytes | memoryview, max_depth: int) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)
        self.max_depth = max_depth

    def _need(self, count: int, what: str) -> None:
        if count > self.end - self.pos:
            raise ProtocolError(
                f"truncated: {what} needs {count} bytes but only {self.end - self.pos} remain"
            )

    def _argument(self, info: int, what: str) -> int:
        if info < 24:
            return info
        data, pos = self.data, self.pos
        if info == 24:
            self._need(1, what)
            self.pos = pos + 1
            return data[pos]
        if info == 25:
            self._need(2, what)
            self.pos = pos + 2
            return _unpack_be16(data, pos)[0]
        if info == 26:
            self._need(4, what)
            self.pos = pos + 4
            return _unpack_be32(data, pos)[0]
        if info == 27:
            self._need(8, what)
            self.pos = pos + 8
            return _unpack_be64(data, pos)[0]
        if info == 31:
            raise ProtocolError(f"indefinite length {what} is not allowed")
        raise ProtocolError(f"reserved additional information {info} in {what}")

    def item(self, depth: int) -> Any:
        if self.pos >= self.end:
            raise ProtocolError("truncated: expected a CBOR item, found the end of the data")
        initial = self.data[self.pos]
        self.pos += 1
        major, info = initial >> 5, initial & 0x1F
        if major == 0:
            return self._argument(info, "integer")
        if major == 1:
            return -1 - self._argument(info, "integer")
        if major == 2:
            length = self._argument(info, "byte string")
            self._need(length, "byte string")
            start = self.pos
            self.pos = start + length
            return bytes(self.data[start : self.pos])
        if major == 3:
            length = self._argument(info, "text string")
            self._need(length, "text string")
            start = self.pos
            self.pos = start + length
            try:
                return str(self.data[start : self.pos], "utf-8")
            except UnicodeDecodeError as exc:
                raise ProtocolError(f"text string is not valid UTF-8: {exc.reason}") from None
        if major == 4:
            length = self._argument(info, "array")
            if depth >= self.max_depth:
                raise ProtocolError(f"nesting deeper than {self.max_depth} levels")
            self._need(length, "array")  # every item takes at least one byte
            return [self.item(depth + 1) for _ in range(length)]
        if major == 5:
            return self._map(info, depth)
        if major == 6:
            raise ProtocolError("CBOR tags are not allowed (semantic tag found)")
        return self._simple(info)

    def _map(self, info: int, depth: int) -> dict:
        length = self._argument(info, "map")
        if depth >= self.max_depth:
            raise ProtocolError(f"nesting deeper than {self.max_depth} levels")
        self._need(2 * length, "map")  # every key and value takes at least one byte
        result: dict = {}
        for _ in range(length):
            key_at = self.pos
            key = self.item(depth + 1)
            if type(key) is not str and type(key) is not int:
                raise ProtocolError(f"map key at byte {key_at} is a {type(key).__name__}; only str or int")
            if key in result:
                raise ProtocolError(f"duplicate map key {key!r}")
            result[key] = self.item(depth + 1)
        return result

    def _simple(self, info: int) -> Any:
        if info == 20:
            return False
        if info == 21:
            return True
        if info == 22:
            return None
        data, pos = self.data, self.pos
        if info == 25:
            self._need(2, "half float")
            self.pos = pos + 2
            return _unpack_f16(data, pos)[0]
        if info == 26:
            self._need(4, "single float")
            self.pos = pos + 4
            return _unpack_f32(data, pos)[0]
        if info == 27:
            self._need(8, "double float")
            self.pos = pos + 8
            return _unpack_f64(data, pos)[0]
        if info == 31:
            raise ProtocolError("unexpected break code (indefinite lengths are not allowed)")
        if info == 23:
            raise ProtocolError("the undefined value is not allowed")
        raise ProtocolError(f"simple value {info} is not allowed")

"""Messages as frozen dataclasses, registered by code, validated on decode from their type hints.

A message body is a CBOR map from field name to value. Decoding checks every field against the
dataclass's type hints, so a subsystem declares a message as one dataclass and never writes a
parser. Unknown fields are ignored and missing fields take their defaults, which lets a newer
peer append an optional field without breaking an older one.
"""

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from frost_core.errors import ProtocolError
from frost_core.wire.codec import decode_strict, encode, encode_head, encode_into
from frost_core.wire.codes import PROTOCOL_VERSION, MessageCode

MAX_MESSAGE_SIZE = 1024 * 1024
"""Largest body any message type may declare: bigger data travels as bulk chunks instead."""

DEFAULT_MAX_SIZE = 16 * 1024


class Message:
    """Base of every wire message; subclasses are `@register`ed frozen dataclasses."""

    CODE: ClassVar[MessageCode]
    MAX_SIZE: ClassVar[int] = DEFAULT_MAX_SIZE
    """Cap on the encoded body in bytes, checked from the frame header before the body is read."""


M = TypeVar("M", bound=type[Message])

_Convert = Callable[[Any], Any]
"""Turns a decoded CBOR value into the field's Python value, or raises ProtocolError."""


@dataclasses.dataclass(frozen=True)
class _Schema:
    cls: type
    fields: tuple[tuple[str, _Convert, bool], ...]  # name, converter, required
    to_plain: Callable[[Any], Any]
    encode: Callable[[Any], bytes]


_REGISTRY: dict[int, type[Message]] = {}
_SCHEMAS: dict[type, _Schema] = {}


def register(cls: M) -> M:
    """Register a message class under its `CODE`; a code can only ever mean one message."""
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} must be a frozen dataclass")
    code = getattr(cls, "CODE", None)
    if not isinstance(code, MessageCode):
        raise TypeError(f"{cls.__name__}.CODE must be a MessageCode")
    if not 0 < cls.MAX_SIZE <= MAX_MESSAGE_SIZE:
        raise TypeError(f"{cls.__name__}.MAX_SIZE must be in 1..{MAX_MESSAGE_SIZE}")
    if code in _REGISTRY and _REGISTRY[code] is not cls:
        raise TypeError(f"code {code.name} is already taken by {_REGISTRY[code].__name__}")
    _schema_for(cls)
    _REGISTRY[code] = cls
    return cls


def message_class(code: int) -> type[Message] | None:
    """The class registered for `code`, or None if no message has that code."""
    return _REGISTRY.get(code)


def max_body_size(code: int) -> int | None:
    """The body cap for `code`, or None for an unknown code (the frame reader refuses those)."""
    cls = _REGISTRY.get(code)
    return None if cls is None else cls.MAX_SIZE


def encode_message(message: Message) -> bytes:
    """Encode the body of `message`; raises ProtocolError if it exceeds its type's MAX_SIZE."""
    cls = type(message)
    if _REGISTRY.get(cls.CODE) is not cls:
        raise ProtocolError(f"{cls.__name__} is not a registered message")
    body = _SCHEMAS[cls].encode(message)
    if len(body) > cls.MAX_SIZE:
        raise ProtocolError(f"{cls.__name__} body is {len(body)} bytes, over its cap of {cls.MAX_SIZE}")
    return body


def decode_message(code: int, body: bytes | bytearray | memoryview) -> Message:
    """Decode and validate a body; every failure is a ProtocolError naming the message and field."""
    cls = _REGISTRY.get(code)
    if cls is None:
        raise ProtocolError(f"unknown message code {code}")
    if len(body) > cls.MAX_SIZE:
        raise ProtocolError(f"{cls.__name__} body is {len(body)} bytes, over its cap of {cls.MAX_SIZE}")
    try:
        return _build(_SCHEMAS[cls], decode_strict(body))
    except ProtocolError as exc:
        raise ProtocolError(f"bad {cls.__name__}: {exc.message}") from None


# ---------------------------------------------------------------------------------------------
# Schemas from type hints


def _build(schema: _Schema, value: Any) -> Any:
    if type(value) is not dict:
        raise ProtocolError(f"expected a map for {schema.cls.__name__}, got {_kind(value)}")
    kwargs = {}
    for name, convert, required in schema.fields:
        if name in value:
            try:
                kwargs[name] = convert(value[name])
            except ProtocolError as exc:
                raise ProtocolError(f"field {name!r}: {exc.message}") from None
        elif required:
            raise ProtocolError(f"missing field {name!r}")
    try:
        return schema.cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{schema.cls.__name__} rejected its fields: {exc}") from None


def _schema_for(cls: type) -> _Schema:
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} must be a frozen dataclass to go on the wire")
    hints = typing.get_type_hints(cls)
    fields = []
    plain = []
    for field in dataclasses.fields(cls):
        convert, to_plain = _converters(hints[field.name], f"{cls.__name__}.{field.name}")
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        fields.append((field.name, convert, required))
        plain.append((field.name, to_plain))

    def dataclass_to_plain(obj: Any) -> dict:
        return {name: to_plain(getattr(obj, name)) for name, to_plain in plain}

    # Field names never change, so their encoded form and canonical order are worked out once.
    encoded = sorted((encode(name), name, to_plain) for name, to_plain in plain)
    map_head = encode_head(5, len(encoded))

    def encode_dataclass(obj: Any) -> bytes:
        out = bytearray(map_head)
        for key, name, to_plain in encoded:
            out += key
            encode_into(out, to_plain(getattr(obj, name)))
        return bytes(out)

    schema = _Schema(cls, tuple(fields), dataclass_to_plain, encode_dataclass)
    _SCHEMAS[cls] = schema
    return schema


def _kind(value: Any) -> str:
    return {dict: "a map", list: "an array", bytes: "bytes", str: "a string"}.get(
        type(value), type(value).__name__
    )


def _identity(value: Any) -> Any:
    return value


def _converters(hint: Any, where: str) -> tuple[_Convert, _Convert]:
    """Build (decode-converter, encode-to-plain) for one type hint, once, at registration."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return _identity, _identity
    if hint is type(None):
        return _exact(type(None), "null"), _identity
    if hint in (bool, str, bytes):
        return _exact(hint, hint.__name__), _identity
    if hint is int:
        return _exact(int, "int"), _identity
    if hint is float:
        return _to_float, _identity
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _to_enum(hint), _enum_value
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(hint), hint, where)
    if origin is tuple:
        return _tuple(typing.get_args(hint), where)
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        if key_hint not in (str, int):
            raise TypeError(f"{where}: map keys must be str or int, not {key_hint}")
        return _dict(_converters(key_hint, where), _converters(value_hint, where))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        schema = _schema_for(hint)
        return (lambda value: _build(schema, value)), schema.to_plain
    raise TypeError(f"{where}: type {hint!r} cannot go on the wire")


def _exact(expected: type, name: str) -> _Convert:
    def convert(value: Any) -> Any:
        if type(value) is not expected:
            raise ProtocolError(f"expected {name}, got {_kind(value)}")
        return value

    return convert


def _to_float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise ProtocolError(f"expected float, got {_kind(value)}")


def _to_enum(enum_cls: type[enum.Enum]) -> _Convert:
    def convert(value: Any) -> Any:
        try:
            return enum_cls(value)
        except ValueError:
            raise ProtocolError(f"{value!r} is not a valid {enum_cls.__name__}") from None

    return convert


def _enum_value(value: enum.Enum) -> Any:
    return value.value


def _union(args: tuple, hint: Any, where: str) -> tuple[_Convert, _Convert]:
    options = [arg for arg in args if arg is not type(None)]
    if len(options) != 1:
        raise TypeError(f"{where}: only `X | None` unions can go on the wire, not {hint}")
    decode, plain = _converters(options[0], where)

    def convert(value: Any) -> Any:
        return None if value is None else decode(value)

    def to_plain(value: Any) -> Any:
        return None if value is None else plain(value)

    return convert, to_plain


def _tuple(args: tuple, where: str) -> tuple[_Convert, _Convert]:
    if len(args) == 2 and args[1] is Ellipsis:
        item_decode, item_plain = _converters(args[0], where)

        def convert_var(value: Any) -> tuple:
            if type(value) is not list:
                raise ProtocolError(f"expected an array, got {_kind(value)}")
            return tuple(item_decode(item) for item in value)

        if item_plain is _identity:
            return convert_var, list
        return convert_var, lambda value: [item_plain(item) for item in value]

    parts = [_converters(arg, where) for arg in args]

    def convert_fixed(value: Any) -> tuple:
        if type(value) is not list or len(value) != len(parts):
            raise ProtocolError(f"expected an array of {len(parts)}, got {_kind(value)}")
        return tuple(decode(item) for (decode, _), item in zip(parts, value))

    return convert_fixed, lambda value: [plain(item) for (_, plain), item in zip(parts, value)]


def _dict(key: tuple[_Convert, _Convert], val: tuple[_Convert, _Convert]) -> tuple[_Convert, _Convert]:
    key_decode, _ = key
    val_decode, val_plain = val

    def convert(value: Any) -> dict:
        if type(value) is not dict:
            raise ProtocolError(f"expected a map, got {_kind(value)}")
        return {key_decode(k): val_decode(v) for k, v in value.items()}

    return convert, lambda value: {k: val_plain(v) for k, v in value.items()}


# ---------------------------------------------------------------------------------------------
# The stream handshake and bulk transfer messages


@register
@dataclasses.dataclass(frozen=True)
class Hello(Message):
    """Opens a stream: who I am, my fresh nonce, and (on the network) a MAC proving the key."""

    CODE = MessageCode.HELLO
    MAX_SIZE = 1024
    protocol_version: int
    node_id: str
    nonce: bytes
    listen_port: int = 0
    proof: bytes = b""


@register
@dataclasses.dataclass(frozen=True)
class HelloAck(Message):
    """Answers HELLO: my identity, my nonce, and a MAC over the whole exchange proving the key."""

    CODE = MessageCode.HELLO_ACK
    MAX_SIZE = 1024
    protocol_version: int
    node_id: str
    nonce: bytes
    proof: bytes = b""


@register
@dataclasses.dataclass(frozen=True)
class BulkBegin(Message):
    """Raw BULK_CHUNK frames follow; `size` is the total if the sender knows it up front."""

    CODE = MessageCode.BULK_BEGIN
    MAX_SIZE = 64
    size: int | None = None


@register
@dataclasses.dataclass(frozen=True)
class BulkEnd(Message):
    """Closes a bulk transfer; `size` lets the receiver confirm that nothing went missing."""

    CODE = MessageCode.BULK_END
    MAX_SIZE = 64
    size: int


__all__ = [
    "MAX_MESSAGE_SIZE",
    "PROTOCOL_VERSION",
    "BulkBegin",
    "BulkEnd",
    "Hello",
    "HelloAck",
    "Message",
    "decode_message",
    "encode_message",
    "max_body_size",
    "message_class",
    "register",
]

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

from frost_core.api.errors import ProtocolError
from frost_core.wire.codec import canonical_key_order, decode_strict, encode, encode_head, encode_into
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


class _Schema:
    """A message type's checked fields, and the two functions generated for them at their first use.

    Every process imports some ninety message types and speaks a few of them (a guest its own, a CLI call
    one request), and generating both functions for all of them took a tenth of a node's imports. The
    fields are still checked at `register`: a hint that cannot go on the wire fails there, not in a call.
    """

    def __init__(self, cls: type, fields: list["_Field"], direct: bool) -> None:
        self.cls, self._fields, self._direct = cls, fields, direct
        plain = [(field.name, to_plain) for field, _, _, to_plain in fields]

        def dataclass_to_plain(obj: Any) -> dict:
            return {name: to_plain(getattr(obj, name)) for name, to_plain in plain}

        self.to_plain = dataclass_to_plain

    def build(self, value: Any) -> Any:
        """Decoded CBOR value -> validated instance, or ProtocolError naming the failing field."""
        self.build = _compile_builder(self.cls, self._fields, self._direct)  # type: ignore[method-assign]
        return self.build(value)

    def encode(self, obj: Any) -> bytes:
        self.encode = _compile_encoder(self._fields)  # type: ignore[method-assign]
        return self.encode(obj)


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
        return _SCHEMAS[cls].build(decode_strict(body))
    except ProtocolError as exc:
        raise ProtocolError(f"bad {cls.__name__}: {exc.message}") from None


def from_plain(hint: Any, value: Any) -> Any:
    """`value` (decoded CBOR) checked and converted to `hint`, as a message field of that type would be.

    For typed data that travels inside a message body, such as a control request or its reply.
    """
    return _plain_converters(hint)[0](value)


def to_plain(hint: Any, value: Any) -> Any:
    """`value` of type `hint` as plain data (maps, lists, strings, numbers) for CBOR or JSON."""
    return _plain_converters(hint)[1](value)


_PLAIN: dict[Any, tuple[_Convert, _Convert]] = {}


def _plain_converters(hint: Any) -> tuple[_Convert, _Convert]:
    if hint not in _PLAIN:
        _PLAIN[hint] = _converters(hint, repr(hint))
    return _PLAIN[hint]


# ---------------------------------------------------------------------------------------------
# Schemas from type hints


def _schema_for(cls: type) -> _Schema:
    if cls in _SCHEMAS:
        return _SCHEMAS[cls]
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} must be a frozen dataclass to go on the wire")
    hints = typing.get_type_hints(cls)
    fields: list[_Field] = []
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        fields.append((field, hint, *_converters(hint, f"{cls.__name__}.{field.name}")))
    schema = _Schema(cls, fields, _builds_without_init(cls, fields, hints))
    _SCHEMAS[cls] = schema
    return schema


# Every message is decoded and encoded on the hot path of every round trip, so each schema gets
# its own generated functions: the common field types are checked and encoded inline, and (when
# nothing else could run in __init__) the frozen instance is built without calling __init__.

_Field = tuple[dataclasses.Field, Any, _Convert, _Convert]
"""A field with its type hint, decode-converter and to-plain converter."""

_EXACT_NAMES = {bool: "bool", str: "str", bytes: "bytes", int: "int", type(None): "null"}


def _wrong(name: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(f"field {name!r}: expected {expected}, got {_kind(value)}")


def _in_field(name: str, exc: ProtocolError) -> ProtocolError:
    return ProtocolError(f"field {name!r}: {exc.message}")


def _check_lines(name: str, hint: Any, convert: _Convert, var: str, env: dict[str, Any]) -> list[str]:
    """Source lines that validate (and convert) `var` in place exactly as `convert` would."""
    optional = ""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        if inner in _EXACT_NAMES or inner is float:
            hint, optional = inner, f"{var} is not None and "
    if hint is Any:
        return []
    if hint in _EXACT_NAMES:
        env[f"_T_{var}"] = hint
        return [
            f"if {optional}type({var}) is not _T_{var}:",
            f"    raise _wrong({name!r}, {_EXACT_NAMES[hint]!r}, {var})",
        ]
    if hint is float:
        return [
            f"if {optional}type({var}) is not float:",
            f"    if type({var}) is not int:",
            f"        raise _wrong({name!r}, 'float', {var})",
            f"    {var} = float({var})",
        ]
    env[f"_convert_{var}"] = convert
    return [
        "try:",
        f"    {var} = _convert_{var}({var})",
        "except ProtocolError as exc:",
        f"    raise _in_field({name!r}, exc) from None",
    ]


def _builds_without_init(cls: type, fields: list[_Field], hints: dict[str, Any]) -> bool:
    """True when the dataclass-generated __init__ would only store the fields, so we can too."""
    init = getattr(cls.__init__, "__code__", None)
    return bool(
        cls.__dataclass_params__.init  # type: ignore[attr-defined]
        and init is not None
        and init.co_filename == "<string>"  # generated by dataclasses, not written by hand
        and not hasattr(cls, "__post_init__")
        and cls.__new__ is object.__new__
        and all(field.init for field, _, _, _ in fields)
        and not any(isinstance(hint, dataclasses.InitVar) for hint in hints.values())
        and all("__slots__" not in vars(base) for base in cls.__mro__[:-1])
    )


def _compile_builder(cls: type, fields: list[_Field], direct: bool) -> Callable[[Any], Any]:
    """Validate exactly as the converters would, field by field in declaration order."""
    env: dict[str, Any] = {
        "ProtocolError": ProtocolError,
        "_wrong": _wrong,
        "_in_field": _in_field,
        "_kind": _kind,
        "_cls": cls,
        "_new": object.__new__,
        "_set": object.__setattr__,
    }
    lines = [
        "def build(_value):",
        "    if type(_value) is not dict:",
        f"        raise ProtocolError(f'expected a map for {cls.__name__}, got {{_kind(_value)}}')",
    ]
    if not direct:
        lines.append("    _kwargs = {}")
    for index, (field, hint, convert, _) in enumerate(fields):
        name, var = field.name, f"_v{index}"
        check = _check_lines(name, hint, convert, var, env)
        if direct:
            # A missing optional field takes its default, exactly as __init__ would give it.
            if field.default is not dataclasses.MISSING:
                env[f"_default_{var}"] = field.default
                missing = f"{var} = _default_{var}"
            elif field.default_factory is not dataclasses.MISSING:
                env[f"_factory_{var}"] = field.default_factory
                missing = f"{var} = _factory_{var}()"
            else:
                missing = f"raise ProtocolError({f'missing field {name!r}'!r})"
            lines += ["    try:", f"        {var} = _value[{name!r}]"]
            lines += ["    except KeyError:", f"        {missing}"]
            if check:
                lines.append("    else:")
                lines += [f"        {line}" for line in check]
        else:
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            lines += [f"    if {name!r} in _value:", f"        {var} = _value[{name!r}]"]
            lines += [f"        {line}" for line in check]
            lines.append(f"        _kwargs[{name!r}] = {var}")
            if required:
                lines += ["    else:", f"        raise ProtocolError({f'missing field {name!r}'!r})"]
    if direct:
        # Frozen dataclasses store fields in the instance dict; one assignment replaces __init__.
        items = ", ".join(f"{field.name!r}: _v{index}" for index, (field, *_) in enumerate(fields))
        lines += ["    _obj = _new(_cls)", f"    _set(_obj, '__dict__', {{{items}}})", "    return _obj"]
    else:
        lines += [
            "    try:",
            "        return _cls(**_kwargs)",
            "    except (TypeError, ValueError) as exc:",
            f"        raise ProtocolError(f'{cls.__name__} rejected its fields: {{exc}}') from None",
        ]
    return _compile("build", lines, env)


def _compile_encoder(fields: list[_Field]) -> Callable[[Any], bytes]:
    """Field names never change, so their encoded keys and canonical order are fixed here."""
    env: dict[str, Any] = {"_encode_into": encode_into, "_head": encode_head}
    ordered = sorted(((encode(field.name), field.name, hint, to_plain) for field, hint, _, to_plain in fields),
                     key=lambda entry: canonical_key_order(entry[0]))
    start = encode_head(5, len(ordered)) + (ordered[0][0] if ordered else b"")
    lines = ["def encode_dataclass(_obj):", f"    _out = bytearray({start!r})"]
    for index, (key, name, hint, to_plain) in enumerate(ordered):
        var = f"_v{index}"
        if index:
            lines.append(f"    _out += {key!r}")
        if to_plain is not _identity:
            env[f"_plain_{var}"] = to_plain
            lines.append(f"    _encode_into(_out, _plain_{var}(_obj.{name}))")
        elif hint is str or hint is bytes:
            major, method = (3, ".encode()") if hint is str else (2, "")
            lines += [
                f"    {var} = _obj.{name}",
                f"    if type({var}) is {hint.__name__}:",
                f"        _raw = {var}{method}",
                "        if len(_raw) < 24:",
                f"            _out.append({major << 5} | len(_raw))",
                "        else:",
                f"            _out += _head({major}, len(_raw))",
                "        _out += _raw",
                "    else:",
                f"        _encode_into(_out, {var})",
            ]
        elif hint is int:
            lines += [
                f"    {var} = _obj.{name}",
                f"    if type({var}) is int and 0 <= {var} < 0x100000000:",
                f"        if {var} < 24:",
                f"            _out.append({var})",
                "        else:",
                f"            _out += _head(0, {var})",
                "    else:",
                f"        _encode_into(_out, {var})",
            ]
        else:
            lines.append(f"    _encode_into(_out, _obj.{name})")
    lines.append("    return bytes(_out)")
    return _compile("encode_dataclass", lines, env)


def _compile(name: str, lines: list[str], env: dict[str, Any]) -> Callable[..., Any]:
    exec("\n".join(lines), env)  # noqa: S102 - our own source, built from field names and constants
    return env[name]


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
        # Looked up at each call: the method generates the builder once, then the instance holds it.
        return (lambda value: schema.build(value)), schema.to_plain
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
class HelloRefused(Message):
    """Answers a HELLO whose proof failed, so the refused node can tell its owner why (it is not sealed:
    at worst a forger makes a node that would be refused anyway say so)."""

    CODE = MessageCode.HELLO_REFUSED
    MAX_SIZE = 256
    reason: str


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
    "HelloRefused",
    "Message",
    "decode_message",
    "encode_message",
    "from_plain",
    "max_body_size",
    "message_class",
    "register",
    "to_plain",
]

"""Messages: one dataclass each, validated on decode from its type hints; fuzzed handlers."""

import dataclasses
import enum
import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.cluster.messages import GANG_MESSAGES
from frost_core.guest.protocol import (
    GuestMemberCheckpoint,
    GuestMemberCheckpointRequest,
    GuestMemberFinish,
    GuestMemberReady,
    GuestMemberResult,
    GuestMemberStart,
    GuestSuperstep,
    GuestSuperstepAnswer,
)
from frost_core.wire import messages
from frost_core.wire.codec import encode
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import (
    BulkBegin,
    BulkEnd,
    Hello,
    HelloAck,
    Message,
    decode_message,
    encode_message,
    register,
)


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass(frozen=True)
class Point:
    x: float
    y: float


# A test-only message on a code nobody else uses; registering it is how a subsystem would.
TEST_CODE = MessageCode.CONTROL_REPLY


@dataclasses.dataclass(frozen=True)
class Sample(Message):
    CODE = TEST_CODE
    MAX_SIZE = 4096
    name: str
    count: int
    blob: bytes
    ratio: float
    flag: bool
    points: tuple[Point, ...]
    pair: tuple[int, str]
    scores: dict[str, int]
    colour: Colour
    note: str | None = None
    extra: tuple[str, ...] = ()


@pytest.fixture(scope="module", autouse=True)
def sample_registered():
    # Borrow the code: import its real owner first so it is registered before we swap it out,
    # and put it back afterwards.
    importlib.import_module("frost_core.node.control")
    previous = messages._REGISTRY.pop(TEST_CODE, None)
    register(Sample)
    yield
    if previous is None:
        del messages._REGISTRY[TEST_CODE]
    else:
        messages._REGISTRY[TEST_CODE] = previous


SAMPLE = Sample("n", 3, b"\x00", 0.5, True, (Point(1.0, 2.5),), (7, "x"), {"a": 1}, Colour.BLUE)


def test_round_trip_every_field_kind() -> None:
    assert decode_message(TEST_CODE, encode_message(SAMPLE)) == SAMPLE
    with_note = dataclasses.replace(SAMPLE, note="hi", extra=("a", "b"))
    assert decode_message(TEST_CODE, encode_message(with_note)) == with_note


def _body(**changes) -> bytes:
    plain = messages._SCHEMAS[Sample].to_plain(SAMPLE)
    plain.update(changes)
    return encode({k: v for k, v in plain.items() if v is not ...})


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"count": "3"}, "field 'count': expected int"),
        ({"count": True}, "field 'count': expected int"),
        ({"flag": 1}, "field 'flag': expected bool"),
        ({"name": b"n"}, "field 'name': expected str"),
        ({"blob": "x"}, "field 'blob': expected bytes"),
        ({"ratio": "x"}, "field 'ratio': expected float"),
        ({"points": [{"x": 1.0}]}, "missing field 'y'"),
        ({"points": {"x": 1.0}}, "expected an array"),
        ({"pair": [1]}, "array of 2"),
        ({"scores": {"a": "b"}}, "expected int"),
        ({"colour": 9}, "not a valid Colour"),
        ({"note": 5}, "field 'note'"),
        ({"name": ...}, "missing field 'name'"),
    ],
)
def test_bad_fields_are_named(changes: dict, reason: str) -> None:
    with pytest.raises(ProtocolError, match="bad Sample: .*" + reason):
        decode_message(TEST_CODE, _body(**changes))


def test_int_is_accepted_for_float_and_unknown_fields_are_ignored() -> None:
    decoded = decode_message(TEST_CODE, _body(ratio=2, newer_field=1))
    assert decoded == dataclasses.replace(SAMPLE, ratio=2.0)


def test_unknown_code_and_oversize_body_are_refused() -> None:
    with pytest.raises(ProtocolError, match="unknown message code 65000"):
        decode_message(65000, b"\xa0")
    with pytest.raises(ProtocolError, match="over its cap"):
        decode_message(TEST_CODE, b"\x00" * 5000)
    with pytest.raises(ProtocolError, match="over its cap"):
        encode_message(dataclasses.replace(SAMPLE, blob=b"x" * 5000))
    with pytest.raises(ProtocolError, match="expected a map"):
        decode_message(TEST_CODE, encode([1, 2]))


def test_register_refuses_bad_declarations() -> None:
    @dataclasses.dataclass
    class NotFrozen(Message):
        CODE = MessageCode.GUEST_LOG

    with pytest.raises(TypeError, match="frozen"):
        register(NotFrozen)

    @dataclasses.dataclass(frozen=True)
    class Taken(Message):
        CODE = MessageCode.HELLO

    with pytest.raises(TypeError, match="already taken"):
        register(Taken)

    @dataclasses.dataclass(frozen=True)
    class BadType(Message):
        CODE = MessageCode.BULK_CHUNK  # raw chunks are never a message, so the code is free here
        when: set[int]

    with pytest.raises(TypeError, match="cannot go on the wire"):
        register(BadType)


GANG_MEMBER_CODES = [GuestMemberStart, GuestSuperstep, GuestSuperstepAnswer, GuestMemberCheckpointRequest,
                     GuestMemberCheckpoint, GuestMemberFinish, GuestMemberResult, GuestMemberReady]
HANDSHAKE_CODES = [Hello, HelloAck, BulkBegin, BulkEnd, Sample, *GANG_MEMBER_CODES, *GANG_MESSAGES]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(HANDSHAKE_CODES), st.binary(max_size=200))
def test_fuzz_every_message_decoder_with_bytes(cls: type[Message], body: bytes) -> None:
    try:
        decode_message(cls.CODE, body)
    except ProtocolError:
        pass


PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.floats() | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=6),
    max_leaves=15,
)
FIELD_NAMES = st.sampled_from(
    ["protocol_version", "node_id", "nonce", "listen_port", "proof", "size", "name", "count", "points",
     "pair", "scores", "colour", "note", "x", "y",
     # a gang member's guest pipe
     "task_id", "plugin_path", "params", "rank", "superstep", "max_state_bytes", "scratch", "address_space",
     "readable", "encode_seconds",
     # a gang's coordinator and hosts
     "spec", "gang_id", "epoch", "with_checkpoint", "expect", "check", "forward_to", "sent_to",
     "move", "done", "sender", "dest", "reply_to", "routed", "key", "at", "mail", "gang_hosts", "margin"]
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(HANDSHAKE_CODES), st.dictionaries(FIELD_NAMES, PLAIN, max_size=12))
def test_fuzz_well_formed_maps_with_wrong_contents(cls: type[Message], fields: dict) -> None:
    try:
        decoded = decode_message(cls.CODE, encode(fields))
    except ProtocolError:
        return
    assert type(decoded) is cls
    assert decode_message(cls.CODE, encode_message(decoded)) == decoded

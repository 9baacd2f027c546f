"""Strict CBOR: every refusal rule on a hand-built byte string, round trips, and fuzzing."""

import math
import tracemalloc

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.wire.codec import decode_strict, encode

# (bytes, words the error must contain)
REFUSED = [
    (bytes.fromhex("c11a5f000000"), "tag"),  # tag 1 (epoch time)
    (bytes.fromhex("d81c80"), "tag"),  # tag 28: shared reference marker
    (bytes.fromhex("d81d00"), "tag"),  # tag 29: shared reference
    (bytes.fromhex("c249010000000000000000"), "tag"),  # bignum
    (bytes.fromhex("9f01ff"), "indefinite"),  # indefinite array
    (bytes.fromhex("bf6161 01ff".replace(" ", "")), "indefinite"),  # indefinite map
    (bytes.fromhex("5f4101ff"), "indefinite"),  # indefinite byte string
    (bytes.fromhex("7f6161ff"), "indefinite"),  # indefinite text string
    (bytes.fromhex("ff"), "break"),
    (bytes.fromhex("a2616101616102"), "duplicate"),  # {"a": 1, "a": 2}
    (bytes.fromhex("a2010101 02".replace(" ", "")), "duplicate"),  # {1: 1, 1: 2}
    (bytes.fromhex("a14161 01".replace(" ", "")), "key"),  # bytes key
    (bytes.fromhex("a18001"), "key"),  # array key
    (bytes.fromhex("a1f501"), "key"),  # bool key
    (bytes.fromhex("0102"), "trailing"),
    (bytes.fromhex("80 00".replace(" ", "")), "trailing"),
    (b"", "truncated"),
    (bytes.fromhex("1a0000"), "truncated"),  # uint32 with two of its four bytes
    (bytes.fromhex("9b00000000ffffffff"), "truncated"),  # array claiming 2**32 items
    (bytes.fromhex("5affffffff"), "truncated"),  # byte string claiming 4 GB
    (bytes.fromhex("bbffffffffffffffff"), "truncated"),  # map claiming 2**64 - 1 pairs
    (bytes.fromhex("62c328"), "utf-8"),  # invalid UTF-8 text
    (bytes.fromhex("f7"), "undefined"),
    (bytes.fromhex("e0"), "simple"),  # simple value 0
    (bytes.fromhex("f820"), "simple"),  # one-byte simple value 32
    (bytes.fromhex("1c"), "reserved"),  # additional information 28
    (b"\x81" * 17 + b"\x00", "nesting"),  # 17 nested arrays
    (b"\xa1\x00" * 17 + b"\x00", "nesting"),  # 17 nested maps
]


@pytest.mark.parametrize(("data", "reason"), REFUSED, ids=[r[0].hex()[:24] for r in REFUSED])
def test_refuses_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match="(?i)" + reason):
        decode_strict(data)


def test_nesting_cap_is_adjustable() -> None:
    deep = b"\x81" * 5 + b"\x00"
    assert decode_strict(deep, max_depth=5) == [[[[[0]]]]]
    with pytest.raises(ProtocolError, match="nesting"):
        decode_strict(deep, max_depth=4)


def test_huge_declared_lengths_cost_nothing() -> None:
    tracemalloc.start()
    try:
        for header in ("9b00000000ffffffff", "5b00000000ffffffff", "7b00000000ffffffff"):
            with pytest.raises(ProtocolError):
                decode_strict(bytes.fromhex(header) + b"\x00" * 64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_array_of_one_byte_items_decodes_linearly() -> None:
    # cbor2's classic blow-up: a flat run of empty arrays. Ours is bounded by the input size.
    data = b"\x9a\x00\x01\x00\x00" + b"\x80" * 65536
    assert len(decode_strict(data, max_depth=2)) == 65536


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8) | st.integers(-1000, 1000), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_round_trip_and_agreement_with_cbor2(value: object) -> None:
    data = encode(value)
    assert decode_strict(data) == value
    assert cbor2.loads(data) == value  # what we write is standard CBOR
    assert encode(decode_strict(data)) == data  # deterministic


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_we_accept_what_cbor2_canonical_writes(value: object) -> None:
    assert decode_strict(cbor2.dumps(value, canonical=True)) == value


def test_canonical_choices() -> None:
    assert encode(1.5) == bytes.fromhex("f93e00")  # fits a half float
    assert encode(0.1) == bytes.fromhex("fb3fb999999999999a")
    assert encode(math.inf) == bytes.fromhex("f97c00")
    assert encode(math.nan) == bytes.fromhex("f97e00")
    assert encode({"b": 1, "a": 2, 10: 3}) == bytes.fromhex("a30a03616102616201")
    assert encode((1, 2)) == encode([1, 2])


@pytest.mark.parametrize("value", [2**64, -(2**64) - 1, {(1,): 2}, {b"k": 1}, {1.5: 1}, object(), {1, 2}])
def test_encode_refuses_what_we_would_not_decode(value: object) -> None:
    with pytest.raises(ProtocolError, match="cannot encode"):
        encode(value)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_arbitrary_bytes_never_crash(data: bytes) -> None:
    try:
        decode_strict(data)
    except ProtocolError:
        pass


@settings(max_examples=500, deadline=None)
@given(PLAIN, st.integers(0, 200), st.integers(0, 255))
def test_fuzz_mutated_valid_items(value: object, position: int, byte: int) -> None:
    data = bytearray(encode(value))
    data[position % len(data)] = byte
    try:
        decode_strict(bytes(data))
    except ProtocolError:
        pass


MAPS = st.dictionaries(st.text(max_size=30), PLAIN, min_size=1, max_size=6)


@settings(max_examples=500, deadline=None)
@given(MAPS, st.integers(0, 400), st.integers(0, 255))
def test_what_the_fast_map_path_accepts_cbor2_reads_alike(value: dict, position: int, byte: int) -> None:
    # Message bodies are flat maps, decoded by an inlined loop; a damaged one is either refused
    # or means exactly what a general CBOR decoder says it means.
    data = bytearray(encode(value))
    data[position % len(data)] = byte
    try:
        decoded = decode_strict(bytes(data))
    except ProtocolError:
        return
    assert encode(decoded) == encode(cbor2.loads(bytes(data)))

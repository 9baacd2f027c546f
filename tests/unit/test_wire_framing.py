"""Frames: whole frames out of arbitrary splits, caps enforced from the header alone."""

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.wire.codes import MessageCode
from frost_core.wire.framing import MAX_CHUNK_SIZE, Frame, FrameReader, encode_frame, encode_header
from frost_core.wire.messages import BulkEnd, Hello, encode_message

HELLO = Hello(1, "node", b"n" * 32, 7)
FRAMES = [
    Frame(MessageCode.HELLO, encode_message(HELLO)),
    Frame(MessageCode.BULK_CHUNK, b"x" * 1000),
    Frame(MessageCode.BULK_END, encode_message(BulkEnd(1000))),
    Frame(MessageCode.BULK_CHUNK, b""),
]
STREAM = b"".join(encode_frame(f.code, f.body) for f in FRAMES)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=10))
def test_any_split_gives_the_same_frames(cuts: list[int]) -> None:
    reader = FrameReader()
    bounds = [0, *sorted(cuts), len(STREAM)]
    frames = []
    for start, end in zip(bounds, bounds[1:]):
        frames += reader.feed(STREAM[start:end])
    assert frames == FRAMES
    assert reader.buffered == 0


def test_oversize_header_refused_before_the_body_arrives() -> None:
    tracemalloc.start()
    try:
        reader = FrameReader()
        with pytest.raises(ProtocolError, match="HELLO declares 4294967295 bytes, over its cap of 1024"):
            list(reader.feed(encode_header(MessageCode.HELLO, 2**32 - 1)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_bulk_chunks_have_a_global_cap_and_unknown_codes_are_refused() -> None:
    list(FrameReader().feed(encode_header(MessageCode.BULK_CHUNK, MAX_CHUNK_SIZE)))
    with pytest.raises(ProtocolError, match="BULK_CHUNK declares"):
        list(FrameReader().feed(encode_header(MessageCode.BULK_CHUNK, MAX_CHUNK_SIZE + 1)))
    with pytest.raises(ProtocolError, match="unknown message code 4242"):
        list(FrameReader().feed(encode_header(4242, 1)))


def test_overhead_widens_the_cap_and_sets_a_floor() -> None:
    reader = FrameReader(overhead=16)
    assert list(reader.feed(encode_header(MessageCode.HELLO, 1024 + 16))) == []
    with pytest.raises(ProtocolError, match="shorter than its 16-byte tag"):
        list(FrameReader(overhead=16).feed(encode_header(MessageCode.HELLO, 3)))


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8))
def test_fuzz_reader_never_crashes_nor_hoards(pieces: list[bytes]) -> None:
    reader = FrameReader()
    try:
        for piece in pieces:
            for frame in reader.feed(piece):
                assert len(frame.body) <= MAX_CHUNK_SIZE
    except ProtocolError:
        return
    assert reader.buffered <= sum(map(len, pieces))

"""The guest's blocking side of the pipe: bulk data round-trips, and any other bytes give a clear error."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import ProtocolError
from frost_core.guest.protocol import GuestProgress
from frost_core.wire.codes import MessageCode
from frost_core.wire.framing import MAX_CHUNK_SIZE, encode_frame
from frost_core.wire.messages import BulkBegin, BulkEnd, encode_message
from frost_core.wire.pipe import read_bulk, write_bulk


def written(data: bytes) -> bytes:
    out = io.BytesIO()
    write_bulk(out, GuestProgress(progress=0.5, steps=3), data)
    return out.getvalue()


@given(st.binary(max_size=3 * 1024), st.integers(min_value=0, max_value=3))
def test_bulk_data_round_trips_whatever_its_size(data, chunks):
    data = data + bytes(chunks * MAX_CHUNK_SIZE)  # several full chunks and a partial one
    header, received = read_bulk(io.BytesIO(written(data)), max_size=len(data))
    assert header == GuestProgress(progress=0.5, steps=3)
    assert received == data


@given(st.lists(st.binary(max_size=MAX_CHUNK_SIZE + 10), max_size=6))
def test_bulk_data_in_pieces_arrives_as_their_concatenation_in_the_same_frames(pieces):
    """Pieces are framed as if joined (chunk borders fall wherever they fall), without being joined."""
    out = io.BytesIO()
    write_bulk(out, GuestProgress(progress=0.5, steps=3), pieces)
    assert out.getvalue() == written(b"".join(pieces))


@settings(max_examples=300)
@given(st.data())
def test_damaged_or_truncated_bulk_data_gives_a_protocol_error(draw):
    stream = bytearray(written(bytes(range(256)) * 5))
    if draw.draw(st.booleans()):
        del stream[draw.draw(st.integers(min_value=1, max_value=len(stream) - 1)):]
    else:
        at = draw.draw(st.integers(min_value=0, max_value=len(stream) - 1))
        stream[at] ^= draw.draw(st.integers(min_value=1, max_value=255))
    try:
        header, received = read_bulk(io.BytesIO(bytes(stream)), max_size=1280)
    except (ProtocolError, EOFError):
        return
    # A flipped bit inside the payload itself is not the framing's business (the state's
    # SHA-256 and CBOR decoding catch it); everything else must have been refused.
    assert len(received) == 1280


def test_a_bulk_transfer_over_its_limit_is_refused_before_it_is_read():
    stream = io.BytesIO(written(bytes(2000)))
    with pytest.raises(ProtocolError, match="up to 1999"):
        read_bulk(stream, max_size=1999)
    assert stream.tell() < 100  # refused at BULK_BEGIN, not after buffering the data


def unsized(chunks: list[bytes]) -> io.BytesIO:
    """Bulk data as the node's channel sends it from pieces of no announced size (see `Channel.send_bulk`)."""
    out = io.BytesIO()
    out.write(encode_frame(GuestProgress.CODE, encode_message(GuestProgress(progress=0.5, steps=3))))
    out.write(encode_frame(MessageCode.BULK_BEGIN, encode_message(BulkBegin(None))))
    for chunk in chunks:
        out.write(encode_frame(MessageCode.BULK_CHUNK, chunk))
    out.write(encode_frame(MessageCode.BULK_END, encode_message(BulkEnd(sum(map(len, chunks))))))
    return io.BytesIO(out.getvalue())


def test_bulk_data_of_no_announced_size_arrives_whole_and_within_its_limit():
    chunks = [bytes(range(256)) * 1024, b"", b"tail"]
    assert read_bulk(unsized(chunks), max_size=256 * 1024 + 4)[1] == b"".join(chunks)
    assert read_bulk(unsized([]), max_size=0)[1] == b""  # a state handed over: nothing follows
    with pytest.raises(ProtocolError, match="past its limit of 1000"):
        read_bulk(unsized([bytes(600), bytes(600)]), max_size=1000)

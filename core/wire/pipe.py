"""The guest child's side of the pipe: the same frames as `wire.channel`, read and written blocking.

A separate module so the child process, which never runs trio, does not pay for importing it:
every migration starts a new interpreter, and its start-up is most of a move's latency.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import BinaryIO

from frost_core.api.errors import ProtocolError
from frost_core.wire.codes import MessageCode
from frost_core.wire.framing import HEADER, HEADER_SIZE, MAX_CHUNK_SIZE, Frame, body_cap, encode_frame, encode_header
from frost_core.wire.messages import BulkBegin, BulkEnd, Message, decode_message, encode_message

_IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16


def _read_exactly(fileobj: BinaryIO, size: int) -> bytes:
    data = fileobj.read(size)
    if data is None:
        raise ProtocolError("pipe is non-blocking; the guest side needs a blocking pipe")
    if len(data) == size:
        return data
    parts = [data]
    received = len(data)
    while received < size:
        more = fileobj.read(size - received)
        if not more:
            raise ProtocolError("pipe closed in the middle of a frame")
        parts.append(more)
        received += len(more)
    return b"".join(parts)


def _read_into(fileobj: BinaryIO, view: memoryview) -> None:
    """Fill `view` from the pipe: the bytes land where they belong, with no copy on the way."""
    filled = 0
    while filled < len(view):
        count = fileobj.readinto(view[filled:])  # type: ignore[attr-defined]
        if not count:
            raise ProtocolError("pipe closed in the middle of a frame")
        filled += count


def _read_header(fileobj: BinaryIO) -> tuple[int, int]:
    """(code, body length) of the next frame, its length checked against the code's cap."""
    header = fileobj.read(HEADER_SIZE)
    if not header:
        raise EOFError("pipe closed")
    if len(header) < HEADER_SIZE:
        header += _read_exactly(fileobj, HEADER_SIZE - len(header))
    length, code = HEADER.unpack(header)
    if length > body_cap(code):
        raise ProtocolError(f"frame with code {code} declares {length} bytes, over its cap of {body_cap(code)}")
    return code, length


def _read_raw_frame(fileobj: BinaryIO) -> Frame:
    code, length = _read_header(fileobj)
    return Frame(code, _read_exactly(fileobj, length))


def write_frame(fileobj: BinaryIO, message: Message) -> None:
    """Write one plaintext frame and flush, so the node sees it at once."""
    fileobj.write(encode_frame(message.CODE, encode_message(message)))
    fileobj.flush()


def read_frame(fileobj: BinaryIO) -> Message:
    """Read one plaintext frame; EOFError if the pipe closed cleanly before it."""
    frame = _read_raw_frame(fileobj)
    if frame.code == MessageCode.BULK_CHUNK:
        raise ProtocolError("bulk chunk outside a bulk transfer")
    return decode_message(frame.code, frame.body)


def write_bulk(fileobj: BinaryIO, header: Message, data: bytes | Sequence[bytes]) -> None:
    """Blocking twin of `Channel.send_bulk`; `data` whole or as pieces, which are sent as they are, never joined.

    Every frame goes out in one `writev` where `fileobj` has a descriptor (the guest's pipe): the
    node then wakes once for them, not once a write (a header, then each chunk's header and part).
    """
    pieces = [data] if isinstance(data, bytes | bytearray | memoryview) else data
    size = sum(len(piece) for piece in pieces)
    frames: list[bytes | memoryview] = [encode_frame(header.CODE, encode_message(header)),
                                        encode_frame(MessageCode.BULK_BEGIN, encode_message(BulkBegin(size)))]
    chunk: list[memoryview] = []
    room = MAX_CHUNK_SIZE
    for piece in pieces:
        view = memoryview(piece)
        while view:
            part = view[:room]
            chunk.append(part)
            room -= len(part)
            view = view[len(part):]
            if not room:
                _add_chunk(frames, chunk)
                chunk, room = [], MAX_CHUNK_SIZE
    if chunk:
        _add_chunk(frames, chunk)
    frames.append(encode_frame(MessageCode.BULK_END, encode_message(BulkEnd(size))))
    try:
        fd = fileobj.fileno()
    except (AttributeError, OSError):  # an in-memory file (io.UnsupportedOperation is an OSError)
        for frame in frames:
            fileobj.write(frame)
        fileobj.flush()
        return
    fileobj.flush()  # what the file object holds goes first
    write_pieces(fd, frames)


def _add_chunk(frames: list[bytes | memoryview], parts: list[memoryview]) -> None:
    frames.append(encode_header(MessageCode.BULK_CHUNK, sum(len(part) for part in parts)))
    frames.extend(parts)


def write_pieces(fd: int, pieces: Sequence[bytes | memoryview]) -> None:
    """Write `pieces` one after another with as few `writev` calls as the kernel takes (IOV_MAX at a time)."""
    views = [memoryview(piece) for piece in pieces if len(piece)]
    while views:
        written = os.writev(fd, views[:_IOV_MAX])
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views:
            views[0] = views[0][written:]


def read_bulk_data(fileobj: BinaryIO, *, max_size: int, begin: BulkBegin | None = None) -> bytes:
    """Blocking twin of `Channel.receive_bulk_data` (after the header was read); `begin`: its BULK_BEGIN, if the
    caller read it already to see the size.

    Read in place into a BytesIO whose buffer becomes the returned bytes without a copy: the
    CBOR decoder reads `bytes` in place, where it would copy a bytearray whole first.
    """
    if begin is None:
        begin = read_frame(fileobj)
    if not isinstance(begin, BulkBegin) or not (begin.size is None or 0 <= begin.size <= max_size):
        raise ProtocolError(f"expected BULK_BEGIN with a size up to {max_size}, got {begin!r}")
    if begin.size is None:
        return _read_unsized(fileobj, max_size)
    data = io.BytesIO(bytes(begin.size))  # its only owner: written in place, no memset (see `Channel`'s `_room_for`)
    received = 0
    with data.getbuffer() as view:
        while True:
            code, length = _read_header(fileobj)
            if code != MessageCode.BULK_CHUNK:
                break
            if received + length > begin.size:
                raise ProtocolError(f"bulk transfer ran past {begin.size} bytes")
            _read_into(fileobj, view[received : received + length])
            received += length
    end = decode_message(code, _read_exactly(fileobj, length))
    if not isinstance(end, BulkEnd) or end.size != received or begin.size != received:
        raise ProtocolError(f"bulk transfer announced {begin.size} bytes but carried {received}")
    return data.getvalue()


def _read_unsized(fileobj: BinaryIO, max_size: int) -> bytes:
    """Bulk data of no announced size, gathered and joined: empty where a state was handed over instead (see
    `guest.handoff`), and only when that failed the state itself, which then pays one more copy."""
    parts: list[bytes] = []
    received = 0
    while (header := _read_header(fileobj))[0] == MessageCode.BULK_CHUNK:
        received += header[1]
        if received > max_size:
            raise ProtocolError(f"bulk transfer ran past its limit of {max_size} bytes")
        parts.append(_read_exactly(fileobj, header[1]))
    end = decode_message(header[0], _read_exactly(fileobj, header[1]))
    if not isinstance(end, BulkEnd) or end.size != received:
        raise ProtocolError(f"bulk transfer carried {received} bytes but ended with {end!r}")
    return b"".join(parts)


def read_bulk(fileobj: BinaryIO, *, max_size: int) -> tuple[Message, bytes]:
    """Blocking twin of `Channel.receive_bulk`."""
    header = read_frame(fileobj)
    return header, read_bulk_data(fileobj, max_size=max_size)

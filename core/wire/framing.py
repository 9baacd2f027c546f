"""Sans-IO frames: a 6-byte header (body length, message code) then the body; caps checked early.

The same frames carry the encrypted TCP stream (the body is then AEAD ciphertext plus its tag,
and the header is the AEAD's associated data) and the plaintext guest pipe. A frame whose header
declares more than its type allows is refused as soon as the six header bytes are in, before a
single body byte is buffered.
"""

import struct
from collections import deque
from collections.abc import Iterator
from typing import NamedTuple

from frost_core.api.errors import ProtocolError
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import max_body_size

HEADER = struct.Struct(">IH")
HEADER_SIZE = HEADER.size
MAX_CHUNK_SIZE = 256 * 1024
"""Largest raw bulk chunk: small enough that encrypting one never stalls the UI loop."""


class Frame(NamedTuple):
    code: int
    body: bytes


def body_cap(code: int) -> int:
    """The largest plaintext body a frame with `code` may carry; unknown codes are refused."""
    if code == MessageCode.BULK_CHUNK:
        return MAX_CHUNK_SIZE
    cap = max_body_size(code)
    if cap is None:
        raise ProtocolError(f"unknown message code {code} in frame header")
    return cap


def encode_header(code: int, length: int) -> bytes:
    """The header for a body of `length` bytes (ciphertext length on an encrypted stream)."""
    return HEADER.pack(length, code)


def encode_frame(code: int, body: bytes) -> bytes:
    """A whole plaintext frame."""
    return HEADER.pack(len(body), code) + body


class FrameReader:
    """Accumulates stream bytes and hands out whole frames, copying each body at most once.

    Received pieces are kept as they came (not appended to one growing buffer), so a 256 KiB
    chunk arriving in several reads is joined once, and a piece that is exactly one frame body
    is handed out without any copy. Headers are parsed in place, at an offset into the first
    piece. `overhead` is what the stream adds to each body (the AEAD tag); the channel raises
    it from 0 once the handshake has set up encryption.
    """

    def __init__(self, *, overhead: int = 0) -> None:
        self.overhead = overhead
        self._pieces: deque[bytes] = deque()
        self._offset = 0  # bytes of the first piece already handed out
        self._size = 0
        self._want: tuple[int, int] | None = None  # (code, length) of a header already checked

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as frames (a checked header counts as handed out)."""
        return self._size

    @property
    def missing(self) -> int:
        """Body bytes still to come for a frame whose header is checked (0 when none is pending).

        A driver that sees a large figure here can receive the rest straight into a buffer of
        its own (`drain_into`) instead of feeding pieces that would later be joined.
        """
        if self._want is None:
            return 0
        return self._want[1] - self._size

    @property
    def pending(self) -> tuple[int, int]:
        """(code, body length) of the frame whose header is checked and whose body is still to come."""
        assert self._want is not None
        return self._want

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[Frame]:
        """Append `data` and yield every frame now complete (raising ProtocolError on a bad header)."""
        self.append(data)
        return self._frames()

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes without parsing them yet."""
        if data:
            self._pieces.append(data if type(data) is bytes else bytes(data))
            self._size += len(data)

    def drain_into(self, buffer: memoryview) -> tuple[int, int, int]:
        """Hand the pending frame over to the caller: (code, body length, bytes put in `buffer`).

        Only for a frame with `missing` > 0, so every buffered byte belongs to its body; the
        caller must then receive the remaining `missing` bytes itself.
        """
        assert self._want is not None and self._size < self._want[1]
        code, length = self._want
        have = 0
        for piece in self._pieces:
            part = memoryview(piece)[self._offset :]
            buffer[have : have + len(part)] = part
            have += len(part)
            self._offset = 0
        self._pieces.clear()
        self._size = 0
        self._want = None
        return code, length, have

    def put_back(self, code: int, length: int, partial: bytes) -> None:
        """Undo `drain_into` when the caller could not finish the frame (e.g. it was cancelled)."""
        assert self._want is None and not self._pieces
        self._want = (code, length)
        self.append(partial)

    def take_all(self) -> bytes:
        """Remove and return every byte not yet handed out as a frame, as the stream sent them (a header
        already checked is put back in front): another reader goes on from there (`Channel.lend_pipe`)."""
        head = b""
        if self._want is not None:
            code, length = self._want
            head, self._want = HEADER.pack(length, code), None
        return head + self._take(self._size)

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None until more bytes arrive."""
        if self._want is None:
            if self._size < HEADER_SIZE:
                return None
            first = self._pieces[0]
            if len(first) - self._offset >= HEADER_SIZE:
                length, code = HEADER.unpack_from(first, self._offset)
                self._offset += HEADER_SIZE
                self._size -= HEADER_SIZE
            else:
                length, code = HEADER.unpack(self._take(HEADER_SIZE))
            self._check(code, length)
            if self._size < length:
                self._want = (code, length)
                return None
            return Frame(code, self._take(length))
        code, length = self._want
        if self._size < length:
            return None
        self._want = None
        return Frame(code, self._take(length))

    def _check(self, code: int, length: int) -> None:
        cap = _CAPS.get(code)
        if cap is None:
            cap = _CAPS[code] = body_cap(code)  # a code never changes meaning, so its cap is kept
        cap += self.overhead
        if length > cap:
            name = MessageCode(code).name if code in MessageCode._value2member_map_ else code
            raise ProtocolError(f"frame {name} declares {length} bytes, over its cap of {cap}")
        if length < self.overhead:
            raise ProtocolError(f"frame declares {length} bytes, shorter than its {self.overhead}-byte tag")

    def _frames(self) -> Iterator[Frame]:
        while (frame := self.next_frame()) is not None:
            yield frame

    def _take(self, count: int) -> bytes:
        """Remove and return the first `count` buffered bytes (the caller checked they are there)."""
        if not count:
            return b""
        self._size -= count
        pieces = self._pieces
        first = pieces[0]
        offset = self._offset
        available = len(first) - offset
        if available > count:
            self._offset = offset + count
            return first[offset : offset + count]
        if available == count:
            pieces.popleft()
            self._offset = 0
            return first[offset:] if offset else first
        parts = [memoryview(pieces.popleft())[offset:]]
        count -= available
        self._offset = 0
        while count:
            piece = pieces[0]
            if len(piece) <= count:
                parts.append(pieces.popleft())
                count -= len(piece)
            else:
                parts.append(memoryview(piece)[:count])
                self._offset = count
                count = 0
        return b"".join(parts)


_CAPS: dict[int, int] = {}

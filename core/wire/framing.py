"""Sans-IO frames: a 6-byte header (body length, message code) then the body; caps checked early.

The same frames carry the encrypted TCP stream (the body is then AEAD ciphertext plus its tag,
and the header is the AEAD's associated data) and the plaintext guest pipe. A frame whose header
declares more than its type allows is refused as soon as the six header bytes are in, before a
single body byte is buffered.
"""

import struct
from collections.abc import Iterator
from typing import NamedTuple

from frost_core.errors import ProtocolError
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
    """Accumulates stream bytes and hands out whole frames; holds at most one frame's worth.

    `overhead` is what the stream adds to each body (the AEAD tag); the channel raises it from 0
    once the handshake has set up encryption.
    """

    def __init__(self, *, overhead: int = 0) -> None:
        self.overhead = overhead
        self._buffer = bytearray()
        self._pos = 0
        self._want: tuple[int, int] | None = None  # (code, length) of a header already checked

    @property
    def buffered(self) -> int:
        """Bytes received but not yet handed out as frames."""
        return len(self._buffer) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[Frame]:
        """Append `data` and yield every frame now complete (raising ProtocolError on a bad header)."""
        self.append(data)
        return self._frames()

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes without parsing them yet."""
        if self._pos and self._pos == len(self._buffer):
            self._buffer.clear()
            self._pos = 0
        self._buffer += data

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None until more bytes arrive."""
        if self._want is None:
            if len(self._buffer) - self._pos < HEADER_SIZE:
                return None
            length, code = HEADER.unpack_from(self._buffer, self._pos)
            cap = body_cap(code) + self.overhead
            if length > cap:
                name = MessageCode(code).name if code in MessageCode._value2member_map_ else code
                raise ProtocolError(f"frame {name} declares {length} bytes, over its cap of {cap}")
            if length < self.overhead:
                raise ProtocolError(f"frame declares {length} bytes, shorter than its {self.overhead}-byte tag")
            self._pos += HEADER_SIZE
            self._want = (code, length)
        code, length = self._want
        start = self._pos
        if len(self._buffer) - start < length:
            self._compact()
            return None
        self._pos = start + length
        self._want = None
        body = bytes(self._buffer[start : self._pos])
        if self._pos > 65536:
            self._compact()
        return Frame(code, body)

    def _frames(self) -> Iterator[Frame]:
        while (frame := self.next_frame()) is not None:
            yield frame

    def _compact(self) -> None:
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0

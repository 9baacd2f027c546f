"""Trio driver for frames: an authenticated, encrypted `Channel` over TCP, or a plaintext one over a pipe.

The guest child runs plain synchronous Python; its blocking twin is `wire.pipe`.
"""

import io
import os
import select
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, TypeVar

import trio

from frost_core.api.errors import AuthenticationError, ProtocolError, WrongClusterKey
from frost_core.wire.codes import MessageCode
from frost_core.wire.framing import HEADER, HEADER_SIZE, MAX_CHUNK_SIZE, Frame, FrameReader, encode_header
from frost_core.wire.hosts import unresolvable_as_os_error
from frost_core.wire.lent import LentInterrupted, LentPipe
from frost_core.wire.messages import (
    BulkBegin, BulkEnd, Hello, HelloAck, HelloRefused, Message, decode_message, encode_message,
)
from frost_core.wire.security import TAG_SIZE, ClusterKey, StreamSession, answer_hello, finish_hello, make_hello

Address = tuple[str, int]
T = TypeVar("T")

RECEIVE_SIZE = MAX_CHUNK_SIZE + 4096
_RECEIVE_SMALL = 64 * 1024
"""Read size while no large frame is pending: big reads of small data cost an mmap each."""
_BULK_CHUNK = int(MessageCode.BULK_CHUNK)
_DIRECT_FROM = 64 * 1024
"""A pending frame body at least this large is received straight into a reused buffer."""
_COALESCE_LIMIT = 64 * 1024
"""Below this, header and body go in one write; above it, two writes beat one big copy."""

__all__ = [
    "Address",
    "BulkSink",
    "Channel",
    "accept_channel",
    "connect_channel",
    "open_channel",
]


class BulkSink(Protocol):
    """Where bulk data received in place goes as it arrives (e.g. a checkpoint file being written)."""

    async def begin(self, size: int) -> None:
        """The transfer announced `size` bytes; `filled` follows only for announced transfers."""

    def filled(self, piece: memoryview) -> None:
        """The next bytes, in their final place: they stay unchanged until `drained` returns."""

    async def drained(self) -> None:
        """Return once no piece handed over is in use any more."""


class Channel:
    """Messages and bulk data over a stream; encrypted once a handshake has set `session`.

    Sends take turns (frame order must match the AEAD counter), and a bulk transfer keeps
    its turn throughout so no other frame can interleave with its chunks. Receiving is
    for one task at a time. `receive` raises `trio.EndOfChannel` when the peer closed cleanly
    between frames and ProtocolError for anything malformed.
    """

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream | None = None,
        *,
        session: StreamSession | None = None,
        peer_node_id: str = "",
        peer_address: Address | None = None,
    ) -> None:
        self._send_stream = send_stream
        if receive_stream is None:
            if not isinstance(send_stream, trio.abc.ReceiveStream):
                raise TypeError("a single stream must be bidirectional")
            receive_stream = send_stream  # type: ignore[assignment]
        self._receive_stream: trio.abc.ReceiveStream = receive_stream  # type: ignore[assignment]
        self._reader = FrameReader()
        self._socket: trio.socket.SocketType | _PipeReader | None = None
        """What large frames are read from straight into a buffer: the socket, or a guest's pipe."""
        if isinstance(receive_stream, trio.SocketStream):
            self._socket = receive_stream.socket
        elif isinstance(receive_stream, trio.lowlevel.FdStream):
            self._socket = _PipeReader(receive_stream)
        self._direct_buffer = bytearray()
        self._plain_buffer = bytearray()
        self._tail = bytearray(HEADER_SIZE)
        """Where a pipe read puts the header after a chunk received in place."""
        self._sending = False
        self._send_waiters = trio.lowlevel.ParkingLot()
        self.torn = False
        """A thread it was lent to (`lend_pipe`) had to leave its pipe mid-frame: nothing more can be read."""
        self._session: StreamSession | None = None
        self.peer_node_id = peer_node_id
        self.peer_address = peer_address
        if session is not None:
            self._start_session(session)

    @property
    def encrypted(self) -> bool:
        return self._session is not None

    def _start_session(self, session: StreamSession) -> None:
        self._session = session
        self._reader.overhead = TAG_SIZE

    # --- sending -----------------------------------------------------------------------------

    async def _send_frame(self, code: int, body: bytes | memoryview) -> None:
        if self._session is not None:
            await self._send_stream.send_all(self._session.seal_frame(code, body))
        elif len(body) < _COALESCE_LIMIT:
            await self._send_stream.send_all(encode_header(code, len(body)) + body)
        else:
            await self._send_stream.send_all(encode_header(code, len(body)))
            await self._send_stream.send_all(body)

    async def send(self, message: Message) -> None:
        body = encode_message(message)
        if self._sending:  # `_take_send_turn`, inlined: this is the hot path of every message
            await self._send_waiters.park()
        else:
            self._sending = True
        try:
            if self._session is not None:
                await self._send_stream.send_all(self._session.seal_frame(message.CODE, body))
            else:
                await self._send_frame(message.CODE, body)
        finally:
            self._pass_send_turn()

    async def _take_send_turn(self) -> None:
        """Wait until no other task is sending (frame order must match the AEAD counter).

        A flag plus a parking lot rather than a `trio.Lock`: the uncontended case, which is
        nearly every send, is one attribute test instead of the lock's task bookkeeping. The
        turn is handed to the first waiter directly, so waiters are served in order.
        """
        if self._sending:
            await self._send_waiters.park()
        else:
            self._sending = True

    def _pass_send_turn(self) -> None:
        if self._send_waiters:
            self._send_waiters.unpark()
        else:
            self._sending = False

    async def send_bulk(self, header: Message, data: bytes | AsyncIterable[bytes | memoryview], *,
                        size: int | None = None, ready: Callable[[], Awaitable[None]] | None = None) -> None:
        """Send `header`, then `data` as raw chunks of at most 256 KiB, then BULK_END.

        An async generator passed as `data` is consumed and closed, even on cancellation; `size`,
        if given, is announced for it (the receiver then lands the chunks in place, and may write
        them to disk as they come), and no reference to a piece is kept once it is sent.
        `ready`, awaited between the header and the data with the channel still held, lets the
        peer act on the header first (a guest loads its plugin while its state is synced); what
        it raises ends the send, leaving the header alone on the channel.
        """
        header_body = encode_message(header)
        await self._take_send_turn()
        try:
            await self._send_frame(header.CODE, header_body)
            if ready is not None:
                await ready()
            if isinstance(data, bytes | bytearray | memoryview):
                view = memoryview(data)
                await self._send_frame(MessageCode.BULK_BEGIN, encode_message(BulkBegin(len(view))))
                for start in range(0, len(view), MAX_CHUNK_SIZE):
                    await self._send_frame(MessageCode.BULK_CHUNK, view[start : start + MAX_CHUNK_SIZE])
                size = len(view)
            else:
                await self._send_frame(MessageCode.BULK_BEGIN, encode_message(BulkBegin(size)))
                size = 0
                try:
                    async for piece in data:
                        piece_view = memoryview(piece)
                        del piece  # a piece may be a view into its sender's buffer: hold none once sent
                        for start in range(0, len(piece_view), MAX_CHUNK_SIZE):
                            await self._send_frame(MessageCode.BULK_CHUNK, piece_view[start : start + MAX_CHUNK_SIZE])
                        size += len(piece_view)
                        del piece_view
                finally:
                    if isinstance(data, AsyncGenerator):
                        await data.aclose()  # an abandoned generator would be finalised by the GC
            await self._send_frame(MessageCode.BULK_END, encode_message(BulkEnd(size)))
        finally:
            self._pass_send_turn()

    # --- receiving ---------------------------------------------------------------------------

    async def _receive_frame(self, *, header_first: bool = False, into: memoryview | None = None) -> Frame:
        """The next frame, decrypted; a bulk chunk's body is a view valid until the next frame.

        `header_first` (inside a bulk transfer) reads a frame's header alone, so that the large
        body after it goes straight into the reused buffer rather than partly into a fresh one.
        `into` (encrypted streams only): where a bulk chunk's plaintext goes, and all the room
        it may take.
        """
        reader = self._reader
        if self.torn:
            raise ProtocolError("the pipe was left in the middle of a frame")
        while (frame := reader.next_frame()) is None:
            missing = reader.missing
            if missing >= _DIRECT_FROM and self._socket is not None:
                in_place = (into is not None and self._session is None and reader.pending[0] == _BULK_CHUNK
                            and isinstance(self._socket, _PipeReader))
                frame = await self._receive_direct(into if in_place else None)
                if in_place:
                    return frame
                break
            if header_first and not missing and self._socket is not None:
                size = HEADER_SIZE - reader.buffered
            else:
                size = min(max(missing, _RECEIVE_SMALL), RECEIVE_SIZE)
            try:
                data = await self._receive_stream.receive_some(size)
            except trio.BrokenResourceError as exc:
                raise ProtocolError(f"connection broke: {exc.__cause__ or exc}") from exc
            if not data:
                if reader.buffered:
                    raise ProtocolError("connection closed in the middle of a frame")
                raise trio.EndOfChannel("peer closed the connection")
            reader.append(data)
        code, body = frame
        if self._session is not None:
            if code == _BULK_CHUNK:
                return Frame(code, self._open_chunk(body, into))
            return Frame(code, self._session.open(HEADER.pack(len(body), code), body))
        if into is not None and code == _BULK_CHUNK:
            place = _room(into, len(body))
            place[:] = body
            return Frame(code, place)  # type: ignore[arg-type]
        if type(body) is not bytes and code != _BULK_CHUNK:  # a chunk's view is valid until the next frame
            return Frame(code, bytes(body))
        return frame

    async def _receive_direct(self, into: memoryview | None = None) -> Frame:
        """Receive the rest of a large pending frame straight into one buffer.

        Saves the per-read allocation of a large bytes object and the copy that joins the
        pieces. The returned body is a view into a buffer reused for the next frame, or, with
        `into` (a plain bulk chunk from a pipe), the start of `into`: the chunk's place in the
        whole, so that it costs no copy besides the kernel's. Each read may also take the next
        frame's header, which then goes to the reader: in a bulk transfer that saves a read
        (and a trip through the scheduler) per chunk. If the receive is cancelled or fails, the
        part already in is handed back to the reader.
        """
        assert self._socket is not None
        reader = self._reader
        length = reader.buffered + reader.missing
        if into is not None:
            assert isinstance(self._socket, _PipeReader)
            view, body, tail = None, _room(into, length), memoryview(self._tail)
        else:
            room = length + HEADER_SIZE
            if length <= RECEIVE_SIZE:  # keep at most one bulk chunk's worth per channel
                if len(self._direct_buffer) < room:
                    self._direct_buffer = bytearray(room)
                view = memoryview(self._direct_buffer)[:room]
            else:
                view = memoryview(bytearray(room))
            body, tail = view[:length], view[length:]
        code, length, have = reader.drain_into(body)
        try:
            while have < length:
                if view is None:
                    count = await self._socket.recv_into_many([body[have:], tail])  # type: ignore[union-attr]
                else:
                    count = await self._socket.recv_into(view[have:])
                if not count:
                    raise ProtocolError("connection closed in the middle of a frame")
                have += count
        except OSError as exc:
            raise ProtocolError(f"connection broke: {exc}") from exc
        except BaseException:
            reader.put_back(code, length, bytes(body[:have]))  # the next header comes only after the body
            raise
        reader.append(tail[: have - length])
        return Frame(code, body)  # type: ignore[arg-type]

    def _open_chunk(self, ciphertext: bytes | memoryview, into: memoryview | None) -> memoryview:
        """Decrypt a bulk chunk into the start of `into`, or else into one reused buffer.

        Returns the plaintext as a view; in the reused buffer it is valid until the next frame.
        """
        assert self._session is not None
        size = len(ciphertext) - TAG_SIZE
        if into is None:
            if not self._plain_buffer:
                self._plain_buffer = bytearray(MAX_CHUNK_SIZE)  # the reader refused any larger chunk
            into = memoryview(self._plain_buffer)
        view = _room(into, size)
        self._session.open_into(HEADER.pack(len(ciphertext), _BULK_CHUNK), ciphertext, view)
        return view

    async def receive(self) -> Message:
        code, body = await self._receive_frame()
        if code == _BULK_CHUNK:
            raise ProtocolError("bulk chunk outside a bulk transfer")
        return decode_message(code, body)

    async def receive_bulk(self, *, max_size: int) -> tuple[Message, bytes]:
        """Receive a header message and the bulk data after it (refused beyond `max_size` bytes)."""
        header = await self.receive()
        return header, await self.receive_bulk_data(max_size=max_size)

    async def receive_bulk_data(self, *, max_size: int, sink: BulkSink | None = None) -> bytes:
        """The bulk data that follows a header already taken with `receive`.

        With the size announced (always, for data sent whole) the result is allocated once and
        every chunk lands straight in its place (decrypted there, on an encrypted stream; copied
        there from the pipe, on a plain one), and is handed to `sink` there; otherwise the chunks
        are gathered as they come (and `sink` sees none). Either way the data sits in a BytesIO,
        whose buffer becomes the returned bytes without a final copy (see `_room_for`).
        """
        bulk = await self._begin_bulk(max_size)
        data = _room_for(bulk.size)
        if bulk.size:
            if sink is not None:
                await sink.begin(bulk.size)
            with data.getbuffer() as target:
                try:
                    # each chunk lands in its place; no view of `target` outlives the loop (chunk ends
                    # as None), or `getvalue` would copy the whole buffer
                    while (chunk := await self._next_chunk(bulk, target[bulk.received:])) is not None:
                        if sink is not None:
                            sink.filled(chunk)  # type: ignore[arg-type]
                finally:
                    if sink is not None:
                        with trio.CancelScope(shield=True):  # the buffer must not go while the sink reads it
                            await sink.drained()
        else:
            while (chunk := await self._next_chunk(bulk)) is not None:
                data.write(chunk)
        return data.getvalue()

    async def iterate_bulk_data(self, *, max_size: int) -> AsyncIterator[bytes | memoryview]:
        """Stream the chunks of a bulk transfer, e.g. straight into a file.

        A chunk may be a view into a buffer the channel reuses: it is valid until the next one
        is asked for, so copy what must be kept (the copy is then the only one).
        """
        bulk = await self._begin_bulk(max_size)
        while (chunk := await self._next_chunk(bulk)) is not None:
            yield chunk

    async def _begin_bulk(self, max_size: int) -> "_Bulk":
        begin = await self.receive()
        if not isinstance(begin, BulkBegin):
            raise ProtocolError(f"expected BULK_BEGIN, got {type(begin).__name__}")
        if begin.size is not None and not 0 <= begin.size <= max_size:
            raise ProtocolError(f"bulk transfer of {begin.size} bytes is over the limit of {max_size}")
        return _Bulk(size=begin.size, limit=max_size if begin.size is None else begin.size)

    async def _next_chunk(self, bulk: "_Bulk", into: memoryview | None = None) -> bytes | memoryview | None:
        """The next chunk of `bulk` (placed at the start of `into` if given), or None after its checked end."""
        frame = await self._receive_frame(header_first=True, into=into)
        if frame.code == MessageCode.BULK_CHUNK:
            bulk.received += len(frame.body)
            if bulk.received > bulk.limit:
                raise ProtocolError(f"bulk transfer ran past {bulk.limit} bytes")
            return frame.body
        end = decode_message(frame.code, frame.body)
        if not isinstance(end, BulkEnd):
            raise ProtocolError(f"{type(end).__name__} inside a bulk transfer")
        for announced in (bulk.size, end.size):
            if announced is not None and announced != bulk.received:
                raise ProtocolError(f"bulk transfer announced {announced} bytes but carried {bulk.received}")
        return None

    @property
    def lendable(self) -> bool:
        """A plaintext pipe, which `lend_pipe` can lend to a thread."""
        return self._session is None and isinstance(self._socket, _PipeReader) and not self.torn

    async def lend_pipe(self, work: Callable[[LentPipe], T]) -> T:
        """`work(pipe)` in a thread that reads this channel's pipe blocking (a `lendable` one; nothing else may
        receive meanwhile), then its bytes left unread are this channel's again. A guest's answer then wakes
        that thread rather than this loop, and the loop learns once, of the outcome. Cancelled, a thread that
        waits between two frames gives the pipe back at once (LentInterrupted in `work`); elsewhere the
        cancel waits for the frame begun, for at most `lent.MID_FRAME_GRACE`: past it the channel is `torn`
        and every later receive a ProtocolError."""
        assert isinstance(self._socket, _PipeReader) and self._session is None
        lent = LentPipe(self._socket.fileno(), self._reader.take_all())
        token, task = trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()
        raise_cancel: list[Callable[[], NoReturn]] = []

        def abort(cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
            raise_cancel.append(cancel)
            lent.interrupt()
            return trio.lowlevel.Abort.FAILED  # rescheduled once the thread is done

        trio.lowlevel.start_thread_soon(
            lambda: work(lent), lambda result: token.run_sync_soon(trio.lowlevel.reschedule, task, result))
        try:
            return await trio.lowlevel.wait_task_rescheduled(abort)
        except LentInterrupted:
            self.torn = self.torn or lent.torn
            raise_cancel[0]()
        finally:
            self._reader.append(lent.rest())
            lent.close()

    def quiet(self) -> bool:
        """True when nothing waits to be read: an idle channel the peer has not closed, reset or written to."""
        if self._reader.buffered:
            return False
        if self._socket is None:
            return True
        fd = self._socket.fileno()
        if fd < 0:
            return False
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return not poller.poll(0)

    async def aclose(self) -> None:
        await self._send_stream.aclose()
        if self._receive_stream is not self._send_stream:
            await self._receive_stream.aclose()

    async def __aenter__(self) -> "Channel":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@dataclass
class _Bulk:
    """A bulk transfer being received: its announced size (None if streamed), cap and progress."""

    size: int | None
    limit: int
    received: int = 0


REFUSAL_TIMEOUT = 1.0
"""How long a server waits to tell a refused client why before it hangs up anyway."""


async def _expect(channel: Channel, kind: Any) -> Message:
    """The next message, which must be of `kind` (a class or a union of them)."""
    name = getattr(kind, "__name__", str(kind))
    try:
        message = await channel.receive()
    except trio.EndOfChannel:
        raise ProtocolError(f"connection closed before {name}") from None
    if not isinstance(message, kind):
        raise ProtocolError(f"expected {name}, got {type(message).__name__}")
    return message


async def open_channel(
    address: Address, key: ClusterKey, node_id: str, *, listen_port: int = 0
) -> Channel:
    """Connect to a peer and run the client handshake; the peer is proven to hold `key`."""
    with unresolvable_as_os_error(address):
        stream = await trio.open_tcp_stream(*address)
    try:
        return await connect_channel(stream, key, node_id, listen_port=listen_port, peer_address=address)
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise


async def connect_channel(
    stream: trio.abc.Stream,
    key: ClusterKey,
    node_id: str,
    *,
    listen_port: int = 0,
    peer_address: Address | None = None,
) -> Channel:
    """Client handshake over an already connected stream (the caller closes it on failure)."""
    channel = Channel(stream, peer_address=peer_address)
    hello = make_hello(key, node_id, listen_port=listen_port)
    await channel.send(hello)
    ack = await _expect(channel, HelloAck | HelloRefused)
    if isinstance(ack, HelloRefused):
        raise WrongClusterKey(f"refused us: {ack.reason}", title="Refused by a peer")  # (its one reason to refuse)
    channel._start_session(finish_hello(key, hello, ack))  # type: ignore[arg-type]
    channel.peer_node_id = ack.node_id  # type: ignore[attr-defined]
    return channel


async def accept_channel(
    stream: trio.abc.Stream, key: ClusterKey, node_id: str, *, peer_address: Address | None = None
) -> Channel:
    """Server handshake: refuse (AuthenticationError) a client that cannot prove it holds `key`.

    `peer_address` is replaced by (peer host, the port the client says it listens on), so
    handlers can answer a node at its own address rather than an ephemeral source port.
    """
    if peer_address is None and isinstance(stream, trio.SocketStream):
        source = stream.socket.getpeername()
        peer_address = (source[0], source[1])
    channel = Channel(stream, peer_address=peer_address)
    hello = await _expect(channel, Hello)
    try:
        ack, session = answer_hello(key, hello, node_id)  # type: ignore[arg-type]
    except AuthenticationError:
        with trio.move_on_after(REFUSAL_TIMEOUT):
            try:  # best effort: the node we refuse learns why, and can tell its owner
                await channel.send(HelloRefused(reason="different cluster key"))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        raise
    await channel.send(ack)
    channel._start_session(session)
    channel.peer_node_id = hello.node_id  # type: ignore[attr-defined]
    if peer_address is not None and hello.listen_port:  # type: ignore[attr-defined]
        channel.peer_address = (peer_address[0], hello.listen_port)  # type: ignore[attr-defined]
    return channel


class _PipeReader:
    """A pipe read like a socket's `recv_into`: a large frame then lands in one buffer, not in fresh
    256 KiB bytes objects (each faulted in anew) copied three times on the way."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream

    def fileno(self) -> int:
        return self._stream.fileno()

    async def recv_into(self, view: memoryview) -> int:
        return await self.recv_into_many([view])

    async def recv_into_many(self, views: list[memoryview]) -> int:
        """Read into the first view, and what follows at once into the next ones: one read fills them all."""
        fd = self._stream.fileno()  # non-blocking: FdStream made it so
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                count = os.readv(fd, views)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return count


def _room(into: memoryview, size: int) -> memoryview:
    """The first `size` bytes of `into`; ProtocolError if a chunk would run past the announced size."""
    if size > len(into):
        raise ProtocolError(f"bulk transfer ran past its announced size by {size - len(into)} bytes")
    return into[:size]


def _room_for(size: int | None) -> io.BytesIO:
    """A BytesIO to receive `size` bytes in place (empty, to write to, if the size is unknown).

    It holds a `bytes(size)` as its only owner, so its buffer is writable in place (BytesIO copies
    a shared one first) and is the bytes `getvalue` returns. `bytes(size)` comes zeroed from the
    OS, where seeking to the end and writing a byte memsets it: 100 MB of pages are then faulted
    in by the reads that fill them, with the GIL released, and not all at once beforehand.
    """
    return io.BytesIO(bytes(size)) if size else io.BytesIO()

"""Channels: messages and bulk data over real TCP and over a real guest subprocess pipe."""

import os
import subprocess
import sys
import textwrap
import tracemalloc
from functools import partial

import pytest
import trio
import trio.testing

from frost_core.api.errors import ProtocolError
from frost_core.membership.messages import PushPullReply
from frost_core.wire.channel import Channel, accept_channel, open_channel
from frost_core.wire.framing import MAX_CHUNK_SIZE
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import BulkBegin, BulkEnd, Hello, encode_message
from frost_core.wire.pipe import write_bulk
from frost_core.wire.security import ClusterKey

KEY = ClusterKey.generate()
HEADER = Hello(1, "checkpoint-header", b"", 0)


async def _tcp_pair(nursery: trio.Nursery) -> tuple[Channel, Channel]:
    """A client/server channel pair over a real loopback TCP connection."""
    accepted: trio.MemorySendChannel[Channel]
    accepted, incoming = trio.open_memory_channel[Channel](1)

    async def handle(stream: trio.SocketStream) -> None:
        async with await accept_channel(stream, KEY, "server") as channel:
            await accepted.send(channel)
            await trio.sleep_forever()

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    client = await open_channel(("127.0.0.1", port), KEY, "client", listen_port=4242)
    server = await incoming.receive()
    return client, server


async def test_bulk_over_tcp_arrives_whole_in_bounded_chunks() -> None:
    data = os.urandom(3 * MAX_CHUNK_SIZE + 12345)
    async with trio.open_nursery() as nursery:
        client, server = await _tcp_pair(nursery)
        assert server.peer_address is not None and server.peer_address[1] == 4242
        nursery.start_soon(client.send_bulk, HEADER, data)
        header = await server.receive()
        assert header == HEADER
        # A chunk is valid until the next is asked for (it may share the channel's buffer): keep copies.
        chunks = [bytes(chunk) async for chunk in server.iterate_bulk_data(max_size=len(data))]
        assert b"".join(chunks) == data
        assert max(map(len, chunks)) <= MAX_CHUNK_SIZE
        # The channel is still in step afterwards.
        await server.send(BulkEnd(1))
        assert await client.receive() == BulkEnd(1)
        await client.aclose()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("size", [0, 1, MAX_CHUNK_SIZE, MAX_CHUNK_SIZE + 1, 3 * MAX_CHUNK_SIZE + 12345])
async def test_bulk_gathered_over_tcp_is_exact_and_leaves_the_channel_in_step(size) -> None:
    """Gathered data is decrypted straight into the result, and reads run ahead into the next header."""
    data = os.urandom(size)
    async with trio.open_nursery() as nursery:
        client, server = await _tcp_pair(nursery)
        for round_ in range(3):
            async def send(round_: int = round_) -> None:  # in the background: the socket buffers may not hold it
                await client.send_bulk(HEADER, data)
                await client.send(BulkEnd(round_))

            nursery.start_soon(send)
            assert await server.receive() == HEADER
            assert await server.receive_bulk_data(max_size=size) == data
            assert await server.receive() == BulkEnd(round_)
        await client.aclose()
        nursery.cancel_scope.cancel()


async def _forged_bulk(client: Channel, announced: int, chunks: list[bytes], end: int) -> None:
    """A sender with the key that breaks the bulk rules: encrypted frames written one by one."""
    await client._send_frame(HEADER.CODE, encode_message(HEADER))
    await client._send_frame(MessageCode.BULK_BEGIN, encode_message(BulkBegin(announced)))
    for chunk in chunks:
        await client._send_frame(MessageCode.BULK_CHUNK, chunk)
    await client._send_frame(MessageCode.BULK_END, encode_message(BulkEnd(end)))


@pytest.mark.parametrize(
    ("chunks", "end", "refusal"),
    [
        ([b"a" * 600, b"b" * 600], 1200, "ran past its announced size by 200 bytes"),
        ([b"a" * 600], 600, "announced 1000 bytes but carried 600"),
        ([b"a" * 1000], 999, "announced 999 bytes but carried 1000"),
    ],
)
async def test_a_bulk_transfer_that_breaks_its_announced_size_is_refused(chunks, end, refusal) -> None:
    async with trio.open_nursery() as nursery:
        client, server = await _tcp_pair(nursery)
        await _forged_bulk(client, 1000, chunks, end)  # a few KiB: the socket buffers hold it all
        assert await server.receive() == HEADER
        with pytest.raises(ProtocolError, match=refusal):
            await server.receive_bulk_data(max_size=10_000)
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_concurrent_senders_take_turns_and_a_bulk_transfer_is_never_interleaved() -> None:
    data = os.urandom(2 * MAX_CHUNK_SIZE + 5)
    async with trio.open_nursery() as nursery:
        client, server = await _tcp_pair(nursery)

        async def sender(n: int) -> None:
            for i in range(20):
                await client.send(BulkEnd(n * 100 + i))

        received: list[int] = []
        async with trio.open_nursery() as senders:
            for n in range(5):
                senders.start_soon(sender, n)
            senders.start_soon(client.send_bulk, HEADER, data)
            for _ in range(101):
                message = await server.receive()
                if message == HEADER:
                    assert await server.receive_bulk_data(max_size=len(data)) == data
                else:
                    received.append(message.size)  # type: ignore[attr-defined]
        for n in range(5):
            assert [size for size in received if size // 100 == n] == list(range(n * 100, n * 100 + 20))
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_receive_cancelled_inside_a_large_frame_resumes_where_it_stopped() -> None:
    big = PushPullReply(wants=os.urandom(300_000))
    async with trio.open_nursery() as nursery:
        client, server = await _tcp_pair(nursery)
        wire_stream, recorder = client._send_stream, trio.testing.MemorySendStream()
        client._send_stream = recorder  # capture the encrypted frames, then deliver them in parts
        await client.send(big)
        await client.send(BulkEnd(3))
        wire = recorder.get_data_nowait()
        rest = trio.Event()

        async def deliver() -> None:  # in the background: the socket buffers may not hold it all
            await wire_stream.send_all(wire[:100_000])
            await rest.wait()
            await wire_stream.send_all(wire[100_000:])

        nursery.start_soon(deliver)
        with trio.move_on_after(0.2) as waited:
            await server.receive()
        assert waited.cancelled_caught
        rest.set()
        assert await server.receive() == big
        assert await server.receive() == BulkEnd(3)
        await wire_stream.aclose()
        nursery.cancel_scope.cancel()


async def test_receive_from_a_pipe_cancelled_inside_a_large_frame_resumes_where_it_stopped() -> None:
    """A guest's pipe is read like a socket: a large frame straight into one buffer, part of it on a cancel."""
    big = PushPullReply(wants=os.urandom(300_000))
    recorder = trio.testing.MemorySendStream()
    guest = Channel(recorder, trio.testing.MemoryReceiveStream())  # the plain frames a guest writes
    await guest.send(big)
    await guest.send(BulkEnd(3))
    wire = recorder.get_data_nowait()
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    with os.fdopen(write_end, "wb", buffering=0) as guest_side:
        async with trio.open_nursery() as nursery:
            rest = trio.Event()

            async def deliver() -> None:  # from a thread: a pipe holds 64 KiB
                await trio.to_thread.run_sync(guest_side.write, wire[:100_000])
                await rest.wait()
                await trio.to_thread.run_sync(guest_side.write, wire[100_000:])

            nursery.start_soon(deliver)
            with trio.move_on_after(0.2) as waited:
                await channel.receive()
            assert waited.cancelled_caught
            rest.set()
            assert await channel.receive() == big
            assert await channel.receive() == BulkEnd(3)
    await channel.aclose()


async def pieces():
    for _ in range(3):
        yield b"y" * 300_000


@pytest.mark.parametrize(
    ("data", "max_size", "refusal"),
    [
        (pieces, 900_000, None),
        (pieces, 500_000, "ran past 500000 bytes"),
        (lambda: b"z" * 1000, 999, "1000 bytes is over the limit of 999"),
    ],
)
async def test_bulk_size_limit_holds_for_known_and_streamed_sizes(data, max_size, refusal) -> None:
    left, right = trio.testing.memory_stream_pair()
    sender, receiver = Channel(left), Channel(right)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.send_bulk, HEADER, data())
        if refusal is None:
            assert await receiver.receive_bulk(max_size=max_size) == (HEADER, b"y" * 900_000)
        else:
            with pytest.raises(ProtocolError, match=refusal):
                await receiver.receive_bulk(max_size=max_size)
            nursery.cancel_scope.cancel()


async def test_peer_closing_between_frames_is_end_of_channel() -> None:
    left, right = trio.testing.memory_stream_pair()
    await Channel(left).aclose()
    with pytest.raises(trio.EndOfChannel):
        await Channel(right).receive()


ECHO_GUEST = textwrap.dedent(
    """
    import sys
    from frost_core.wire.pipe import read_bulk, read_frame, write_bulk, write_frame
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    write_frame(stdout, read_frame(stdin))
    header, data = read_bulk(stdin, max_size=10_000_000)
    write_bulk(stdout, header, data[::-1])
    try:
        read_frame(stdin)
    except EOFError:
        sys.exit(0)
    sys.exit(3)
    """
)


async def test_plaintext_pipe_to_a_real_guest_subprocess() -> None:
    data = os.urandom(MAX_CHUNK_SIZE * 2 + 7)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", ECHO_GUEST], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    channel = Channel(process.stdin, process.stdout)
    assert not channel.encrypted
    with trio.fail_after(30):
        await channel.send(BulkEnd(9))
        assert await channel.receive() == BulkEnd(9)
        await channel.send_bulk(HEADER, data)
        assert await channel.receive_bulk(max_size=len(data)) == (HEADER, data[::-1])
        await process.stdin.aclose()
        assert await process.wait() == 0
    await channel.aclose()


class _Pieces:
    """A sink that keeps a copy of each piece handed to it."""

    def __init__(self) -> None:
        self.size, self.pieces, self.emptied = None, [], False

    async def begin(self, size: int) -> None:
        self.size = size

    def filled(self, piece: memoryview) -> None:
        self.pieces.append(bytes(piece))

    async def drained(self) -> None:
        self.emptied = True


async def test_a_bulk_transfer_up_a_guest_pipe_reaches_a_sink_piece_by_piece_as_it_arrives(monkeypatch) -> None:
    """A guest's checkpoint is written to disk while it comes up the pipe (the node's end is a sink's).
    The guest's end writes every frame in one call, not a write each (the node wakes once for them);
    the state's pieces go as they are, never joined."""
    data = os.urandom(3 * MAX_CHUNK_SIZE + 12345)
    calls = []
    real_writev = os.writev

    def counted(fd, buffers):
        calls.append(len(buffers))
        return real_writev(fd, buffers)

    monkeypatch.setattr(os, "writev", counted)
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    sink = _Pieces()
    with os.fdopen(write_end, "wb") as guest_side, trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, write_bulk, guest_side, HEADER, [data[:100], data[100:]])
            assert await channel.receive() == HEADER
            assert await channel.receive_bulk_data(max_size=len(data), sink=sink) == data
    assert sink.size == len(data) and sink.emptied
    assert b"".join(sink.pieces) == data and len(sink.pieces) >= 4
    await channel.aclose()
    assert calls == [2 + 4 * 2 + 1 + 1], "header, begin, 4 chunks (header and part; the first one's in two), end"


async def test_a_state_received_up_a_guest_pipe_is_held_in_memory_once() -> None:
    """A 16 MiB checkpoint costs the node 16 MiB, not twice that (once a copy at the end cost 100 ms at 100 MB)."""
    data = os.urandom(16 << 20)
    read_end, write_end = os.pipe()
    channel = Channel(trio.testing.MemorySendStream(), trio.lowlevel.FdStream(read_end))
    with os.fdopen(write_end, "wb") as guest_side, trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, write_bulk, guest_side, HEADER, [data[:100], data[100:]])
            assert await channel.receive() == HEADER
            tracemalloc.start()
            try:
                received = await channel.receive_bulk_data(max_size=len(data))
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert received == data
    assert peak < 1.5 * len(data)
    await channel.aclose()

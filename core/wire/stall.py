"""A call's deadline that counts from the last bytes that moved, so a big transfer over a slow link goes through.

A flat deadline caps a transfer's size by the link's speed: a minute lets a 256 MiB checkpoint
through only at 36 Mbit/s or more, and ten seconds a 256 MiB result only at 200 Mbit/s, so on a
home upload or a crowded Wi-Fi such a unit could never resume or deliver: each attempt timed out
and the next began anew. Here the deadline moves on by the call's timeout each time a piece of
its bulk data goes out or comes in. A peer that stops taking or sending bytes for that long still
fails the call, as does a reply that does not come within the timeout of the last write. What the
socket still holds then is what the kernel sized its buffer to, about the link's bandwidth times
its round trip (16-41 KiB in tests/scenario/test_slow_link.py's 1 MiB/s link): a fraction of a
second of it, not the timeout's seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Iterator

import trio

from frost_core.wire.channel import BulkSink
from frost_core.wire.framing import MAX_CHUNK_SIZE


class StallDeadline:
    """The deadline of one call: `seconds` from the start, moved on by `moved` (TooSlowError past it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._scope = trio.CancelScope(deadline=trio.current_time() + seconds)

    def moved(self) -> None:
        """Bytes moved: the call has `seconds` again from now."""
        self._scope.deadline = trio.current_time() + self.seconds

    async def paced(self, data: bytes | memoryview | AsyncIterable[bytes | memoryview]) -> AsyncIterator[memoryview]:
        """`data` for `Channel.send_bulk` in pieces of a chunk at most; each one the channel took counts as
        progress (it asks for the next only once the last is written). No view of a piece is held while the
        next is awaited: a piece may point into a buffer its source wants back (`CaptureFeed`)."""
        async with contextlib.aclosing(_pieces(data)) as pieces:
            async for piece in pieces:
                for chunk in _chunks(piece):
                    yield chunk
                    del chunk
                    self.moved()
                del piece

    def watching(self, sink: BulkSink | None = None) -> BulkSink:
        """A sink for `Channel.receive_bulk_data` that counts each piece landing as progress and hands it on to
        `sink`, if any."""
        return _Watching(self, sink)


class _Watching:
    def __init__(self, deadline: StallDeadline, sink: BulkSink | None) -> None:
        self._deadline, self._sink = deadline, sink

    async def begin(self, size: int) -> None:
        self._deadline.moved()
        if self._sink is not None:
            await self._sink.begin(size)

    def filled(self, piece: memoryview) -> None:
        self._deadline.moved()
        if self._sink is not None:
            self._sink.filled(piece)

    async def drained(self) -> None:
        if self._sink is not None:
            await self._sink.drained()


async def _pieces(data: bytes | memoryview | AsyncIterable[bytes | memoryview]) -> AsyncIterator[memoryview]:
    """`data`'s pieces as views (bytes: one piece); an async generator among them is closed with this one."""
    if isinstance(data, bytes | bytearray | memoryview):
        yield memoryview(data)
        return
    iterator = aiter(data)
    try:
        async for piece in iterator:
            yield memoryview(piece)
            del piece
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()


def _chunks(view: memoryview) -> Iterator[memoryview]:
    for start in range(0, len(view), MAX_CHUNK_SIZE):
        yield view[start:start + MAX_CHUNK_SIZE]


@contextlib.contextmanager
def stall_deadline(seconds: float) -> Iterator[StallDeadline]:
    """Run the block under a `StallDeadline` of `seconds`; trio.TooSlowError if it passes."""
    deadline = StallDeadline(seconds)
    with deadline._scope:
        yield deadline
    if deadline._scope.cancelled_caught:
        raise trio.TooSlowError

"""A capture handed on piece by piece while it comes up the guest's pipe, so a move sends it before it is whole.

The guest's side (`RunningGuest`) fills a `CaptureFeed` through `FeedingSink` as each piece
lands in the buffer the state is received into, and seals it with the SHA-256 once the whole
state is hashed; the move's side reads `begun`, `pieces` and `sealed` and sends them on (the
hash as a trailer after the state). The pieces are views into that buffer: while one is held,
the buffer cannot become the record's bytes without a copy, so once the whole state is in, the
receiving side says so (the eviction kills the guest then, as without a move) and waits for the
sender to catch up (`FEED_LAG` at most) before it lets go of the buffer. A state that does not
come whole (the guest missed its deadline, or died) fails the sender at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from frost_core.api.errors import CheckpointError
from frost_core.wire.channel import BulkSink

FEED_LAG = 5.0
"""Seconds the pipe's receiver waits, once the whole state is in (the guest killed meanwhile), for the
move to have sent every piece (on loopback 100 MiB go in ~0.1-0.4 s); past that the state is copied
out of the buffer the pieces still point into (a 100 MiB copy, ~50 ms) and the capture goes on."""


class CaptureFeed:
    """One capture's pieces, from the guest's pipe to a move that sends them as they arrive."""

    def __init__(self) -> None:
        self.identity: dict[str, Any] = {}
        """The checkpoint's identity fields (`checkpoints.IDENTITY`), once begun."""
        self.size = 0
        self.began_at = 0.0
        """`time.monotonic()` when the state began to come (what a move's transfer is timed from)."""
        self.sha256: str | None = None
        self._pieces: list[memoryview] = []
        self._handed = 0
        self._closed: str | None = None
        self._began = trio.Event()
        self._changed = trio.Event()
        self._consumed = trio.Event()

    # --- the guest's side --------------------------------------------------------------------

    def begin(self, identity: dict[str, Any], size: int) -> None:
        self.identity, self.size, self.began_at = dict(identity), size, time.monotonic()
        self._began.set()
        if not size:
            self._consumed.set()

    def filled(self, piece: memoryview) -> None:
        """The next bytes, in their final place: unchanged until `release` (the sender may still read them)."""
        self._pieces.append(piece)
        self._handed += len(piece)
        self._wake()

    async def caught_up(self, limit: float) -> None:
        """Return once the sender took every piece in (or it is gone), or after `limit` seconds."""
        with trio.move_on_after(limit):
            await self._consumed.wait()
        if self._consumed.is_set():
            self.release()

    def seal(self, sha256: str) -> None:
        """The whole state is hashed: the sender may send its trailer."""
        if self._closed is None:
            self.sha256 = sha256
            self._wake()

    def close(self, why: str = "the capture did not come through") -> None:
        """No more comes: a sender still waiting for a piece or the hash fails with `why` (a no-op once sealed)."""
        if self._closed is None and self.sha256 is None:
            self._closed = why
        self._consumed.set()
        self._began.set()
        self._wake()

    def release(self) -> None:
        """Let go of the pieces, so the buffer they point into can become the record's bytes."""
        self._pieces.clear()

    # --- the move's side ---------------------------------------------------------------------

    async def begun(self) -> None:
        """Return once the state's size and identity are known (CheckpointError if it never comes)."""
        await self._began.wait()
        self._raise_if_closed()

    async def pieces(self) -> AsyncIterator[memoryview]:
        """The state's pieces as they arrive, from the first (a second read starts over, while they are held)."""
        index = offset = 0
        try:
            while offset < self.size:
                if index < len(self._pieces):
                    piece = self._pieces[index]
                    index += 1
                    offset += len(piece)
                    yield piece
                    del piece  # the buffer is the record's bytes without a copy only once no view of it is left
                    continue
                self._raise_if_closed()
                if self._handed > offset:
                    raise CheckpointError("the capture's pieces were let go of before they were sent")
                self._changed = trio.Event()
                await self._changed.wait()
        finally:
            if offset >= self.size:
                self._consumed.set()
                self.release()

    async def sealed(self) -> str:
        """The state's SHA-256, once hashed (CheckpointError if the capture failed)."""
        while self.sha256 is None:
            self._raise_if_closed()
            self._changed = trio.Event()
            await self._changed.wait()
        return self.sha256

    def _raise_if_closed(self) -> None:
        if self._closed is not None and self.sha256 is None:
            raise CheckpointError(self._closed, title="Capture not sent")

    def _wake(self) -> None:
        self._changed.set()


class FeedingSink:
    """A `BulkSink` that hands each piece to `inner` (the durable write) and to a `CaptureFeed`;
    `whole` is called once every byte is in (the guest has nothing more to send)."""

    def __init__(self, inner: BulkSink, feed: CaptureFeed, identity: dict[str, Any],
                 whole: Callable[[], None]) -> None:
        self._inner, self._feed, self._identity, self._whole = inner, feed, identity, whole
        self._received = 0

    async def begin(self, size: int) -> None:
        await self._inner.begin(size)
        self._feed.begin(self._identity, size)

    def filled(self, piece: memoryview) -> None:
        self._inner.filled(piece)
        self._feed.filled(piece)
        self._received += len(piece)

    async def drained(self) -> None:
        if self._received == self._feed.size:
            self._whole()
        else:
            self._feed.close("the guest's state did not come whole")
        await self._inner.drained()
        await self._feed.caught_up(FEED_LAG)

"""The sink that writes a checkpoint to the store while it arrives, from a peer's channel or a guest's pipe."""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from frost_core.api.errors import CheckpointError
from frost_core.storage.checkpoints import IncomingCheckpoint

log = logging.getLogger("frost.checkpoints")

STAGE_FROM = 8 << 20
"""A guest's state from this size on is written to disk while it comes up the pipe; below it, it is
received whole, then committed in one go. Staged, each checkpoint pays hand-offs between the loop
and the writing threads, which only a large state's overlap repays: from 30 MB on staging won, at
10 MB they were even, at 1 MB received-whole kept 0.36-0.56 of a raw write+fsync against 0.23-0.27
(load 10-11; once hand-offs were cut, 0.33-0.43 against 0.40-0.42 at load 8: even). A staged state
is renamed into place (`CheckpointStore.write`), never written into one of the task's slots."""


class StagingSink:
    """A `BulkSink` handing each piece of an arriving state to an `IncomingCheckpoint` as it lands.

    `start(size)` opens the temp file, in a worker thread; states under `from_size` bytes are not
    staged (`incoming` stays None) and are written whole once they are in, as is one whose temp file the
    disk refused (full): its write then fails, and says so, where every checkpoint's failure is handled.
    """

    def __init__(self, start: Callable[[int], IncomingCheckpoint], from_size: int = 0) -> None:
        self._start, self._from_size = start, from_size
        self.incoming: IncomingCheckpoint | None = None

    async def begin(self, size: int) -> None:
        if size >= self._from_size:
            try:
                self.incoming = await trio.to_thread.run_sync(self._start, size)
            except CheckpointError as error:
                log.info("a checkpoint of %d bytes is received whole: %s", size, error.message)

    def filled(self, piece: memoryview) -> None:
        if self.incoming is not None:
            self.incoming.filled(piece)

    async def drained(self) -> None:
        if self.incoming is not None:
            await trio.to_thread.run_sync(self.incoming.wait_written)

    async def abort(self) -> None:
        """Remove the temp file unless it was installed (a no-op then): after any outcome."""
        if self.incoming is not None and not self.incoming.installed:  # no trip to a thread after a success
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.incoming.abort)

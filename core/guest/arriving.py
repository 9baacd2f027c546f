"""A moved-in unit's saved state while it still arrives, so its guest can start on the move's header."""

from __future__ import annotations

import os

import trio

from frost_core.api.errors import CheckpointError
from frost_core.guest import handoff
from frost_core.storage.checkpoints import CheckpointRecord
from frost_core.storage.staging import StagingSink

FILL_FROM = 1 << 20
"""From this size on, the state is copied into the guest's sealed memfd as it arrives (a copy of 256 KiB
pieces on the loop, beside the network's), not in one pass after it is in (32-42 ms at 100 MiB, which came
between the state's arrival and the guest's start); below it, the one pass costs under a millisecond."""


class ArrivingState:
    """A `BulkSink` that stages an arriving state on disk (`staging`) and fills the guest's memfd with it,
    and tells the guest's side when it is in (`whole`).

    The channel's receiver calls `begin`, `filled`, `drained`, then `arrived` or `failed`; the guest's
    side waits in `whole` and takes the memfd with `take_memfd`. `close` (after any outcome) closes a
    memfd no guest took."""

    def __init__(self, header: CheckpointRecord, staging: StagingSink) -> None:
        self.header = header
        """The checkpoint's identity, its state still empty."""
        self.size = 0
        self._staging = staging
        self._begun = trio.Event()
        self._done = trio.Event()
        self._record: CheckpointRecord | None = None
        self._why = ""
        self._memfd: int | None = None
        self._filled = 0

    # --- the receiving side (`wire.channel.BulkSink`, then the outcome) ------------------------

    async def begin(self, size: int) -> None:
        self.size = size
        await self._staging.begin(size)  # (what it raises, the receiver gives `failed`)
        self._begun.set()  # the guest may start now
        if size >= FILL_FROM and handoff.AVAILABLE:
            try:
                self._memfd = os.memfd_create("frost-state", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            except OSError:
                self._memfd = None  # (it is copied after, or goes through the pipe)

    def filled(self, piece: memoryview) -> None:
        self._staging.filled(piece)
        if self._memfd is not None:
            try:
                handoff.write_all(self._memfd, piece)
                self._filled += len(piece)
            except OSError:
                self._drop_memfd()

    async def drained(self) -> None:
        await self._staging.drained()

    def arrived(self, record: CheckpointRecord) -> None:
        """The whole state is in (`record`, its hash not yet checked: the store's write does)."""
        self._record = record
        self._begun.set()
        self._done.set()

    def failed(self, why: str) -> None:
        self._why = why
        self._begun.set()
        self._done.set()

    def close(self) -> None:
        self._drop_memfd()

    # --- the guest's side ---------------------------------------------------------------------

    async def begun(self) -> bool:
        """Whether its size came (False: it failed before)."""
        await self._begun.wait()
        return not self._why

    async def whole(self) -> CheckpointRecord:
        """The record once it is all in; CheckpointError if it never will be."""
        await self._done.wait()
        if self._record is None:
            raise CheckpointError(f"checkpoint {self.header.seq} of task {self.header.task_id} did not arrive "
                                  f"whole: {self._why}")
        return self._record

    def take_memfd(self) -> int | None:
        """The memfd filled as the state arrived, sealed (the caller closes it); None if there is none (then
        the caller copies the state itself). Only once the state is whole."""
        assert self._done.is_set()
        fd, self._memfd = self._memfd, None
        if fd is None:
            return None
        try:
            if self._record is None or self._filled != self._record.size:
                raise OSError(f"{self._filled} bytes of {self.size} were copied as they came")
            handoff.seal(fd, self._filled)
        except OSError:
            os.close(fd)
            return None
        return fd

    def _drop_memfd(self) -> None:
        if self._memfd is not None:
            os.close(self._memfd)
            self._memfd = None

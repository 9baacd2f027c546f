"""Whether the disk of the node's data folder has room for guests, as its free space and the node's stores say.

A guest writes checkpoints and a result, and its master and host each commit it: on a full disk all of that
fails. So below a floor of free space (`guests.min_free_disk_mb`, BOINC's "leave at least ... free") the node
takes no new guest, before its own writes start failing, until it has `ROOM_AGAIN` more than the floor; the
guests it runs go on (a checkpoint that fails is tried again later, the last one kept). A store whose write
the disk refused anyway (another program filled it at once; a read-only or failing disk, which free space
does not show) says so here, and holds the node's hosting back until no refusal came for `REFUSAL_HOLD`
seconds: each store tries again on its own clock (seconds apart), so a disk that still refuses keeps the
hold, and one that takes writes again lifts it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from frost_core.api.errors import StorageError
from frost_core.events import EventLog

MIB = 1 << 20
REFUSAL_HOLD = 10.0
"""Seconds after the last refused write before the node takes guests again (if free space allows)."""
RETRY_AFTER = 5.0
"""Seconds a store waits before it tries again a write the disk refused (its pending writes kept meanwhile)."""
LOOK_EVERY = 2.0
"""Seconds between two looks at the free space (one statvfs: cheap, but asked for on every snapshot)."""
ROOM_AGAIN = 64 * MIB
"""Free space above the floor a held node waits for before it takes guests again: a disk hovering at the floor
(a download, a log) would otherwise flip it every look, and warn each time."""


class DiskWatch:
    def __init__(self, folder: Path, events: EventLog, *, floor: Callable[[], int],
                 free_bytes: Callable[[Path], int] = lambda folder: shutil.disk_usage(folder).free,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`floor`: the free bytes below which no guest is taken (0: none); `free_bytes` and `clock` for tests."""
        self._folder = folder
        self._events = events
        self._floor = floor
        self._free_bytes = free_bytes
        self._clock = clock
        self._refused_at = -float("inf")
        self._refusal = ""
        self._looked_at = -float("inf")
        self._free: int | None = None
        self._reason: str | None = None   # as last told in the events: a change is told once
        self._low = False                 # held for want of free space (until ROOM_AGAIN above the floor)

    def refused(self, error: StorageError) -> None:
        """A store's write was refused: the node takes no guest until the disk has taken writes again."""
        self._refused_at = self._clock()
        self._refusal = error.message
        self.reason()

    def reason(self) -> str | None:
        """Why this node takes no new guest because of its disk, or None if the disk has room."""
        now = self._clock()
        if now - self._looked_at >= LOOK_EVERY:
            self._looked_at = now
            try:
                self._free = self._free_bytes(self._folder)
            except OSError:
                self._free = None   # (the folder is gone or unreadable: the stores' writes say more)
        floor = self._floor()
        self._low = bool(floor) and self._free is not None and self._free < floor + (ROOM_AGAIN if self._low else 0)
        if now - self._refused_at < REFUSAL_HOLD:
            reason = f"the disk refused a write ({self._refusal}); no new guest until it takes writes again"
        elif self._low:
            reason = (f"the disk of {self._folder} has {self._free / MIB:.0f} MiB free, under "
                      f"guests.min_free_disk_mb ({floor // MIB}); no new guest until it has "
                      f"{(floor + ROOM_AGAIN) // MIB} MiB")
        else:
            reason = None
        self._tell(reason)
        return reason

    def _tell(self, reason: str | None) -> None:
        was_held, self._reason = self._reason is not None, reason
        if (reason is not None) == was_held:
            return
        if reason is not None:
            self._events.add("disk", f"{reason}; the guests running here go on", severity="warning",
                             title="Disk full")
        else:
            self._events.add("disk", "the disk has room again: this node takes guests")

"""When a node rebuilds the snapshot its UI draws: soon after a command, at a steady pace while a sweep runs.

Every placement, result and figure reading changes what the screen shows. Snapshotted up to ten times a second, a
watched 10,000-unit sweep of tiny units ran at 0.83-0.86x the speed of an unwatched one, and 0.96x at two a second
(bench/watched_sweep_cost.py): the master's own work waited behind the screen. A command (the owner's pause, evict,
submit) is what a person waits to see, so its effect goes out at once; the rest keeps a pace a person reads at (htop
redraws every 1.5 s).
"""

from __future__ import annotations

import trio

PUBLISH_INTERVAL = 0.1      # a command's effect reaches the UI at most this long after the last snapshot
STEADY_INTERVAL = 0.5       # other changes, when they keep coming, at this pace
SNAPSHOT_COST_SHARE = 10    # and building snapshots takes at most a tenth of the node's time


class SnapshotPace:
    """The node marks changes here; its publishing loop waits for one (`changed`), builds, then rests (`rest`)."""

    def __init__(self) -> None:
        self._changed = trio.Event()
        self._commanded = trio.Event()

    def mark(self, *, command: bool = False) -> None:
        """Something a snapshot shows changed; `command`: what a command did, which ends the rest early."""
        if command:
            self._commanded.set()
        self._changed.set()

    async def changed(self) -> None:
        """Return once something changed since the last return."""
        await self._changed.wait()
        self._changed, self._commanded = trio.Event(), trio.Event()

    async def rest(self, cost: float) -> None:
        """After a snapshot that took `cost` seconds to build: STEADY_INTERVAL, or PUBLISH_INTERVAL if a command comes
        meanwhile; never less than SNAPSHOT_COST_SHARE times the cost."""
        began = trio.current_time()
        spacing = max(PUBLISH_INTERVAL, cost * SNAPSHOT_COST_SHARE)
        with trio.move_on_after(max(STEADY_INTERVAL, spacing)):
            await self._commanded.wait()
            await trio.sleep_until(began + spacing)

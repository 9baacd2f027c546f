"""`NodeApi`: the one contract between a node and whatever shows or scripts it.

The embedded node (`frost_core.node.wiring.Node`) implements it in-process; a client attached
over the control socket implements it across a connection. The UI holds the latest snapshot,
sends commands one way and learns their outcome from later snapshots and events, so no screen
needs to know which of the two it has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from frost_core.api.commands import Command
from frost_core.api.snapshot import NodeSnapshot


class NodeApi(Protocol):
    """What the UI needs of a node (tests substitute a fake)."""

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled; report readiness once the first snapshot can be read."""

    def snapshot(self) -> NodeSnapshot:
        """The latest snapshot, without blocking."""

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        """Call `callback` (from the node's loop) whenever a new snapshot is ready."""

    def send_nowait(self, command: Command) -> None:
        """Hand a command to the node without waiting; its outcome shows in later snapshots."""

"""`NodeApi`: the one contract between a node and whatever shows or scripts it.

The embedded node (`frost_core.node.wiring.Node`) implements it in-process; a client attached
over the control socket implements it across a connection. The UI holds the latest snapshot,
sends commands one way and learns their outcome from later snapshots and events, so no screen
needs to know which of the two it has. Scripts (the CLI) wait instead: `execute` and `ask`
return the typed reply each command and query declares as its `REPLY`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from frost_core.api.commands import Command
from frost_core.api.queries import Query
from frost_core.api.snapshot import NodeSnapshot


@dataclass(frozen=True)
class Link:
    """How the UI reaches its node: what the header says, and whether commands can get through."""

    kind: str                  # embedded (in this process) or attached (over a connection)
    where: str                 # "this process", "local node", or HOST:PORT
    connected: bool = True     # False while an attached UI reconnects: commands are dropped then
    watch: bool = False        # attached to watch only: the node refuses every command
    switchable: bool = False   # `next_target()` leads to another node (a host list)
    problem: str = ""          # why it cannot attach where trying again will not help ("owner token refused")
    remote: bool = False       # the node runs on another machine: the paths in its views are not this machine's

    def describe(self, *, short: bool = False) -> str:
        """What the header says; `short` leaves out where (the header names the node) for a narrow terminal."""
        if self.kind == "embedded":
            return "embedded" if short else "embedded node"
        if short:
            return ("watching" if self.watch else "attached") if self.connected else self.problem or "reconnecting…"
        if self.connected:
            text = f"attached to {self.where}"
        else:
            text = f"{self.problem}: {self.where}" if self.problem else f"reconnecting to {self.where}…"
        return text + (" (watching)" if self.watch else "")


EMBEDDED = Link(kind="embedded", where="this process")


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

    def link(self) -> Link:
        """How this UI reaches the node right now (a change comes with a new snapshot)."""

    def next_target(self) -> None:
        """Leave this node for the next of the host list; does nothing unless `link().switchable`."""

    async def execute(self, command: Command) -> Any:
        """Carry out `command` now and return its REPLY; a FrostError says why it could not."""

    async def ask(self, query: Query) -> Any:
        """Answer `query` with its REPLY, changing nothing; a FrostError says why it could not."""

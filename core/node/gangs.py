"""A node's gang runtime: the coordinators of the gangs it is master of and the members it hosts, on one post.

Outgoing gang messages leave through one GangPost (in order per destination) as wire headers
and bulk (`cluster.gang_wire`) handed to `send`; incoming ones (`receive`) go to the master's
GangRuns when they are for a coordinator and to the GangHost otherwise. A message to this
node itself takes the same way without the network.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import trio

from frost_core.cluster.gang_host import GangHost, OpenMember
from frost_core.cluster.gang_post import GangPost, Outgoing
from frost_core.cluster.gang_wire import for_coordinator, gang_from_wire, gang_to_wire
from frost_core.cluster.messages import GangStart
from frost_core.master.gang_runs import GangRuns
from frost_core.policies.views import NodeView
from frost_core.wire.messages import Message

Send = Callable[[str, Message, "bytes | None"], Awaitable[None]]
"""Sends a gang header (and its bulk) to another node; NodeUnavailableError if it did not take it in."""


class Gangs:
    """Node `node_id`'s gang runtime; `serve` runs it."""

    def __init__(self, node_id: str, send: Send, open_member: OpenMember, table: Callable[[], Iterable[NodeView]],
                 now: Callable[[], float], *, named: Callable[[str], str] = lambda node_id: node_id[:8]) -> None:
        """`named`: a host as a gang's reasons name it (`api.wording.peer_named`)."""
        self.node_id = node_id
        self._send = send
        self.post = GangPost(self._deliver, self._failed)
        self.runs = GangRuns(self.post, now, named)
        self.host = GangHost(node_id, open_member, self.post, table)

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.post.run_in(nursery)
            self.host.run_in(nursery)
            task_status.started()
            await trio.sleep_forever()

    def receive(self, peer: str, header: Message, data: bytes | None) -> None:
        """A gang message from node `peer`; ProtocolError if it is malformed."""
        message = gang_from_wire(header, data)
        if for_coordinator(header):
            self.runs.receive(peer, message)
        else:
            self.host.receive(peer, message, header.spec if isinstance(header, GangStart) else None)

    async def _deliver(self, to: str, outgoing: Outgoing) -> None:
        header, data = gang_to_wire(outgoing.message, outgoing.spec, home=outgoing.home)
        if to == self.node_id:
            await trio.lowlevel.checkpoint()
            self.receive(self.node_id, header, data)
        else:
            await self._send(to, header, data)

    def _failed(self, to: str, message: object, reason: str) -> None:
        self.runs.send_failed(to, message, reason)
        self.host.send_failed(to, message, reason)

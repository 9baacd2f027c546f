"""Gang messages to a node leave in the order they were posted, without holding up the one who posts them.

The gang coordinator and sites return messages as actions and expect each node to get its own
in order (a member's start before its first release, a stop before the next start); the
network may still lose them, which the sans-IO classes recover from. Each destination gets one
task that sends its queue one call at a time; a call that fails is reported to `on_failed`
and the queue goes on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from frost_core.api.errors import NodeUnavailableError
from frost_core.cluster.messages import GangSpec

log = logging.getLogger("frost.gang")


@dataclass(frozen=True)
class Outgoing:
    """A gang message on its way: `home` marks Mail for the gang's coordinator on that node, `spec` goes
    with a StartMember."""

    message: object
    home: bool = False
    spec: GangSpec | None = None


Deliver = Callable[[str, Outgoing], Awaitable[None]]
"""Sends one gang message to a node and returns once that node took it in; NodeUnavailableError if not."""


class GangPost:
    """Per-destination ordered delivery of gang messages; its senders run in the nursery given to `run_in`."""

    def __init__(self, deliver: Deliver, on_failed: Callable[[str, object, str], None] | None = None) -> None:
        self._deliver = deliver
        self._on_failed = on_failed
        self._queues: dict[str, trio.MemorySendChannel] = {}
        self._nursery: trio.Nursery | None = None

    def run_in(self, nursery: trio.Nursery) -> None:
        """Start its tasks in `nursery` from now on (the node's gang runtime owns it)."""
        self._nursery = nursery

    def post(self, to: str, message: object, *, home: bool = False, spec: GangSpec | None = None) -> None:
        """Queue `message` for node `to` behind what was posted to it before (see Outgoing)."""
        queue = self._queues.get(to)
        if queue is None:
            assert self._nursery is not None, "run_in() first"
            queue, inbox = trio.open_memory_channel(math.inf)
            self._queues[to] = queue
            self._nursery.start_soon(self._send_all, to, inbox)
        queue.send_nowait(Outgoing(message, home, spec))

    async def _send_all(self, to: str, inbox: trio.MemoryReceiveChannel) -> None:
        async with inbox:
            async for outgoing in inbox:
                message = outgoing.message
                try:
                    await self._deliver(to, outgoing)
                except NodeUnavailableError as error:
                    log.info("gang %s to %s not delivered: %s", type(message).__name__, to[:8], error.message)
                    if self._on_failed is not None:
                        self._on_failed(to, message, error.message)

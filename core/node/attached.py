"""`AttachedNode`: the `NodeApi` of a node in another process, reached over a control connection.

The UI cannot tell it from the embedded node: it reads the latest snapshot (pushed by the node),
sends commands one way, and learns their outcome from later snapshots; `execute` and `ask` wait
for a typed reply on the same connection. When the connection breaks or falls silent it says so
through `link()` and reconnects by itself; a command given while it is not connected is dropped,
never replayed later against a state the owner did not see. A node that refuses the owner token (or
one with no token kept for it) is not a lost connection: the UI says so and what to do, and asks
again only now and then.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from frost_core.api.commands import Command
from frost_core.api.errors import AuthenticationError, FrostError, NodeUnavailableError, ProtocolError
from frost_core.api.node_api import Link
from frost_core.api.snapshot import HostingView, NodeSnapshot
from frost_core.api.queries import Query
from frost_core.node.attach_protocol import (
    KEEP_ALIVE_INTERVAL, SILENCE_TIMEOUT, AttachCommand, AttachRequest, KeepAlive, ReceivedViews, SnapshotPush,
    receive_snapshot,
)
from frost_core.node.control import ControlReply, Request, receive_reply_body, reply_value, request_message
from frost_core.wire.channel import Address, Channel, open_channel
from frost_core.wire.codec import encode
from frost_core.wire.messages import to_plain
from frost_core.wire.security import ClusterKey

log = logging.getLogger("frost.attached")

CONNECT_TIMEOUT = 10.0
RETRY_INTERVAL = 0.5
REFUSED_RETRY_INTERVAL = 30.0
"""Seconds between attempts once the node refused the owner token: the same token will not do a moment later, and
each attempt is a line in that node's Events (at RETRY_INTERVAL, one every 5 s for as long as this UI runs)."""
COMMAND_QUEUE = 64


@dataclass(frozen=True)
class _Waiting:
    """A request that wants its reply: it travels in the command queue, its answer comes back here."""

    request: Request
    reply: trio.MemorySendChannel[ControlReply | None]


@dataclass(frozen=True)
class Target:
    """One node the UI can attach to: how the header names it, and how to open its connection."""

    where: str
    connect: Callable[[], Awaitable[Channel]]
    attached: Callable[[], None] = lambda: None
    """Called after each attachment: a token typed for this node is kept once the node has taken it."""
    remote: bool = False
    """On another machine (`Link.remote`)."""


def local_target(socket_path: Path) -> Target:
    """The node of this data dir, over its Unix control socket (mode 0600: this account only)."""

    async def connect() -> Channel:
        return Channel(await trio.open_unix_socket(str(socket_path)))

    return Target("local node", connect)


def remote_target(address: Address, token: Callable[[], ClusterKey | None], client_id: str, *,
                  attached: Callable[[], None] = lambda: None) -> Target:
    """A node on another machine, over a channel keyed by its owner token. `token` is asked at each attempt, so a
    token kept while the UI runs (`frost-tui key remember`) is tried at the next one; None: none is kept here,
    and the UI says how to get one when it comes to that node."""

    async def connect() -> Channel:
        key = token()
        if key is None:
            raise AuthenticationError("no owner token for it is kept here", title="no owner token")
        try:
            return await open_channel(address, key, client_id)
        except AuthenticationError:
            raise AuthenticationError("it refused this UI's owner token", title="owner token refused") from None

    return Target(f"{address[0]}:{address[1]}", connect, attached, remote=True)


class AttachedNode:
    """A node elsewhere, seen through the snapshots it pushes; `next_target()` switches between nodes."""

    def __init__(self, targets: Sequence[Target], *, watch: bool = False) -> None:
        if not targets:
            raise ValueError("an attached UI needs at least one node to attach to")
        self._targets = tuple(targets)
        self._index = 0
        self._watch = watch
        self._connected = False
        self._problem = ""   # the current target's token was refused, or none is kept (`Link.problem`)
        self._snapshot = waiting_snapshot(self._targets[0].where, time.time())
        self._listener: Callable[[NodeSnapshot], None] | None = None
        self._commands: trio.MemorySendChannel[Command | _Waiting] | None = None
        self._waiting: deque[_Waiting] = deque()
        self._session_scope: trio.CancelScope | None = None
        self._trio_token: trio.lowlevel.TrioToken | None = None

    # -- NodeApi ---------------------------------------------------------------------------

    def snapshot(self) -> NodeSnapshot:
        return self._snapshot

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        self._listener = callback

    def link(self) -> Link:
        target = self._targets[self._index]
        return Link(kind="attached", where=target.where, connected=self._connected, watch=self._watch,
                    switchable=len(self._targets) > 1, problem=self._problem, remote=target.remote)

    def send_nowait(self, command: Command) -> None:
        """Queue `command` for the node; dropped while not connected (see the module docstring)."""
        if self._trio_token is None:
            return
        self._trio_token.run_sync_soon(self._enqueue, command)

    async def execute(self, command: Command) -> Any:
        """Carry out `command` on the node and return its REPLY (refused on a watch connection)."""
        return await self._request(command)

    async def ask(self, query: Query) -> Any:
        return await self._request(query)

    def next_target(self) -> None:
        """Leave this node for the next one in the list (the same one again if it is the only one)."""
        if self._trio_token is not None:
            self._trio_token.run_sync_soon(self._switch)

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Attach, and attach again after every loss, until cancelled. Ready at once: the first
        snapshot says whom it waits for until the node's own arrives."""
        self._trio_token = trio.lowlevel.current_trio_token()
        task_status.started()
        while True:
            target = self._targets[self._index]
            # (`next_target()` cancels the attempt or the wait after it: the next node is tried at once.)
            with trio.CancelScope() as self._session_scope:
                retry_after = RETRY_INTERVAL
                try:
                    await self._attach(target)
                except* AuthenticationError as refused:
                    log.warning("not attached to %s: %s", target.where, refused.exceptions[0])
                    self._token_problem(target, refused.exceptions[0])
                    retry_after = REFUSED_RETRY_INTERVAL
                except* (OSError, FrostError, trio.TooSlowError, trio.EndOfChannel, trio.BrokenResourceError) as lost:
                    log.info("attachment to %s lost: %s", target.where, lost.exceptions[0])
                if self._connected:
                    self._connected = False
                    self._publish(dataclasses.replace(self._snapshot))  # same figures, the header tells
                await trio.sleep(retry_after)

    # -- one attachment ----------------------------------------------------------------------

    async def _attach(self, target: Target) -> None:
        with trio.fail_after(CONNECT_TIMEOUT):
            channel = await target.connect()
        async with channel:
            with trio.fail_after(CONNECT_TIMEOUT):
                await channel.send(AttachRequest(watch=self._watch))
                first = await channel.receive()
                if not isinstance(first, SnapshotPush):
                    raise ProtocolError(f"the node answered the attach request with {type(first).__name__}")
                views = ReceivedViews()   # (this connection's: a node reconnected to may be another one)
                snapshot = await receive_snapshot(channel, views)
            commands_in, commands_out = trio.open_memory_channel[Command | _Waiting](COMMAND_QUEUE)
            self._commands = commands_in
            self._connected = True
            self._problem = ""
            log.info("attached to %s", target.where)
            target.attached()
            self._publish(snapshot)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._send_commands, channel, commands_out)
                    await self._receive_snapshots(channel, views)
                    nursery.cancel_scope.cancel()
            finally:
                self._commands = None
                self._fail_waiting(commands_out)

    async def _receive_snapshots(self, channel: Channel, views: ReceivedViews) -> None:
        while True:
            # The whole message, its body too: a node stopped half way through a snapshot is as silent as one
            # stopped between two, and would otherwise hold this reader (and the UI's "attached") for ever.
            with trio.move_on_after(SILENCE_TIMEOUT) as silence:
                message = await channel.receive()
                if isinstance(message, SnapshotPush):
                    self._publish(await receive_snapshot(channel, views))
                elif isinstance(message, ControlReply) and self._waiting:
                    body = await receive_reply_body(channel, message)
                    self._waiting.popleft().reply.send_nowait(body)
                elif not isinstance(message, KeepAlive):
                    raise ProtocolError(f"expected a snapshot or a keep-alive, got {type(message).__name__}")
            if silence.cancelled_caught:
                raise NodeUnavailableError(f"the node said nothing for {SILENCE_TIMEOUT:.0f} s")

    async def _send_commands(self, channel: Channel, commands: trio.MemoryReceiveChannel[Command | _Waiting]) -> None:
        """Commands and requests as they come, a keep-alive when there were none for KEEP_ALIVE_INTERVAL."""
        while True:
            command = None
            with trio.move_on_after(KEEP_ALIVE_INTERVAL):
                command = await commands.receive()
            if command is None:
                await channel.send(KeepAlive())
            elif isinstance(command, _Waiting):
                self._waiting.append(command)  # replies come in the order the requests went
                await channel.send(request_message(command.request))
            else:
                await channel.send(AttachCommand(kind=type(command).__name__,
                                                 fields=encode(to_plain(type(command), command))))

    async def _request(self, request: Request) -> Any:
        if self._commands is None:
            raise NodeUnavailableError(f"not attached to {self._targets[self._index].where} right now")
        reply_in, reply_out = trio.open_memory_channel[ControlReply | None](1)
        await self._commands.send(_Waiting(request, reply_in))
        reply = await reply_out.receive()
        if reply is None:
            raise NodeUnavailableError(f"the attachment to {self._targets[self._index].where} was lost "
                                       "before the node answered")
        return reply_value(request, reply)

    def _fail_waiting(self, unsent: trio.MemoryReceiveChannel[Command | _Waiting]) -> None:
        """The attachment ended: every request still owed a reply gets None (NodeUnavailableError)."""
        while True:
            try:
                item = unsent.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            if isinstance(item, _Waiting):
                self._waiting.append(item)
        while self._waiting:
            self._waiting.popleft().reply.send_nowait(None)

    # -- helpers ------------------------------------------------------------------------------

    def _enqueue(self, command: Command) -> None:
        if self._commands is None:
            log.info("not attached: %s dropped", type(command).__name__)
            return
        try:
            self._commands.send_nowait(command)
        except trio.WouldBlock:
            log.warning("too many commands at once: %s dropped", type(command).__name__)

    def _token_problem(self, target: Target, error: AuthenticationError) -> None:
        """Say in the header, and where the node's state would be, what is wrong with the token and how to fix it."""
        self._problem = error.title
        if self._snapshot.node_id:   # (a node seen before: its last figures stay, the header tells)
            self._publish(dataclasses.replace(self._snapshot))
        else:
            self._publish(waiting_snapshot(target.where, time.time(), reason=(
                f"{error.message}: `frost-tui key owner-token` there, then "
                f"`frost-tui key remember {target.where} TOKEN` here.")))

    def _switch(self) -> None:
        self._index = (self._index + 1) % len(self._targets)
        self._problem = ""
        self._connected = False
        self._publish(waiting_snapshot(self._targets[self._index].where, time.time()))
        if self._session_scope is not None:
            self._session_scope.cancel()

    def _publish(self, snapshot: NodeSnapshot) -> None:
        self._snapshot = snapshot
        if self._listener is not None:
            self._listener(snapshot)


def waiting_snapshot(where: str, now: float, *, reason: str = "") -> NodeSnapshot:
    """What the UI shows before the node's first snapshot: nothing known yet, and whom it waits for (or `reason`)."""
    hosting = HostingView(
        state="unknown", reason=reason or f"waiting for the node at {where}", paused_until=None, finishing=False,
        transfer_mode="neutral", system_average=0.0, lower_threshold=0.0, upper_threshold=0.0,
        memory_pool_bytes=0, memory_used_bytes=0, guest_cpus=0,
    )
    return NodeSnapshot(
        node_id="", name=where, address="", cluster_join_code="", taken_at=now, hosting=hosting, history=(),
        peers=(), guests=(), assignments=(), plugins=(), events=(), settings={},
    )

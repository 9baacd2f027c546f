"""The node's side of an attached UI: push each new snapshot, carry out commands unless the client only watches.

Besides one-way commands the UI may send typed requests (`ControlRequest`, as the CLI does) and
gets each `ControlReply` in order; a watcher's queries are answered, its commands refused.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from typing import Protocol

import trio

from frost_core.api.commands import Command
from frost_core.api.errors import FrostError, ProtocolError
from frost_core.api.queries import Query
from frost_core.api.snapshot import NodeSnapshot
from frost_core.node.attach_protocol import (
    KEEP_ALIVE_INTERVAL, SILENCE_TIMEOUT, AttachCommand, AttachRequest, KeepAlive, SentAssignments,
    send_snapshot,
)
from frost_core.node.control import ControlRequest, Handler, Request, answer_request, send_reply
from frost_core.wire.channel import Channel
from frost_core.wire.codec import decode_strict
from frost_core.wire.messages import from_plain

log = logging.getLogger("frost.attach")

COMMANDS: dict[str, type] = {cls.__name__: cls for cls in typing.get_args(Command)}


class Attachable(Protocol):
    """What serving an attached UI needs of the node."""

    async def wait_snapshot(self, seen: NodeSnapshot | None) -> NodeSnapshot: ...

    def send_nowait(self, command: Command) -> None: ...

    def refuse(self, message: str) -> None: ...


async def serve_attached(
    channel: Channel, request: AttachRequest, node: Attachable, handler: Handler, *, client: str,
) -> None:
    """Serve one attached UI until it leaves or falls silent; ProtocolError drops a misbehaving one."""
    log.info("%s attached%s", client, " to watch" if request.watch else "")
    if request.watch:
        handler = _queries_only(handler, node, client)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_push_snapshots, channel, node, request.watch)
            await _receive_commands(channel, node, handler, watch=request.watch, client=client)
            nursery.cancel_scope.cancel()
    except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
        # A UI that vanished (killed, its machine asleep, its terminal closed) is only a detach:
        # out of the nursery this would arrive as a group its caller does not catch, and crash the node.
        log.info("%s went away", client)
    except* ProtocolError as group:
        log.warning("%s dropped: %s", client, "; ".join(error.message for error in group.exceptions))
    finally:
        log.info("%s detached", client)


async def _push_snapshots(channel: Channel, node: Attachable, watch: bool) -> None:
    """Each snapshot the node publishes, whole; a keep-alive when nothing changed.

    The node already paces its snapshots (`pace.SnapshotPace`): a second limit here would only
    add its delay to a keypress's effect (p95 133 ms with it, 79 without: bench/attach_latency.py).

    Only the wait is bounded: a send cut off midway would leave half a frame on the stream. A
    watcher is not the owner: the cluster's join code (its key) stays out of what it sees.
    """
    seen: NodeSnapshot | None = None
    sent = SentAssignments()
    while True:
        latest = seen
        with trio.move_on_after(KEEP_ALIVE_INTERVAL):
            latest = await node.wait_snapshot(seen)
        if latest is seen:
            await channel.send(KeepAlive())
            continue
        seen = latest
        await send_snapshot(channel, dataclasses.replace(latest, cluster_join_code="") if watch else latest, sent)


async def _receive_commands(channel: Channel, node: Attachable, handler: Handler, *, watch: bool, client: str) -> None:
    while True:
        with trio.move_on_after(SILENCE_TIMEOUT) as silence:
            try:
                message = await channel.receive()
            except trio.EndOfChannel:
                return
        if silence.cancelled_caught:
            log.info("%s fell silent for %.0f s; dropped", client, SILENCE_TIMEOUT)
            return
        if isinstance(message, KeepAlive):
            continue
        if isinstance(message, ControlRequest):
            await send_reply(channel, await answer_request(message, handler))
            continue
        if not isinstance(message, AttachCommand):
            raise ProtocolError(f"expected a command, a request or a keep-alive, got {type(message).__name__}")
        if watch:
            node.refuse(f"refused {message.kind} from {client}: it attached to watch only")
            continue
        node.send_nowait(decode_command(message))


def _queries_only(handler: Handler, node: Attachable, client: str) -> Handler:
    async def answer(request: Request):
        if not isinstance(request, Query):
            message = f"refused {type(request).__name__} from {client}: it attached to watch only"
            node.refuse(message)
            raise FrostError(message, title="Refused")
        return await handler(request)

    return answer


def decode_command(message: AttachCommand) -> Command:
    cls = COMMANDS.get(message.kind)
    if cls is None:
        raise ProtocolError(f"unknown command {message.kind!r}")
    try:
        return from_plain(cls, decode_strict(message.fields))
    except ProtocolError as error:
        raise ProtocolError(f"bad {message.kind}: {error.message}") from None

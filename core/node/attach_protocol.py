"""What an attached UI and its node say: snapshots pushed one way, commands and keep-alives the other.

After an `AttachRequest` on a control connection (the local socket, or an owner-keyed channel
from another machine) the node pushes every snapshot it publishes (at most ten a second), whole, as bulk
data after a `SnapshotPush` header (a node with thousands of units outgrows any one frame), and a
`KeepAlive` when nothing changed for a while; the UI sends commands one way and keep-alives. A
side that hears nothing for SILENCE_TIMEOUT takes the other for gone: the node drops the client,
the UI reconnects.
"""

from __future__ import annotations

import dataclasses

from frost_core.api.snapshot import NodeSnapshot
from frost_core.node.event_cbor import encoded_events
from frost_core.wire.channel import Channel
from frost_core.wire.codec import decode_strict, encode
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message, from_plain, register, to_plain

KEEP_ALIVE_INTERVAL = 2.0
SILENCE_TIMEOUT = 3 * KEEP_ALIVE_INTERVAL + 1.0
MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
"""A snapshot of 3,000 units, 600 history samples and 500 events encodes to 0.6 MiB."""


@register
@dataclasses.dataclass(frozen=True)
class AttachRequest(Message):
    """Turns a control connection into an attached one; `watch` gives up the right to command, for good."""

    CODE = MessageCode.ATTACH_REQUEST
    MAX_SIZE = 256
    watch: bool = False


@register
@dataclasses.dataclass(frozen=True)
class SnapshotPush(Message):
    """Bulk data follows: one NodeSnapshot as a CBOR map, checked against its type hints on arrival."""

    CODE = MessageCode.SNAPSHOT_PUSH
    MAX_SIZE = 16


@register
@dataclasses.dataclass(frozen=True)
class AttachCommand(Message):
    """One command (`frost_core.api.commands`), named by its class, with its fields as a CBOR map."""

    CODE = MessageCode.ATTACH_COMMAND
    MAX_SIZE = 64 * 1024
    kind: str
    fields: bytes


@register
@dataclasses.dataclass(frozen=True)
class KeepAlive(Message):
    CODE = MessageCode.KEEP_ALIVE
    MAX_SIZE = 16


async def send_snapshot(channel: Channel, snapshot: NodeSnapshot) -> None:
    plain = to_plain(NodeSnapshot, snapshot)
    plain["events"] = encoded_events(snapshot.events)  # up to 500 events, ten pushes a second during a sweep
    await channel.send_bulk(SnapshotPush(), encode(plain))


async def receive_snapshot(channel: Channel) -> NodeSnapshot:
    """The snapshot after a SnapshotPush header already received; ProtocolError if it is not one."""
    data = await channel.receive_bulk_data(max_size=MAX_SNAPSHOT_BYTES)
    return from_plain(NodeSnapshot, decode_strict(data))

"""What an attached UI and its node say: snapshots pushed one way, commands and keep-alives the other.

After an `AttachRequest` on a control connection (the local socket, or an owner-keyed channel
from another machine) the node pushes every new snapshot whole, at most ten a second, and a
`KeepAlive` when nothing changed for a while; the UI sends commands one way and keep-alives. A
side that hears nothing for SILENCE_TIMEOUT takes the other for gone: the node drops the client,
the UI reconnects.
"""

from __future__ import annotations

import dataclasses

from frost_core.api.snapshot import NodeSnapshot
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, register

KEEP_ALIVE_INTERVAL = 2.0
SILENCE_TIMEOUT = 3 * KEEP_ALIVE_INTERVAL + 1.0
PUSH_INTERVAL = 0.1
"""At most ten snapshots a second reach an attached UI, as for an embedded one."""


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
    CODE = MessageCode.SNAPSHOT_PUSH
    MAX_SIZE = MAX_MESSAGE_SIZE
    snapshot: NodeSnapshot


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

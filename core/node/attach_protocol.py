"""What an attached UI and its node say: snapshots pushed one way, commands and keep-alives the other.

After an `AttachRequest` on a control connection (the local socket, or an owner-keyed channel
from another machine) the node pushes every snapshot it publishes (`pace.SnapshotPace`), whole, as bulk
data after a `SnapshotPush` header (a node with thousands of units outgrows any one frame), and a
`KeepAlive` when nothing changed for a while; the UI sends commands one way and keep-alives. A
side that hears nothing for SILENCE_TIMEOUT takes the other for gone: the node drops the client,
the UI reconnects.

A snapshot's assignments go as a list whose items are each one assignment's CBOR (a byte string), or
its id alone where the connection's last push carried it unchanged (`SentAssignments`,
`ReceivedViews`). A finished assignment's CBOR is made once on the node (`SettledViews` hands out the
same view while nothing in it changes). With three finished 10,000-unit sweeps behind it, a node spent
350 ms of its event loop encoding each 4 MiB push and the UI 290 ms decoding it. Each assignment carries some
of its units (`SNAPSHOT_UNITS`) and the counts of all: a running sweep's every unit took 110 ms a push to encode.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable

from frost_core.api.errors import ProtocolError
from frost_core.api.snapshot import AssignmentView, NodeSnapshot
from frost_core.master.store import SETTLED
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


async def send_snapshot(channel: Channel, snapshot: NodeSnapshot, sent: SentAssignments | None = None) -> None:
    """`sent`: what this connection's earlier pushes carried (none: every assignment goes whole)."""
    plain = to_plain(NodeSnapshot, dataclasses.replace(snapshot, assignments=(), events=()))
    plain["assignments"] = (sent or SentAssignments()).items(snapshot.assignments)
    plain["events"] = encoded_events(snapshot.events)  # up to 500 events, ten pushes a second during a sweep
    await channel.send_bulk(SnapshotPush(), encode(plain))


_SETTLED_ITEMS: dict[int, tuple[weakref.ref[AssignmentView], bytes]] = {}
"""A settled assignment's view's CBOR by the view's identity, for as long as the view lives."""


def _settled_item(view: AssignmentView) -> bytes:
    """A settled view's CBOR, made at its first push only."""
    kept = _SETTLED_ITEMS.get(id(view))
    if kept is None or kept[0]() is not view:
        key = id(view)
        kept = _SETTLED_ITEMS[key] = (weakref.ref(view, lambda _, key=key: _SETTLED_ITEMS.pop(key, None)),
                                      encode(to_plain(AssignmentView, view)))
    return kept[1]


class SentAssignments:
    """The node's side of one attached UI: the CBOR it last sent of each assignment, so an unchanged one goes as
    its id."""

    def __init__(self) -> None:
        self._sent: dict[str, bytes] = {}

    def items(self, views: Iterable[AssignmentView]) -> list[bytes | str]:
        items: list[bytes | str] = []
        sent = {}
        for view in views:
            item = _settled_item(view) if view.state in SETTLED else encode(to_plain(AssignmentView, view))
            before = self._sent.get(view.id)
            items.append(view.id if before is item or before == item else item)   # (a running one unchanged too)
            sent[view.id] = item
        self._sent = sent
        return items


class ReceivedViews:
    """The UI's side of one attachment: the assignments of the last push, for the next one's ids."""

    def __init__(self) -> None:
        self._views: dict[str, AssignmentView] = {}

    def read(self, items: object) -> tuple[AssignmentView, ...]:
        if not isinstance(items, list):
            raise ProtocolError("a snapshot's assignments must be a list")
        views = []
        for item in items:
            if isinstance(item, bytes):
                views.append(from_plain(AssignmentView, decode_strict(item)))
            elif isinstance(item, str) and item in self._views:
                views.append(self._views[item])
            else:
                raise ProtocolError(f"a snapshot's assignment must be its CBOR or the id of one pushed before on this "
                                    f"connection, not {type(item).__name__} {str(item)[:40]!r}")
        self._views = {view.id: view for view in views}
        return tuple(views)


async def receive_snapshot(channel: Channel, views: ReceivedViews | None = None) -> NodeSnapshot:
    """The snapshot after a SnapshotPush header already received; ProtocolError if it is not one. `views`: what the
    connection's earlier pushes brought (none: every assignment is decoded)."""
    data = await channel.receive_bulk_data(max_size=MAX_SNAPSHOT_BYTES)
    plain = decode_strict(data)
    if not isinstance(plain, dict):
        raise ProtocolError("a snapshot must be a map")
    assignments = (views or ReceivedViews()).read(plain.get("assignments"))
    plain["assignments"] = []
    return dataclasses.replace(from_plain(NodeSnapshot, plain), assignments=assignments)

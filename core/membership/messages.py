"""Membership's wire messages, and the checked conversion between wire entries and records."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from frost_core.errors import ProtocolError
from frost_core.membership.records import MAX_SUSPECTORS, MemberState, NodeRecord, ResourceFigures
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, register

MAX_ID = 64
MAX_NAME = 128
MAX_HOST = 255
MAX_MODE = 32
MAX_COUNTER = 2**32 - 1
MAX_STATE_AGE = 86400.0


@dataclass(frozen=True)
class MemberEntry:
    """One record on the wire. `state_age` replaces the local `state_since` (clocks differ)."""

    node_id: str
    name: str
    host: str
    port: int
    protocol_version: int
    incarnation: int
    state: int
    figures: ResourceFigures
    figures_version: int
    suspectors: tuple[str, ...] = ()
    state_age: float = 0.0


@register
@dataclass(frozen=True)
class Announce(Message):
    """Broadcast by a node at start and now and then: here I am, and I know `known` members.

    A newcomer announces again once it has pulled the table (`known` > 1): peers still waiting
    to answer its first announcement then stay quiet.
    """

    CODE = MessageCode.ANNOUNCE
    MAX_SIZE = 4096
    node: MemberEntry
    known: int = 1


@register
@dataclass(frozen=True)
class AnnounceReply(Message):
    """Unicast answer to an announcement from a node we did not know, after a random delay."""

    CODE = MessageCode.ANNOUNCE_REPLY
    MAX_SIZE = 4096
    node: MemberEntry


@register
@dataclass(frozen=True)
class Leave(Message):
    """A node quitting on purpose: mark it left (not dead) at once."""

    CODE = MessageCode.LEAVE
    MAX_SIZE = 256
    node_id: str
    incarnation: int


@register
@dataclass(frozen=True)
class Ping(Message):
    """Are you alive? `target_id` guards against a different node now living at the address."""

    CODE = MessageCode.PING
    MAX_SIZE = 256
    seq: int
    target_id: str


@register
@dataclass(frozen=True)
class PingReq(Message):
    """Please probe this member for me and tell me if it answers (SWIM's indirect probe)."""

    CODE = MessageCode.PING_REQ
    MAX_SIZE = 512
    seq: int
    target_id: str
    target_host: str
    target_port: int


@register
@dataclass(frozen=True)
class Ack(Message):
    """The probed node (or the helper, forwarding) answers a probe."""

    CODE = MessageCode.ACK
    MAX_SIZE = 128
    seq: int


@register
@dataclass(frozen=True)
class Nack(Message):
    """A helper could not reach the target; proves the helper (and our path to it) works."""

    CODE = MessageCode.NACK
    MAX_SIZE = 128
    seq: int


@register
@dataclass(frozen=True)
class PushPull(Message):
    """Opens an anti-entropy exchange: my record, a digest of my table, and records you asked for.

    With `digest` None this is a plain push of `entries` and the reply carries nothing.
    """

    CODE = MessageCode.PUSH_PULL
    MAX_SIZE = MAX_MESSAGE_SIZE
    sender: MemberEntry
    digest: bytes | None
    entries: tuple[MemberEntry, ...] = ()


@register
@dataclass(frozen=True)
class PushPullReply(Message):
    """Records the asker lacks, and the digest keys of records the asker should push back."""

    CODE = MessageCode.PUSH_PULL_REPLY
    MAX_SIZE = MAX_MESSAGE_SIZE
    entries: tuple[MemberEntry, ...] = ()
    wants: bytes = b""


@register
@dataclass(frozen=True)
class ResourceUpdate(Message):
    """An immediate push of news (a 5 % figure change, a suspicion, a death, a refutation)."""

    CODE = MessageCode.RESOURCE_UPDATE
    MAX_SIZE = 64 * 1024
    entries: tuple[MemberEntry, ...]


def entry_from_record(record: NodeRecord, now: float) -> MemberEntry:
    return MemberEntry(
        node_id=record.node_id,
        name=record.name,
        host=record.address[0],
        port=record.address[1],
        protocol_version=record.protocol_version,
        incarnation=record.incarnation,
        state=int(record.state),
        figures=record.figures,
        figures_version=record.figures_version,
        suspectors=record.suspectors if record.state == MemberState.SUSPECT else (),
        state_age=min(MAX_STATE_AGE, max(0.0, now - record.state_since)),
    )


def record_from_entry(entry: MemberEntry, now: float) -> NodeRecord:
    """Check every field a peer sent; a bad one raises ProtocolError naming it."""
    _check_text("node_id", entry.node_id, MAX_ID, allow_empty=False)
    _check_text("name", entry.name, MAX_NAME)
    _check_text("host", entry.host, MAX_HOST, allow_empty=False)
    _check_range("port", entry.port, 1, 65535)
    _check_range("protocol_version", entry.protocol_version, 0, MAX_COUNTER)
    _check_range("incarnation", entry.incarnation, 0, MAX_COUNTER)
    _check_range("figures_version", entry.figures_version, 0, MAX_COUNTER)
    _check_range("state", entry.state, 0, max(MemberState))
    if len(entry.suspectors) > MAX_SUSPECTORS:
        raise ProtocolError(f"entry for {entry.node_id!r} lists {len(entry.suspectors)} suspectors")
    for suspector in entry.suspectors:
        _check_text("suspector", suspector, MAX_ID, allow_empty=False)
    if not (math.isfinite(entry.state_age) and entry.state_age >= 0):
        raise ProtocolError(f"entry for {entry.node_id!r} has a bad state_age {entry.state_age!r}")
    _check_figures(entry.figures)
    state = MemberState(entry.state)
    return NodeRecord(
        node_id=entry.node_id,
        name=entry.name,
        address=(entry.host, entry.port),
        protocol_version=entry.protocol_version,
        incarnation=entry.incarnation,
        state=state,
        figures=entry.figures,
        figures_version=entry.figures_version,
        suspectors=tuple(sorted(set(entry.suspectors))) if state == MemberState.SUSPECT else (),
        state_since=now - min(entry.state_age, MAX_STATE_AGE),
        updated_at=now,
    )


def _check_figures(figures: ResourceFigures) -> None:
    for field in dataclasses.fields(figures):
        value = getattr(figures, field.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ProtocolError(f"figure {field.name} is not a finite number")
        if isinstance(value, int) and not 0 <= value <= 2**63:
            raise ProtocolError(f"figure {field.name} is out of range: {value}")
    _check_text("mode", figures.mode, MAX_MODE)


def _check_text(name: str, value: str, limit: int, *, allow_empty: bool = True) -> None:
    if len(value) > limit or (not value and not allow_empty):
        raise ProtocolError(f"field {name} must be 1..{limit} characters, got {len(value)}")


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ProtocolError(f"field {name} must be in {low}..{high}, got {value}")

"""Membership's wire messages, and the checked conversion between wire entries and records."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frost_core.api.errors import ProtocolError
from frost_core.membership.records import MAX_COUNTER, MAX_SUSPECTORS, MemberState, NodeRecord, ResourceFigures
from frost_core.wire.codes import MessageCode
from frost_core.wire.hosts import is_host
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, register

MAX_ID = 64
MAX_NAME = 128
MAX_HOST = 255
MAX_MODE = 32
_MAX_STATE = int(max(MemberState))
MAX_STATE_AGE = 864000
"""Deciseconds (a day): an older state travels as this age."""
MAX_MILLI = 10**15
"""Largest figure in thousandths; far beyond any machine, well inside a float's exact range."""
MAX_MIB = 2**43
"""Largest free memory in MiB (2**63 bytes)."""

Figures = tuple[int, int, int, int, int, int, str]
"""ResourceFigures on the wire: available, idle_extremity and heavy_extremity in thousandths,
cpus, free_memory in MiB (rounded down), guests, mode."""

MemberEntry = tuple[str, str, str, int, int, int, int, int, int, Figures, tuple[str, ...]]
"""One record on the wire, positional to keep it small (a map would repeat every field name):
node_id, name, host, port, protocol_version, incarnation, state, figures_version,
state_age in deciseconds (it replaces the local `state_since`: clocks differ), figures,
suspectors. The codec checks every position's type; `record_from_entry` checks every range."""

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
    """Opens an anti-entropy exchange: my record, a digest of my news (or of my whole table when
    `full`), and records you asked for.

    With `digest` None this is a plain push of `entries` and the reply carries nothing.
    """

    CODE = MessageCode.PUSH_PULL
    MAX_SIZE = MAX_MESSAGE_SIZE
    sender: MemberEntry
    digest: bytes | None
    entries: tuple[MemberEntry, ...] = ()
    full: bool = False


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
    figures = record.figures
    return (
        record.node_id,
        record.name,
        record.address[0],
        record.address[1],
        record.protocol_version,
        record.incarnation,
        int(record.state),
        record.figures_version,
        min(MAX_STATE_AGE, max(0, round((now - record.state_since) * 10))),
        (
            _to_milli(figures.available),
            _to_milli(figures.idle_extremity),
            _to_milli(figures.heavy_extremity),
            figures.cpus,
            max(0, figures.free_memory) >> 20,
            figures.guests,
            figures.mode,
        ),
        record.suspectors if record.state == MemberState.SUSPECT else (),
    )


def record_from_entry(entry: MemberEntry, now: float) -> NodeRecord:
    """Check every field a peer sent; a bad one raises ProtocolError naming it."""
    node_id, name, host, port, protocol_version, incarnation, state, figures_version, age, figures, suspectors = entry
    _check_text("node_id", node_id, MAX_ID, allow_empty=False)
    _check_text("name", name, MAX_NAME)
    _check_text("host", host, MAX_HOST, allow_empty=False)
    _check_host("host", host)
    _check_range("port", port, 1, 65535)
    _check_range("protocol_version", protocol_version, 0, MAX_COUNTER)
    _check_range("incarnation", incarnation, 0, MAX_COUNTER)
    _check_range("figures_version", figures_version, 0, MAX_COUNTER)
    _check_range("state", state, 0, _MAX_STATE)
    _check_range("state_age", age, 0, MAX_STATE_AGE)
    if len(suspectors) > MAX_SUSPECTORS:
        raise ProtocolError(f"entry for {node_id!r} lists {len(suspectors)} suspectors")
    for suspector in suspectors:
        _check_text("suspector", suspector, MAX_ID, allow_empty=False)
    member_state = MemberState(state)
    return NodeRecord(
        node_id=node_id,
        name=name,
        address=(host, port),
        protocol_version=protocol_version,
        incarnation=incarnation,
        state=member_state,
        figures=_figures_from_wire(figures),
        figures_version=figures_version,
        suspectors=tuple(sorted(set(suspectors))) if member_state == MemberState.SUSPECT else (),
        state_since=now - age / 10,
        updated_at=now,
    )


def check_datagram(message: Message) -> None:
    """Check the scalar fields of a probe, goodbye or announcement (entries are checked on merge).

    Sequence numbers are echoed back in acks: one out of range must be refused here, not fail
    when we encode the answer.
    """
    if isinstance(message, (Ping, PingReq, Ack, Nack)):
        _check_range("seq", message.seq, 0, MAX_COUNTER)
    if isinstance(message, (Ping, PingReq)):
        _check_text("target_id", message.target_id, MAX_ID, allow_empty=False)
    if isinstance(message, PingReq):
        _check_text("target_host", message.target_host, MAX_HOST, allow_empty=False)
        _check_host("target_host", message.target_host)
        _check_range("target_port", message.target_port, 1, 65535)
    if isinstance(message, Leave):
        _check_text("node_id", message.node_id, MAX_ID, allow_empty=False)
        _check_range("incarnation", message.incarnation, 0, MAX_COUNTER)
    if isinstance(message, Announce):
        _check_range("known", message.known, 0, MAX_COUNTER)


def _to_milli(value: float) -> int:
    """Thousandths are finer than any decision made on these figures, and three bytes instead of nine."""
    return max(-MAX_MILLI, min(MAX_MILLI, round(value * 1000))) if math.isfinite(value) else 0


def _figures_from_wire(figures: Figures) -> ResourceFigures:
    available, idle_extremity, heavy_extremity, cpus, free_mib, guests, mode = figures
    _check_range("available", available, -MAX_MILLI, MAX_MILLI)
    _check_range("idle_extremity", idle_extremity, -MAX_MILLI, MAX_MILLI)
    _check_range("heavy_extremity", heavy_extremity, -MAX_MILLI, MAX_MILLI)
    _check_range("cpus", cpus, 0, MAX_COUNTER)
    _check_range("free_memory", free_mib, 0, MAX_MIB)
    _check_range("guests", guests, 0, MAX_COUNTER)
    _check_text("mode", mode, MAX_MODE)
    return ResourceFigures(
        available=available / 1000,
        idle_extremity=idle_extremity / 1000,
        heavy_extremity=heavy_extremity / 1000,
        cpus=cpus,
        free_memory=free_mib << 20,
        guests=guests,
        mode=mode,
    )


def _check_text(name: str, value: str, limit: int, *, allow_empty: bool = True) -> None:
    if len(value) > limit or (not value and not allow_empty):
        raise ProtocolError(f"field {name} must be 1..{limit} characters, got {len(value)}")


def _check_host(name: str, value: str) -> None:
    """Refused here, a malformed name is one bad message; stored, every peer would fail to resolve it."""
    if not is_host(value):
        raise ProtocolError(f"field {name} must be an IP address or a host name, got {value!r}")


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ProtocolError(f"field {name} must be in {low}..{high}, got {value}")

"""The gang runtime's messages on the wire and back, so the sans-IO coordinator and sites never see a socket.

`gang_to_wire` turns a `cluster.gang_site` message (or a GangLost or GangHostState, their own) into its header (`cluster.messages`) and
bulk bytes; `gang_from_wire` rebuilds it from what arrived, refusing with a ProtocolError what
the gang classes could not hold: rank sets with repeats or negative ranks, plain data that is
not plain CBOR, a member's messages that are not a list, bulk where none belongs.
"""

from __future__ import annotations

import dataclasses
import math

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.cluster.gang_site import (
    BarrierReport,
    CheckpointReport,
    GangCheck,
    Mail,
    MailAck,
    MailBounced,
    ReleaseStep,
    StartMember,
    StopMember,
    TakeCheckpoint,
)
from frost_core.cluster.messages import (
    GANG_HOST_STATES,
    GangCheckpoint,
    GangHostState,
    GangLost,
    GangMail,
    GangMailAck,
    GangMailBounced,
    GangRelease,
    GangReport,
    GangSpec,
    GangStart,
    GangStop,
    GangTakeCheckpoint,
    WireCheck,
)
from frost_core.plugin.limits import MAX_OUTBOX_BYTES, MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.wire.messages import Message

WITH_BULK = (GangCheckpoint, GangMail, GangMailBounced)
"""Headers always followed by bulk bytes; GangStart and GangReport say so in a field."""


def gang_to_wire(message: object, spec: GangSpec | None = None, *, home: bool = False) -> tuple[Message, bytes | None]:
    """The header and bulk bytes (None: no bulk) of a gang message; a StartMember needs its gang's `spec`.

    `home` marks Mail for the gang's coordinator rather than for a member on the node it goes to.
    """
    match message:
        case GangLost() | GangHostState():
            return message, None
        case StartMember():
            if spec is None:
                raise ValueError("a member's start travels with its gang's spec")
            return GangStart(spec, message.gang_id, message.rank, message.size, message.epoch, message.superstep,
                             message.checkpoint is not None), message.checkpoint
        case ReleaseStep(check=check):
            wire_check = None if check is None else WireCheck(tuple(sorted(check.gang_hosts)), check.x, check.margin)
            return GangRelease(message.gang_id, message.rank, message.epoch, message.superstep,
                               tuple(sorted(message.expect)), wire_check), None
        case TakeCheckpoint():
            return GangTakeCheckpoint(message.gang_id, message.rank, message.epoch, message.superstep,
                                      tuple(sorted(message.expect))), None
        case StopMember():
            return GangStop(message.gang_id, message.rank, message.epoch, message.forward_to), None
        case BarrierReport():
            result = encode_plain(message.result, f"rank {message.rank}'s result", MAX_RESULT_BYTES) if message.done else None
            return GangReport(message.gang_id, message.epoch, message.rank, message.superstep,
                              tuple(sorted(message.sent_to)), message.move, message.done), result
        case CheckpointReport():
            return GangCheckpoint(message.gang_id, message.epoch, message.rank, message.superstep), message.data
        case Mail():
            return dataclasses.replace(_mail_header(message), home=home), _mail_bytes(message)
        case MailAck():
            return GangMailAck(message.gang_id, message.key, message.at), None
        case MailBounced(mail=mail):
            return GangMailBounced(_mail_header(mail)), _mail_bytes(mail)
    raise TypeError(f"{type(message).__name__} is not a gang message")


def for_coordinator(header: Message) -> bool:
    """Whether `header` is for the gang's coordinator on the receiving node, not for a member hosted there."""
    return isinstance(header, (GangReport, GangCheckpoint, GangLost, GangHostState)) or (isinstance(header, GangMail) and header.home)


def has_bulk(header: Message) -> bool:
    """Whether bulk bytes follow `header` (the receiver reads them before `gang_from_wire`)."""
    if isinstance(header, GangStart):
        return header.with_checkpoint
    if isinstance(header, GangReport):
        return header.done
    return isinstance(header, WITH_BULK)


def gang_from_wire(header: Message, data: bytes | None) -> object:
    """The gang_site message `header` and its bulk `data` carry; ProtocolError for anything malformed."""
    if has_bulk(header) != (data is not None):
        raise ProtocolError(f"{type(header).__name__} came {'without' if data is None else 'with'} bulk bytes")
    match header:
        case GangLost():
            _count(header.rank)
            return header
        case GangHostState():
            _count(header.rank)
            if header.state not in GANG_HOST_STATES:
                raise ProtocolError(f"a member's host is not {header.state!r}: one of {', '.join(GANG_HOST_STATES)}")
            return header
        case GangStart():
            if header.size < 1 or not 0 <= header.rank < header.size:
                raise ProtocolError(f"rank {header.rank} is not a member of a gang of {header.size}")
            return StartMember(header.gang_id, header.rank, header.size, header.epoch, _count(header.superstep), data)
        case GangRelease(check=check):
            gang_check = None if check is None else _check(check)
            return ReleaseStep(header.gang_id, _count(header.rank), header.epoch, _count(header.superstep),
                               _ranks(header.expect), gang_check)
        case GangTakeCheckpoint():
            return TakeCheckpoint(header.gang_id, _count(header.rank), header.epoch, _count(header.superstep),
                                  _ranks(header.expect))
        case GangStop():
            return StopMember(header.gang_id, _count(header.rank), header.epoch, header.forward_to)
        case GangReport():
            result = None if data is None else _plain(data, f"rank {header.rank}'s result")
            return BarrierReport(header.gang_id, header.epoch, _count(header.rank), _count(header.superstep),
                                 _ranks(header.sent_to), header.move, header.done, result)
        case GangCheckpoint():
            assert data is not None
            return CheckpointReport(header.gang_id, header.epoch, _count(header.rank), _count(header.superstep), data)
        case GangMail():
            assert data is not None
            return _mail(header, data)
        case GangMailAck(key=key):
            for part in key[1:]:
                _count(part)
            return MailAck(header.gang_id, key, header.at)
        case GangMailBounced(mail=mail):
            assert data is not None
            return MailBounced(_mail(mail, data))
    raise ProtocolError(f"{type(header).__name__} is not a gang message")


def _mail_header(mail: Mail) -> GangMail:
    return GangMail(mail.gang_id, mail.epoch, mail.superstep, mail.sender, mail.dest, mail.reply_to, mail.routed)


def _mail_bytes(mail: Mail) -> bytes:
    return encode_plain(list(mail.messages), f"rank {mail.sender}'s mail to rank {mail.dest}", MAX_OUTBOX_BYTES)


def _mail(header: GangMail, data: bytes) -> Mail:
    messages = _plain(data, f"rank {header.sender}'s mail")
    if not isinstance(messages, list):
        raise ProtocolError(f"rank {header.sender}'s mail to rank {header.dest} is not a list of messages")
    return Mail(header.gang_id, header.epoch, _count(header.superstep), _count(header.sender), _count(header.dest),
                tuple(messages), header.reply_to, header.routed)


def _plain(data: bytes, what: str) -> object:
    try:
        return decode_plain(data, what)
    except PluginError as error:
        raise ProtocolError(error.message) from None


def _count(value: int) -> int:
    if value < 0:
        raise ProtocolError(f"a rank or superstep cannot be negative ({value})")
    return value


def _ranks(ranks: tuple[int, ...]) -> frozenset[int]:
    chosen = frozenset(_count(rank) for rank in ranks)
    if len(chosen) != len(ranks):
        raise ProtocolError(f"ranks {list(ranks)} name a member twice")
    return chosen


def _check(check: WireCheck) -> GangCheck:
    """The check a member answers in its own task: figures the predicate refuses would stop that task."""
    if not (math.isfinite(check.x) and 0.0 <= check.x <= 1.0):
        raise ProtocolError(f"a check's anticipated load is between 0 and 1, not {check.x}")
    if not (math.isfinite(check.margin) and check.margin >= 0.0):
        raise ProtocolError(f"a check's margin is a fraction of at least 0, not {check.margin}")
    return GangCheck(_names(check.gang_hosts), check.x, check.margin)


def _names(hosts: tuple[str, ...]) -> frozenset[str]:
    chosen = frozenset(hosts)
    if len(chosen) != len(hosts):
        raise ProtocolError(f"a gang's hosts {list(hosts)} name a host twice")
    return chosen

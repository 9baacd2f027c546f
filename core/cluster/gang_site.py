"""One host's side of a gang, sans-IO: its members' inboxes, where their mail goes, and forwarding.

A gang member is named by its rank alone (`gang_id`/rank), never by its host: mail is sent to
the host this host last saw the member on (or to the coordinator, the member's home, when it
knows none), and whoever holds the member's mail acknowledges it with its own address, so the
sender learns where the member is now. A host a member left keeps a pointer and forwards mail
that arrives for it there (MINIPROCs' forwarding after a move). Each member's inbox is keyed by
(superstep, sender), so a duplicate is acknowledged but delivered once; mail of an older epoch
(before a restart from a global checkpoint) is dropped. A member runs superstep k only once the
coordinator released it and the inbox holds exactly the senders the release names, in ascending
sender order, so nothing sent at the barrier is lost or reordered whatever the network does.

Inputs are the coordinator's and peers' messages and the guest's answers (`handle`); outputs are
actions: messages for other hosts or the coordinator, and what to do with a guest here. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from frost_core.api.errors import ProtocolError
from frost_core.plugin.gang import Inbox, MemberCheckpoint
from frost_core.policies.gang_migration import member_should_move
from frost_core.policies.views import NodeView

COORDINATOR = ""
"""The `to` of a message for the gang's coordinator (on the assignment's master)."""


# Messages between hosts and the coordinator (what the wiring carries).

@dataclass(frozen=True)
class Mail:
    """Messages `sender` sent to `dest` in `superstep` of `epoch`; `reply_to` is the sender's host.

    `routed` is set by the coordinator when it passes mail on: it vouches that `dest` runs (or is
    about to start) on the host it sends the mail to, so that host keeps mail it cannot place yet.
    """

    gang_id: str
    epoch: int
    superstep: int
    sender: int
    dest: int
    messages: tuple
    reply_to: str
    routed: bool = False

    @property
    def key(self) -> tuple[int, int, int, int]:
        return self.epoch, self.superstep, self.sender, self.dest


@dataclass(frozen=True)
class MailAck:
    """`dest` holds the mail of `key` (epoch, superstep, sender, dest) on host `at`."""

    gang_id: str
    key: tuple[int, int, int, int]
    at: str


@dataclass(frozen=True)
class MailBounced:
    """The host the mail went to does not know `mail.dest` in its epoch: send it home instead."""

    mail: Mail


@dataclass(frozen=True)
class StartMember:
    """Run member `rank` of `size` here from superstep `superstep` of `epoch`.

    `checkpoint` is its MemberCheckpoint bytes of the last global checkpoint (None: start afresh
    at superstep 0). It carries no addresses: mail finds the other members by forwarding.
    """

    gang_id: str
    rank: int
    size: int
    epoch: int
    superstep: int
    checkpoint: bytes | None


@dataclass(frozen=True)
class GangCheck:
    """A check asked of every member: the gang's hosts now and the predicate's `x` and `margin`."""

    gang_hosts: frozenset[str]
    x: float
    margin: float = 0.0

    def answer(self, table: Iterable[NodeView], size: int, host: str) -> bool:
        """The member's answer on `host`, from its own merged table: is a better set of p hosts free?"""
        return member_should_move(table, self.gang_hosts, size, self.x, host, self.margin)


@dataclass(frozen=True)
class ReleaseStep:
    """Member `rank` may run `superstep` of `epoch` once mail from exactly `expect` arrived.

    With a `check` the member answers it in this superstep and sends the answer with its barrier
    report (so a "no" costs no message of its own); None means no check is due.
    """

    gang_id: str
    rank: int
    epoch: int
    superstep: int
    expect: frozenset[int]
    check: GangCheck | None = None


@dataclass(frozen=True)
class TakeCheckpoint:
    """Member `rank` checkpoints before `superstep` of `epoch`, its inbox holding mail from `expect`."""

    gang_id: str
    rank: int
    epoch: int
    superstep: int
    expect: frozenset[int]


@dataclass(frozen=True)
class StopMember:
    """Stop member `rank` here if it runs an epoch before `epoch`; with `forward_to`, it runs there in `epoch`."""

    gang_id: str
    rank: int
    epoch: int
    forward_to: str | None = None


@dataclass(frozen=True)
class BarrierReport:
    """Member `rank` finished `superstep` of `epoch`: whom it sent mail, its answer to a check, done.

    `move` is None when no check was asked, else the member's predicate answer; `result` is its
    `finish` result when `done`.
    """

    gang_id: str
    epoch: int
    rank: int
    superstep: int
    sent_to: frozenset[int]
    move: bool | None
    done: bool
    result: object = None


@dataclass(frozen=True)
class CheckpointReport:
    """Member `rank`'s MemberCheckpoint bytes before `superstep` of `epoch`."""

    gang_id: str
    epoch: int
    rank: int
    superstep: int
    data: bytes


# Between this host's bookkeeping and its guests.

@dataclass(frozen=True)
class StepDone:
    """The guest of member `rank` ran `superstep` of `epoch` (its outbox checked by check_superstep)."""

    rank: int
    epoch: int
    superstep: int
    outbox: dict
    done: bool
    move: bool | None = None
    result: object = None


@dataclass(frozen=True)
class EvictMembers:
    """This host's owner evicts: every member here stops at once, without waiting for a barrier."""


@dataclass(frozen=True)
class SendFailed:
    """The transport could not reach the host `mail` went to: it goes home instead."""

    mail: Mail


@dataclass(frozen=True)
class Send:
    """Action: deliver `message` to host `to` (COORDINATOR: the gang's coordinator)."""

    to: str
    message: object


@dataclass(frozen=True)
class LaunchMember:
    """Action: start the guest of `rank` for `epoch` from `state` (None: the plugin's `start`)."""

    rank: int
    epoch: int
    state: object


@dataclass(frozen=True)
class RunStep:
    """Action: the guest of `rank` runs `superstep` of `epoch` on `inbox`; with `check`, also answer it."""

    rank: int
    epoch: int
    superstep: int
    inbox: Inbox
    check: GangCheck | None = None


@dataclass(frozen=True)
class WriteCheckpoint:
    """Action: encode MemberCheckpoint(rank, superstep, guest's state, inbox) and report it."""

    rank: int
    epoch: int
    superstep: int
    inbox: Inbox


@dataclass(frozen=True)
class KillMember:
    """Action: end the guest of `rank` (of `epoch` or older) now."""

    rank: int
    epoch: int


@dataclass
class _Slot:
    """A member hosted here: its epoch, the superstep it runs next, and mail by (superstep, sender)."""

    epoch: int
    next: int
    mail: dict[int, Inbox] = field(default_factory=dict)
    release: ReleaseStep | TakeCheckpoint | None = None
    running: int | None = None


class GangSite:
    """The members of gang `gang_id` on host `host`, mail held for them and pointers to where they went."""

    def __init__(self, gang_id: str, host: str) -> None:
        self.gang_id = gang_id
        self.host = host
        self._slots: dict[int, _Slot] = {}
        self._pointers: dict[int, tuple[int, str]] = {}   # rank -> (epoch it left in, host it went to)
        self._ended: dict[int, int] = {}                  # rank -> the last epoch of it that ended here
        self._addresses: dict[int, str] = {}             # rank -> host it was last seen on
        self._held: dict[tuple, Mail] = {}               # routed mail for a member not started here yet
        self._unacked: dict[tuple, Mail] = {}
        self.dropped = 0                                  # stale mail refused (worth a log line)
        self._handlers = {
            StartMember: self._start, ReleaseStep: self._release, TakeCheckpoint: self._release,
            StopMember: self._stop, StepDone: self._step_done, Mail: self._mail, MailAck: self._ack,
            MailBounced: self._bounced, SendFailed: self._bounced, EvictMembers: self._evict,
        }

    def handle(self, event: object) -> list:
        """Apply one input; returns the actions it causes, in order. ProtocolError: not a gang message."""
        handler = self._handlers.get(type(event))
        if handler is None:
            raise ProtocolError(f"a gang site does not take a {type(event).__name__}")
        return handler(event)

    def members(self) -> dict[int, int]:
        """Rank -> epoch of the members hosted here now."""
        return {rank: slot.epoch for rank, slot in self._slots.items()}

    def _start(self, start: StartMember) -> list:
        slot = self._slots.get(start.rank)
        pointer = self._pointers.get(start.rank)
        if (slot and slot.epoch >= start.epoch) or (pointer and pointer[0] >= start.epoch) \
                or self._ended.get(start.rank, -1) >= start.epoch:
            return []   # a late or repeated start: that epoch already ended here
        actions = self._end(start.rank) if slot else []
        self._pointers.pop(start.rank, None)
        slot = self._slots[start.rank] = _Slot(start.epoch, start.superstep)
        if start.checkpoint is None:
            state, inbox = None, {}
        else:
            checkpoint = MemberCheckpoint.from_bytes(start.checkpoint, start.size)
            state, inbox = checkpoint.state, checkpoint.inbox
        slot.mail[start.superstep - 1] = inbox
        actions.append(LaunchMember(start.rank, start.epoch, state))
        actions += self._release(ReleaseStep(self.gang_id, start.rank, start.epoch, start.superstep, frozenset(inbox)))
        for key, mail in sorted(self._held.items()):
            if mail.dest == start.rank and mail.epoch <= start.epoch:
                del self._held[key]
                actions += self._mail(mail)
        return actions

    def _release(self, release: ReleaseStep | TakeCheckpoint) -> list:
        slot = self._slots.get(release.rank)
        if slot is None or slot.epoch != release.epoch or release.superstep != slot.next or slot.running is not None \
                or slot.release is not None:
            return []
        slot.release = release
        return self._try_run(release.rank, slot)

    def _try_run(self, rank: int, slot: _Slot) -> list:
        release = slot.release
        if release is None:
            return []
        arrived = slot.mail.get(release.superstep - 1, {})
        if len(arrived) != len(release.expect) or arrived.keys() != release.expect:
            return []
        inbox = dict(sorted(slot.mail.pop(release.superstep - 1, {}).items()))
        slot.release = None
        if isinstance(release, TakeCheckpoint):
            slot.mail[release.superstep - 1] = inbox   # kept: a repeated request gets the same checkpoint
            return [WriteCheckpoint(rank, slot.epoch, release.superstep, inbox)]
        slot.running, slot.next = release.superstep, release.superstep + 1
        return [RunStep(rank, slot.epoch, release.superstep, inbox, release.check)]

    def _stop(self, stop: StopMember) -> list:
        actions = []
        slot = self._slots.get(stop.rank)
        if slot and slot.epoch < stop.epoch:
            actions += self._end(stop.rank)
        for key in [key for key, mail in self._unacked.items() if mail.sender == stop.rank and mail.epoch < stop.epoch]:
            del self._unacked[key]
        pointer = self._pointers.get(stop.rank)
        if stop.forward_to is not None and stop.rank not in self._slots and (pointer is None or pointer[0] < stop.epoch):
            self._pointers[stop.rank] = (stop.epoch, stop.forward_to)
        for key, mail in sorted(self._held.items()):
            if mail.dest != stop.rank:
                continue
            if mail.epoch < stop.epoch:
                del self._held[key]
                self.dropped += 1
            elif stop.rank in self._pointers:   # the member's new host takes it
                del self._held[key]
                actions += self._mail(mail)
        return actions

    def _evict(self, _: EvictMembers) -> list:
        actions = [action for rank in sorted(self._slots) for action in self._end(rank)]
        self._held.clear()
        self._unacked.clear()
        return actions

    def _end(self, rank: int) -> list:
        slot = self._slots.pop(rank)
        self._ended[rank] = slot.epoch
        return [KillMember(rank, slot.epoch)]

    def _step_done(self, done: StepDone) -> list:
        slot = self._slots.get(done.rank)
        if slot is None or slot.epoch != done.epoch or slot.running != done.superstep:
            return []
        slot.running = None
        actions = []
        for dest, messages in sorted(done.outbox.items()):
            mail = Mail(self.gang_id, done.epoch, done.superstep, done.rank, dest, tuple(messages), self.host)
            if dest == done.rank:
                actions += self._mail(mail)
            else:
                self._unacked[mail.key] = mail
                actions.append(Send(self._addresses.get(dest, COORDINATOR), mail))
        actions.append(Send(COORDINATOR, BarrierReport(self.gang_id, done.epoch, done.rank, done.superstep,
                                                       frozenset(done.outbox), done.move, done.done, done.result)))
        return actions + self._try_run(done.rank, slot)

    def _mail(self, mail: Mail) -> list:
        slot = self._slots.get(mail.dest)
        pointer = self._pointers.get(mail.dest)
        if slot is not None and mail.epoch == slot.epoch:
            return self._deliver(slot, mail)
        if (slot is not None and mail.epoch < slot.epoch) or (pointer is not None and mail.epoch < pointer[0]):
            self.dropped += 1   # sent before a restart: the checkpoint already holds what counts
            return []
        if pointer is not None:
            return [Send(pointer[1], mail)]
        if mail.routed:
            self._held[mail.key] = mail
            return []
        return [Send(mail.reply_to, MailBounced(mail))]

    def _deliver(self, slot: _Slot, mail: Mail) -> list:
        ack = MailAck(self.gang_id, mail.key, self.host)
        ack_action = [] if mail.reply_to == self.host else [Send(mail.reply_to, ack)]
        if mail.superstep < slot.next - 1 or mail.sender in slot.mail.get(mail.superstep, {}):
            return ack_action   # a duplicate (or read already): acknowledged again, delivered once
        slot.mail.setdefault(mail.superstep, {})[mail.sender] = list(mail.messages)
        return ack_action + self._try_run(mail.dest, slot)

    def _ack(self, ack: MailAck) -> list:
        mail = self._unacked.pop(ack.key, None)
        if mail is not None:
            self._addresses[mail.dest] = ack.at
        return []

    def _bounced(self, bounce: MailBounced | SendFailed) -> list:
        mail = bounce.mail
        if mail.key not in self._unacked:
            return []
        self._addresses.pop(mail.dest, None)
        return [Send(COORDINATOR, mail)]

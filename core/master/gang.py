"""The master's side of a gang assignment, sans-IO: placement, the barrier, global checkpoints, restarts.

The coordinator places the p members on p distinct hosts (`policies.gang_migration.choose_hosts`
over the merged table, waiting with a reason while fewer than p hosts can take one) and runs the
barrier: superstep k+1 is released only when all p members reported k, each release naming the
senders whose mail the member must hold first (`cluster.gang_site` does the delivery). Every
placement is an epoch; a report, checkpoint or mail of another epoch, or a second report of the
same superstep, is refused, so no superstep is applied twice. At a check (`CheckCadence`) the
members' predicate answers ride on their reports and are OR-reduced; on "move" every member
checkpoints at the barrier, and only once all p checkpoints of that barrier are in do they replace
the previous global checkpoint and the gang restart on the new best p under a new epoch. Every
`checkpoint_interval` seconds without a global checkpoint (0: never) the members checkpoint at the
next barrier anyway and, once all p are in, go on where they are in the same epoch: a gang that never
needs to move still has a recent point to restart from when a host or the master dies. A host
that is lost (its owner evicts, it crashes or is cut off) restarts the whole gang from the last
global checkpoint at once: nobody waits for a barrier the lost member will never reach. A member
whose host's owner holds its guests (HostHeld: it is stopped) cannot answer a check either: when a
timed check falls due with such a host in the gang, the gang restarts the same way, elsewhere. The
results are combined only when all p finished in the same epoch.

Inputs are events with their time (`handle`); outputs are actions (`Send` to a host, `Combine`,
`GangFailed`, `Refused`). No clocks, sockets or plugin code here; `view()` is what the UI shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.cluster.gang_site import (
    BarrierReport,
    CheckpointReport,
    GangCheck,
    Mail,
    ReleaseStep,
    Send,
    StartMember,
    StopMember,
    TakeCheckpoint,
)
from frost_core.plugin.gang import MemberCheckpoint, check_agreement
from frost_core.policies.gang_migration import CheckCadence, check_due, choose_hosts, member_share, or_reduce
from frost_core.policies.views import NodeView


# Events the node feeds in.

@dataclass(frozen=True)
class TableChanged:
    """The merged resource table as of `at`."""

    at: float
    table: tuple[NodeView, ...]


@dataclass(frozen=True)
class HostLost:
    """`host` can no longer run a member: its owner evicts, it crashed, or it is cut off (`reason`)."""

    at: float
    host: str
    reason: str


@dataclass(frozen=True)
class HostBack:
    """`host`, lost earlier, is reachable again (it may still run members of an old epoch)."""

    at: float
    host: str


@dataclass(frozen=True)
class HostHeld:
    """`host`'s owner needs the machine: its members are stopped (SIGSTOP) and reach no barrier (`reason`)."""

    at: float
    host: str
    reason: str


@dataclass(frozen=True)
class HostFree:
    """`host`, held earlier, runs its members again."""

    at: float
    host: str


@dataclass(frozen=True)
class LeaveHost:
    """`host`'s owner is finishing (`reason`): the gang leaves it at the first barrier at which p other hosts
    can take the members (its member would not be done soon; the owner waits for it to go)."""

    at: float
    host: str
    reason: str


@dataclass(frozen=True)
class MoveGang:
    """The owner asked to move member `rank` (`move` in the UI): the gang moves at the next barrier,
    leaving that member's host if p others can take the members."""

    at: float
    rank: int
    reason: str


@dataclass(frozen=True)
class Received:
    """A message from a host (BarrierReport, CheckpointReport or Mail to route) at `at`."""

    at: float
    message: object


# Actions it returns besides `Send`.

@dataclass(frozen=True)
class Combine:
    """All p members finished in the same epoch: combine `results[rank]` into the output."""

    results: tuple


@dataclass(frozen=True)
class GangFailed:
    """The gang cannot go on (a plugin broke the contract)."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """A message that was not applied, and why (one log line for the wiring)."""

    message: object
    reason: str


# The view.

@dataclass(frozen=True)
class MemberView:
    """One member as the UI shows it: where it runs, how far it got, how long it waited for the others."""

    rank: int
    host: str | None
    superstep: int
    at_barrier: bool
    waited: float
    moves: int


@dataclass(frozen=True)
class CheckpointView:
    """The last global checkpoint: before which superstep, when it was complete, its bytes (all p)."""

    superstep: int
    at: float
    size: int


@dataclass(frozen=True)
class GangView:
    """A gang assignment: its phase (waiting, running, checkpointing, finished, failed) and members."""

    gang_id: str
    size: int
    epoch: int
    phase: str
    reason: str
    superstep: int
    members: tuple[MemberView, ...]
    last_checkpoint: CheckpointView | None
    moves: int
    restarts: int


@dataclass(frozen=True)
class GlobalCheckpoint:
    """All p members' MemberCheckpoint bytes taken at the same barrier, before `superstep`."""

    superstep: int
    at: float
    data: tuple[bytes, ...]


@dataclass
class _Member:
    host: str | None = None
    superstep: int = 0
    at_barrier: bool = False
    reported_at: float = 0.0
    waited: float = 0.0
    moves: int = 0


class GangCoordinator:
    """One gang assignment's barrier and placement; feed it events, carry out what it returns.

    `x` and `margin` are the migration predicate's (`policies.gang_migration`); `cadence` says
    when members check; a host takes a member only with `memory` bytes free for guests; a global
    checkpoint is taken at the first barrier `checkpoint_interval` seconds after the last one (or the
    placement) though the gang stays (0: only when it moves). `phase` is waiting, running, checkpointing,
    finished or failed.
    """

    def __init__(self, gang_id: str, size: int, cadence: CheckCadence = CheckCadence(), x: float = 1.0,
                 margin: float = 0.0, *, epoch: int = 0, checkpoint: GlobalCheckpoint | None = None,
                 memory: int = 0, checkpoint_interval: float = 0.0,
                 named: Callable[[str], str] = lambda node_id: node_id[:8]) -> None:
        """`epoch`: the one before the first placement; a coordinator started again for the same gang starts
        above every epoch of its earlier life, so hosts that still know those take it for a new one, and
        from `checkpoint`, the last global checkpoint of that life (its superstep, not 0). `named`: a host as the
        gang's reason names it (a peer's name; its id said nothing to the owner reading why the gang waits)."""
        if size < 1:
            raise ValueError(f"a gang has at least one member, not {size}")
        if checkpoint_interval < 0:
            raise ValueError(f"a checkpoint every {checkpoint_interval:g} seconds is not an interval (0 turns it off)")
        self.gang_id, self.size, self.cadence, self.x, self.margin = gang_id, size, cadence, x, margin
        self.memory, self.checkpoint_interval = memory, checkpoint_interval
        self._named = named
        self.phase, self.reason = "waiting", "waiting for the resource table"
        self.epoch = epoch            # every placement is a new epoch
        self.checkpoint = checkpoint
        self.superstep = checkpoint.superstep if checkpoint else 0   # the one running (or checkpointed before)
        self.moves = 0
        self.restarts = 0
        self._table: tuple[NodeView, ...] = ()
        self._down: set[str] = set()
        self._stale: dict[str, set[int]] = {}       # lost host -> ranks it may still run
        self._members = [_Member() for _ in range(size)]
        self._reports: dict[int, BarrierReport] = {}
        self._images: dict[int, bytes] = {}
        self._checked = (self.superstep, 0.0)       # the superstep and time of the last check (or start)
        self._saved_at = 0.0                        # when the last global checkpoint was in (or the placement)
        self._staying: tuple[list, str] | None = None   # a periodic checkpoint's releases to send once it is in, the reason
        self._asked = False                         # the running superstep carries a check
        self._move_asked = ""                       # why the owner asked to move, until the next barrier
        self._leave: str | None = None              # the host that `move` asked the gang to leave
        self._held: dict[str, str] = {}             # host whose owner holds its members -> why
        self._leaving: dict[str, str] = {}          # host whose owner is finishing -> why, until the gang left it
        self._messages = {BarrierReport: self._report, CheckpointReport: self._image, Mail: self._route}
        self._events = {TableChanged: self._table_changed, HostLost: self._host_lost, HostBack: self._host_back,
                        MoveGang: self._move, HostHeld: self._host_held, HostFree: self._host_free,
                        LeaveHost: self._leave_host}

    def handle(self, event: object) -> list:
        """Apply one event; returns the actions it causes, in order."""
        if isinstance(event, Received):
            handler = self._messages.get(type(event.message))
            if handler is None:
                raise ProtocolError(f"a gang coordinator does not take a {type(event.message).__name__}")
            return handler(event.at, event.message)
        return self._events[type(event)](event)

    def hosts(self) -> tuple[str | None, ...]:
        """The host of each rank in the current epoch (None while waiting)."""
        return tuple(member.host for member in self._members)

    def view(self) -> GangView:
        members = tuple(MemberView(rank, m.host, m.superstep, m.at_barrier, m.waited, m.moves)
                        for rank, m in enumerate(self._members))
        last = self.checkpoint
        return GangView(self.gang_id, self.size, self.epoch, self.phase, self.reason, self.superstep, members,
                        None if last is None else CheckpointView(last.superstep, last.at, sum(map(len, last.data))),
                        self.moves, self.restarts)

    # Placement and restarts.

    def _table_changed(self, event: TableChanged) -> list:
        self._table = event.table
        return self._place(event.at) if self.phase == "waiting" else self._leave_held(event.at)

    def _host_held(self, event: HostHeld) -> list:
        self._held[event.host] = event.reason
        return self._leave_held(event.at)

    def _host_free(self, event: HostFree) -> list:
        self._held.pop(event.host, None)
        return self._place(event.at) if self.phase == "waiting" else []

    def _leave_host(self, event: LeaveHost) -> list:
        if event.host in self.hosts():
            self._leaving[event.host] = event.reason
        return []

    def _leave_held(self, at: float) -> list:
        """Leave the hosts whose owner holds their members once a timed check falls due: from the last global
        checkpoint, as for a lost host."""
        held = [host for host in self.hosts() if host in self._held]
        if not held or self.phase not in ("running", "checkpointing") or not check_due(self.cadence, 0, at - self._checked[1]):
            return []
        # The member there is stopped: it reaches no barrier and takes no checkpoint, so the check that falls
        # due cannot be answered. Waiting would hold the other p - 1 hosts idle until the owner's policy
        # evicts (minutes) or the owner leaves; the gang starts again from its last global checkpoint.
        self.restarts += 1
        return self._place(at, "; ".join(f"{self._named(host)} {self._held[host]}" for host in dict.fromkeys(held)))

    def _host_lost(self, event: HostLost) -> list:
        self._down.add(event.host)
        ranks = {rank for rank, m in enumerate(self._members) if m.host == event.host}
        if not ranks or self.phase not in ("running", "checkpointing"):
            return []
        self._stale.setdefault(event.host, set()).update(ranks)
        self.restarts += 1
        return self._place(event.at, f"{self._named(event.host)} {event.reason}")

    def _host_back(self, event: HostBack) -> list:
        self._down.discard(event.host)
        stale = self._stale.pop(event.host, set())
        actions = [Send(event.host, StopMember(self.gang_id, rank, self.epoch)) for rank in sorted(stale)]
        return actions + (self._place(event.at) if self.phase == "waiting" else [])

    def _move(self, event: MoveGang) -> list:
        if self.phase in ("running", "checkpointing") and 0 <= event.rank < self.size:
            self._move_asked, self._leave = event.reason, self._members[event.rank].host
            # Where p other hosts cannot take the members at that barrier (one of them busy for a moment), the
            # gang checkpoints there and stays, then leaves at the first later barrier where they can.
            self._leaving[self._leave] = event.reason
        return []

    def _place(self, at: float, why: str = "") -> list:
        """Start all p members (afresh or from the last global checkpoint) on the best p hosts, or wait."""
        current = frozenset(m.host for m in self._members if m.host is not None)
        willing, usable = self._usable(current)
        if len([v for v in usable if v.node_id != self._leave]) >= self.size:
            usable = [v for v in usable if v.node_id != self._leave]
        self._leave = None
        if len(usable) < self.size:
            stops = self._stop_all(None)
            names = ", ".join(sorted(self._named(v.node_id) for v in usable)) or "none"
            self.phase = "waiting"
            short = len(willing) - len(usable)
            self.reason = ((f"{why}: " if why else "") + f"needs {self.size} hosts that can take a member, {len(usable)} can ({names})"
                           + (f"; {short} more lack {self.memory >> 20} MiB free for it" if short else ""))
            # Stopped, the members keep nothing since the last global checkpoint: the gang shows where it starts again.
            self.superstep = self.checkpoint.superstep if self.checkpoint else 0
            for member in self._members:
                member.host, member.at_barrier, member.superstep = None, False, self.superstep
            return stops
        chosen = choose_hosts(usable, current, self.size, self.x, self.margin)
        self._leaving = {host: why for host, why in self._leaving.items() if host in chosen}
        old = self.hosts()
        staying = {host for host in old if host in chosen}
        spare = iter(host for host in chosen if host not in staying)
        new = [host if host in staying else next(spare) for host in old]
        self.epoch += 1
        actions = self._stop_all(new)
        start = self.checkpoint.superstep if self.checkpoint else 0
        for rank, member in enumerate(self._members):
            if old[rank] is not None and old[rank] != new[rank]:
                member.moves += 1
            member.host, member.superstep, member.at_barrier = new[rank], start, False
            image = self.checkpoint.data[rank] if self.checkpoint else None
            actions.append(Send(new[rank], StartMember(self.gang_id, rank, self.size, self.epoch, start, image)))
        if any(host is not None for host in old) and new != list(old):
            self.moves += 1
        self.phase, self.superstep, self.reason = "running", start, why
        self._reports, self._images, self._checked, self._asked, self._move_asked = {}, {}, (start, at), False, ""
        self._saved_at, self._staying = at, None
        return actions

    def _usable(self, current: frozenset[str]) -> tuple[list[NodeView], list[NodeView]]:
        """The hosts that would take a member (up, not held, offering a share), and those of them with its memory free."""
        willing = [v for v in self._table if v.node_id not in self._down and v.node_id not in self._held
                   and member_share(v, v.node_id in current, self.x) > 0]
        return willing, [v for v in willing if v.free_memory >= self.memory]

    def _leaving_now(self) -> str:
        """A host the gang should leave at this barrier for its finishing owner, if p others can take the members."""
        current = frozenset(self.hosts())
        leaving = [host for host in self.hosts() if host in self._leaving]
        if not leaving or len([v for v in self._usable(current)[1] if v.node_id not in leaving]) < self.size:
            return ""
        self._leave = leaving[0]
        return f"{self._named(leaving[0])} {self._leaving[leaving[0]]}"

    def _stop_all(self, new: list[str] | None) -> list:
        """Stop the members of the ending epoch, leaving a pointer where one moves to its `new` host."""
        actions = []
        for rank, member in enumerate(self._members):
            if member.host is None or member.host in self._down:
                continue
            if new is None:
                actions.append(Send(member.host, StopMember(self.gang_id, rank, self.epoch + 1)))
            else:   # called once the new epoch is counted
                forward = None if new[rank] == member.host else new[rank]
                actions.append(Send(member.host, StopMember(self.gang_id, rank, self.epoch, forward)))
        return actions

    # The barrier.

    def _report(self, at: float, report: BarrierReport) -> list:
        refusal = self._refusal(report.epoch, report.superstep, "running")
        if refusal or report.rank in self._reports:
            return [Refused(report, refusal or f"superstep {report.superstep} of rank {report.rank} was already applied")]
        self._reports[report.rank] = report
        member = self._members[report.rank]
        member.at_barrier, member.reported_at = True, at
        if len(self._reports) < self.size:
            return []
        reports = [self._reports[rank] for rank in range(self.size)]
        try:
            done = check_agreement([r.done for r in reports], report.superstep)
        except PluginError as error:
            self.phase, self.reason = "failed", str(error)
            return self._stop_all(None) + [GangFailed(str(error))]
        for member in self._members:
            member.waited += at - member.reported_at
            member.at_barrier = False
        if done:
            self.phase, self.reason = "finished", f"finished after superstep {report.superstep}"
            return self._stop_all(None) + [Combine(tuple(r.result for r in reports))]
        answers = [r.move for r in reports if r.move is not None]
        moving = self._move_asked or self._leaving_now() or ("" if not self._asked else "a forced checkpoint" if self.cadence.forced
                                      else "a member's host fell out of the best p" if or_reduce(answers) else "")
        self.superstep = nxt = report.superstep + 1
        self._reports = {}
        for member in self._members:
            member.superstep = nxt
        expect = [frozenset(r.rank for r in reports if dest in r.sent_to) for dest in range(self.size)]
        if moving:
            self.phase, self.reason = "checkpointing", moving
            return [Send(m.host, TakeCheckpoint(self.gang_id, rank, self.epoch, nxt, expect[rank]))
                    for rank, m in enumerate(self._members)]
        self._asked = check_due(self.cadence, nxt - self._checked[0], at - self._checked[1])
        check = GangCheck(frozenset(self.hosts()), self.x, self.margin) if self._asked else None
        if self._asked:
            self._checked = (nxt, at)
        releases = [Send(m.host, ReleaseStep(self.gang_id, rank, self.epoch, nxt, expect[rank], check))
                    for rank, m in enumerate(self._members)]
        if not self.checkpoint_interval or at - self._saved_at < self.checkpoint_interval:
            return releases
        # A periodic global checkpoint: the members checkpoint here and, once all p are in, run on where they are.
        self._staying, self.phase, self.reason = (releases, self.reason), "checkpointing", "a periodic global checkpoint"
        return [Send(m.host, TakeCheckpoint(self.gang_id, rank, self.epoch, nxt, expect[rank]))
                for rank, m in enumerate(self._members)]

    def _image(self, at: float, image: CheckpointReport) -> list:
        refusal = self._refusal(image.epoch, image.superstep, "checkpointing")
        if refusal or image.rank in self._images:
            return [Refused(image, refusal or f"rank {image.rank}'s checkpoint is already in")]
        try:
            decoded = MemberCheckpoint.from_bytes(image.data, self.size)
        except PluginError as error:
            return [Refused(image, str(error))]
        if (decoded.rank, decoded.superstep) != (image.rank, image.superstep):
            return [Refused(image, f"the checkpoint holds rank {decoded.rank} before superstep {decoded.superstep}")]
        self._images[image.rank] = image.data
        if len(self._images) < self.size:
            return []
        self.checkpoint = GlobalCheckpoint(image.superstep, at, tuple(self._images[rank] for rank in range(self.size)))
        if self._staying is None:
            return self._place(at, self.reason)
        (releases, self.reason), self._staying = self._staying, None
        self.phase, self._images, self._saved_at = "running", {}, at
        return releases

    def _refusal(self, epoch: int, superstep: int, phase: str) -> str:
        if epoch != self.epoch:
            return f"epoch {epoch} is over (the gang runs epoch {self.epoch})"
        if self.phase != phase:
            return f"the gang is {self.phase}"
        if superstep != self.superstep:
            return f"superstep {superstep} is not the one running ({self.superstep})"
        return ""

    def _route(self, at: float, mail: Mail) -> list:
        """Mail for a member whose host the sender does not know: pass it on, vouching for the address."""
        host = self._members[mail.dest].host if 0 <= mail.dest < self.size else None
        if mail.epoch != self.epoch or host is None:
            return [Refused(mail, f"mail of epoch {mail.epoch} has no member to go to (epoch {self.epoch}, {self.phase})")]
        return [Send(host, Mail(mail.gang_id, mail.epoch, mail.superstep, mail.sender, mail.dest, mail.messages,
                                mail.reply_to, routed=True))]


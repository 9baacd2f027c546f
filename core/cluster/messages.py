"""What masters and hosts say to each other about units: offers, starts, reports, results, moves.

A unit travels as a `UnitSpec` (everything a host needs to run it, with no local paths) plus,
as bulk bytes after the header, the checkpoint it resumes from. The same start message serves a
master placing a queued unit and a host handing a running unit to another host: in both cases
the receiver answers only once the checkpoint is durable on its disk and the guest is running.
"""

from __future__ import annotations

import dataclasses

from frost_core.storage.checkpoints import IDENTITY, CheckpointRecord
from frost_core.policies.views import NodeView
from frost_core.guest.views import InputFile
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message, register

MAX_TASKS_PER_REPORT = 1024


@dataclasses.dataclass(frozen=True)
class UnitSpec:
    """A unit as it travels: location independent (its task id never changes) and free of local paths."""

    task_id: str
    assignment_id: str
    master: str                 # node id of the assignment's master
    plugin_name: str
    plugin_version: str
    plugin_hash: str
    unit: bytes                 # canonical CBOR of WorkUnit.to_plain()
    memory_bytes: int
    epoch: int
    inputs: tuple[InputFile, ...] = ()  # fetched by hash from `master` when the unit opens them
    submitter: str = ""         # who submitted its assignment (`identity.submitter_id`); "" from an older master


@dataclasses.dataclass(frozen=True)
class CheckpointMeta:
    """A checkpoint's identity fields (`checkpoints.IDENTITY`, spelled out for the wire's type checks)
    and hash; its state follows as bulk bytes, verified by the side that keeps it."""

    task_id: str
    plugin_name: str
    plugin_version: str
    plugin_hash: str
    unit_index: int
    epoch: int
    seq: int
    taken_at: float
    sha256: str

    @classmethod
    def of(cls, record: CheckpointRecord) -> CheckpointMeta:
        return cls(**{name: getattr(record, name) for name in IDENTITY}, sha256=record.sha256)

    def record(self, state: bytes) -> CheckpointRecord:
        """The record with its state, not yet verified.

        The receiving side checks the SHA-256 when it makes the record durable
        (`CheckpointStore.write`), where the check overlaps the fsync instead of holding up
        the transfer; what it does not write, it verifies (`CheckpointRecord.verify`) first.
        """
        return CheckpointRecord(**{name: getattr(self, name) for name in IDENTITY}, state=state, sha256=self.sha256)


TRAILED = ""
"""`CheckpointMeta.sha256` of a state sent while it was still arriving: its hash follows it (`CheckpointTrailer`)."""


@register
@dataclasses.dataclass(frozen=True)
class CheckpointTrailer(Message):
    """The SHA-256 of the state just sent, after its BULK_END, where the header said `TRAILED`."""

    CODE = MessageCode.CHECKPOINT_TRAILER
    MAX_SIZE = 128
    sha256: str


@register
@dataclasses.dataclass(frozen=True)
class UnitOffer(Message):
    """Would you take this unit? Sent before a placement and before a move (the negotiation)."""

    CODE = MessageCode.UNIT_OFFER
    MAX_SIZE = 1024
    task_id: str
    plugin_hash: str
    memory_bytes: int
    state_bytes: int
    moving: bool = False
    submitter: str = ""         # whose unit it is: a host choosing between masters favours the least used
    usage: float = 0.0          # that submitter's decayed CPU-seconds as its master counts them (fair share)
    queued: int = 0             # its units still waiting at that master besides this one
    running: int = 0            # its units running besides this one, as its master counts them (equal share)
    ahead: bool = False         # it may wait on a host whose CPUs are busy for the next free one (short units)


@register
@dataclasses.dataclass(frozen=True)
class UnitOfferReply(Message):
    """Yes or no with the reason, and the host's fresh figures (the location policy's last look)."""

    CODE = MessageCode.UNIT_OFFER_REPLY
    MAX_SIZE = 1024
    accepted: bool
    reason: str
    available: float
    guests: int
    free_memory: int


@register
@dataclasses.dataclass(frozen=True)
class UnitStart(Message):
    """Run this unit; the checkpoint's state (empty when `checkpoint` is None) follows as bulk."""

    CODE = MessageCode.UNIT_START
    MAX_SIZE = MAX_MESSAGE_SIZE
    spec: UnitSpec
    checkpoint: CheckpointMeta | None = None
    moved: bool = False         # a host hands the unit over (a migration), rather than its master placing it


@register
@dataclasses.dataclass(frozen=True)
class Verdict(Message):
    """The general answer: done (`ok`) or why not; `later`: not refused, but the answering node's disk refused
    to store it now, so the asker keeps it and sends it again later."""

    CODE = MessageCode.VERDICT
    MAX_SIZE = 4096
    ok: bool
    reason: str = ""
    later: bool = False


STOPPED = "stopped"
"""A `UnitStatus.state`: its master had this copy stopped, and these are its final figures (what it used to
the end counts as thrown away); no longer running."""


@dataclasses.dataclass(frozen=True)
class UnitStatus:
    task_id: str
    epoch: int
    progress: float
    cpu_seconds: float = 0.0    # CPU this copy's guest process has used on its host (what waste is counted in)
    checkpoint_seq: int = 0     # its newest checkpoint on its host (0: none yet): where it would resume
    checkpoint_progress: float = 0.0   # the progress that checkpoint holds
    checkpoint_cpu: float = 0.0        # the guest's CPU-seconds when it was taken (work past it is lost with the copy)
    state: str = "running"      # as its host sees it: running, starting, checkpointing, paused (by the owner),
                                # suspended (by the owner policy), so its master's screen tells the truth;
                                # STOPPED once, with its last figures, after its master had it stopped
    submitter: str = ""         # whose unit it is (from its spec)
    leaves_in: float = 0.0      # paused by its host's owner: seconds until that pause sends it on (0: not known, never)


@dataclasses.dataclass(frozen=True)
class SpentRun:
    """A guest run of a master's unit that ended on its host with no result to deliver (evicted, moved, failed,
    stopped): the CPU it used there, which the host's ledger counts as given and the master's as received."""

    task_id: str
    epoch: int
    cpu_seconds: float
    ended_at: float             # the host's wall clock: with task and epoch, what makes the run unique


@register
@dataclasses.dataclass(frozen=True)
class UnitReport(Message):
    """Host -> master, every report interval: these units of yours run here. It is also the
    host's heartbeat for them: a master that stops hearing it restarts them elsewhere. `spent` are
    the runs of its units that ended here since the last report without a result."""

    CODE = MessageCode.UNIT_REPORT
    MAX_SIZE = 256 * 1024
    units: tuple[UnitStatus, ...]
    spent: tuple[SpentRun, ...] = ()


@register
@dataclasses.dataclass(frozen=True)
class UnitReportReply(Message):
    """Which of the reported units this host must stop: superseded by a newer epoch, cancelled, done."""

    CODE = MessageCode.UNIT_REPORT_REPLY
    MAX_SIZE = 256 * 1024
    stop: tuple[str, ...]


@register
@dataclasses.dataclass(frozen=True)
class UnitResult(Message):
    """Host -> master: the unit finished; its result bytes follow as bulk."""

    CODE = MessageCode.UNIT_RESULT
    MAX_SIZE = 1024
    task_id: str
    epoch: int
    cpu_seconds: float = 0.0    # the CPU this copy's guest used: what a refused result threw away


@register
@dataclasses.dataclass(frozen=True)
class UnitReturn(Message):
    """Host -> master: no peer took this evicted unit; queue it again from this checkpoint (bulk)."""

    CODE = MessageCode.UNIT_RETURN
    MAX_SIZE = 4096
    task_id: str
    epoch: int
    checkpoint: CheckpointMeta | None = None
    progress: float = 0.0       # the progress the checkpoint holds, and the guest's CPU-seconds when it was
    cpu_seconds: float = 0.0    # taken (0: its host does not know): the queue shows the unit that far along


@register
@dataclasses.dataclass(frozen=True)
class UnitFailed(Message):
    """Host -> master: the unit failed here; `retryable` says whether another try may succeed."""

    CODE = MessageCode.UNIT_FAILED
    MAX_SIZE = 8192
    task_id: str
    epoch: int
    reason: str
    retryable: bool


@register
@dataclasses.dataclass(frozen=True)
class UnitMoved(Message):
    """Source host -> master, once the destination confirmed: the unit runs at `destination` under `epoch`."""

    CODE = MessageCode.UNIT_MOVED
    MAX_SIZE = 1024
    task_id: str
    epoch: int
    destination: str


@register
@dataclasses.dataclass(frozen=True)
class MoveCommand(Message):
    """Master (or operator) -> current host: move this unit to `destination` now."""

    CODE = MessageCode.MOVE_COMMAND
    MAX_SIZE = 1024
    task_id: str
    destination: str


@dataclasses.dataclass(frozen=True)
class Figures:
    """A node's row of the resource table, fresh (policies.views.NodeView on the wire)."""

    node_id: str
    available: float
    guests: int
    cpus: int
    idle_extremity: float
    heavy_extremity: float
    free_memory: int
    owner_active: bool
    accepting: bool

    @classmethod
    def of(cls, view: NodeView) -> Figures:
        return cls(view.node_id, view.available, view.guests, view.cpus, view.idle_extremity, view.heavy_extremity,
                   view.free_memory, view.owner_active, view.accepting)

    def view(self) -> NodeView:
        return NodeView(node_id=self.node_id, available=self.available, guests=self.guests, cpus=max(self.cpus, 1),
                        idle_extremity=self.idle_extremity, heavy_extremity=self.heavy_extremity,
                        free_memory=self.free_memory, owner_active=self.owner_active, accepting=self.accepting)


@register
@dataclasses.dataclass(frozen=True)
class FiguresQuery(Message):
    """The location policy's last look before sending (FROST 5.4.1): your figures now, please."""

    CODE = MessageCode.FIGURES_QUERY
    MAX_SIZE = 64


@register
@dataclasses.dataclass(frozen=True)
class FiguresReply(Message):
    CODE = MessageCode.FIGURES_REPLY
    MAX_SIZE = 1024
    figures: Figures


@register
@dataclasses.dataclass(frozen=True)
class WorkRequest(Message):
    """An underloaded node asks a loaded one to send it a guest (receiver-initiated mode), with its figures."""

    CODE = MessageCode.WORK_REQUEST
    MAX_SIZE = 1024
    requester: Figures


@register
@dataclasses.dataclass(frozen=True)
class CheckpointReplica(Message):
    """Host -> master: a copy of a checkpoint as it is taken (a desk disk is not stable storage)."""

    CODE = MessageCode.CHECKPOINT_REPLICA
    MAX_SIZE = 4096
    checkpoint: CheckpointMeta
    held_for: str = ""          # set when the receiver is one of the k extra holders, not the master
    progress: float = 0.0       # the progress it holds, and the guest's CPU-seconds when it was taken
    cpu_seconds: float = 0.0    # (0: its host did not say): a replacement resumed from it counts from there


@register
@dataclasses.dataclass(frozen=True)
class ReplicaFetch(Message):
    """Master -> a peer holding replicas: your newest checkpoint of this unit, if newer than `after_seq`.

    Answered with a CheckpointReplica header and the state as bulk, or a Verdict saying why not.
    """

    CODE = MessageCode.REPLICA_FETCH
    MAX_SIZE = 1024
    task_id: str
    after_seq: int


@register
@dataclasses.dataclass(frozen=True)
class HoldingsQuery(Message):
    """Master -> a host it hears again after a cut-off: what do you hold of mine? Asked before re-placing."""

    CODE = MessageCode.HOLDINGS_QUERY
    MAX_SIZE = 64


@register
@dataclasses.dataclass(frozen=True)
class SlotKept(Message):
    """Host -> master: a free CPU here is kept for your submitter (a share hold): offer here now, not at your next
    round. A master with no unit of its own finishing learns of a free CPU only this way."""

    CODE = MessageCode.SLOT_KEPT
    MAX_SIZE = 64


@register
@dataclasses.dataclass(frozen=True)
class Holdings(Message):
    """Host -> master: its copies of the master's units still running (with their progress and newest
    checkpoint), and the finished ones whose result or failure waits in its outbox, each as (task id, epoch)."""

    CODE = MessageCode.HOLDINGS
    MAX_SIZE = 256 * 1024
    running: tuple[UnitStatus, ...] = ()
    finished: tuple[tuple[str, int], ...] = ()


MAX_BATCH = 256
"""Units in one batch call at most: a round places at most as many units as hosts have free cores."""


@register
@dataclasses.dataclass(frozen=True)
class OffersWithdrawn(Message):
    """Master -> host: units whose offers you accepted will not be started after all (cancelled, or no longer
    queued, between the offer and the placement): free the CPU and memory they hold."""

    CODE = MessageCode.OFFERS_WITHDRAWN
    MAX_SIZE = MAX_BATCH * 256
    task_ids: tuple[str, ...]


@register
@dataclasses.dataclass(frozen=True)
class UnitOffers(Message):
    """Several offers in one call (a placement round); answered in order, each as `UnitOffer` would be."""

    CODE = MessageCode.UNIT_OFFERS
    MAX_SIZE = MAX_BATCH * 1024
    offers: tuple[UnitOffer, ...]


@register
@dataclasses.dataclass(frozen=True)
class UnitOfferReplies(Message):
    CODE = MessageCode.UNIT_OFFER_REPLIES
    MAX_SIZE = MAX_BATCH * 1024
    replies: tuple[UnitOfferReply, ...]


@register
@dataclasses.dataclass(frozen=True)
class UnitStarts(Message):
    """Start these units, none with a checkpoint (a unit with one is started alone, its state as bulk);
    answered once each runs or was refused, in order."""

    CODE = MessageCode.UNIT_STARTS
    MAX_SIZE = MAX_MESSAGE_SIZE
    specs: tuple[UnitSpec, ...]


@register
@dataclasses.dataclass(frozen=True)
class Verdicts(Message):
    CODE = MessageCode.VERDICTS
    MAX_SIZE = MAX_BATCH * 4096
    verdicts: tuple[Verdict, ...]


# Gang assignments: the coordinator on the master and the sites on the members' hosts
# (master.gang, cluster.gang_site) exchange these. Plain data a plugin sends or returns (mail,
# results) and member checkpoints travel as bulk bytes after the header; `gang_from_wire`
# rebuilds the sans-IO classes' messages and refuses what they could not hold.


@dataclasses.dataclass(frozen=True)
class GangSpec:
    """What a host needs to run any member of a gang: its plugin (fetched by hash from `master`), parameters
    and memory."""

    assignment_id: str
    master: str
    plugin_name: str
    plugin_version: str
    plugin_hash: str
    params: bytes               # canonical CBOR of the assignment's parameters
    memory_bytes: int


@dataclasses.dataclass(frozen=True)
class WireCheck:
    """`gang_site.GangCheck` on the wire: the gang's hosts, sorted."""

    gang_hosts: tuple[str, ...]
    x: float
    margin: float = 0.0


@register
@dataclasses.dataclass(frozen=True)
class GangStart(Message):
    """Coordinator -> host: `gang_site.StartMember`; its MemberCheckpoint follows as bulk when `with_checkpoint`."""

    CODE = MessageCode.GANG_START
    MAX_SIZE = 64 * 1024
    spec: GangSpec
    gang_id: str
    rank: int
    size: int
    epoch: int
    superstep: int
    with_checkpoint: bool = False


@register
@dataclasses.dataclass(frozen=True)
class GangRelease(Message):
    """Coordinator -> host: `gang_site.ReleaseStep`."""

    CODE = MessageCode.GANG_RELEASE
    MAX_SIZE = 64 * 1024
    gang_id: str
    rank: int
    epoch: int
    superstep: int
    expect: tuple[int, ...]
    check: WireCheck | None = None


@register
@dataclasses.dataclass(frozen=True)
class GangTakeCheckpoint(Message):
    """Coordinator -> host: `gang_site.TakeCheckpoint`."""

    CODE = MessageCode.GANG_TAKE_CHECKPOINT
    MAX_SIZE = 4096
    gang_id: str
    rank: int
    epoch: int
    superstep: int
    expect: tuple[int, ...]


@register
@dataclasses.dataclass(frozen=True)
class GangStop(Message):
    """Coordinator -> host: `gang_site.StopMember`."""

    CODE = MessageCode.GANG_STOP
    MAX_SIZE = 1024
    gang_id: str
    rank: int
    epoch: int
    forward_to: str | None = None


@register
@dataclasses.dataclass(frozen=True)
class GangReport(Message):
    """Host -> coordinator: `gang_site.BarrierReport`; the member's result (plain CBOR) follows as bulk when `done`."""

    CODE = MessageCode.GANG_REPORT
    MAX_SIZE = 4096
    gang_id: str
    epoch: int
    rank: int
    superstep: int
    sent_to: tuple[int, ...]
    move: bool | None
    done: bool


@register
@dataclasses.dataclass(frozen=True)
class GangCheckpoint(Message):
    """Host -> coordinator: `gang_site.CheckpointReport`; the MemberCheckpoint bytes follow as bulk."""

    CODE = MessageCode.GANG_CHECKPOINT
    MAX_SIZE = 1024
    gang_id: str
    epoch: int
    rank: int
    superstep: int


@register
@dataclasses.dataclass(frozen=True)
class GangMail(Message):
    """Between hosts (or by way of the coordinator): `gang_site.Mail`; its messages (a plain CBOR list) follow as bulk."""

    CODE = MessageCode.GANG_MAIL
    MAX_SIZE = 1024
    gang_id: str
    epoch: int
    superstep: int
    sender: int
    dest: int
    reply_to: str
    routed: bool = False
    home: bool = False          # for the gang's coordinator (it routes it), not for a member hosted there


@register
@dataclasses.dataclass(frozen=True)
class GangMailAck(Message):
    """`gang_site.MailAck`: the mail of `key` (epoch, superstep, sender, dest) is held on host `at`."""

    CODE = MessageCode.GANG_MAIL_ACK
    MAX_SIZE = 1024
    gang_id: str
    key: tuple[int, int, int, int]
    at: str


@register
@dataclasses.dataclass(frozen=True)
class GangMailBounced(Message):
    """`gang_site.MailBounced`: the mail came back; its messages follow as bulk, as with GangMail."""

    CODE = MessageCode.GANG_MAIL_BOUNCED
    MAX_SIZE = 1024
    mail: GangMail


@register
@dataclasses.dataclass(frozen=True)
class GangLost(Message):
    """Host -> coordinator: member `rank` of `epoch` ended here before the gang did: its owner evicted it, its
    guest died, or (`plugin_fault`) the plugin broke the contract, which fails the gang anywhere."""

    CODE = MessageCode.GANG_LOST
    MAX_SIZE = 8192
    gang_id: str
    rank: int
    epoch: int
    reason: str
    plugin_fault: bool = False


@register
@dataclasses.dataclass(frozen=True)
class GangHostState(Message):
    """Host -> coordinator: what happens to member `rank` (of `epoch`) on its host: `held` (the host's owner
    needs the machine: the member is stopped and reaches no barrier), `free` (it runs again) or `leaving`
    (the owner is finishing: the gang should leave at its next barrier)."""

    CODE = MessageCode.GANG_HOST_STATE
    MAX_SIZE = 8192
    gang_id: str
    rank: int
    epoch: int
    state: str
    reason: str


GANG_HOST_STATES = ("held", "free", "leaving")

GANG_MESSAGES = (GangStart, GangRelease, GangTakeCheckpoint, GangStop, GangReport, GangCheckpoint, GangMail,
                 GangMailAck, GangMailBounced, GangLost, GangHostState)
"""Every gang message: each is answered with a Verdict once its receiver took it in."""

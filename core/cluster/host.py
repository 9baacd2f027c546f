"""The host side of units: run other people's units (and this node's own) as guests, and account for them.

Whatever a unit's master is, this machine treats it alike: a master (or another host handing a
unit over) first asks `offer`, then `start`s it with its checkpoint, and the answer comes only
once that checkpoint is durable here and the guest process runs. While it runs, the unit is
reported to its master every `cluster.report_interval` (that report is its heartbeat, and the
master's reply stops copies superseded by a newer epoch), its checkpoints are replicated to the
master, and when it ends its result or failure is owed to the master until delivered — kept in
a durable outbox if the master is out of reach. An evicted guest is sent on to the best peer
(`migration.relocate`) or back to its master's queue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import trio

from frost_core.api.wording import counted
from frost_core.storage.checkpoints import CheckpointRecord
from frost_core.cluster.links import Links
from frost_core.cluster.messages import (
    STOPPED, Holdings, SpentRun, UnitOffer, UnitOfferReply, UnitSpec, UnitStatus, Verdict,
)
from frost_core.cluster.outbox import Held, Outbox, Owed, owed_failure, owed_result
from frost_core.cluster.replication import replica_holders
from frost_core.api.errors import CheckpointError, FrostError, NodeUnavailableError, PluginError, StorageError
from frost_core.events import EventLog
from frost_core.guest import envelope
from frost_core.guest.supervisor import GuestSupervisor
from frost_core.guest.views import Completed, Evicted, Failed, GuestFigures, GuestTask, Stopped
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_plain
from frost_core.plugin.registry import PluginInfo
from frost_core.policies import equal_share, fair_share
from frost_core.policies.fair_share import Demand, ShareSettings, note_demand
from frost_core.policies.prefetch import units_held
from frost_core.policies.views import NodeView

log = logging.getLogger("frost.host")

FORWARD_SECONDS = 600.0
"""How long a host remembers where a unit it handed over went, to pass on commands sent to the old place."""
RESERVATION_SECONDS = 60.0
"""How long an accepted offer holds its CPU and memory while the start is on its way."""
SUPERSEDED = "superseded: the master runs a newer copy of this unit elsewhere, or no longer needs it"
SPENT_PER_REPORT = 1000
"""At most this many ended runs go in one report (~70 bytes each: well within a report's size cap)."""
SPENT_HELD = 10_000
"""Ended runs kept for a master out of reach; beyond that the oldest are dropped (its ledger misses them)."""


@dataclasses.dataclass(frozen=True)
class Capacity:
    """What this machine offers guests right now (from the owner's intents, policy and settings)."""

    accepts_guests: bool
    reason: str             # why not, when it does not
    cpus: int
    memory_pool_bytes: int
    available: float        # the gossiped availability, in speed units
    sent_away: Mapping[str, float] = dataclasses.field(default_factory=dict)   # units the owner evicted -> until


@dataclasses.dataclass(frozen=True)
class HostSettings:
    report_interval: float = 2.0
    hold_results: float = 7 * 86400.0
    replicate_every: int = 1
    replicate_max_bytes: int = 256 << 20
    replica_peers: int = 0
    allow_cluster_plugins: bool = True
    shares: ShareSettings = ShareSettings()

    @classmethod
    def from_config(cls, config) -> HostSettings:
        return cls(
            report_interval=config.get("cluster.report_interval"), hold_results=config.get("cluster.hold_results"),
            replicate_every=config.get("checkpoints.replicate_every"),
            replicate_max_bytes=config.get("checkpoints.replicate_max_mb") << 20,
            replica_peers=config.get("checkpoints.replica_peers"),
            allow_cluster_plugins=config.get("cluster.allow_cluster_plugins"),
            shares=ShareSettings.from_config(config),
        )


class Stay(enum.Enum):
    """Where a hosted unit is in its stay on this machine."""

    RUNNING = "running"          # its guest runs here
    EVICTED = "evicted"          # the owner evicted it: its guest stops with a checkpoint, then it relocates
    MOVING = "moving"            # a move is capturing it or handing it over
    RELOCATING = "relocating"    # stopped by an eviction: on its way to a peer or back to its master
    STRANDED = "stranded"        # relocating, but no peer took it and its master is out of reach: kept here


STAY_CHANGES: Mapping[Stay, frozenset[Stay]] = {
    Stay.RUNNING: frozenset({Stay.EVICTED, Stay.MOVING, Stay.RELOCATING}),  # (an eviction not through evict())
    Stay.EVICTED: frozenset({Stay.MOVING, Stay.RELOCATING}),  # a move may take the eviction's capture on
    Stay.MOVING: frozenset({Stay.RUNNING}),  # the move failed, or the guest ended first: it stays
    Stay.RELOCATING: frozenset({Stay.STRANDED}),  # it leaves for good (a peer or its master's queue)
    Stay.STRANDED: frozenset(),  # still trying its master: it leaves for good when it answers
}
"""The allowed changes of `Hosted.stay`; anything else is refused by `Hosted.change`."""


@dataclasses.dataclass(eq=False)
class Hosted:
    """One unit on this machine, from its start until its outcome is in its master's hands."""

    task: GuestTask
    spec: UnitSpec
    arrived_at: float
    progress: float = 0.0
    cpu_seconds: float = 0.0              # its guest's CPU time at the last look (with progress: its remaining work)
    stay: Stay = Stay.RUNNING
    checkpoints: int = 0
    replicating: bool = False             # a replica of one of its checkpoints is on its way
    checkpoint: tuple[int, float, float] = (0, 0.0, 0.0)   # its newest checkpoint taken here: seq, progress, CPU
    guest_state: str = "running"          # its guest's state at the last look (GuestFigures.state)

    @property
    def master(self) -> str:
        return self.spec.master

    def status(self, paused_as: str = "paused", leaves_in: float = 0.0) -> UnitStatus:
        """How far it got, at what CPU, from which checkpoint it would resume, and whether it runs at all,
        as its master hears it; a stopped guest is `paused_as` (paused by the owner, or suspended), and one the
        owner paused leaves in `leaves_in` seconds (0: not by itself)."""
        seq, progress, cpu = self.checkpoint
        state = paused_as if self.guest_state == "paused" else self.guest_state
        return UnitStatus(self.task.task_id, self.task.epoch, self.progress, self.cpu_seconds,
                          checkpoint_seq=seq, checkpoint_progress=progress, checkpoint_cpu=cpu, state=state,
                          submitter=self.spec.submitter, leaves_in=leaves_in if state == "paused" else 0.0)

    def standing_at(self, record: CheckpointRecord | None, *, captured: bool = False) -> tuple[float, float]:
        """The progress and CPU-seconds the unit stood at when `record` was taken here ((0, 0): not known).
        They go with a checkpoint to its master, which may queue the unit again from it before any report
        says where it stood. `captured`: `record` is its guest's last state, whose own figures may reach this
        host after the guest's end: then those of the last look, which the capture is at least as far as."""
        seq, progress, cpu = self.checkpoint
        if record is not None and seq == record.seq:
            return progress, cpu
        return (self.progress, self.cpu_seconds) if record is not None and captured else (0.0, 0.0)

    @property
    def leaving(self) -> bool:
        """A move or a relocation is taking it away: it no longer counts as running here."""
        return self.stay in (Stay.MOVING, Stay.RELOCATING, Stay.STRANDED)

    def change(self, stay: Stay) -> bool:
        """Go to `stay` if `STAY_CHANGES` allows it from here; False (and no change) if not."""
        if stay not in STAY_CHANGES[self.stay]:
            return False
        self.stay = stay
        return True


class Relocator(Protocol):
    """How units leave this host (`cluster.migration.Migrator`). The host hands itself in as the
    unit's home: a move that fails after the capture resumes the unit there."""

    async def move_out(self, home: HostService, hosted: Hosted, destination: str) -> Verdict: ...

    async def relocate(self, home: HostService, hosted: Hosted, record: CheckpointRecord | None) -> None: ...

    def prepare(self, hosted: Hosted, nursery: trio.Nursery) -> None:
        """`hosted` is being evicted: its `relocate` may be got ready while its guest is captured."""


PluginSource = Callable[[str, tuple[str, ...]], Awaitable[PluginInfo]]
"""(code hash, node ids that may have it) -> the plugin, fetched and validated if need be."""


class _Install:
    """A moved-in checkpoint being made durable here beside its guest's start."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.error: CheckpointError | None = None

    async def run(self, blocking: Callable[..., Awaitable[Any]], write: Callable[[CheckpointRecord], Any],
                  record: CheckpointRecord) -> None:
        try:
            await blocking(write, record)  # also drops any older copy here
        except CheckpointError as error:
            self.error = error
        finally:
            self.done.set()


class HostService:
    def __init__(
        self, *, node_id: str, supervisor: GuestSupervisor, links: Links, capacity: Callable[[], Capacity],
        plugin_source: PluginSource, has_plugin: Callable[[str], bool], outbox: Outbox, events: EventLog,
        settings: Callable[[], HostSettings], on_change: Callable[[], None], alive: Callable[[], list[str]],
        own_figures: Callable[[], NodeView], answer_work_request: Callable[[NodeView], Awaitable[Verdict]],
        on_arrival: Callable[[str], None], relocator: Relocator,
        blocking: Callable[..., Awaitable[Any]] = trio.to_thread.run_sync,
        paused_as: Callable[[], str] = lambda: "paused",
        pause_leaves_in: Callable[[], float] = lambda: 0.0,
        usage_of: Callable[[str], float] = lambda submitter: 0.0,
        on_spent: Callable[[Hosted, float, float], None] = lambda hosted, cpu_seconds, at: None,
        disk_refused: Callable[[StorageError], None] = lambda error: None,
        named: Callable[[str], str] = lambda node_id: node_id[:8],
    ) -> None:
        """`blocking` is how file work runs (in a thread); MockClock tests run it inline, so the mock
        clock cannot jump past a move's deadline while a thread writes. `paused_as` names why guests
        stand still now ("paused" by the owner, "suspended" by the owner policy) for the masters' reports, and
        `pause_leaves_in` in how many seconds the owner's pause sends them on (0: not by itself).
        `usage_of` is a submitter's decayed usage as this node knows it (fair share takes the larger of
        that and what the offering master says). `on_spent` hears the CPU each guest run here used and when it
        ended, whatever its outcome (the ledger's "given"); its master hears the same figure, with the result
        or, for any other outcome, with the next report (`SpentRun`: the ledger's "received" there).
        `disk_refused` is told of each write of the outbox the disk refused. `named`: a master as the events name it
        (`api.wording.peer_named`)."""
        self.node_id = node_id
        self._peer = named
        self.supervisor = supervisor
        self._links = links
        self._capacity = capacity
        self._plugin_source = plugin_source
        self._has_plugin = has_plugin
        self._outbox = outbox
        self._events = events
        self._settings = settings
        self._on_change = on_change
        self._alive = alive
        self._own_figures = own_figures
        self._answer_work_request = answer_work_request
        self._on_arrival = on_arrival
        self._relocator = relocator
        self._blocking = blocking
        self._paused_as = paused_as
        self._pause_leaves_in = pause_leaves_in
        self._usage_of = usage_of
        self._demand: dict[str, Demand] = {}       # submitter -> its master's last offer here (fair share)
        self._held_since: float | None = None      # since when a free slot waits for a less-used submitter
        self._served: dict[str, float] = {}        # submitter -> when this host last took one of its units
        self._called: dict[str, float] = {}        # master -> when it was last told a free CPU is kept for it
        self._on_spent = on_spent
        self._spent: dict[str, list[SpentRun]] = {}   # master -> runs of its units ended here, for its next report
        self._hosted: dict[str, Hosted] = {}
        # task id -> a unit placed ahead (`policies.prefetch`), with the checkpoint it came with: first in, first run
        self._ahead: dict[str, tuple[Hosted, CheckpointRecord | None]] = {}
        self._reserved: dict[str, tuple[int, float, str]] = {}   # task id -> (memory bytes, expiry, offering node)
        self._receiving = 0
        self._starting: set[str] = set()
        self._stopping: dict[str, str] = {}   # task id -> why its guest is being stopped
        self._stopped: dict[str, tuple[UnitStatus, str, float]] = {}   # task id -> (final figures, master, when)
        """Copies stopped as superseded whose final figures their masters have not heard yet."""
        self._forwards: dict[str, tuple[str, float]] = {}   # task id -> (where it went, until when)
        self._delivering: set[str] = set()   # outcomes on their way to a master (a first try can outlast a cut)
        self._reporting: set[str] = set()    # masters whose report is on its way
        self._delivering_to: set[str] = set()   # masters whose held outcomes are being tried
        self._owing = trio.Event()           # set when an outcome stays in the outbox: `_deliver_owed` wakes for it
        self._unsaved: dict[str, Owed] = {}  # task id -> an outcome owed that the disk would not take into the outbox
        self._disk_refused = disk_refused
        self._nursery: trio.Nursery | None = None

    # -- what the node and the UI read ---------------------------------------------------------

    @property
    def running_count(self) -> int:
        return len(self._hosted)

    def hosted(self) -> tuple[Hosted, ...]:
        return tuple(self._hosted.values())

    def held_for_others(self) -> tuple[int, int]:
        """Units of other masters on this machine (running, placed ahead, arriving, or a guest still ending) and
        outcomes still owed to other masters: what this node would strand if it left for another cluster."""
        own = f"{self.node_id[:8]}-"
        here = {*self._hosted, *self._ahead, *self._starting, *(guest.task_id for guest in self.supervisor.figures())}
        owed = {held.task_id for held in self._outbox.held() if held.master != self.node_id} | set(self._unsaved)
        return (sum(not task_id.startswith(own) for task_id in here),
                sum(not task_id.startswith(own) for task_id in owed))

    def forwarded_to(self, task_id: str) -> str | None:
        """Where a unit that ran here went, if it left recently."""
        forward = self._forwards.get(task_id)
        return forward[0] if forward is not None and forward[1] > time.monotonic() else None

    # -- running ---------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._blocking(self.drop_foreign_checkpoints)
        self._spent = await self._blocking(self._spent_kept)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._report_periodically)
            nursery.start_soon(self._deliver_owed)
            task_status.started()

    def drop_foreign_checkpoints(self) -> None:
        """Other masters' units did not survive this node's restart (or its move to another cluster): their masters
        restart them from their replicas, so the copies left here would only fill the disk. This node's own units
        keep theirs (its master side resumes them from here)."""
        own = f"{self.node_id[:8]}-"
        for task_id in self.supervisor.store.list_tasks():
            if not task_id.startswith(own):
                self.supervisor.store.discard(task_id)

    # -- the calls masters and other hosts make (links.HostSide) -------------------------------------

    async def offer(self, source: str, offer: UnitOffer) -> UnitOfferReply:
        refusal = self._refusal(offer.task_id, offer.plugin_hash, offer.memory_bytes, moving=offer.moving,
                                ahead=offer.ahead)
        refusal = self._share_refusal(source, offer, refusal)
        capacity = self._capacity()
        free = max(0, capacity.memory_pool_bytes - self._memory_committed())
        if refusal is None:
            self._reserved[offer.task_id] = (offer.memory_bytes, time.monotonic() + RESERVATION_SECONDS, source)
            free -= offer.memory_bytes
        return UnitOfferReply(
            accepted=refusal is None, reason=refusal or "", available=capacity.available,
            guests=len(self._hosted), free_memory=free,
        )

    async def start(self, source: str, spec: UnitSpec, record: CheckpointRecord | None, *,
                    moved: bool = False) -> Verdict:
        """Make the checkpoint durable here and start the guest; answer once it runs (two-phase hand-off)."""
        if spec.task_id in self._hosted or spec.task_id in self._starting or spec.task_id in self._ahead:
            return Verdict(ok=False, reason=f"{spec.task_id} already runs here")
        reserved = self._reserved.pop(spec.task_id, None)
        if reserved is None:
            refusal = self._refusal(spec.task_id, spec.plugin_hash, spec.memory_bytes, moving=bool(record))
            if refusal is not None:
                return Verdict(ok=False, reason=refusal)
        if record is not None and (record.task_id, record.plugin_hash) != (spec.task_id, spec.plugin_hash):
            return Verdict(ok=False, reason=f"the checkpoint sent with {spec.task_id} belongs to another unit")
        self._receiving += 1
        self._starting.add(spec.task_id)
        try:
            return await self._start(source, spec, record, moved)
        finally:
            self._receiving -= 1
            self._starting.discard(spec.task_id)

    async def withdraw(self, source: str, task_ids: tuple[str, ...]) -> None:
        """`source` will not start these units it offered and this host accepted: the CPU and memory they hold
        are free now. Without this they stayed held until the reservation ran out (`RESERVATION_SECONDS`), and a
        cancel that came between a master's offer and its placement left the host refusing every unit for a
        minute while it showed no guest."""
        for task_id in task_ids:
            if task_id in self._reserved and self._reserved[task_id][2] == source:
                del self._reserved[task_id]
        self._on_change()

    async def _start(self, source: str, spec: UnitSpec, record: CheckpointRecord | None, moved: bool) -> Verdict:
        try:
            info = await self._plugin_source(spec.plugin_hash, tuple(dict.fromkeys((spec.master, source))))
            unit = WorkUnit.from_plain(decode_plain(spec.unit, "work unit"))
            store = self.supervisor.store
            install = None
            if record is not None and moved:
                install = _Install()  # written beside the guest's start (see below)
                assert self._nursery is not None
                self._nursery.start_soon(install.run, self._blocking, store.write, record)
            elif record is not None:
                await self._blocking(store.write, record)  # also drops any older copy here
            elif store.holds(spec.task_id):
                await self._blocking(store.discard, spec.task_id)
        except (PluginError, CheckpointError, NodeUnavailableError) as error:
            return Verdict(ok=False, reason=error.message)
        task = GuestTask(
            task_id=spec.task_id, assignment_id=spec.assignment_id, origin=spec.master, plugin_name=info.name,
            plugin_version=info.version, plugin_hash=info.hash, plugin_path=info.path, unit=unit, epoch=spec.epoch,
            inputs=spec.inputs,
        )
        hosted = Hosted(task=task, spec=spec, arrived_at=time.time())
        if not moved and (self._ahead or self._running_here() >= self._capacity().cpus):
            hosted.guest_state = "waiting"   # placed ahead: its guest begins it when a CPU frees
            self._ahead[spec.task_id] = (hosted, record)
            self._start_ahead()
            self._on_change()
            return Verdict(ok=True)
        self._hosted[spec.task_id] = hosted
        assert self._nursery is not None
        if install is None:
            await self._nursery.start(self._run, hosted, record)
        else:
            # A moved-in guest settles in and loads its plugin while its checkpoint is synced and
            # renamed into place here; it gets its state, and the source its answer, once it is durable.
            async def durable() -> None:
                await install.done.wait()
                if install.error is not None:
                    self._stopping[spec.task_id] = f"its checkpoint was not kept here: {install.error.message}"
                    raise install.error

            gone = trio.Event()

            async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                try:
                    await self._run(hosted, record, durable=durable, task_status=task_status)
                finally:
                    gone.set()

            await self._nursery.start(run)
            await install.done.wait()  # (already, unless its guest never got as far as its state)
            if install.error is not None:
                await gone.wait()   # "refused" means nothing of it runs here any more
                return Verdict(ok=False, reason=install.error.message)
        if moved:
            self._on_arrival(spec.task_id)  # the minimum stay after a move starts now
        self._on_change()
        return Verdict(ok=True)

    async def move(self, task_id: str, destination: str) -> Verdict:
        hosted = self._hosted.get(task_id)
        went = self.forwarded_to(task_id)
        if hosted is None and went is not None:
            # It left since the sender looked (MINIPROCs' forwarding): pass the command on to where it went.
            if went == destination:
                return Verdict(ok=True, reason=f"{task_id} already runs there")
            return await self._links.host(went).move(task_id, destination)
        if hosted is None or hosted.leaving:
            return Verdict(ok=False, reason=f"{task_id} does not run here")
        return await self._relocator.move_out(self, hosted, destination)

    async def work_request(self, requester: NodeView) -> Verdict:
        return await self._answer_work_request(requester)

    async def figures(self) -> NodeView:
        return self._own_figures()

    async def holdings(self, master: str) -> Holdings:
        """What this host holds of `master`'s units: its copies (moving ones too), and outcomes owed to it."""
        self._note_figures()
        running = tuple(h.status() for h in self._all_units() if h.master == master)
        held = await self._held()
        return Holdings(running=running, finished=tuple((h.task_id, h.epoch) for h in held if h.master == master))

    # -- what the owner does ------------------------------------------------------------------------

    async def evict(self, task_id: str | None = None) -> tuple[str, ...]:
        """Free the CPU now (checkpoint within the evict deadline, then kill); the units then travel on."""
        self._note_figures()  # the last look at the guests before they stop: where they go depends on it
        for hosted in self._hosted.values():
            if (task_id is None or hosted.task.task_id == task_id) and hosted.change(Stay.EVICTED) \
                    and self._nursery is not None:
                self._relocator.prepare(hosted, self._nursery)  # its destination is found while it is captured
        returned = tuple(t for t in self._ahead if task_id in (None, t))
        if not returned:
            return await self.supervisor.evict(task_id)
        async with trio.open_nursery() as nursery:   # units placed ahead go back while the guests checkpoint
            nursery.start_soon(self._give_back_ahead, "evicted", task_id)
            evicted = await self.supervisor.evict(task_id)
        return (*evicted, *returned)

    async def stop_assignment(self, assignment_id: str) -> None:
        """The master cancelled an assignment: its guests here stop at once."""
        tasks = tuple(t for t, h in self._hosted.items() if h.task.assignment_id == assignment_id)
        self._drop_ahead(t for t, (h, _) in self._ahead.items() if h.task.assignment_id == assignment_id)
        why = f"cancelled: assignment {assignment_id} was cancelled"
        self._stopping.update(dict.fromkeys(tasks, why))
        await self.supervisor.end_warm(assignment_id)
        await self.supervisor.stop(tasks, why)

    def resume_here(self, hosted: Hosted) -> None:
        """A move failed after the capture: run the unit here again from the checkpoint kept on disk."""
        hosted.change(Stay.RUNNING)
        assert self._nursery is not None
        self._hosted[hosted.task.task_id] = hosted
        self._nursery.start_soon(self._run, hosted)

    def forget(self, hosted: Hosted, moved_to: str | None = None) -> None:
        """The unit is in other hands now (another host, or its master's queue)."""
        self._hosted.pop(hosted.task.task_id, None)
        now = time.monotonic()
        self._forwards = {t: f for t, f in self._forwards.items() if f[1] > now}
        if moved_to is not None:
            self._forwards[hosted.task.task_id] = (moved_to, now + FORWARD_SECONDS)
        self.supervisor.discard_checkpoints(hosted.task.task_id)
        self._start_ahead()
        self._on_change()

    # -- units placed ahead ---------------------------------------------------------------------------

    def _running_here(self) -> int:
        return sum(1 for h in self._hosted.values() if not h.leaving)

    def _all_units(self) -> list[Hosted]:
        """The units here, running or placed ahead."""
        return [*self._hosted.values(), *(hosted for hosted, _ in self._ahead.values())]

    def _start_ahead(self) -> None:
        """Begin the units placed ahead while a CPU is free, oldest first; give them back to their masters'
        queues if this machine no longer takes guests. (Shares were judged when each was offered, like any
        unit's: a unit ahead is short, so a submitter who asks for a CPU later waits for one unit at most.)"""
        if not self._ahead or self._nursery is None:
            return
        capacity = self._capacity()
        if not capacity.accepts_guests:
            self.give_back_ahead(f"not taking guests: {capacity.reason}")
            return
        while self._ahead and self._running_here() < capacity.cpus:
            task_id, (hosted, record) = next(iter(self._ahead.items()))
            del self._ahead[task_id]
            hosted.guest_state = "running"
            self._hosted[task_id] = hosted
            self._nursery.start_soon(self._run, hosted, record)

    def give_back_ahead(self, why: str) -> None:
        """Return every unit placed ahead to its master's queue now (guests here stop or take nothing new)."""
        if self._ahead and self._nursery is not None:
            self._nursery.start_soon(self._give_back_ahead, why, None)

    async def _give_back_ahead(self, why: str, task_id: str | None) -> None:
        ahead = [self._ahead.pop(t) for t in [t for t in self._ahead if task_id in (None, t)]]
        async with trio.open_nursery() as nursery:
            for hosted, record in ahead:
                nursery.start_soon(self._give_back, hosted, record, why)

    async def _give_back(self, hosted: Hosted, record: CheckpointRecord | None, why: str) -> None:
        """A unit placed ahead goes back to its master's queue before it started; if its master is out of
        reach it is dropped here all the same: its master restarts it when this host no longer reports it."""
        task_id = hosted.task.task_id
        try:
            await self._links.master(hosted.master).host_return(self.node_id, task_id, hosted.task.epoch, record)
        except FrostError as error:
            log.info("%s not given back to its master (%s); it finds it missing", task_id, error.message)
        self.supervisor.discard_checkpoints(task_id)
        self._events.add("host", f"{task_id} went back to its master's queue before it started here: {why}")
        self._on_change()

    def _drop_ahead(self, task_ids) -> None:
        """Units placed ahead that their master no longer wants (cancelled, or superseded)."""
        for task_id in list(task_ids):
            self._ahead.pop(task_id, None)
            self.supervisor.discard_checkpoints(task_id)

    # -- one guest's life ---------------------------------------------------------------------------

    async def _run(self, hosted: Hosted, arrived: CheckpointRecord | None = None, *,
                   durable: Callable[[], Awaitable[None]] | None = None,
                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the unit to its outcome; `arrived` is the checkpoint it came with, durable here already
        or once `durable()` returns (see `GuestSupervisor.run`)."""
        task = hosted.task
        outcome = await self.supervisor.run(task, checkpoint=arrived, durable=durable, task_status=task_status)
        if not isinstance(outcome, Evicted):
            self._hosted.pop(task.task_id, None)   # its CPU is free: a unit placed ahead takes it now
        self._start_ahead()
        hosted.cpu_seconds = max(hosted.cpu_seconds, outcome.cpu_seconds)   # its last figure, not the last look's
        ran = SpentRun(task.task_id, task.epoch, hosted.cpu_seconds, time.time())
        self._on_spent(hosted, ran.cpu_seconds, ran.ended_at)
        if isinstance(outcome, Completed | Evicted):  # (its guest is gone, and its figures with it)
            hosted.progress = 1.0 if isinstance(outcome, Completed) else max(hosted.progress, outcome.progress)
        if isinstance(outcome, Evicted):
            self._owe_spent(hosted.master, ran)
            if hosted.leaving:  # a move captured it: the checkpoint went back to the move as capture()'s value
                return
            hosted.change(Stay.RELOCATING)
            self._on_change()
            await self._relocator.relocate(self, hosted, outcome.checkpoint)
            return
        self._on_change()   # (out of `_hosted` already: a move waiting to capture it learns so from capture())
        why = self._stopping.pop(task.task_id, None)
        if why == SUPERSEDED:
            # Its master counts the CPU it threw away up to the report it stopped it on; the rest, to
            # its last figure (warm or fresh, killed now), goes in the next report.
            self._stopped[task.task_id] = (dataclasses.replace(hosted.status(), state=STOPPED), hosted.master,
                                           time.monotonic())
        if why is not None or isinstance(outcome, Stopped):
            self._owe_spent(hosted.master, ran)
            return
        if isinstance(outcome, Completed):
            try:
                packed = envelope.pack(envelope.RESULT, outcome.result, outcome.files, MAX_RESULT_BYTES)
            except PluginError as error:
                outcome = Failed(f"result: {error.message}", retryable=False)
        if isinstance(outcome, Completed):
            # Output files travel with it; so does the CPU it took, which its master counts if it refuses it.
            owed = owed_result(task.task_id, hosted.master, task.epoch, packed, hosted.cpu_seconds)
        else:
            assert isinstance(outcome, Failed)
            owed = owed_failure(task.task_id, hosted.master, task.epoch, outcome.reason, outcome.retryable)
            self._owe_spent(hosted.master, ran)
        if hosted.master != self.node_id:
            await self._keep(owed)
        kept = await self._deliver(owed)
        if kept is None:
            await self._delivered(owed)
        elif owed.task_id not in self._delivering:   # (a delivery of it already on its way goes on)
            if hosted.master == self.node_id:   # (its own master's outcomes skip the outbox: its store is the disk)
                self._unsaved[owed.task_id] = owed
            self._events.add("host", f"{task.task_id}: {kept}; the {owed.kind} is kept here until it takes it",
                             severity="warning")
            self._owing.set()

    async def _keep(self, owed: Owed) -> None:
        """Put an outcome in the outbox before its first delivery; in memory if the disk refuses it (a crash then
        loses it, as the guest's checkpoints would be lost on a disk that takes nothing)."""
        try:
            await self._blocking(self._outbox.put, owed)
        except StorageError as error:
            self._disk_refused(error)
            self._unsaved[owed.task_id] = owed

    async def _delivered(self, owed: Owed) -> None:
        """The master has the outcome: it leaves the outbox (a durable commit: not on the loop). One the disk would
        not let go of stays there, and goes again later: its master takes the same outcome twice as once."""
        self._unsaved.pop(owed.task_id, None)
        if owed.master != self.node_id:   # (its own master's never go there)
            try:
                await self._blocking(self._outbox.remove, owed.task_id)
            except StorageError as error:
                self._disk_refused(error)
        self.supervisor.discard_checkpoints(owed.task_id)

    async def _deliver(self, owed: Owed) -> str | None:
        """None once the master has the outcome (or told us it needs it no more), else why it is kept here for a
        later try; one delivery per unit at a time."""
        if owed.task_id in self._delivering:
            return "it is on its way to its master already"
        self._delivering.add(owed.task_id)
        try:
            return await self._deliver_now(owed)
        finally:
            self._delivering.discard(owed.task_id)

    async def _deliver_now(self, owed: Owed) -> str | None:
        master = self._links.master(owed.master)
        try:
            if owed.kind == "result":
                accepted = await master.host_result(self.node_id, owed.task_id, owed.epoch, owed.payload,
                                                    owed.cpu_seconds)
                if not accepted:
                    self._events.add("host", f"{owed.task_id}: the master already had this result or a newer "
                                     "copy; this one was dropped")
            else:
                await master.host_failed(self.node_id, owed.task_id, owed.epoch, owed.reason, owed.retryable)
        except NodeUnavailableError:
            return f"its master {self._peer(owed.master)} is out of reach"
        except StorageError as error:   # the master's disk refused it (this node's own, or a peer's)
            return f"its master {self._peer(owed.master)} could not store it ({error.message})"
        except FrostError as error:  # the master refused it outright (e.g. the assignment is gone)
            log.warning("master %s refused the %s of %s: %s", owed.master[:8], owed.kind, owed.task_id, error.message)
        return None

    async def _held(self) -> list[Held]:
        """What masters could not take yet, without the outcomes themselves: the outbox's entries, and those the
        disk would not take into it."""
        held = await self._blocking(self._outbox.held)
        stored = {h.task_id for h in held}
        return [*held, *(o for o in self._unsaved.values() if o.task_id not in stored)]

    async def _deliver_owed(self) -> None:
        """Retry what masters could not take, every `report_interval`, until they are back or `hold_results` runs
        out; asleep while nothing is owed. An outcome is read whole (up to 256 MiB) only when its master is alive
        to be tried: a master away for days costs this loop a read of the outbox's index every round, not of
        everything held. The outbox is read and written in a worker thread: each removal is a durable commit."""
        while True:
            settings = self._settings()
            expiry = time.time() - settings.hold_results
            expired: list[Held] = [o for o in self._unsaved.values() if o.created_at < expiry]
            try:
                expired += await self._blocking(self._outbox.expire, expiry)
            except StorageError as error:
                self._disk_refused(error)
            for held in expired:
                self._unsaved.pop(held.task_id, None)
                self._events.add("host", f"{held.task_id}: gave up holding its {held.kind} for master "
                                 f"{self._peer(held.master)} after {settings.hold_results:g} s", severity="error")
            held_now = await self._held()
            if not held_now:
                await self._owing.wait()
                self._owing = trio.Event()
                continue
            alive = {self.node_id, *self._alive()}
            by_master: defaultdict[str, list[Held]] = defaultdict(list)
            for held in held_now:
                if held.master in alive:   # (else out of reach: tried again once the membership sees it back)
                    by_master[held.master].append(held)
            assert self._nursery is not None
            for master, owed_there in by_master.items():
                if master not in self._delivering_to:   # (else its last round's tries are still on their way)
                    self._delivering_to.add(master)
                    self._nursery.start_soon(self._deliver_held, master, owed_there)
            await trio.sleep(settings.report_interval)

    async def _deliver_held(self, master: str, held: list[Held]) -> None:
        """`master`'s outcomes held here, oldest first, until one does not go; beside the other masters'. A master
        alive in the membership but out of this host's reach lets each try run out (CALL_TIMEOUT, 10 s): tried one
        after the other, and before the other masters', 200 results held for it kept theirs waiting half an hour."""
        try:
            for one in held:
                if one.task_id in self._delivering:
                    continue   # (its first delivery is still on its way)
                owed = self._unsaved.get(one.task_id) or await self._blocking(self._outbox.owed, one.task_id)
                if owed is None:
                    continue   # (delivered meanwhile)
                if await self._deliver(owed) is not None:
                    return
                await self._delivered(owed)
                self._events.add("host", f"{owed.task_id}: {owed.kind} delivered to master {self._peer(owed.master)}")
                self._on_change()
        finally:
            self._delivering_to.discard(master)

    # -- reports and replicas ------------------------------------------------------------------------

    async def _report_periodically(self) -> None:
        """Each master's report every `report_interval`, each on its own (`_report_to`); a master whose last is
        still on its way (out of reach: it runs out in CALL_TIMEOUT) is left out of the round."""
        assert self._nursery is not None
        while True:
            for master, units in self._reports().items():
                if master not in self._reporting:
                    self._reporting.add(master)
                    self._nursery.start_soon(self._report_in_turn, master, units)
            await trio.sleep(self._settings().report_interval)

    async def _report_in_turn(self, master: str, units: tuple[UnitStatus, ...]) -> None:
        try:
            await self._report_to(master, units)
        finally:
            self._reporting.discard(master)

    async def report_now(self) -> None:
        """Tell each master which of its units run here, and what its runs that ended here without a result
        used; stop the copies it no longer wants. Returns once each master has answered or could not."""
        async with trio.open_nursery() as nursery:
            for master, units in self._reports().items():
                nursery.start_soon(self._report_to, master, units)

    async def report_spent(self) -> None:
        """Before this node stops: tell each master what its runs that ended here without a result used (a report
        of no units, which leaves the master's view of them as it was): a stop's hand-off ends every guest's run
        here, and this node's ledger counted each as given at once. What a master out of reach does not hear now
        waits in the outbox for the next start's reports."""
        async with trio.open_nursery() as nursery:
            for master in list(self._spent):
                nursery.start_soon(self._report_to, master, ())

    def _reports(self) -> dict[str, tuple[UnitStatus, ...]]:
        """Master -> what its report says now: its units here, and its runs that ended here without a result."""
        self._note_figures()
        by_master: defaultdict[str, list[UnitStatus]] = defaultdict(list)
        self._start_ahead()   # (a unit placed ahead goes back if this machine stopped taking guests)
        paused_as, leaves_in = self._paused_as(), self._pause_leaves_in()
        for hosted in self._all_units():
            if hosted.leaving:
                continue
            by_master[hosted.master].append(hosted.status(paused_as, leaves_in))
        expired = time.monotonic() - self._settings().hold_results
        for task_id, (status, master, since) in list(self._stopped.items()):
            if since < expired:
                del self._stopped[task_id]
            else:
                by_master[master].append(status)
        for master in self._spent:   # a master with no unit running here still hears of its spent runs
            by_master.setdefault(master, [])
        return {master: tuple(units) for master, units in by_master.items()}

    async def _report_to(self, master: str, units: tuple[UnitStatus, ...]) -> None:
        """One master's report (`report_now`). Each goes on its own: a master alive in the membership but out of
        this host's reach lets the call run out (CALL_TIMEOUT, 10 s), and the reports after it, one after the
        other, came that much later every round, until their masters took their units for silent."""
        spent = tuple(self._spent.get(master, ())[:SPENT_PER_REPORT])
        try:
            stop = await self._links.master(master).host_report(self.node_id, units, spent)
        except (NodeUnavailableError, StorageError) as error:   # (this node's own master: its disk refused)
            log.debug("report to %s failed: %s", master[:8], error.message)
            return
        for status in units:
            if status.state == STOPPED and self._stopped.get(status.task_id, (None,))[0] == status:
                del self._stopped[status.task_id]
        if spent:   # (only those sent: more may have ended meanwhile, or another report sent these too)
            await self._write_spent(self._outbox.settle_spent, spent)
            sent = set(spent)
            left = [run for run in self._spent.get(master, ()) if run not in sent]
            if left:
                self._spent[master] = left
            else:
                self._spent.pop(master, None)
        self._drop_ahead(t for t in stop if t in self._ahead)
        stop = tuple(t for t in stop if t in self._hosted and not self._hosted[t].leaving)
        if stop:
            self._stopping.update(dict.fromkeys(stop, SUPERSEDED))
            self._events.add("host", f"stopping {', '.join(stop)}: {SUPERSEDED}", severity="warning")
            await self.supervisor.stop(stop, SUPERSEDED)

    def _note_figures(self) -> dict[str, GuestFigures]:
        """Keep each running unit's progress and CPU time: once its guest has stopped they are gone."""
        figures = {f.task_id: f for f in self.supervisor.figures()}
        for task_id, hosted in self._hosted.items():
            if task_id in figures and not hosted.leaving:
                hosted.progress, hosted.cpu_seconds = figures[task_id].progress, figures[task_id].cpu_seconds
                hosted.guest_state = figures[task_id].state
        return figures

    def on_checkpoint(self, task: GuestTask, record: CheckpointRecord) -> None:
        """Send every Nth checkpoint to the unit's master (never blocks the guest; one at a time per unit)."""
        hosted = self._hosted.get(task.task_id)
        if hosted is None:
            return
        figures = self._note_figures().get(task.task_id)
        if figures is not None:
            hosted.checkpoint = (record.seq, figures.progress, figures.cpu_seconds - figures.cpu_since_checkpoint_seconds)
        else:   # an eviction's capture, its guest gone already: where the unit stood at the last look
            hosted.checkpoint = (record.seq, hosted.progress, hosted.cpu_seconds)
        if hosted.master == self.node_id or self._nursery is None:
            return
        if hosted.stay is not Stay.RUNNING:
            # A capture for a move goes with the move: to the master, were it sent there too, it
            # would race the move's new epoch and be refused (or arrive twice when the master is
            # the destination). Only a move that fails replicates it (`replicate`).
            return
        settings = self._settings()
        hosted.checkpoints += 1
        due = settings.replicate_every and hosted.checkpoints % settings.replicate_every == 0
        if due and not hosted.replicating and record.size <= settings.replicate_max_bytes:
            self.replicate(hosted, record)

    def replicate(self, hosted: Hosted, record: CheckpointRecord) -> None:
        """Send `record` to the unit's master (and the extra holders) in the background."""
        if hosted.master == self.node_id or self._nursery is None:
            return
        hosted.replicating = True
        self._nursery.start_soon(self._replicate, hosted, record)

    async def _replicate(self, hosted: Hosted, record: CheckpointRecord) -> None:
        """To the master, then to the k extra holders (never this host itself: its disk is the one at risk)."""
        k = self._settings().replica_peers
        holders = [n for n in replica_holders(record.task_id, self._alive(), hosted.master, k) if n != self.node_id]
        # Its progress and CPU time go with it: the master may have to place the unit again from it before
        # the next report says them (a cut right after it), and would then guess where the lost copy stood.
        progress, cpu = hosted.standing_at(record)
        try:
            try:
                record = await trio.to_thread.run_sync(record.loaded)  # a guest's handed state is on disk only
            except (FrostError, OSError) as error:
                log.info("replica of %s not sent: its checkpoint cannot be read back: %s", record.task_id, error)
                return
            for index, holder in enumerate([None, *holders[:k]]):
                try:
                    if holder is None:
                        await self._links.master(hosted.master).host_replica(self.node_id, record, progress, cpu)
                    else:
                        await self._links.keeper(holder).keep(hosted.master, record)
                except FrostError as error:
                    log.info("replica %d of %s not sent: %s", index, record.task_id, error.message)
        finally:
            hosted.replicating = False

    def _owe_spent(self, master: str, ran: SpentRun) -> None:
        """A run of `master`'s unit ended here without a result: its next report tells it what it used. Kept in
        the outbox too, written beside the guest's next step (an eviction's relocation does not wait for it)."""
        if ran.cpu_seconds <= 0:
            return
        runs = [*self._spent.get(master, ()), ran]
        dropped, self._spent[master] = runs[:-SPENT_HELD], runs[-SPENT_HELD:]
        assert self._nursery is not None
        self._nursery.start_soon(self._write_spent, self._outbox.owe_spent, master, ran)
        if dropped:
            self._nursery.start_soon(self._write_spent, self._outbox.settle_spent, dropped)

    async def _write_spent(self, write: Callable[..., None], *args) -> None:
        try:
            await self._blocking(write, *args)
        except StorageError as error:   # (in memory still: only a crash before its report loses it)
            self._disk_refused(error)

    def _spent_kept(self) -> dict[str, list[SpentRun]]:
        """The runs the outbox still owes their masters from before this start, less those older than a master may
        stay away (`hold_results`)."""
        expiry = time.time() - self._settings().hold_results
        with contextlib.suppress(StorageError):   # (a refused removal is tried again at the next start)
            if gone := self._outbox.expire_spent(expiry):
                log.info("gave up telling masters of %d runs that ended here before the hold", gone)
        return {master: kept[-SPENT_HELD:] for master, runs in self._outbox.spent_owed().items()
                if (kept := [run for run in runs if run.ended_at >= expiry])}

    # -- capacity -------------------------------------------------------------------------------

    def _memory_committed(self) -> int:
        now = time.monotonic()
        self._reserved = {t: r for t, r in self._reserved.items() if r[1] > now}
        hosted = sum(h.task.unit.memory_bytes for h in self._all_units() if not h.leaving)
        return hosted + sum(memory for memory, _, _ in self._reserved.values())

    def _share_refusal(self, source: str, offer: UnitOffer, refusal: str | None) -> str | None:
        """Shares at unit boundaries: note who asked for a slot; a free one goes to the submitter whose master
        lately offered more and who comes first (least used with fair share on, `fair_share`; fewest running
        with it off, `equal_share`), held for it at most `ShareSettings.hold` seconds; no unit is taken ahead
        (`policies.prefetch`) for someone behind in line. The master of the one a free CPU is kept for is told
        so at once (`_call`). A unit moving between hosts already runs: it is never held back."""
        shares = self._settings().shares
        if offer.moving or not offer.submitter:
            return refusal
        now = time.monotonic()
        usage = max(offer.usage, self._usage_of(offer.submitter))
        seen = Demand(usage, offer.queued, now, offer.running, source)
        self._demand = note_demand(self._demand, offer.submitter, seen, now, shares)
        if refusal is not None:
            return refusal
        if shares.enabled:
            rival = fair_share.favoured_over(offer.submitter, usage, self._demand, now, shares)
        else:
            rival = equal_share.favoured_over(offer.submitter, offer.running, self._demand, self._served, now, shares)
        if rival is not None:
            if shares.enabled:
                why = fair_share.explain(offer.submitter, usage, rival, self._demand[rival].usage)
            else:
                why = equal_share.explain(offer.submitter, offer.running, rival, self._demand[rival].running)
            # A unit placed ahead would begin on the next free CPU without asking: while someone ahead in line
            # waits, none is taken. No hold starts (the rival offers for a free CPU, not ahead).
            if not offer.ahead:
                self._held_since = now if self._held_since is None else self._held_since
            if offer.ahead or now - self._held_since < shares.hold:
                self._call(rival, now)
                return why
            del self._demand[rival]   # it did not come for the slot: not waiting after all
        self._held_since = None
        self._served[offer.submitter] = now
        return None

    def _call(self, submitter: str, now: float) -> None:
        """If a CPU here is free and kept for `submitter`, its master hears it now (`SlotKept`) and offers at once:
        a master none of whose units just finished would otherwise come back only at its next timed round."""
        master = fair_share.master_to_call(self._demand[submitter], self._called, now)
        busy = self._running_here() + len(self._reserved) + len(self._ahead)
        if master is None or self._nursery is None or busy >= self._capacity().cpus:
            return
        self._called[master] = now
        self._nursery.start_soon(self._tell_slot_kept, master)

    async def _tell_slot_kept(self, master: str) -> None:
        try:
            wanted = await self._links.master(master).slot_kept(self.node_id)
        except NodeUnavailableError as error:
            log.debug("telling %s of a CPU kept for it failed: %s", master[:8], error.message)
            return
        if not wanted:
            self._forget_demand(master)

    def _forget_demand(self, master: str) -> None:
        """`master` has no unit waiting (its assignment was cancelled since it offered here): the CPU kept for its
        submitters goes to the next in line now, not after `ShareSettings.hold` seconds; their masters hear it."""
        self._demand = {s: d for s, d in self._demand.items() if d.master != master}
        self._held_since = None
        now = time.monotonic()
        for submitter, seen in list(self._demand.items()):
            if seen.queued > 0:
                self._call(submitter, now)

    def _refusal(self, task_id: str, plugin_hash: str, memory: int, *, moving: bool,
                 ahead: bool = False) -> str | None:
        """Why this machine cannot take the unit now, or None; `ahead`: it may wait for a CPU here."""
        free = self._capacity().memory_pool_bytes - self._memory_committed()  # (drops expired reservations)
        capacity = self._capacity()
        if not capacity.accepts_guests:
            return f"not taking guests: {capacity.reason}"
        if capacity.sent_away.get(task_id, 0.0) > time.time():  # (an ended hold may be listed for up to a second)
            until = time.strftime("%H:%M:%S", time.localtime(capacity.sent_away[task_id]))
            return f"the owner evicted {task_id} from here; not taking it back before {until}"
        if task_id in self._hosted or task_id in self._reserved or task_id in self._ahead:
            return f"{task_id} already runs here"
        if moving and self._receiving:
            return "already receiving a unit"
        busy = self._running_here() + len(self._reserved) + (0 if moving else len(self._ahead))
        # A unit moving here takes a CPU at once; a placed one, a CPU no unit placed ahead waits for, unless it
        # may wait itself (`policies.prefetch`).
        if busy >= (units_held(capacity.cpus) if ahead else capacity.cpus):
            return f"no free CPU ({counted(busy, 'guest')} for {counted(capacity.cpus, 'CPU')})"
        if memory > free:
            return f"not enough memory: needs {memory >> 20} MiB, {max(free, 0) >> 20} MiB free in the pool"
        if not self._has_plugin(plugin_hash) and not self._settings().allow_cluster_plugins:
            return "plugin not allowed: this node runs only its own plugins (cluster.allow_cluster_plugins is off)"
        return None

"""The master side of this node's assignments: place queued units on hosts, take their outcomes, recover.

Hosts are every live peer and this machine itself, ranked by `placement.plan` from the gossiped
resource table. Placing a unit is an offer, then a start under a new ownership epoch that ships
the unit's newest checkpoint (replicated here by its earlier hosts). After that the master only
listens: hosts report their units every few seconds, send replicas of checkpoints, deliver
results (the first complete one of each unit is accepted, whichever copy it comes from), give
evicted units back, and say when one moved.

Each copy has its own silence clock, started at its placement or move; news of an older copy never
touches it. A unit is given up, and restarts elsewhere from its last replica, only on evidence:
its host was declared dead while other peers stayed reachable, the host says it no longer has it,
or it was silent for `cluster.host_timeout` while this master could hear. A master that lost every
peer at once is the likely one cut off (a laptop's Wi-Fi, a closed lid): it leaves its units
running where they are for `cluster.unit_lease`, and when it hears its peers again it first asks
each host what it holds (`reconcile`) before re-placing anything. A master that starts again asks too.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio

from frost_core.api.wording import counted
from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore
from frost_core.cluster.links import Links
from frost_core.cluster.messages import (
    STOPPED, Holdings, SpentRun, UnitOffer, UnitOfferReply, UnitSpec, UnitStatus, Verdict,
)
from frost_core.cluster.replication import replica_holders
from frost_core.api.errors import FrostError, NodeUnavailableError, PluginError, StorageError
from frost_core.guest import envelope
from frost_core.events import EventLog
from frost_core.plugin.api import Output, WorkUnit
from frost_core.plugin.plain import encode_plain
from frost_core.plugin.calls import combine_output
from frost_core.plugin.spare import SpareWorker
from frost_core.plugin.registry import PluginRegistry
from frost_core.policies.fair_share import DEMAND_REFRESH, ShareSettings
from frost_core.policies.prefetch import typical_seconds, units_held, worth_placing_ahead
from frost_core.policies.queue_order import QueuedAssignment, queue_order
from frost_core.policies.views import NodeView
from frost_core.master.group_commit import GroupCommit
from frost_core.master.placement import Need, WaitingReasons, plan, why_not_placed, with_free_cpu
from frost_core.master.results import export_result
from frost_core.master import verification, waste
from frost_core.master.reach import Reach
from frost_core.master.unanswered import Unanswered
from frost_core.master.store import (
    Delivery, MasterStore, Placement, UnitRecord, UnknownAssignmentError, split_task_id,
)
from frost_core.master.unit_index import AssignmentHead, Placed
from frost_core.master.usage import UsageBook
from frost_core.master.waste import CopyRun
from frost_core.membership import MembershipConfig
from frost_core.membership.suspicion import death_settle
from frost_core.membership.ticks import next_tick
from frost_core.storage.disk_watch import RETRY_AFTER

log = logging.getLogger("frost.master")

OFFER_TIMEOUT = 3.0
REFUSAL_REMEMBERED = 15.0
"""Seconds a host's refusal of a unit that last ran there keeps the unit from being offered there again, while the
units queued behind it take that host's free CPU. An owner's evict sends its units back to the head of the queue with
a hold of minutes against their coming straight back, and a round offers only as many units as there are free CPUs,
in queue order: offered again every round, they kept a lone desk idle for the whole hold. Other refusals (no free CPU
after all, a CPU kept for another submitter) pass with the next round and are not remembered: remembered, they kept
units off hosts that had freed up (a three-node fair-share race took 45-60 s instead of 18-21)."""


def _why_missed(error: NodeUnavailableError | trio.TooSlowError) -> str:
    return f"({error.message})" if isinstance(error, NodeUnavailableError) else f"within {OFFER_TIMEOUT:.0f} s"


@dataclass(frozen=True)
class MasterSettings:
    max_retries: int = 3
    host_timeout: float = 30.0
    replica_peers: int = 0
    unit_lease: float = 300.0
    death_settle: float = death_settle(3, MembershipConfig())
    """Seconds a host's death waits before its units restart elsewhere: when this master is the one cut
    off, its other peers fall silent too, within the probe rounds `membership.suspicion.death_settle`
    allows for, and a death with nobody else reachable is no evidence against the host."""

    @classmethod
    def from_config(cls, config, *, peers: int) -> MasterSettings:
        """`peers`: the members alive or suspect besides this node (the dead host's round had it too: + 1)."""
        return cls(max_retries=config.get("guests.max_retries"), host_timeout=config.get("cluster.host_timeout"),
                   replica_peers=config.get("checkpoints.replica_peers"), unit_lease=config.get("cluster.unit_lease"),
                   death_settle=death_settle(peers + 1, MembershipConfig.from_config(config)))


QUARANTINE = "quarantined"
"""The intent key of the hosts this master quarantined (host -> why)."""

STANDING_STILL = frozenset({"paused", "suspended", "waiting"})
"""Reported states in which a unit makes no progress ("waiting": placed ahead, its host's CPUs all busy)."""


@dataclass(frozen=True)
class Copy:
    """The copy of a unit the master counts on: its epoch and host, and its own silence clock."""

    epoch: int
    host: str
    run: CopyRun
    state: str = "running"   # as its host last reported it (paused, suspended, ...)
    leaves_at: float = 0.0   # paused by its host's owner: when that pause sends it on (wall time here; 0: not known)

    @property
    def heard_at(self) -> float:
        return self.run.heard_at


class MasterScheduler:
    def __init__(
        self, *, node_id: str, store: MasterStore, registry: PluginRegistry, links: Links, events: EventLog,
        results_dir: Path, replicas: CheckpointStore, local_checkpoints: CheckpointStore,
        hosts: Callable[[], Sequence[NodeView]], settings: Callable[[], MasterSettings],
        on_change: Callable[[], None], alive: Callable[[], list[str]],
        clock: Callable[[], float] = time.monotonic,
        blocking: Callable[..., Awaitable[Any]] = trio.to_thread.run_sync,
        usage: UsageBook | None = None, usage_of: Callable[[str], float] = lambda submitter: 0.0,
        shares: Callable[[], ShareSettings] = ShareSettings,
        on_received: Callable[[str, str, int, float, float | None], None] = (
            lambda host, task_id, epoch, cpu_seconds, ended_at: None),
        spare: SpareWorker | None = None,
        disk_refused: Callable[[StorageError], None] = lambda error: None,
        named: Callable[[str], str] = lambda host: host[:8],
    ) -> None:
        """`clock` and `blocking` (how file work runs: in a thread) are for MockClock tests, which run that
        work inline so the mock clock cannot jump ahead while a thread works. Fair share: `usage` counts
        each accepted result's CPU time for its submitter; `usage_of` is the submitter's decayed usage the
        queue is ordered by and offers carry (this master's own count, or the cluster's). `on_received` hears the
        guest CPU of each run of its units and its host (the ledger's "received"): a result's as it arrives, the
        others' (evicted, moved, failed, stopped: `ended_at` set) with the host's next report. `spare`: the node's
        worker process started ahead, which a combine takes when it waits. `disk_refused` hears of each write of
        the store the disk refused in the master's own rounds: what the round did is done again at the next.
        `named`: a host as the events and a unit's reasons name it (`api.wording.peer_named`)."""
        self._node_id = node_id
        self._host = named
        self._spare = spare
        self._disk_refused = disk_refused
        self._store = store
        self._registry = registry
        self._links = links
        self._events = events
        self._results_dir = results_dir
        self._replicas = replicas
        self._local_checkpoints = local_checkpoints
        self._hosts = hosts
        self._settings = settings
        self._on_change = on_change
        self._alive = alive
        self._clock = clock
        self._blocking = blocking
        self._usage = usage
        self._usage_of = usage_of
        self._shares = shares
        self._told: dict[tuple[str, str], float] = {}        # (host, assignment id) -> when that assignment's demand
                                                             # was last offered there (while it waits)
        self._kept: set[str] = set()                         # hosts that said they keep a free CPU for us (next round)
        self._unanswered = Unanswered()                      # peers whose last call ran out: left out for a while
        self._refused: dict[str, dict[str, tuple[float, str]]] = {}   # task id -> host -> (until when, why) it refused
                                                                      # that unit (`REFUSAL_REMEMBERED`)
        self._fetched: dict[str, CheckpointRecord] = {}      # task id -> a newer copy a holder gave, this round
        self._starts_on: dict[str, set[trio.CancelScope]] = {}   # host -> its starts on their way (see host_lost)
        self._starting: dict[str, int] = {}                  # task id -> the epoch of its start on its way: no report
                                                             # is due before its host says it runs
        self._quarantined: dict[str, str] = dict(store.intent(QUARANTINE, {}))   # host -> why (durable)
        self._afresh: set[str] = set()    # units taken back from a quarantined host: their next copy starts afresh
        self._on_received = on_received
        self._copies: dict[str, Copy] = {}                   # task id -> the copy the master counts on
        self._waiting = WaitingReasons()                     # queued task id -> why it is not placed
        self._given_up: dict[tuple[str, int], Copy] = {}     # (task id, epoch) -> a copy given up, for its waste
        self._overtaken: dict[tuple[str, int], Copy] = {}    # (task id, epoch) -> a copy another's result overtook,
                                                             # until its host reports it once more (and stops it)
        # task id -> the newest replica's (epoch, seq, progress, its guest's CPU-seconds then if its host said)
        self._replicated: dict[str, tuple[int, int, float, float | None]] = {}
        # task id -> the current copy's newest checkpoint as its host reported it: (epoch, seq, progress, CPU)
        self._checkpoint_heard: dict[str, tuple[int, int, float, float]] = {}
        self._dead: dict[str, float] = {}                    # host -> when membership declared it dead
        self._left: dict[str, str] = {}                      # host that left -> why, until its units are requeued
        self._combined: dict[str, Output] = {}               # assignment -> its output, combined but not stored yet
        self._combine_after: dict[str, float] = {}           # assignment -> when to try storing its output again
        self._reconciling: set[str] = set()                  # hosts being asked what they hold
        self._unasked: set[str] | None = None                # hosts of units running elsewhere at this master's
                                                             # start, not yet asked what they hold (None: not looked)
        self._kept_older: set[tuple[str, int]] = set()       # (task id, epoch): an older copy further along, let run
        self._unit_seconds: dict[str, float] = {}           # assignment -> its units' typical placement-to-result time
        self.reach = Reach(events, clock)
        self._combining: set[str] = set()
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._results: GroupCommit[Delivery, bool] = GroupCommit(self._accept_results)

    def wake(self) -> None:
        """Look at the queue again now (a submit, a resume, a unit back in the queue)."""
        self._wake.set()

    async def slot_kept(self, host: str) -> bool:
        """`host` keeps a free CPU for one of this node's submitters (a share hold): offer there now, and say
        whether any unit waits here to take it. Without this, a master none of whose units just finished would
        come back only at its next timed round, a second on, and the slot would stand idle meanwhile (two equal
        assignments submitted together did not finish together: the first to get going took the other's held
        slots' turns). A master with nothing waiting (its assignment was just cancelled) says so, and the host
        stops keeping the CPU for it."""
        if not self._store.index.waiting():
            return False
        self._kept.add(host)
        self.wake()
        return True

    def progress(self) -> dict[str, float]:
        """Live progress of this node's running units, as their hosts last reported it."""
        return {task_id: copy.run.progress for task_id, copy in self._copies.items()}

    def standing(self, assignment_id: str) -> dict[int, float]:
        """How far each of the assignment's placed units got, by index, as its host last reported it: the store
        keeps it when the assignment stops (`MasterStore.cancel_assignment`)."""
        prefix = f"{assignment_id}."
        return {split_task_id(task_id)[1]: copy.run.progress for task_id, copy in self._copies.items()
                if task_id.startswith(prefix)}

    def leaving(self) -> dict[str, float]:
        """When each placed unit its host's owner paused leaves that host, by task id (`UnitStatus.leaves_in`)."""
        return {task_id: copy.leaves_at for task_id, copy in self._copies.items() if copy.leaves_at}

    def reported_states(self) -> dict[str, str]:
        """Each placed unit's state as its host last reported it: "paused" and "suspended" stand still."""
        return {task_id: copy.state for task_id, copy in self._copies.items()}

    def etas(self) -> dict[str, float]:
        """Seconds each running unit still needs, at the rate its copy progressed since it was placed or moved;
        none for a unit its host reports paused or suspended: it makes no progress until it runs again."""
        etas = {}
        for task_id, copy in self._copies.items():
            if copy.state in STANDING_STILL:
                continue
            rate = copy.run.seconds_per_progress()
            if rate is not None:
                etas[task_id] = rate * (1.0 - copy.run.progress) - (self._clock() - copy.heard_at)
        return {task_id: max(eta, 0.0) for task_id, eta in etas.items()}

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        for assignment_id in self._store.done_assignments():
            await self.export(assignment_id)
        requeued = self._store.requeue_hosted_by(self._node_id)
        if requeued:
            ran = f"{counted(len(requeued), 'unit')} this machine ran when it stopped"
            self._events.add("assignment", f"{ran} {'is' if len(requeued) == 1 else 'are'} queued again")
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.reach.watch_for_sleep)
            task_status.started()
            while True:
                try:
                    self._combine_ready(nursery)
                    self._watch_peers()
                    self._requeue_left()
                    self._recover_dead()
                    self._recover_silent()
                    await self._place_queued()
                except StorageError as error:   # the disk is full: this round is done again at the next
                    self._disk_refused(error)
                # At least once a second, on the clock watchers' grid: an idle node's loop wakes once for them all.
                with trio.move_on_at(next_tick(trio.current_time(), 1.0)):
                    await self._wake.wait()
                self._wake = trio.Event()

    # -- placement ---------------------------------------------------------------------------------

    async def _place_queued(self) -> None:
        """One placement round: as many queued units as hosts have free slots, in the queue's order, spread by
        the placement policy, offered and started per host in one call each, their epochs in one transaction."""
        try:
            await self._plan_and_place()
        finally:
            self._fetched = {}

    async def _plan_and_place(self) -> None:
        index = self._store.index
        waiting = index.waiting()
        waiting_ids = {head.id for head in waiting}
        self._told = {told: at for told, at in self._told.items() if told[1] in waiting_ids}
        if not waiting:
            self._waiting = WaitingReasons()
            return
        kept, self._kept = self._kept, set()
        hosts = self._with_own_units([with_free_cpu(h) if h.node_id in kept else h
                                      for h in self._hosts() if h.node_id not in self._quarantined])
        now = self._clock()
        resting = {host: f"did not answer in time; asked again in {until - now:.0f} s"
                   for host, until in self._unanswered.resting(now).items()}
        reachable = [h for h in hosts if h.node_id not in resting]
        held = index.holders()
        free = [h for h in reachable if h.accepting and h.guests < units_held(h.cpus)]
        slots = sum(units_held(h.cpus) - h.guests for h in free)
        heads = {head.id: head for head in waiting}
        refused = self._refusals_remembered(now)
        free_ids = {h.node_id for h in free}
        # assignment -> its queued units every free host refused lately
        held_back = Counter(split_task_id(task_id)[0] for task_id, refusers in refused.items()
                            if free_ids <= refusers.keys())
        queued = {head.id: index.queued_count(head.id) for head in waiting}
        usage = {s: self._usage_of(s) for s in {head.submitter for head in waiting}}
        demand = {s: sum(queued[head.id] for head in waiting if head.submitter == s) for s in usage}
        running = self._running_by_submitter()
        order = queue_order([QueuedAssignment(
            head.id, head.seq, head.submitter, max(queued[head.id] - held_back[head.id], 0),
            sum(h.node_id not in held.get(head.id, ()) for h in free) if head.one_per_host else queued[head.id],
        ) for head in waiting], slots, usage.__getitem__, self._shares(), running)
        # (the units held back are read too, and passed over: they may stand anywhere in their assignment's queue)
        units = [unit for assignment_id, count in order
                 for unit in self._store.queued(assignment_id, count + held_back[assignment_id])]
        needs = [Need(u.task_id, u.assignment_id, u.memory_bytes, heads[u.assignment_id].one_per_host,
                      frozenset(u.copied_on), worth_placing_ahead(self._unit_seconds.get(u.assignment_id)),
                      frozenset(refused.get(u.task_id, ())))
                 for u in units]
        by_task = {u.task_id: u for u in units}
        planned = plan(needs, reachable, held, limits=dict(order))
        refusals: dict[str, dict[str, str]] = {}
        by_host: dict[str, list[tuple[UnitRecord, AssignmentHead]]] = {}
        for need, candidates in planned:
            by_host.setdefault(candidates[0], []).append((by_task[need.task_id], heads[need.assignment_id]))
        await self._place_round(by_host, refusals, usage, demand, running)
        for need, candidates in planned:  # a unit its first choice refused tries the others, one at a time
            for host in candidates[1:]:
                if need.task_id not in refusals or need.task_id in self._copies:
                    break
                if self._unanswered.rests(host, self._clock()):
                    continue   # (an offer to it ran out earlier in this round)
                await self._place_round({host: [(by_task[need.task_id], heads[need.assignment_id])]}, refusals,
                                        usage, demand, running)
        now = self._clock()   # (resting now too: those whose offer ran out this round)
        for task_id, by_host in refusals.items():
            for host, why in by_host.items():
                if host == by_task[task_id].host:   # where it last ran: the owner's hold (only by_task's are offered)
                    self._refused.setdefault(task_id, {})[host] = (now + REFUSAL_REMEMBERED, why)
        await self._tell_demand(waiting, [h for h in reachable if not self._unanswered.rests(h.node_id, now)], usage,
                                demand, running, refused)
        placed = set(self._copies) | set(self._starting)   # (a start with a checkpoint may still be on its way)
        reasons = {need.task_id: why_not_placed(need, hosts, held.get(need.assignment_id, frozenset()),
                                                {**refused.get(need.task_id, {}), **resting,
                                                 **refusals.get(need.task_id, {})}, self._host)
                   for need in needs if need.task_id not in placed}
        self._waiting = WaitingReasons(reasons, partial(self._reasons_beyond, waiting, units, hosts, held))
        self._on_change()

    def _refusals_remembered(self, now: float) -> dict[str, dict[str, str]]:
        """Task id -> host -> why, for the refusals of the last `REFUSAL_REMEMBERED` seconds (the older forgotten)."""
        self._refused = {task_id: kept for task_id, by_host in self._refused.items()
                         if (kept := {host: seen for host, seen in by_host.items() if seen[0] > now})}
        return {task_id: {host: why for host, (_, why) in by_host.items()} for task_id, by_host in self._refused.items()}

    async def _tell_demand(self, waiting: list[AssignmentHead], hosts: Sequence[NodeView], usage: dict[str, float],
                           demand: dict[str, int], running: Mapping[str, int],
                           refused: Mapping[str, Mapping[str, str]]) -> None:
        """Offer each submitter's next waiting unit to the full hosts too, every `DEMAND_REFRESH` seconds and at
        once for an assignment not told yet: a host learns who waits for its next free slot (fair share, or equal
        share with it off) only from offers. (Timed per submitter, one whose assignment was cancelled and who
        submitted again at once was told up to a second late, while the other's master, hearing first of the
        slots the cancelled units freed, took them all.) One it takes runs. The unit offered is the first that host
        did not refuse lately (`refused`: task id -> the hosts that did)."""
        now = self._clock()
        oldest: dict[str, AssignmentHead] = {}
        for head in sorted(waiting, key=lambda head: head.seq):
            oldest.setdefault(head.submitter, head)
        refused_in = Counter(split_task_id(task_id)[0] for task_id in refused)
        for host in (h.node_id for h in hosts if h.accepting and h.guests >= h.cpus):   # (room ahead or not)
            for head in oldest.values():
                if now - self._told.get((host, head.id), -math.inf) < DEMAND_REFRESH:
                    continue
                self._told[(host, head.id)] = now
                # (a checked unit's next copy goes to another host)
                unit = next((unit for unit in self._store.queued(head.id, 1 + refused_in[head.id])
                             if host not in unit.copied_on and host not in refused.get(unit.task_id, ())), None)
                if unit is not None:
                    await self._place_round({host: [(unit, head)]}, {}, usage, demand, running)

    def _running_by_submitter(self) -> dict[str, int]:
        """Each submitter's units this master has running now (what equal share compares)."""
        counts: dict[str, int] = {}
        index = self._store.index
        for placed in index.running():
            head = index.head(placed.assignment_id)
            if head is not None:
                counts[head.submitter] = counts.get(head.submitter, 0) + 1
        return counts

    def _with_own_units(self, hosts: Sequence[NodeView]) -> list[NodeView]:
        """The gossiped figures, but a host runs at least the units this master placed there: figures a few
        seconds old would otherwise show the slots of the last round free again, and fill one host twice."""
        mine: dict[str, int] = {}
        for placed in self._store.index.running():
            mine[placed.host] = mine.get(placed.host, 0) + 1
        return [h if h.guests >= mine.get(h.node_id, 0) else dataclasses.replace(h, guests=mine[h.node_id])
                for h in hosts]

    def _reasons_beyond(self, waiting: list[AssignmentHead], looked_at: list[UnitRecord], hosts: Sequence[NodeView],
                        held: dict[str, frozenset[str]]) -> dict[str, str]:
        """Assignment -> why its units this round did not look at wait: as its first such unit would be told,
        by the round's hosts (called once somebody asks, on the queue as it is then)."""
        seen = {(u.assignment_id, u.index) for u in looked_at}
        reasons = {}
        for head in waiting:
            count = sum(u.assignment_id == head.id for u in looked_at)
            beyond = [i for i in self._store.index.first_queued(head.id, count + 1) if (head.id, i) not in seen]
            if beyond:   # (only its row is read: the others were read for this round already)
                unit = self._store.unit(head.id, beyond[0])
                need = Need(unit.task_id, head.id, unit.memory_bytes, head.one_per_host)
                reasons[head.id] = why_not_placed(need, hosts, held.get(head.id, frozenset()))
        return reasons

    def waiting_reasons(self) -> Mapping[str, str]:
        """Why each queued unit of this node's assignments is not placed, as of the last placement round."""
        return self._waiting

    async def _place_round(self, by_host: dict[str, list[tuple[UnitRecord, AssignmentHead]]],
                           refusals: dict[str, dict[str, str]], usage: dict[str, float], demand: dict[str, int],
                           running: Mapping[str, int]) -> None:
        """Offer each host its units in one call, place all the units taken in one transaction, then start them
        (per host, the ones without a checkpoint in one call); a refusal is noted in `refusals`. Each offer says
        whose unit it is, that submitter's `usage`, and how many more of its units wait (`demand`, counted
        down as they are offered), and how many of its units run (`running`): a host keeps a free slot for a
        less-used (or, fair share off, less-running) submitter still waiting."""
        taken: dict[str, list[tuple[UnitRecord, AssignmentHead, CheckpointRecord | None]]] = {}
        async with trio.open_nursery() as nursery:
            for host, batch in by_host.items():
                nursery.start_soon(self._offer, host, batch, refusals, taken, usage, demand, running)
        placing = [(host, *item) for host, items in taken.items() for item in items]
        if not placing:
            return
        epochs = await self._blocking(self._store.place_units,
                                      [Placement(u.assignment_id, u.index, host) for host, u, _, _ in placing])
        starts: dict[str, list[tuple[UnitRecord, CheckpointRecord | None, UnitSpec]]] = {}
        withdrawn: dict[str, list[str]] = {}   # host -> units it accepted that are no longer queued (cancelled meanwhile)
        for (host, unit, head, checkpoint), epoch in zip(placing, epochs):
            if epoch is None:
                withdrawn.setdefault(host, []).append(unit.task_id)
            else:
                starts.setdefault(host, []).append((unit, checkpoint, self._spec(unit, head, epoch)))
        async with trio.open_nursery() as nursery:
            for host, items in starts.items():
                fresh = [item for item in items if item[1] is None]
                if fresh:
                    nursery.start_soon(self._start, host, fresh, refusals)
                for item in items:   # a checkpoint may take minutes over a slow link: not waited for by the round
                    if item[1] is not None:
                        self._background().start_soon(self._start, host, [item], {})
            for host, task_ids in withdrawn.items():
                nursery.start_soon(self._withdraw, host, tuple(task_ids))

    async def _withdraw(self, host: str, task_ids: tuple[str, ...]) -> None:
        """Free the room `host` holds for units this master will not start; if it is out of reach, its
        reservations run out by themselves."""
        try:
            await self._links.withdraw_offers(host, task_ids)
        except FrostError as error:
            log.info("%s not told that %s will not start: %s", host[:8], ", ".join(task_ids), error.message)

    async def _offer(self, host: str, batch: list[tuple[UnitRecord, AssignmentHead]],
                     refusals: dict[str, dict[str, str]],
                     taken: dict[str, list[tuple[UnitRecord, AssignmentHead, CheckpointRecord | None]]],
                     usage: dict[str, float], demand: dict[str, int], running: Mapping[str, int]) -> None:
        checkpoints = await self._newest_checkpoints([(u, head.plugin_hash) for u, head in batch])
        async with trio.open_nursery() as nursery:
            for i, (unit, head) in enumerate(batch):
                if unit.copied_on or unit.task_id in self._afresh:
                    # A checked unit's next copy starts afresh: nothing of an earlier copy's run; so does one taken
                    # back from a quarantined host.
                    checkpoints[i] = None
                elif unit.epoch > 0:  # it ran before: a holder may have a newer copy than this master received
                    nursery.start_soon(self._newer_from_holders, unit, head.plugin_hash, checkpoints, i)
        offers = []
        for (unit, head), checkpoint in zip(batch, checkpoints):
            demand[unit.submitter] = max(demand.get(unit.submitter, 1) - 1, 0)
            offers.append(UnitOffer(
                task_id=unit.task_id, plugin_hash=head.plugin_hash, memory_bytes=unit.memory_bytes,
                state_bytes=checkpoint.size if checkpoint else 0, submitter=unit.submitter,
                usage=usage.get(unit.submitter, 0.0), queued=demand[unit.submitter],
                running=running.get(unit.submitter, 0),
                ahead=worth_placing_ahead(self._unit_seconds.get(unit.assignment_id))))
        try:
            with trio.fail_after(OFFER_TIMEOUT):
                replies = await self._links.offer_units(host, tuple(offers))
        except (NodeUnavailableError, trio.TooSlowError) as error:
            self._missed(host, f"an offer of {counted(len(offers), 'unit')} {_why_missed(error)}")
            replies = tuple(UnitOfferReply(accepted=False, reason="did not answer the offer", available=0.0,
                                           guests=0, free_memory=0) for _ in offers)
        else:
            self._unanswered.answered(host)
        for (unit, head), checkpoint, reply in zip(batch, checkpoints, replies):
            if reply.accepted:
                taken.setdefault(host, []).append((unit, head, checkpoint))
            else:
                log.info("%s refused %s: %s", host[:8], unit.task_id, reply.reason)
                refusals.setdefault(unit.task_id, {})[host] = reply.reason

    def _background(self) -> trio.Nursery:
        assert self._nursery is not None, "placement runs only inside serve()"
        return self._nursery

    async def _start(self, host: str, items: list[tuple[UnitRecord, CheckpointRecord | None, UnitSpec]],
                     refusals: dict[str, dict[str, str]]) -> None:
        """Start the placed units on `host` and wait for its verdicts; if membership declares `host` dead meanwhile
        (`host_lost`) stop waiting: the round, and with it every other placement and the master's look at
        whether it is the one cut off, would otherwise wait out `START_TIMEOUT` (a minute) on a host that may
        never answer. A unit whose verdict did not come counts as placed there; a dead host's units restart
        elsewhere and one heard again is asked what it holds, as for any unit running there. A unit no longer
        placed there by the time its verdict comes (cancelled, or given up meanwhile) is left alone."""
        fresh = [(unit, spec) for unit, checkpoint, spec in items if checkpoint is None]
        verdicts: dict[str, tuple[bool, str]] = {}
        self._starting.update({unit.task_id: spec.epoch for unit, _, spec in items})
        with trio.CancelScope() as waiting:
            self._starts_on.setdefault(host, set()).add(waiting)
            try:
                await self._send_starts(host, items, fresh, verdicts)
            finally:
                self._starts_on[host].discard(waiting)
                if not self._starts_on[host]:
                    del self._starts_on[host]
                for unit, _, spec in items:
                    if self._starting.get(unit.task_id) == spec.epoch:
                        del self._starting[unit.task_id]
        for unit, checkpoint, spec in items:
            placed = self._store.index.placed(unit.assignment_id, unit.index)
            if placed is None or (placed.host, placed.epoch) != (host, spec.epoch):
                continue   # (its host left, and it is queued again already; or it was cancelled)
            if unit.task_id not in verdicts:
                self._started(unit, host, spec.epoch, checkpoint)
                self._events.add("assignment", f"{unit.task_id}: its host {self._host(host)} went out of reach "
                                 "before it said the unit runs; it counts as placed there until that host is heard "
                                 "again or given up", severity="warning")
                continue
            ok, reason = verdicts[unit.task_id]
            if ok:
                self._started(unit, host, spec.epoch, checkpoint)
            else:
                try:
                    self._store.requeue_unit(unit.assignment_id, unit.index, epoch=spec.epoch,
                                             progress=self._kept_progress(unit.task_id))
                except StorageError as error:   # it counts as placed there, and restarts once given up as silent
                    self._disk_refused(error)
                self._events.add("assignment", f"{unit.task_id} could not start on {self._host(host)}: {reason}",
                                 severity="warning")
                refusals.setdefault(unit.task_id, {})[host] = reason

    async def _send_starts(self, host: str, items: list[tuple[UnitRecord, CheckpointRecord | None, UnitSpec]],
                           fresh: list[tuple[UnitRecord, UnitSpec]], verdicts: dict[str, tuple[bool, str]]) -> None:
        """The starts to `host`: the fresh units in one call, each with a checkpoint alone; verdicts by task id."""
        if fresh:
            try:
                answers = await self._links.start_units(host, tuple(spec for _, spec in fresh))
            except FrostError as error:
                answers = tuple(Verdict(ok=False, reason=error.message) for _ in fresh)
            verdicts.update({unit.task_id: (v.ok, v.reason) for (unit, _), v in zip(fresh, answers)})
        for unit, checkpoint, spec in items:
            if checkpoint is not None:
                try:
                    verdict = await self._links.host(host).start(self._node_id, spec, checkpoint)
                except FrostError as error:
                    verdicts[unit.task_id] = (False, error.message)
                else:
                    verdicts[unit.task_id] = (verdict.ok, verdict.reason)

    def _spec(self, unit: UnitRecord, head: AssignmentHead, epoch: int) -> UnitSpec:
        return UnitSpec(
            task_id=unit.task_id, assignment_id=unit.assignment_id, master=self._node_id,
            plugin_name=head.plugin, plugin_version=head.plugin_version, plugin_hash=head.plugin_hash,
            unit=encode_plain(WorkUnit(unit.index, unit.data, unit.memory_bytes, unit.cost).to_plain(), "work unit"),
            memory_bytes=unit.memory_bytes, epoch=epoch, inputs=unit.inputs, submitter=unit.submitter,
        )

    def _started(self, unit: UnitRecord, host: str, epoch: int, checkpoint: CheckpointRecord | None) -> None:
        now = self._clock()
        start, cpu_then = self._resume_point(unit.task_id, checkpoint)
        run = CopyRun(placed_at=now, start=start, heard_at=now, progress=start)
        self._copies[unit.task_id] = Copy(epoch, host, run)
        self._afresh.discard(unit.task_id)
        self._refused.pop(unit.task_id, None)   # (placed: no longer held back in the queue)
        self._count_redone(unit, start, cpu_then)
        where = "here" if host == self._node_id else f"on {self._host(host)}"
        resumed = f" from checkpoint {checkpoint.seq}" if checkpoint else ""
        self._events.add("assignment", f"{unit.task_id} placed {where}{resumed} (epoch {epoch})")

    async def _newest_checkpoints(self, units: list[tuple[UnitRecord, str]]) -> list[CheckpointRecord | None]:
        """Each unit's `_newest_checkpoint`, read in a thread for the units with one here (most units never had one)."""
        held = [(u, plugin_hash) for u, plugin_hash in units
                if self._replicas.holds(u.task_id) or self._local_checkpoints.holds(u.task_id)]
        found = await self._blocking(lambda: {u.task_id: self._newest_checkpoint(u.task_id, plugin_hash, u.index)
                                              for u, plugin_hash in held}) if held else {}
        return [found.get(u.task_id) for u, _ in units]

    def _newest_checkpoint(self, task_id: str, plugin_hash: str, index: int) -> CheckpointRecord | None:
        """The furthest-along checkpoint of the unit held here: a replica, or one taken on this machine."""
        found = [r for r in (self._replicas.latest(task_id), self._local_checkpoints.latest(task_id))
                 if r is not None and (r.plugin_hash, r.unit_index) == (plugin_hash, index)]
        return max(found, key=lambda r: (r.seq, r.epoch), default=None)

    async def _newer_from_holders(self, unit: UnitRecord, plugin_hash: str,
                                  checkpoints: list[CheckpointRecord | None], i: int) -> None:
        """Replace `checkpoints[i]`, the unit's newest here, with a newer copy one of its replica holders keeps.

        The holders are asked one after the other, each for up to OFFER_TIMEOUT and only for a copy newer than
        the best so far (they keep the same copies: the newer one usually crosses the network once). A batch's
        units ask at once (`_offer`): with a holder alive but out of reach, the placement round waits that long
        per holder, not per unit (twenty units coming back at once, asked one after the other, held it 30 s).
        A holder resting (`Unanswered`) is not asked; a unit offered to its next host after its first refused
        starts from the copy fetched for the first offer, so the copy crosses once a round."""
        k = self._settings().replica_peers
        known = [c for c in (checkpoints[i], self._fetched.get(unit.task_id)) if c is not None]
        checkpoints[i] = max(known, key=lambda c: (c.seq, c.epoch), default=None)
        now = self._clock()
        for holder in replica_holders(unit.task_id, self._alive(), self._node_id, k):
            if self._unanswered.rests(holder, now):
                continue
            with trio.move_on_after(OFFER_TIMEOUT) as waiting:
                best = checkpoints[i]
                held = await self._links.keeper(holder).fetch(unit.task_id, best.seq if best else 0)
                if held is not None and (held.plugin_hash, held.unit_index) == (plugin_hash, unit.index):
                    checkpoints[i] = self._fetched[unit.task_id] = held
                    self._events.add("assignment", f"{unit.task_id}: peer {self._host(holder)} held a newer checkpoint "
                                     f"({held.seq}) than this master")
            if waiting.cancelled_caught:
                self._missed(holder, f"a request for its copy of {unit.task_id} within {OFFER_TIMEOUT:.0f} s")
            else:
                self._unanswered.answered(holder)

    def _missed(self, peer: str, call: str) -> None:
        """`peer` let `call` run out: rest it (`Unanswered`), and say so when its rest begins."""
        rest = self._unanswered.missed(peer, self._clock())
        if rest is not None:
            self._events.add("cluster", f"peer {self._host(peer)} did not answer {call}; left out of placement for "
                             f"{rest:.0f} s", severity="warning")

    def _add_waste(self, assignment_id: str, index: int, *, epoch: int, reason: str, seconds: float) -> None:
        log.info("%s.%d epoch %d: %.1f guest-seconds thrown away (%s)", assignment_id, index, epoch, seconds, reason)
        self._store.add_waste(assignment_id, index, epoch=epoch, reason=reason, seconds=seconds)

    def _resume_point(self, task_id: str, checkpoint: CheckpointRecord | None) -> tuple[float, tuple[int, float] | None]:
        """The progress `checkpoint` holds (0 if unknown), and (epoch, CPU-seconds) of the copy that took it
        when it did, if its host said so."""
        if checkpoint is None:
            return 0.0, None
        replicated = self._replicated.get(task_id)
        if replicated is None or replicated[:2] != (checkpoint.epoch, checkpoint.seq):
            return 0.0, None
        epoch, _, progress, cpu = replicated
        return progress, None if cpu is None else (epoch, cpu)

    def _count_redone(self, unit: UnitRecord, start: float, cpu_then: tuple[int, float] | None) -> None:
        """A copy given up earlier is replaced from `start`: what it had done past that is computed again."""
        key = (unit.task_id, unit.epoch)
        lost = self._given_up.get(key)
        if lost is not None:
            own = cpu_then[1] if cpu_then is not None and cpu_then[0] == lost.epoch else None
            seconds = waste.redone(lost.run, start, own)
            self._add_waste(unit.assignment_id, unit.index, epoch=lost.epoch, reason=waste.REDONE, seconds=seconds)
            self._given_up[key] = Copy(lost.epoch, lost.host, waste.resumed(lost.run, start, own, seconds))

    # -- what hosts tell the master (links.MasterSide) ----------------------------------------------

    async def host_report(self, host: str, units: tuple[UnitStatus, ...],
                          spent: tuple[SpentRun, ...] = ()) -> tuple[str, ...]:
        for run in spent:
            self._on_received(host, run.task_id, run.epoch, run.cpu_seconds, run.ended_at)
        stop: list[str] = []
        now = self._clock()
        refused: StorageError | None = None
        for status in units:
            try:
                self._take_report(host, status, now, stop)
            except StorageError as error:   # that copy's write waits for its next report; the others count now
                refused = error
        if refused is not None:
            self._disk_refused(refused)
        self._on_change()
        return tuple(stop)

    def _take_report(self, host: str, status: UnitStatus, now: float, stop: list[str]) -> None:
        """One copy's report: heard if it is the current copy, else kept running or stopped (added to `stop`)."""
        progress = min(max(status.progress, 0.0), 1.0)
        if status.state == STOPPED:  # a copy stopped on this master's word: its final figures
            self._count_stopped(status.task_id, status.epoch, progress, now, status.cpu_seconds, final=True)
            return
        try:
            current = self._current(host, status.task_id, status.epoch)
        except UnknownAssignmentError:
            current = False
        if current:
            self._heard(status.task_id, status.epoch, host, progress, now, status.cpu_seconds, status.state,
                        time.time() + status.leaves_in if status.leaves_in > 0 else 0.0)
            self._heard_checkpoint(status)
        elif not self._worth_keeping(host, status):
            stop.append(status.task_id)
            self._count_stopped(status.task_id, status.epoch, progress, now, status.cpu_seconds, final=False)

    def _worth_keeping(self, host: str, status: UnitStatus) -> bool:
        """Whether an older copy, no longer the one that counts, should run on rather than be stopped.

        So it should when its host holds a newer checkpoint of the unit than any this master could
        restart it from, and that checkpoint is further along than the copy that counts now (placed
        again from an older one while this copy was out of reach): the first complete result wins.
        """
        key = (status.task_id, status.epoch)
        assignment_id, index = split_task_id(status.task_id)
        try:
            unit = self._store.unit(assignment_id, index)
        except UnknownAssignmentError:
            return False
        if host in self._quarantined:   # its result would be refused: its copies stop
            return False
        if unit.state != "running" or unit.epoch <= status.epoch:
            self._kept_older.discard(key)
            return False
        if key in self._kept_older:
            return True
        replica_seq = self._replicated.get(status.task_id, (0, 0))[1]
        current = self._copies.get(status.task_id)
        ahead = current is None or status.checkpoint_progress > current.run.progress
        if status.checkpoint_seq <= replica_seq or not ahead:
            return False
        self._kept_older.add(key)
        self._events.add("assignment", f"{status.task_id}: {self._host(host)} still runs epoch {status.epoch} "
                         f"with checkpoint {status.checkpoint_seq} ({status.checkpoint_progress:.0%}), newer than this "
                         f"master's replica ({replica_seq}) and ahead of the copy of epoch {unit.epoch}: kept; the "
                         "first complete result wins")
        return True

    def _current(self, host: str, task_id: str, epoch: int) -> bool:
        """Whether the copy at `epoch` on `host` is the one that counts; a copy given up as lost whose unit
        still waits in the queue under its epoch is taken back rather than stopped (one its host gave back
        or failed is not: it no longer runs, whatever a report sent just before says)."""
        assignment_id, index = split_task_id(task_id)
        given_up = (task_id, epoch) in self._given_up
        if given_up and self._store.readopt(assignment_id, index, epoch=epoch, host=host):
            self._given_up.pop((task_id, epoch), None)
            self._events.add("assignment", f"{task_id} still runs on {self._host(host)} (epoch {epoch}): taken back "
                             "from the queue")
        return self._store.confirm_location(assignment_id, index, epoch=epoch, host=host)

    def _heard(self, task_id: str, epoch: int, host: str, progress: float, now: float, cpu: float = 0.0,
               state: str = "running", leaves_at: float = 0.0) -> None:
        """The copy at `epoch` reported: its clock restarts; a newer epoch (a move) gets a clock of its own."""
        copy = self._copies.get(task_id)
        if copy is None or copy.epoch != epoch or copy.host != host:
            start = copy.run.progress if copy is not None else progress
            copy = Copy(epoch, host, CopyRun(placed_at=now, start=start, heard_at=now, progress=start,
                                             cpu_start=cpu, cpu=cpu))
        self._copies[task_id] = Copy(epoch, host, copy.run.report(progress, now, cpu), state, leaves_at)

    def _heard_checkpoint(self, status: UnitStatus) -> None:
        """Keep the current copy's newest checkpoint as its host reports it: its replica's figures, exactly."""
        if status.checkpoint_seq <= 0:
            return
        heard = (status.epoch, status.checkpoint_seq, min(max(status.checkpoint_progress, 0.0), 1.0),
                 status.checkpoint_cpu)
        self._checkpoint_heard[status.task_id] = heard
        replicated = self._replicated.get(status.task_id)
        if replicated is not None and replicated[:2] == heard[:2]:
            self._replicated[status.task_id] = heard

    def _count_stopped(self, task_id: str, epoch: int, progress: float, now: float, cpu: float, *,
                       final: bool) -> None:
        """A copy given up or overtaken earlier still ran and is stopped: what it did since its figures last
        counted is thrown away. It is followed until its `final` figures (its host stopped it), since a
        stop is asked on a report that may be stale (sent before a cut) and its guest runs until then."""
        assignment_id, index = split_task_id(task_id)
        key = (task_id, epoch)
        for copies, reason in ((self._given_up, None), (self._overtaken, waste.SUPERSEDED)):
            copy = copies.pop(key, None)
            if copy is None:
                continue
            self._add_waste(assignment_id, index, epoch=epoch,
                            reason=reason or waste.late_reason(copy.run, waste.SUPERSEDED),
                            seconds=waste.ran_on(copy.run, progress, now, cpu))
            if not final:
                copies[key] = Copy(copy.epoch, copy.host, waste.counted_to(copy.run, progress, now, cpu))

    async def host_result(self, host: str, task_id: str, epoch: int, result: bytes, cpu_seconds: float = 0.0) -> bool:
        """`result` is the guest's result envelope: the plugin's result and the unit's output files;
        `cpu_seconds` the CPU its guest used (0 if its host did not say)."""
        assignment_id, index = split_task_id(task_id)
        try:
            value, files = envelope.unpack(envelope.RESULT, result)
        except PluginError as error:  # refused, not retried: the same bytes would fail again
            raise FrostError(f"the result of {task_id} from {self._host(host)} is malformed: {error.message}") from error
        self._on_received(host, task_id, epoch, cpu_seconds, None)   # its host gave that CPU, whatever comes of it
        if host in self._quarantined:   # (its copies were taken back when it was quarantined)
            self._events.add("assignment", f"{task_id}: the result from {self._host(host)} is refused: that host is "
                             "quarantined", severity="warning")
            self._on_change()
            return False
        unit = self._store.unit(assignment_id, index)
        if unit.checked and unit.state != "done":
            decided = await self._check_copy(host, unit, epoch, value, files, cpu_seconds)
            if decided is not None:
                return decided
        accepted = await self._results.submit(Delivery(assignment_id, index, epoch, value, files, cpu_seconds))
        where = "here" if host == self._node_id else f"on {self._host(host)}"
        lost = self._given_up.pop((task_id, epoch), None)
        overtaken = self._overtaken.pop((task_id, epoch), None)
        if overtaken is not None:  # it finished before its host heard it was overtaken
            self._add_waste(assignment_id, index, epoch=epoch, reason=waste.SUPERSEDED,
                            seconds=waste.ran_on(overtaken.run, 1.0, self._clock(), cpu_seconds))
        if accepted:
            if self._usage is not None:
                self._usage.add(unit.submitter, host, cpu_seconds, time.time())
            current = self._copies.pop(task_id, None)
            if current is not None and current.epoch == epoch:
                self._unit_seconds[assignment_id] = typical_seconds(self._unit_seconds.get(assignment_id),
                                                                    self._clock() - current.run.placed_at)
            if current is not None and current.epoch > epoch:
                # An older copy finished first: its work was kept, the newer copy's is what is thrown away,
                # up to its last report now and the rest when its host reports it once more (and stops it).
                now = self._clock()
                self._store.withdraw_waste(assignment_id, index, reason=waste.REDONE)
                self._add_waste(assignment_id, index, epoch=current.epoch, reason=waste.SUPERSEDED,
                                seconds=waste.overtaken(current.run, now))
                # (Counted by the clock up to now if its host sends no CPU time: its stop counts from now.)
                run = dataclasses.replace(current.run, heard_at=now) if current.run.heard else current.run
                self._overtaken[(task_id, current.epoch)] = Copy(current.epoch, current.host, run)
                self._events.add("assignment", f"{task_id}: the copy of epoch {epoch} finished first; the newer "
                                 f"copy on {self._host(current.host)} (epoch {current.epoch}) is stopped")
            self._replicated.pop(task_id, None)
            self._checkpoint_heard.pop(task_id, None)
            if self._replicas.holds(task_id):
                await self._blocking(self._replicas.discard, task_id)
            self._events.add("assignment", f"{task_id} result accepted: finished {where} (epoch {epoch})")
            self.wake()
        else:
            if lost is not None:
                self._add_waste(assignment_id, index, epoch=epoch, reason=waste.late_reason(lost.run, waste.REFUSED),
                                seconds=waste.ran_on(lost.run, 1.0, self._clock(), cpu_seconds))
            if self._store.holds_result(assignment_id, index, value):
                self._events.add("assignment", f"{task_id}: the same result came again {where} (epoch {epoch}); "
                                 "it was accepted once already")
                self._on_change()
                return True
            self._events.add("assignment", f"{task_id} result refused: it came {where} with epoch {epoch}, "
                             "and the unit is already done or cancelled")
        self._on_change()
        return accepted

    async def _accept_results(self, deliveries: list[Delivery]) -> list[bool]:
        """Results that arrived together, in one transaction off the event loop."""
        return await self._blocking(self._store.accept_results, deliveries)

    async def _check_copy(self, host: str, unit: UnitRecord, epoch: int, value: bytes,
                          files: dict[str, bytes] | None, cpu_seconds: float) -> bool | None:
        """A checked unit's copy came in: keep it and act on what the copies decide; None if it is not
        the current copy (the ordinary refusal applies)."""
        task_id = unit.task_id
        decision = await self._blocking(partial(self._store.record_copy, unit.assignment_id, unit.index, epoch=epoch,
                                                host=host, result=value, files=files, cpu_seconds=cpu_seconds))
        if decision is None:
            return None
        self._forget(task_id, epoch)
        self._replicated.pop(task_id, None)
        self._checkpoint_heard.pop(task_id, None)
        await self._blocking(self._replicas.discard, task_id)   # the next copy must not resume from this one's
        if self._usage is not None:
            self._usage.add(unit.submitter, host, cpu_seconds, time.time())
        for wrong in decision.wrong:
            self.quarantine(wrong, f"its result of {task_id} differed from the majority's")
        if decision.agreed is not None:
            self._events.add("assignment", f"{task_id} result verified: {counted(len(unit.copied_on) + 1, 'host')} "
                             "returned it, the majority agreed")
        elif decision.exhausted:
            self._store.fail_assignment(unit.assignment_id, f"unit {unit.index}: no two hosts returned the same result",
                                        failed_unit=(unit.index, "no two hosts returned the same result"),
                                        standing=self.standing(unit.assignment_id))
            self._events.add("assignment", f"assignment {unit.assignment_id} failed: no two hosts agreed on unit "
                             f"{unit.index}'s result", severity="error", title="Assignment failed")
        elif not self._checkers(unit.copied_on + (host,)) and await self._blocking(self._store.settle_unchecked,
                                                                                    unit.assignment_id, unit.index):
            self._events.add("assignment", f"{task_id}: no other host takes guests to check it; the result from "
                             f"{self._host(host)} is taken unverified")
        else:
            self._events.add("assignment",
                             f"{task_id}: a copy from {self._host(host)} is in; another host runs it to check")
        self.wake()
        self._on_change()
        return True

    def _checkers(self, ran: tuple[str, ...]) -> list[str]:
        """Hosts that could run another copy of a checked unit: taking guests, trusted, and not among `ran`."""
        return [h.node_id for h in self._hosts()
                if h.accepting and h.node_id not in ran and h.node_id not in self._quarantined]

    # -- quarantine -------------------------------------------------------------------------------------

    def quarantined(self) -> dict[str, str]:
        """Hosts this master no longer sends units to, each with why, until the owner clears them."""
        return dict(self._quarantined)

    def quarantine(self, host: str, why: str) -> None:
        """No more units for `host`; the copies it runs now are taken back (its next report stops them, a
        result one still sends is refused) and run again elsewhere from their start: a checkpoint it took is
        no more to be trusted than its results."""
        if host in self._quarantined or host == self._node_id:
            return
        self._store.set_intents({QUARANTINE: {**self._quarantined, host: why}})   # (durable first: a refusal changes nothing)
        self._quarantined[host] = why
        taken = [u for u in self._store.running_units()
                 if u.host == host and self._store.requeue_unit(u.assignment_id, u.index, epoch=u.epoch, progress=0.0)]
        for unit in taken:
            self._forget(unit.task_id, unit.epoch)
            self._replicated.pop(unit.task_id, None)
            self._checkpoint_heard.pop(unit.task_id, None)
            self._replicas.discard(unit.task_id)
            self._afresh.add(unit.task_id)
        stopped = (f"; its {counted(len(taken), 'copy', 'copies')} of this master's units "
                   f"({', '.join(u.task_id for u in taken)}) are stopped and run again elsewhere" if taken else "")
        self._events.add("quarantine", f"{self._host(host)} returned a wrong result ({why}): quarantined, no more units "
                         f"from this master until the owner clears it (frost-tui unquarantine {host[:8]}){stopped}",
                         severity="error", title="Host quarantined")
        self.wake()

    def clear_quarantine(self, host: str) -> str:
        """The owner trusts `host` again (a prefix of its id is enough); returns the full id."""
        matches = [h for h in self._quarantined if h.startswith(host)]
        if len(matches) != 1:
            raise FrostError(f"no single quarantined host matches {host!r}"
                             f" (quarantined: {', '.join(h[:8] for h in self._quarantined) or 'none'})",
                             title="Not quarantined")
        self._store.set_intents({QUARANTINE: {h: why for h, why in self._quarantined.items() if h != matches[0]}})
        del self._quarantined[matches[0]]
        self._events.add("quarantine", f"{self._host(matches[0])} cleared by the owner: it gets units again")
        self.wake()
        return matches[0]

    async def host_return(self, host: str, task_id: str, epoch: int, record: CheckpointRecord | None,
                          progress: float = 0.0, cpu_seconds: float = 0.0) -> bool:
        """`progress` and `cpu_seconds`: where the copy stood when it took `record` (0: its host did not say)."""
        assignment_id, index = split_task_id(task_id)
        newest = False
        if record is not None:
            try:
                newest = await self._keep_replica(record)
            except FrostError as error:  # a disk that refused it, or a checkpoint of other code: queued all the same
                self._events.add("assignment", f"{task_id}: the checkpoint it came back with was not kept "
                                 f"({error.message}); it goes on from the newest one kept here", severity="warning")
        resumes_at = min(max(progress, 0.0), 1.0) if newest else self._kept_progress(task_id)
        requeued = self._store.requeue_unit(assignment_id, index, epoch=epoch, progress=resumes_at)
        if requeued:
            self._forget(task_id, epoch)
            if newest and record is not None:
                self._replicated[task_id] = (record.epoch, record.seq, resumes_at, cpu_seconds or None)
            self._events.add("assignment", f"{task_id} is back in the queue (evicted from {self._host(host)})")
            self.wake()
        self._on_change()
        return requeued

    async def host_failed(self, host: str, task_id: str, epoch: int, reason: str, retryable: bool) -> None:
        assignment_id, index = split_task_id(task_id)
        self._given_up.pop((task_id, epoch), None)
        unit = self._store.unit(assignment_id, index)
        retries_left = self._settings().max_retries - unit.failures
        if retryable and retries_left > 0:
            if self._store.requeue_unit(assignment_id, index, epoch=epoch, error=reason,
                                        progress=self._kept_progress(task_id)):
                self._forget(task_id, epoch)
                self._events.add("assignment", f"unit {task_id} failed on {self._host(host)} ({reason}); retrying, "
                                 f"{retries_left} retries left", severity="warning")
                self.wake()
        elif self._store.fail_unit(assignment_id, index, epoch=epoch, error=reason):
            self._forget(task_id, epoch)
            self._store.fail_assignment(assignment_id, f"unit {index} failed: {reason}",
                                        standing=self.standing(assignment_id))
            self._events.add("assignment", f"assignment {assignment_id} failed: unit {index}: {reason}",
                             severity="error", title="Assignment failed")
        self._on_change()

    async def host_moved(self, host: str, task_id: str, epoch: int, destination: str) -> bool:
        assignment_id, index = split_task_id(task_id)
        current = self._store.confirm_location(assignment_id, index, epoch=epoch, host=destination)
        if current:
            copy = self._copies.get(task_id)
            if copy is None or copy.epoch < epoch:  # its clock starts now (unless its first report won the race)
                self._heard(task_id, epoch, destination, copy.run.progress if copy else 0.0, self._clock())
            self._events.add("move",
                             f"{task_id} moved from {self._host(host)} to {self._host(destination)} (epoch {epoch})")
        self._on_change()
        return current

    async def host_replica(self, host: str, record: CheckpointRecord, progress: float = 0.0,
                           cpu_seconds: float = 0.0) -> None:
        """`progress` and `cpu_seconds`: where the copy stood when it took `record` (0: its host did not say)."""
        assignment_id, index = split_task_id(record.task_id)
        if not self._store.confirm_location(assignment_id, index, epoch=record.epoch, host=host):
            raise FrostError(f"{record.task_id} epoch {record.epoch} is not the current copy; replica refused")
        copy = self._copies.get(record.task_id)
        if copy is not None and copy.epoch == record.epoch:
            heard = self._checkpoint_heard.get(record.task_id)
            if cpu_seconds > 0:
                self._replicated[record.task_id] = (record.epoch, record.seq, min(max(progress, 0.0), 1.0), cpu_seconds)
            elif heard is not None and heard[:2] == (record.epoch, record.seq):
                self._replicated[record.task_id] = heard
            else:  # its next report says how far it was and at what CPU time; until then, as last heard
                self._replicated[record.task_id] = (record.epoch, record.seq, copy.run.progress, None)
        await self._keep_replica(record)

    async def _keep_replica(self, record: CheckpointRecord) -> bool:
        """Keep `record` unless a newer replica is kept already; whether it is the newest now."""
        assignment_id, index = split_task_id(record.task_id)
        assignment = self._store.head(assignment_id)
        if (record.plugin_hash, record.unit_index) != (assignment.plugin_hash, index):
            raise FrostError(f"the replica of {record.task_id} was taken with other plugin code")
        held = await self._blocking(self._replicas.latest, record.task_id)
        if held is None or record.seq > held.seq:
            await self._blocking(self._replicas.write, record)
        return held is None or record.seq >= held.seq

    def _kept_progress(self, task_id: str) -> float:
        """How far the newest replica kept here took the unit (0: none, or not said): where it goes on from
        once queued again, and what its row shows meanwhile rather than a progress that looks lost."""
        replicated = self._replicated.get(task_id)
        return 0.0 if replicated is None else replicated[2]

    # -- failure recovery ------------------------------------------------------------------------------

    def host_lost(self, host: str, *, left: bool = False) -> None:
        """Membership declared a host dead (or it left): its units restart elsewhere, once that is evidence.

        A host that left said so itself. A death is evidence only if, a few probe rounds later, this
        master still reaches another peer (`_recover_dead`); otherwise this master is the one cut off.
        """
        if host == self._node_id:
            return
        for waiting in self._starts_on.get(host, ()):
            waiting.cancel()
        if left:
            self._left[host] = f"its host {self._host(host)} left the cluster"
            try:
                self._requeue_left()
            except StorageError as error:   # the disk is full: the master's next round tries again
                self._disk_refused(error)
        else:
            self._dead.setdefault(host, self._clock())
        self.wake()

    def _peers(self) -> set[str]:
        return set(self._alive()) - {self._node_id}

    def _watch_peers(self) -> None:
        """Notice when this master lost every peer at once, and when it hears them again.

        A master that starts (after a crash, a reboot) could not hear its hosts while it was down either:
        each host of its running units is asked what it holds as soon as it is a peer, as after a cut. A unit
        it lost restarts now, not after `host_timeout`; its finished results it still sends on its outbox's
        next retry (`cluster.report_interval`), each counted as heard meanwhile.
        """
        remote = [u for u in self._store.running_units() if u.host != self._node_id]
        hosts = {u.host for u in remote}
        peers = self._peers()
        woke = self.reach.woke()
        healed = self.reach.observe(peers=bool(peers), remote_units=len(remote))
        if healed or woke:   # the calls that ran out meanwhile ran out on this side
            self._unanswered.clear()
        if self._unasked is None:
            self._unasked = set(hosts)
        ask = (hosts & peers if healed or woke else set()) | (self._unasked & peers)
        self._unasked -= peers
        for host in ask:
            self._reconcile_soon(host)

    def _recover_dead(self) -> None:
        now = self._clock()
        peers = self._peers()
        for host, since in list(self._dead.items()):
            if host in peers:  # back before it was given up: ask it what it holds
                del self._dead[host]
                self._unanswered.answered(host)
                self._reconcile_soon(host)
            elif (self.reach.cut_off_since is None and peers
                  and now - max(since, self.reach.hearing_since) >= self._settings().death_settle):
                self._requeue_hosted(host, f"its host {self._host(host)} is dead while other peers are reachable")
                del self._dead[host]

    def _requeue_left(self) -> None:
        for host, why in list(self._left.items()):
            self._requeue_hosted(host, why)
            del self._left[host]

    def _requeue_hosted(self, host: str, why: str) -> None:
        for unit in self._store.running_units():
            if unit.host == host and unit.host != self._node_id:
                self._requeue_lost(unit, why)

    def _recover_silent(self) -> None:
        settings = self._settings()
        now = self._clock()
        for unit in self._store.running_units():
            if self._starting.get(unit.task_id) == unit.epoch:
                continue   # its start is on its way (a checkpoint over a slow link): its clock starts at the verdict
            copy = self._copies.get(unit.task_id)
            if copy is None or copy.epoch != unit.epoch:  # first seen (a restart): its clock starts now
                copy = Copy(unit.epoch, unit.host, CopyRun(placed_at=now, start=unit.progress, heard_at=now,
                                                           progress=unit.progress))
                self._copies[unit.task_id] = copy
            cut_off_since = self.reach.cut_off_since
            if cut_off_since is not None:  # hold its place for the lease, counted from the cut or its placement
                if now - max(copy.heard_at, cut_off_since) > settings.unit_lease and unit.host != self._node_id:
                    self._requeue_lost(unit, f"this master has been out of reach of its peers for longer than "
                                       f"the unit lease ({settings.unit_lease:g} s)")
                continue
            silent = now - max(copy.heard_at, self.reach.hearing_since)
            if silent > settings.host_timeout:
                self._requeue_lost(unit, f"its host {self._host(unit.host)} has not reported it for {silent:.0f} s")

    def _requeue_lost(self, unit: Placed, why: str) -> None:
        if self._store.requeue_unit(unit.assignment_id, unit.index, epoch=unit.epoch,
                                    progress=self._kept_progress(unit.task_id)):
            copy = self._copies.pop(unit.task_id, None)
            if copy is not None and copy.epoch == unit.epoch:
                self._given_up[(unit.task_id, unit.epoch)] = copy
            self._events.add("assignment", f"{unit.task_id} restarts elsewhere from its last checkpoint: {why}",
                             severity="warning")
            self.wake()

    def _forget(self, task_id: str, epoch: int) -> None:
        """The copy at `epoch` is over; a newer copy's bookkeeping is not this message's to touch."""
        copy = self._copies.get(task_id)
        if copy is not None and copy.epoch <= epoch:
            del self._copies[task_id]

    # -- reconciliation ----------------------------------------------------------------------------

    def _reconcile_soon(self, host: str) -> None:
        if self._nursery is not None and host not in self._reconciling:
            self._reconciling.add(host)
            self._nursery.start_soon(self._reconcile_once, host)

    async def _reconcile_once(self, host: str) -> None:
        try:
            await self.reconcile(host)
        finally:
            self._reconciling.discard(host)

    async def reconcile(self, host: str) -> None:
        """Ask a host that is reachable again what it holds of this master's, and keep what is still good.

        Its copies still running are heard from now (or taken back, if their unit waits in the queue
        under the same epoch); finished results waiting in its outbox arrive by themselves; a unit this
        master placed there that the host no longer has at all restarts elsewhere now.
        """
        try:
            with trio.fail_after(OFFER_TIMEOUT * 2):
                held = await self._links.host(host).holdings(self._node_id)
        except (NodeUnavailableError, trio.TooSlowError):
            return
        kept, gone = self.apply_holdings(host, held)
        if kept or gone:
            self._events.add("assignment", f"{self._host(host)} is reachable again: it holds "
                             f"{counted(kept, 'unit')} of this master's still; {gone} restart elsewhere")
        self._on_change()

    def apply_holdings(self, host: str, held: Holdings) -> tuple[int, int]:
        """(units kept, units given up) after a host's answer to `holdings`."""
        now = self._clock()
        kept = 0
        for status in held.running:
            if self._current(host, status.task_id, status.epoch):
                self._heard(status.task_id, status.epoch, host, min(max(status.progress, 0.0), 1.0), now,
                            status.cpu_seconds)
                kept += 1
            elif self._worth_keeping(host, status):
                kept += 1
        finished = {(task_id, epoch) for task_id, epoch in held.finished}
        for task_id, epoch in finished:
            copy = self._copies.get(task_id)
            if copy is not None and copy.epoch == epoch:  # its result is on its way: not silent
                self._copies[task_id] = Copy(epoch, host, copy.run.report(1.0, now))
                kept += 1
        holding = {s.task_id for s in held.running} | {task_id for task_id, _ in finished}
        gone = [u for u in self._store.running_units() if u.host == host and u.task_id not in holding]
        for unit in gone:
            self._requeue_lost(unit, f"its host {self._host(host)} no longer has it")
        return kept, len(gone)

    # -- combining -------------------------------------------------------------------------------------

    def _combine_ready(self, nursery: trio.Nursery) -> None:
        now = self._clock()
        ready = self._store.combining_assignments()
        self._combined = {a: output for a, output in self._combined.items() if a in ready}   # (cancelled meanwhile)
        for assignment_id in ready:
            if assignment_id in self._combining or self._combine_after.get(assignment_id, now) > now:
                continue
            self._store.mark_combining(assignment_id)
            self._combining.add(assignment_id)
            self._combine_after.pop(assignment_id, None)
            nursery.start_soon(self._combine, assignment_id)

    async def store_output(self, assignment_id: str, output: Output) -> bool:
        """Store a combined output (a durable commit, in a worker thread) and export it. False if the assignment
        was cancelled while it combined: nothing is stored, and the event log says so."""
        stored = await self._blocking(partial(self._store.finish_assignment, assignment_id, data=output.data,
                                              media_type=output.media_type, filename=output.filename))
        if stored:
            await self.export(assignment_id)
        else:
            self._events.add("assignment", f"assignment {assignment_id} was cancelled while its results were "
                             "combined: the combined result is dropped")
        return stored

    async def export(self, assignment_id: str) -> None:
        """Write a stored result to the results folder, in a worker thread. A failure is told, not raised: the
        database keeps the result (`frost-tui result` saves it), and the next start exports it again."""
        try:
            await self._blocking(export_result, self._store, self._results_dir, assignment_id)
        except FrostError as error:
            self._events.add("assignment", f"assignment {assignment_id}: its result is kept in the node's database "
                             f"but was not exported: {error.message}", severity="warning")

    async def _combine(self, assignment_id: str) -> None:
        """Combine in a throwaway subprocess; a crash here leaves the assignment 'combining' for the next start.
        An output the disk refused to store is kept in memory and stored `RETRY_AFTER` seconds on (the combine
        is not run again)."""
        try:
            await self._combine_and_store(assignment_id)
        except StorageError as error:
            self._disk_refused(error)
            self._combine_after[assignment_id] = self._clock() + RETRY_AFTER
        finally:
            self._combining.discard(assignment_id)
        self._on_change()

    async def _combine_and_store(self, assignment_id: str) -> None:
        """The assignment is read without its units, and their results in a worker thread: a 100,000-unit sweep's
        every unit, read twice, and its results held the event loop for seconds."""
        record = self._store.listed(assignment_id, 0).record
        output = self._combined.pop(assignment_id, None)
        if output is None:
            try:
                info = self._registry.by_hash(record.plugin_hash)
                results = await self._blocking(self._store.unit_results, assignment_id)
                output = await combine_output(info, record.params, results, spare=self._spare)
            except FrostError as error:
                self._store.fail_assignment(assignment_id, f"combine failed: {error.message}")
                self._events.error(error)
                self._unit_seconds.pop(assignment_id, None)
                return
        try:
            stored = await self.store_output(assignment_id, output)
        except StorageError:
            self._combined[assignment_id] = output
            raise
        self._unit_seconds.pop(assignment_id, None)
        self._kept_older = {key for key in self._kept_older if not key[0].startswith(f"{assignment_id}.")}
        if stored:
            done = self._store.listed(assignment_id, 0)
            checked = verification.summary(done.record.verify, done.tally.count, done.tally.verified)
            self._events.add("assignment", f"assignment {assignment_id} ({record.plugin}) is done: "
                             f"{output.filename}; {waste.summary(done.record.waste)}; {checked}")

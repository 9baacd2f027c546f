"""The master side of this node's assignments: place queued units on hosts, take their outcomes, recover.

Hosts are every live peer and this machine itself, ranked by `placement.plan` from the gossiped
resource table. Placing a unit is an offer, then a start under a new ownership epoch that ships
the unit's newest checkpoint (replicated here by its earlier hosts). After that the master only
listens: hosts report their units every few seconds, send replicas of checkpoints, deliver
results (accepted once per unit), give evicted units back, and say when one moved. A unit whose
host is declared dead, or whose reports stop for `cluster.host_timeout`, is queued again and
restarts elsewhere from its last replica; if the old host comes back, its older epoch stops it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore
from frost_core.cluster.links import Links
from frost_core.cluster.messages import UnitOffer, UnitSpec, UnitStatus
from frost_core.cluster.replication import replica_holders
from frost_core.api.errors import FrostError, NodeUnavailableError, PluginError
from frost_core.guest import envelope
from frost_core.events import EventLog
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.plain import encode_plain
from frost_core.plugin.calls import combine_output
from frost_core.plugin.registry import PluginRegistry
from frost_core.policies.views import NodeView
from frost_core.master.placement import Need, plan
from frost_core.master.results import export_result
from frost_core.master.store import MasterStore, UnitRecord, UnknownAssignmentError, split_task_id

log = logging.getLogger("frost.master")

OFFER_TIMEOUT = 3.0


@dataclass(frozen=True)
class MasterSettings:
    max_retries: int = 3
    host_timeout: float = 30.0
    replica_peers: int = 0

    @classmethod
    def from_config(cls, config) -> MasterSettings:
        return cls(max_retries=config.get("guests.max_retries"), host_timeout=config.get("cluster.host_timeout"),
                   replica_peers=config.get("checkpoints.replica_peers"))


class MasterScheduler:
    def __init__(
        self, *, node_id: str, store: MasterStore, registry: PluginRegistry, links: Links, events: EventLog,
        results_dir: Path, replicas: CheckpointStore, local_checkpoints: CheckpointStore,
        hosts: Callable[[], Sequence[NodeView]], settings: Callable[[], MasterSettings],
        on_change: Callable[[], None], alive: Callable[[], list[str]],
    ) -> None:
        self._node_id = node_id
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
        self._heard: dict[str, float] = {}        # task id -> when its host last reported it
        self._progress: dict[str, float] = {}     # task id -> progress its host reported
        self._placed: dict[str, tuple[float, float]] = {}  # task id -> (when, progress) at its placement
        self._combining: set[str] = set()
        self._wake = trio.Event()
        self._started_at = time.monotonic()

    def wake(self) -> None:
        """Look at the queue again now (a submit, a resume, a unit back in the queue)."""
        self._wake.set()

    def progress(self) -> dict[str, float]:
        """Live progress of this node's running units, as their hosts last reported it."""
        return dict(self._progress)

    def etas(self) -> dict[str, float]:
        """Seconds each running unit still needs, at the rate it progressed since it was placed (moves included)."""
        now = time.monotonic()
        etas = {}
        for task_id, (since, start) in self._placed.items():
            done = self._progress.get(task_id, start) - start
            if done > 0:
                etas[task_id] = (now - since) * (1.0 - self._progress[task_id]) / done
        return etas

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        for record in self._store.assignments():
            if record.state == "done":
                await trio.to_thread.run_sync(export_result, self._store, self._results_dir, record.id)
        requeued = self._store.requeue_hosted_by(self._node_id)
        if requeued:
            self._events.add("assignment", f"{len(requeued)} unit(s) this machine ran when it stopped are queued again")
        self._started_at = time.monotonic()  # units on other hosts get a full timeout to report after a restart
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._combine_ready(nursery)
                self._recover_silent()
                await self._place_queued()
                with trio.move_on_after(1.0):
                    await self._wake.wait()
                self._wake = trio.Event()

    # -- placement ---------------------------------------------------------------------------------

    async def _place_queued(self) -> None:
        queued = self._store.queued_units()
        if not queued:
            return
        records = {r.id: r for r in self._store.assignments() if r.state == "running"}
        holding: dict[str, set[str]] = {}
        for record in records.values():
            holding[record.id] = {u.host for u in record.units if u.state == "running"}
        needs = [Need(u.task_id, u.assignment_id, u.memory_bytes, records[u.assignment_id].one_per_host)
                 for u in queued if u.assignment_id in records]
        by_task = {u.task_id: u for u in queued}
        for need, candidates in plan(needs, self._hosts(), {a: frozenset(h) for a, h in holding.items()}):
            for host in candidates:
                if await self._place(by_task[need.task_id], records[need.assignment_id].plugin_hash, host):
                    break
        self._on_change()

    async def _place(self, unit: UnitRecord, plugin_hash: str, host: str) -> bool:
        """Offer, then start under a new epoch with the newest checkpoint; False if the host would not."""
        checkpoint = await trio.to_thread.run_sync(self._newest_checkpoint, unit.task_id, plugin_hash, unit.index)
        if unit.epoch > 0:  # it ran before: a holder may have a newer copy than this master received
            checkpoint = await self._newer_from_holders(unit, plugin_hash, checkpoint)
        offer = UnitOffer(task_id=unit.task_id, plugin_hash=plugin_hash, memory_bytes=unit.memory_bytes,
                          state_bytes=checkpoint.size if checkpoint else 0)
        link = self._links.host(host)
        try:
            with trio.fail_after(OFFER_TIMEOUT):
                reply = await link.offer(self._node_id, offer)
        except (NodeUnavailableError, trio.TooSlowError):
            return False
        if not reply.accepted:
            log.info("%s refused %s: %s", host[:8], unit.task_id, reply.reason)
            return False
        record = self._store.assignment(unit.assignment_id)
        epoch = self._store.place_unit(unit.assignment_id, unit.index, host=host)
        spec = UnitSpec(
            task_id=unit.task_id, assignment_id=unit.assignment_id, master=self._node_id,
            plugin_name=record.plugin, plugin_version=record.plugin_version, plugin_hash=plugin_hash,
            unit=encode_plain(WorkUnit(unit.index, unit.data, unit.memory_bytes, unit.cost).to_plain(), "work unit"),
            memory_bytes=unit.memory_bytes, epoch=epoch, inputs=unit.inputs,
        )
        try:
            verdict = await link.start(self._node_id, spec, checkpoint)
        except FrostError as error:
            verdict_ok, reason = False, error.message
        else:
            verdict_ok, reason = verdict.ok, verdict.reason
        if not verdict_ok:
            self._store.requeue_unit(unit.assignment_id, unit.index, epoch=epoch)
            self._events.add("assignment", f"{unit.task_id} could not start on {host[:8]}: {reason}", severity="warning")
            return False
        self._heard[unit.task_id] = time.monotonic()
        self._placed[unit.task_id] = (time.monotonic(), self._progress.get(unit.task_id, 0.0))
        where = "here" if host == self._node_id else f"on {host[:8]}"
        resumed = f" from checkpoint {checkpoint.seq}" if checkpoint else ""
        self._events.add("assignment", f"{unit.task_id} placed {where}{resumed} (epoch {epoch})")
        return True

    def _newest_checkpoint(self, task_id: str, plugin_hash: str, index: int) -> CheckpointRecord | None:
        """The furthest-along checkpoint of the unit held here: a replica, or one taken on this machine."""
        found = [r for r in (self._replicas.latest(task_id), self._local_checkpoints.latest(task_id))
                 if r is not None and (r.plugin_hash, r.unit_index) == (plugin_hash, index)]
        return max(found, key=lambda r: (r.seq, r.epoch), default=None)

    async def _newer_from_holders(self, unit: UnitRecord, plugin_hash: str,
                                  best: CheckpointRecord | None) -> CheckpointRecord | None:
        k = self._settings().replica_peers
        for holder in replica_holders(unit.task_id, self._alive(), self._node_id, k):
            with trio.move_on_after(OFFER_TIMEOUT):
                held = await self._links.keeper(holder).fetch(unit.task_id, best.seq if best else 0)
                if held is not None and (held.plugin_hash, held.unit_index) == (plugin_hash, unit.index):
                    best = held
                    self._events.add("assignment", f"{unit.task_id}: peer {holder[:8]} held a newer checkpoint "
                                     f"({held.seq}) than this master")
        return best

    # -- what hosts tell the master (links.MasterSide) ----------------------------------------------

    async def host_report(self, host: str, units: tuple[UnitStatus, ...]) -> tuple[str, ...]:
        stop = []
        now = time.monotonic()
        for status in units:
            try:
                assignment_id, index = split_task_id(status.task_id)
                current = self._store.confirm_location(assignment_id, index, epoch=status.epoch, host=host)
            except UnknownAssignmentError:
                current = False
            if current:
                self._heard[status.task_id] = now
                self._progress[status.task_id] = min(max(status.progress, 0.0), 1.0)
            else:
                stop.append(status.task_id)
        self._on_change()
        return tuple(stop)

    async def host_result(self, host: str, task_id: str, epoch: int, result: bytes) -> bool:
        """`result` is the guest's result envelope: the plugin's result and the unit's output files."""
        assignment_id, index = split_task_id(task_id)
        try:
            value, files = envelope.unpack(envelope.RESULT, result)
        except PluginError as error:  # refused, not retried: the same bytes would fail again
            raise FrostError(f"the result of {task_id} from {host[:8]} is malformed: {error.message}") from error
        accepted = self._store.accept_result(assignment_id, index, epoch=epoch, result=value, files=files)
        self._forget(task_id)
        where = "here" if host == self._node_id else f"on {host[:8]}"
        if accepted:
            await trio.to_thread.run_sync(self._replicas.discard, task_id)
            self._events.add("assignment", f"{task_id} result accepted: finished {where} (epoch {epoch})")
            self.wake()
        else:
            self._events.add("assignment", f"{task_id} result refused: it came {where} with epoch {epoch}, "
                             "and the unit is done or owned by a newer epoch")
        self._on_change()
        return accepted

    async def host_return(self, host: str, task_id: str, epoch: int, record: CheckpointRecord | None) -> bool:
        assignment_id, index = split_task_id(task_id)
        if record is not None:
            await self._keep_replica(record)
        requeued = self._store.requeue_unit(assignment_id, index, epoch=epoch)
        if requeued:
            self._forget(task_id)
            self._events.add("assignment", f"{task_id} is back in the queue (evicted from {host[:8]})")
            self.wake()
        self._on_change()
        return requeued

    async def host_failed(self, host: str, task_id: str, epoch: int, reason: str, retryable: bool) -> None:
        assignment_id, index = split_task_id(task_id)
        self._forget(task_id)
        unit = self._store.unit(assignment_id, index)
        retries_left = self._settings().max_retries - unit.failures
        if retryable and retries_left > 0:
            if self._store.requeue_unit(assignment_id, index, epoch=epoch, error=reason):
                self._events.add("assignment", f"unit {task_id} failed on {host[:8]} ({reason}); retrying, "
                                 f"{retries_left} retries left", severity="warning")
                self.wake()
        elif self._store.fail_unit(assignment_id, index, epoch=epoch, error=reason):
            self._store.fail_assignment(assignment_id, f"unit {index} failed: {reason}")
            self._events.add("assignment", f"assignment {assignment_id} failed: unit {index}: {reason}",
                             severity="error", title="Assignment failed")
        self._on_change()

    async def host_moved(self, host: str, task_id: str, epoch: int, destination: str) -> bool:
        assignment_id, index = split_task_id(task_id)
        current = self._store.confirm_location(assignment_id, index, epoch=epoch, host=destination)
        if current:
            self._heard[task_id] = time.monotonic()
            self._events.add("move", f"{task_id} moved from {host[:8]} to {destination[:8]} (epoch {epoch})")
        self._on_change()
        return current

    async def host_replica(self, host: str, record: CheckpointRecord) -> None:
        assignment_id, index = split_task_id(record.task_id)
        if not self._store.confirm_location(assignment_id, index, epoch=record.epoch, host=host):
            raise FrostError(f"{record.task_id} epoch {record.epoch} is not the current copy; replica refused")
        await self._keep_replica(record)

    async def _keep_replica(self, record: CheckpointRecord) -> None:
        assignment_id, index = split_task_id(record.task_id)
        assignment = self._store.assignment(assignment_id)
        if (record.plugin_hash, record.unit_index) != (assignment.plugin_hash, index):
            raise FrostError(f"the replica of {record.task_id} was taken with other plugin code")
        held = await trio.to_thread.run_sync(self._replicas.latest, record.task_id)
        if held is None or record.seq > held.seq:
            await trio.to_thread.run_sync(self._replicas.write, record)

    # -- failure recovery ------------------------------------------------------------------------------

    def host_lost(self, host: str) -> None:
        """A host was declared dead: its units restart elsewhere from their last replicas."""
        for unit in self._store.running_units():
            if unit.host == host and unit.host != self._node_id:
                self._requeue_lost(unit, f"its host {host[:8]} is dead")

    def _recover_silent(self) -> None:
        timeout = self._settings().host_timeout
        now = time.monotonic()
        for unit in self._store.running_units():
            heard = self._heard.get(unit.task_id, self._started_at)
            if now - heard > timeout:
                self._requeue_lost(unit, f"its host {unit.host[:8]} has not reported it for {now - heard:.0f} s")

    def _requeue_lost(self, unit: UnitRecord, why: str) -> None:
        if self._store.requeue_unit(unit.assignment_id, unit.index, epoch=unit.epoch):
            self._forget(unit.task_id)
            self._events.add("assignment", f"{unit.task_id} restarts elsewhere from its last checkpoint: {why}",
                             severity="warning")
            self.wake()

    def _forget(self, task_id: str) -> None:
        self._heard.pop(task_id, None)
        self._progress.pop(task_id, None)
        self._placed.pop(task_id, None)

    # -- combining -------------------------------------------------------------------------------------

    def _combine_ready(self, nursery: trio.Nursery) -> None:
        for assignment_id in self._store.combining_assignments():
            if assignment_id in self._combining:
                continue
            self._combining.add(assignment_id)
            self._store.mark_combining(assignment_id)
            nursery.start_soon(self._combine, assignment_id)

    async def _combine(self, assignment_id: str) -> None:
        """Combine in a throwaway subprocess; a crash here leaves the assignment 'combining' for the next start."""
        record = self._store.assignment(assignment_id)
        try:
            info = self._registry.by_hash(record.plugin_hash)
            output = await combine_output(info, record.params, self._store.unit_results(assignment_id))
        except FrostError as error:
            self._store.fail_assignment(assignment_id, f"combine failed: {error.message}")
            self._events.error(error)
        else:
            self._store.finish_assignment(
                assignment_id, data=output.data, media_type=output.media_type, filename=output.filename
            )
            await trio.to_thread.run_sync(export_result, self._store, self._results_dir, assignment_id)
            self._events.add("assignment", f"assignment {assignment_id} ({record.plugin}) is done: {output.filename}")
        finally:
            self._combining.discard(assignment_id)
        self._on_change()

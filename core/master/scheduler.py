"""Runs the queued units of this node's assignments as guests on this machine, and combines results.

The master's own machine is a host like any other: this loop places a queued unit whenever the
owner's intents allow guests and a CPU and enough of the memory pool are free, hands its result
to the store exactly once, and combines an assignment when its last unit is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from ..errors import FrostError, PluginError
from ..events import EventLog
from ..guest.supervisor import Completed, Evicted, Failed, GuestSupervisor, GuestTask
from ..plugin_api import WorkUnit
from ..plugin_calls import combine_output
from ..plugin_registry import PluginRegistry
from .results import export_result
from .store import MasterStore, UnitRecord

log = logging.getLogger("frost.master")


@dataclass(frozen=True)
class Capacity:
    """What this machine offers guests right now."""

    accepts_guests: bool
    cpus: int
    memory_pool_bytes: int


class LocalScheduler:
    def __init__(
        self, *, node_id: str, store: MasterStore, registry: PluginRegistry, supervisor: GuestSupervisor,
        events: EventLog, results_dir: Path, capacity: Callable[[], Capacity], max_retries: Callable[[], int],
        on_change: Callable[[], None],
    ) -> None:
        self._node_id = node_id
        self._store = store
        self._registry = registry
        self._supervisor = supervisor
        self._events = events
        self._results_dir = results_dir
        self._capacity = capacity
        self._max_retries = max_retries
        self._on_change = on_change
        self._running: dict[str, UnitRecord] = {}
        self._combining: set[str] = set()
        self._wake = trio.Event()
        self._released = trio.Event()

    @property
    def running_count(self) -> int:
        return len(self._running)

    async def wait_released(self, task_ids: tuple[str, ...]) -> None:
        """Return once these guests' outcomes are in the store (an evicted unit is queued again)."""
        while any(task_id in self._running for task_id in task_ids):
            await self._released.wait()

    def wake(self) -> None:
        """Look at the queue again now (a submit, a resume, a settings change)."""
        self._wake.set()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        for record in self._store.assignments():
            if record.state == "done":
                await trio.to_thread.run_sync(export_result, self._store, self._results_dir, record.id)
        requeued = self._store.requeue_running()
        if requeued:
            self._events.add("assignment", f"{requeued} unit(s) interrupted by the last shutdown are queued again")
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._combine_ready(nursery)
                self._place_queued(nursery)
                with trio.move_on_after(1.0):
                    await self._wake.wait()
                self._wake = trio.Event()

    def _place_queued(self, nursery: trio.Nursery) -> None:
        capacity = self._capacity()
        if not capacity.accepts_guests:
            return
        memory_used = sum(unit.memory_bytes for unit in self._running.values())
        for unit in self._store.queued_units():
            if len(self._running) >= capacity.cpus:
                return
            if memory_used + unit.memory_bytes > capacity.memory_pool_bytes:
                continue
            try:
                info = self._registry.by_hash(self._plugin_hash(unit))
            except PluginError as error:
                self._store.fail_assignment(unit.assignment_id, error.message)
                self._events.error(error)
                continue
            epoch = self._store.place_unit(unit.assignment_id, unit.index, host=self._node_id)
            memory_used += unit.memory_bytes
            self._running[unit.task_id] = unit
            task = GuestTask(
                task_id=unit.task_id, assignment_id=unit.assignment_id, origin=self._node_id,
                plugin_name=info.name, plugin_version=info.version, plugin_hash=info.hash,
                plugin_path=info.path, epoch=epoch,
                unit=WorkUnit(index=unit.index, data=unit.data, memory_bytes=unit.memory_bytes, cost=unit.cost),
            )
            nursery.start_soon(self._run_guest, task)
        self._on_change()

    def _plugin_hash(self, unit: UnitRecord) -> str:
        return self._store.assignment(unit.assignment_id).plugin_hash

    async def _run_guest(self, task: GuestTask) -> None:
        aid, index = task.assignment_id, task.unit.index
        try:
            outcome = await self._supervisor.run(task)
            if isinstance(outcome, Completed):
                if self._store.accept_result(aid, index, epoch=task.epoch, result=outcome.result):
                    self._supervisor.discard_checkpoints(task.task_id)
            elif isinstance(outcome, Evicted):
                self._store.requeue_unit(aid, index, epoch=task.epoch)
            elif isinstance(outcome, Failed):
                self._handle_failure(task, outcome)
        finally:
            # Only now is the outcome in the store: whoever waits for this guest may look.
            self._running.pop(task.task_id, None)
            self._released.set()
            self._released = trio.Event()
        self._on_change()
        self.wake()

    def _handle_failure(self, task: GuestTask, outcome: Failed) -> None:
        aid, index = task.assignment_id, task.unit.index
        unit = next(u for u in self._store.assignment(aid).units if u.index == index)
        retries_left = self._max_retries() - unit.failures
        if outcome.retryable and retries_left > 0:
            self._store.requeue_unit(aid, index, epoch=task.epoch, error=outcome.reason)
            self._events.add(
                "assignment", f"unit {task.task_id} failed ({outcome.reason}); retrying, {retries_left} retries left",
                severity="warning",
            )
            return
        self._store.fail_unit(aid, index, epoch=task.epoch, error=outcome.reason)
        self._store.fail_assignment(aid, f"unit {index} failed: {outcome.reason}")
        self._events.add("assignment", f"assignment {aid} failed: unit {index}: {outcome.reason}",
                         severity="error", title="Assignment failed")

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

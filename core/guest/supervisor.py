"""The node's side of guests: run units in low-priority subprocesses and keep them in line.

One `GuestSupervisor` per node. `run(task)` starts a guest (resuming from the task's newest
valid checkpoint), contains it (its own cgroup, confined files, no network: `containment`),
feeds it, checkpoints it at Young's interval, watches its memory, priority and progress, and
returns how it ended. `pause_all`/`resume_all` freeze and thaw each guest's cgroup (signals to
its process group where there is no freezer), so they act before the call returns. Nothing here
blocks the trio loop: hashing and durable writes run in worker threads.

A process whose unit completed waits a few seconds for the next unit of the same assignment
(`warm`), up to `units_per_process` units; one that failed or was evicted is never reused.

The supervisor ties five parts: `spawn` (processes and the warm spare), `warm` (processes between
units), `containment` (the isolation layers), `running` (one guest from start to outcome) and
`checks` (pure judgements).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from frost_core.guest import checks
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.guest.containment import Containment
from frost_core.guest.cgroups import GuestCgroup
from frost_core.guest.isolation import IsolationReport
from frost_core.guest.priority import read_priority
from frost_core.guest.running import RunningGuest
from frost_core.guest.spawn import SPARE_FOLDER, Child, WarmSpare, fresh_folder, remove_folder, start_child
from frost_core.guest.warm import IdleGuests, WarmKey, end, warm_key
from frost_core.guest.views import (
    Completed,
    Evicted,
    Failed,
    GuestEvent,
    GuestFigures,
    GuestSettings,
    GuestTask,
    InputFile,
    Outcome,
    Stopped,
)
from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore, check_task_id

class GuestSupervisor:
    """Runs guests for this node; see the module docstring. Checkpoints live in data_dir/checkpoints."""

    def __init__(
        self, *, data_dir: Path, settings: GuestSettings, on_event: Callable[[GuestEvent], None],
        on_checkpoint: Callable[[GuestTask, CheckpointRecord], None] | None = None,
        open_input: Callable[[GuestTask, InputFile], Awaitable[Path]] | None = None,
        input_roots: tuple[Path, ...] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.on_event = on_event
        self.on_checkpoint = on_checkpoint
        """Called with every checkpoint once it is durable here (the node replicates it to the master)."""
        self.open_input = open_input
        """The local path of a task's input file, fetched from its master if need be (None: no file access)."""
        self.store = CheckpointStore(self.data_dir / "checkpoints")
        self._scratch_root = self.data_dir / "scratch"
        self._guests: dict[str, RunningGuest] = {}
        self._request_ids = itertools.count(1)
        self._paused = False
        self.containment = Containment(data_dir=self.data_dir, input_roots=input_roots, settings=settings)
        """The isolation layers; `input_roots` are the folders `open_input`'s files live in, which guests may read."""
        self._spare = WarmSpare(self._scratch_root / SPARE_FOLDER, self._spares_wanted,
                                self.containment.child_options, self.containment.spare_cgroup)
        self._idle = IdleGuests(self._scratch_root)
        self._reaper: trio.Nursery | None = None
        """Where an evicted guest's process is reaped while its unit goes on elsewhere (see `run`); `keep_warm`'s."""
        self._reaping: dict[str, trio.Event] = {}
        """Set, by task id, once such a reap is over: the unit's next run here waits for its scratch folder."""
        self._settling: dict[str, trio.Event] = {}
        """Set, by task id, once a capture that left before it was durable here is durable (or failed)."""
        self._feeds: dict[str, CaptureFeed] = {}
        """By task id: where the guest's next capture goes piece by piece as it comes up the pipe (`feed_capture`)."""

    # --- running ---------------------------------------------------------------------------

    async def run(self, task: GuestTask, *, checkpoint: CheckpointRecord | None = None,
                  durable: Callable[[], Awaitable[None]] | None = None,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> Outcome:
        """Run `task` here until it completes, fails or is evicted; resumes from its newest checkpoint.

        `checkpoint` is that checkpoint when the caller has it in hand, verified and durable in
        the store (a unit that just arrived): reading and hashing it again would cost a move
        ~3 ms per MiB. Or, with `durable`, about to be: the guest process is readied and loads
        its plugin while `durable()` makes it so, and gets its state only once it returns (if it
        raises CheckpointError, the run ends Failed). With `nursery.start`, returns to the
        starter once the guest process runs (or failed to start).
        """
        check_task_id(task.task_id)
        if task.task_id in self._reaping:
            await self._reaping[task.task_id].wait()
        await self.settled(task.task_id)  # its newest checkpoint may still be on its way to disk
        if task.task_id in self._guests:
            task_status.started()
            return Failed(f"task {task.task_id} is already running on this node", retryable=False)
        refusal = self.containment.report().refusal()
        if refusal:
            task_status.started()
            return Failed(f"isolation: {refusal}", retryable=True)
        newest = checkpoint or (await trio.to_thread.run_sync(self.store.latest, task.task_id)
                                if self.store.holds(task.task_id) else None)
        refused = checks.newer_owner(task, newest)
        if refused is not None:
            task_status.started()
            return refused
        resume_from = newest
        if newest is not None and not checks.same_code(task, newest):
            self.emit(task.task_id, "error", f"ignoring checkpoint {newest.seq}: it was taken with other "
                      "plugin code or another unit; starting the unit afresh", "warning")
            resume_from = None
        guest = RunningGuest(self, task, resume_from, next_seq=(newest.seq + 1) if newest else 1)
        self._guests[task.task_id] = guest
        scratch = self._scratch_root / task.task_id
        key = warm_key(task)
        try:
            warm = await self._idle.take(key, scratch)
            if warm is None:
                try:
                    await trio.to_thread.run_sync(fresh_folder, scratch)
                    self.containment.prepare_scratch(scratch)
                except OSError as error:  # (what an earlier guest left there that this node cannot remove)
                    guest.finish(Failed(f"start: could not make its scratch folder: {error}", retryable=True))
            async with trio.open_nursery() as nursery:
                if guest.outcome is None:
                    await self._begin(guest, warm, scratch, nursery, durable)
                task_status.started()
                await guest.finished.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                kept = await self._keep_warm(guest, key)
                if not kept and isinstance(guest.outcome, Evicted) and self._reaper is not None:
                    # Its state is in hand and its process killed: the unit may go on elsewhere now. A killed
                    # process at the lowest priority may take a second to exit on a busy machine (0.3-1 s seen).
                    guest.settle_cpu()
                    self._reaping[task.task_id] = trio.Event()
                    self._reaper.start_soon(self._reap, guest, scratch)
                elif not kept:
                    await self._reap(guest, scratch)
            del self._guests[task.task_id]
            feed = self._feeds.pop(task.task_id, None)
            if feed is not None:
                feed.close(f"{task.task_id} ended before its state came")
        assert guest.outcome is not None
        self._report_outcome(task.task_id, guest.outcome)
        return dataclasses.replace(guest.outcome, cpu_seconds=guest.cpu)

    async def _begin(self, guest: RunningGuest, warm: Child | None, scratch: Path, nursery: trio.Nursery,
                     durable: Callable[[], Awaitable[None]] | None) -> None:
        """Give the guest a process (the one kept for its assignment, a spare, or a new one), contained, and start
        its unit there."""
        try:
            child = warm or await self._spare.take() or await start_child(scratch, self.containment.child_options())
        except OSError as error:
            guest.finish(Failed(f"start: could not start the guest process: {error}", retryable=True))
            return
        if guest.outcome is None and not warm:
            with trio.CancelScope(shield=True):   # a cancel comes once the guest holds the child
                child.cgroup = await self._contain(guest.task, child)
        if guest.outcome is not None:
            # Evicted or stopped while its process was being made ready: give it no unit.
            await end(child)
            return
        await guest.start(child, scratch, nursery, paused=self._paused, cgroup=child.cgroup,
                          readable=self.containment.readable(guest.task), ready=durable)

    async def _reap(self, guest: RunningGuest, scratch: Path) -> None:
        """Wait for the guest's process to be gone, then remove its cgroup and its scratch folder."""
        try:
            with trio.CancelScope(shield=True):
                await guest.reap()
                await trio.to_thread.run_sync(remove_folder, scratch)
        finally:
            reaped = self._reaping.pop(guest.task.task_id, None)
            if reaped is not None:
                reaped.set()

    async def _keep_warm(self, guest: RunningGuest, key: WarmKey) -> bool:
        """Keep a completed unit's process for the next unit of its assignment, if it may run more."""
        child = guest.child
        if child is None or not isinstance(guest.outcome, Completed) or guest.killed or self._paused:
            return False
        raised = guest.priority_floor and read_priority(child.process.pid).raised_from(guest.priority_floor)
        if raised:   # (its watcher looks every interval: a unit may end between two looks)
            guest.emit("error", f"the guest raised its priority ({raised}); its process runs no more units", "warning")
            return False
        child.units += 1
        child.rss = guest.rss
        child.floor = guest.priority_floor
        child.cpu_seen = guest.cpu_base + guest.cpu   # (its own, as last sampled: settle_cpu may add its forks')
        guest.report_fork_refusals()
        guest.settle_cpu()
        child.cgroup_cpu_seen, child.fork_refusals = guest.cgroup_cpu_seen, guest.fork_refusals
        return child.units < self.settings.units_per_process and await self._idle.park(key, child)

    async def _contain(self, task: GuestTask, child: Child) -> GuestCgroup | None:
        """The cgroup `child` runs `task` in: the one it waited in as the spare, sized for `task`, or a new one,
        made in a worker thread as the spare's is (its folders and the move of the pid into them took 0.5-16 ms,
        which the event loop, and every other guest's result, would wait for)."""
        if child.cgroup is not None:
            try:
                self.containment.size_for(child.cgroup, task)
            except OSError as error:
                self.emit(task.task_id, "error", f"the guest runs without its cgroup's memory limit: {error}", "warning")
            return child.cgroup
        try:
            return await trio.to_thread.run_sync(self.containment.cgroup_for, child.process.pid, task)
        except OSError as error:
            self.emit(task.task_id, "error", f"the guest runs without its own cgroup: {error}", "warning")
            return None

    def _spares_wanted(self) -> int:
        return self.settings.spares if self.settings.warm_spare else 0

    def isolation(self) -> IsolationReport:
        """Which isolation layers hold this node's guests, and why any is missing."""
        return self.containment.report()

    def close(self) -> None:
        """Remove the guests' cgroups (the node is stopping); a later guest makes them again."""
        self.containment.close()

    async def keep_warm(self) -> None:
        """Keep guest processes started and waiting (`settings.spares`) while `settings.warm_spare` says so (see
        `spawn.WarmSpare`), and processes between two units of an assignment (see `warm.py`: without
        this running, every unit gets a process of its own); runs until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._reaper = nursery
                nursery.start_soon(self._spare.keep_warm)
                nursery.start_soon(self._idle.serve)
        finally:
            self._reaper = None

    # --- checkpoints ---------------------------------------------------------------------------

    async def checkpoint_now(self, task_id: str, deadline: float = 2.0) -> CheckpointRecord | None:
        """Checkpoint one guest now; after `deadline` seconds without an answer, its last checkpoint.

        A paused guest cannot answer (its owner wants the CPU), so it gets its last checkpoint too.
        """
        guest = self._guests.get(task_id)
        if guest is None or guest.outcome is not None:
            raise KeyError(f"no guest {task_id} is running here")
        if guest.paused:
            return guest.last_record
        return await guest.checkpoint(deadline)

    async def capture(self, task_id: str, deadline: float) -> CheckpointRecord | None:
        """Stop one guest for a move and return its state: taken at its next migration point, or
        its last checkpoint if it misses `deadline` (None: it has none, the unit starts over).

        Its run() returns Evicted with the same checkpoint. Raises KeyError if no guest `task_id`
        runs here, or it completed or failed before it could be stopped.
        """
        guest = self._guests.get(task_id)
        if guest is None or guest.outcome is not None:
            raise KeyError(f"no guest {task_id} is running here")
        if self._reaper is not None:
            # The state is in hand once it has finished; its killed process may take a second to exit
            # at the lowest priority on a busy machine (see `run`): the move need not wait for that.
            self._reaper.start_soon(guest.evict, deadline)
        else:
            await guest.evict(deadline)
        await guest.finished.wait()  # an eviction already under way decides for both
        if not isinstance(guest.outcome, Evicted):
            raise KeyError(f"guest {task_id} ended before it could be captured")
        return guest.outcome.checkpoint

    def feed_capture(self, task_id: str, feed: CaptureFeed) -> bool:
        """Hand the guest's next state, as it comes up its pipe, to `feed` too (a move sends it on at
        once); False if no guest `task_id` runs here. The feed is closed if no state comes."""
        guest = self._guests.get(task_id)
        if guest is None or guest.outcome is not None or task_id in self._feeds:
            return False
        self._feeds[task_id] = feed
        return True

    def take_feed(self, task_id: str) -> CaptureFeed | None:
        """The feed for the state that begins to come up `task_id`'s pipe now, if a move waits for it."""
        return self._feeds.pop(task_id, None)

    def settle_behind(self, task_id: str, settle: Callable[[], Awaitable[None]]) -> bool:
        """Run a capture's durable write (`settle`) beside the move that sends it; False where
        nothing runs behind a guest (no `keep_warm`): the capture is then written before it leaves."""
        if self._reaper is None or task_id in self._settling:
            return False
        done = self._settling[task_id] = trio.Event()

        async def run() -> None:
            try:
                with trio.CancelScope(shield=True):  # half a checkpoint helps no one: finish it, even on the way out
                    await settle()
            finally:
                del self._settling[task_id]
                done.set()

        self._reaper.start_soon(run)
        return True

    async def settled(self, task_id: str) -> None:
        """Return once the unit's last capture is durable here, or known not to be (its write failed)."""
        settling = self._settling.get(task_id)
        if settling is not None:
            await settling.wait()

    def next_request_id(self) -> int:
        """A checkpoint request id no guest of this node has used."""
        return next(self._request_ids)

    # --- the owner's commands ------------------------------------------------------------------

    def guest_pids(self) -> tuple[int, ...]:
        """Process ids of the running guests: the information policy counts their CPU as the guests'.

        Not the warm spare's, nor those waiting for their next unit: they run no unit, and
        use no CPU blocked on their pipes.
        """
        return tuple(g.process.pid for g in self._guests.values() if g.process is not None and g.outcome is None)

    def pause_all(self) -> None:
        """Stop every guest's process group now (SIGSTOP); new guests start stopped until resume.
        Processes waiting for their next unit end: the owner wants the machine back."""
        self._paused = True
        self._idle.end_soon()
        for guest in self._guests.values():
            guest.pause()

    def resume_all(self) -> None:
        """Let every paused guest run again (SIGCONT)."""
        self._paused = False
        for guest in self._guests.values():
            guest.resume()

    def update_settings(self, settings: GuestSettings) -> None:
        """New settings (the owner saved the config); running guests follow from their next check."""
        if settings != self.settings:
            self._idle.end_soon()  # they were confined and capped under the old settings
        self.settings = settings
        self.containment.update_settings(settings)

    def discard_checkpoints(self, task_id: str) -> None:
        """Forget a task's checkpoints, once its result is safe with its master."""
        self.store.discard(task_id)

    async def cancel_assignment(self, assignment_id: str) -> tuple[str, ...]:
        """Stop the guests of a cancelled assignment at once and drop their checkpoints."""
        tasks = tuple(g.task.task_id for g in self._guests.values() if g.task.assignment_id == assignment_id)
        await self.end_warm(assignment_id)
        return await self.stop(tasks, f"cancelled: assignment {assignment_id} was cancelled")

    async def end_warm(self, assignment_id: str) -> None:
        """End the processes waiting for a next unit of `assignment_id`: there will be none."""
        await self._idle.close(lambda key: key[1] == assignment_id)

    async def stop(self, task_ids: tuple[str, ...], reason: str) -> tuple[str, ...]:
        """Stop these guests at once and drop their checkpoints: their work is not wanted any more
        (cancelled, or superseded by a newer copy elsewhere). Their run() returns Stopped(reason)."""
        guests = [g for g in self._guests.values() if g.task.task_id in task_ids and g.outcome is None]
        for guest in guests:
            guest.finish(Stopped(reason))
        for guest in guests:
            if guest.process is not None:
                await guest.process.wait()
            await trio.to_thread.run_sync(self.store.discard, guest.task.task_id)
        return tuple(g.task.task_id for g in guests)

    async def evict(self, task_id: str | None = None, *, deadline: float | None = None) -> tuple[str, ...]:
        """Checkpoint (within `deadline`, default `evict_deadline`) and stop one guest or all; their
        run() returns Evicted with the state taken at the migration point, or the last checkpoint."""
        guests = [g for g in self._guests.values() if task_id is None or g.task.task_id == task_id]
        if task_id is None:
            await self._idle.close()  # the owner's evict frees everything, waiting processes too
        async with trio.open_nursery() as nursery:
            for guest in guests:
                nursery.start_soon(guest.evict, self.settings.evict_deadline if deadline is None else deadline)
        return tuple(g.task.task_id for g in guests)

    # --- figures and events --------------------------------------------------------------------

    def figures(self) -> tuple[GuestFigures, ...]:
        """Live figures of every guest, from the watcher's latest sample (never blocks).

        Outside a trio run there are no guests, and no trio clock to read: the node builds its
        first snapshot before it runs.
        """
        if not self._guests:
            return ()
        now = trio.current_time()
        return tuple(g.figures(now) for g in self._guests.values())

    def _report_outcome(self, task_id: str, outcome: Outcome) -> None:
        if isinstance(outcome, Completed):
            self.emit(task_id, "completed", f"unit finished ({len(outcome.result)} result bytes)")
        elif isinstance(outcome, Failed):
            self.emit(task_id, "failed", outcome.reason, "error")
        elif isinstance(outcome, Evicted):
            where = f"checkpoint {outcome.checkpoint.seq}" if outcome.checkpoint else "no checkpoint (starts over)"
            self.emit(task_id, "evict", f"guest left this machine with {where}")
        elif isinstance(outcome, Stopped):
            self.emit(task_id, "stopped", f"guest stopped: {outcome.reason}")

    def emit(self, task_id: str, kind: str, message: str, level: str = "info") -> None:
        """Tell the node what happened to one guest."""
        self.on_event(GuestEvent(task_id=task_id, kind=kind, message=message, level=level))

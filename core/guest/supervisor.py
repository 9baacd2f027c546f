"""The node's side of guests: run each unit in its own low-priority subprocess and keep it in line.

One `GuestSupervisor` per node. `run(task)` starts a guest (resuming from the task's newest
valid checkpoint), feeds it, checkpoints it at Young's interval, watches its memory, priority
and progress, and returns how it ended. `pause_all`/`resume_all` are plain signals to each
guest's process group, so they act before the call returns. Nothing here blocks the trio loop:
hashing and durable writes run in worker threads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
import trio

from frost_core.policies.checkpoint_interval import young_interval
from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore, check_task_id
from frost_core.api.errors import CheckpointError, FrostError, PluginError, ProtocolError
from frost_core.guest import envelope
from frost_core.guest.limits import address_space_cap, memory_verdict
from frost_core.guest.priority import PriorityView, read_priority
from frost_core.guest.protocol import (
    GuestCheckpoint,
    GuestCheckpointRequest,
    GuestFailed,
    GuestFileReady,
    GuestFileRefused,
    GuestFileRequest,
    GuestLog,
    GuestProgress,
    GuestResult,
    GuestStart,
)
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
)
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import encode_plain
from frost_core.wire.channel import Channel
from frost_core.wire.messages import MAX_MESSAGE_SIZE

MAX_LOG_LINE = 1000
SPARE_FOLDER = ".spare"
"""Where the warm spare waits, under the scratch root (task ids cannot start with a dot)."""
SPARE_CHECK_INTERVAL = 5.0
"""Seconds between checks that the spare is still wanted (the owner may turn it off)."""
PIPE_BUFFER_BYTES = 1 << 20
"""Buffer of the guest pipes where the OS lets us choose it (see `_widen_pipe`)."""
CPU_WINDOW = 1.0
PROTOCOL_GRACE = 1.0
STDERR_TAIL = 5
# Failures the plugin causes itself: running it again elsewhere gives the same answer.
_PLUGIN_FAULTS = ("plugin", "state", "memory")


@dataclasses.dataclass(eq=False)
class _Pending:
    """One checkpoint request in flight."""

    request_id: int
    sent_at: float
    received: trio.Event = dataclasses.field(default_factory=trio.Event)
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    record: CheckpointRecord | None = None


@dataclasses.dataclass(eq=False)
class _Child:
    """A guest process and the pipe channel to it, before or after it is given its unit."""

    process: trio.Process
    channel: Channel


class _Guest:
    """Mutable bookkeeping for one running guest; the outside world sees `GuestFigures`."""

    def __init__(self, task: GuestTask, resume_from: CheckpointRecord | None, next_seq: int) -> None:
        now = time.monotonic()
        self.task = task
        self.resume_from = resume_from
        self.last_record = resume_from
        self.next_seq = next_seq
        self.process: trio.Process | None = None
        self.channel: Channel | None = None
        self.outcome: Outcome | None = None
        self.finished = trio.Event()
        self.killed = False
        self.paused = False
        self.evicting = False
        self.fetching = False  # waiting for an input file is not being stuck
        self.pending: _Pending | None = None
        self.started_at = now
        self.progress = 0.0
        self.steps_seen = False
        self.cpu = 0.0
        self.cpu_percent = 0.0
        self.rss = 0
        self.progress_cpu = 0.0
        self.asleep_since: float | None = None
        self.checkpoint_at = now
        self.checkpoint_cpu = 0.0
        self.checkpoint_cost = 0.0
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.priority_floor: PriorityView | None = None

    def state(self) -> str:
        if isinstance(self.outcome, Failed):
            return "failed"
        if self.evicting:
            return "evicting"
        if self.paused:
            return "paused"
        if self.pending is not None:
            return "checkpointing"
        return "running" if self.steps_seen else "starting"


class GuestSupervisor:
    """Runs guests for this node; see the module docstring. Checkpoints live in data_dir/checkpoints."""

    def __init__(
        self, *, data_dir: Path, settings: GuestSettings, on_event: Callable[[GuestEvent], None],
        on_checkpoint: Callable[[GuestTask, CheckpointRecord], None] | None = None,
        open_input: Callable[[GuestTask, InputFile], Awaitable[Path]] | None = None,
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
        self._guests: dict[str, _Guest] = {}
        self._request_ids = itertools.count(1)
        self._paused = False
        self._spare: _Child | None = None
        self._spare_taken = trio.Event()

    # --- running ---------------------------------------------------------------------------

    async def run(self, task: GuestTask, *, checkpoint: CheckpointRecord | None = None,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> Outcome:
        """Run `task` here until it completes, fails or is evicted; resumes from its newest checkpoint.

        `checkpoint` is that checkpoint when the caller has it in hand, verified and durable in
        the store (a unit that just arrived): reading and hashing it again would cost a move
        ~3 ms per MiB. With `nursery.start`, returns to the starter once the guest process runs
        (or failed to start).
        """
        check_task_id(task.task_id)
        if task.task_id in self._guests:
            task_status.started()
            return Failed(f"task {task.task_id} is already running on this node", retryable=False)
        newest = checkpoint or await trio.to_thread.run_sync(self.store.latest, task.task_id)
        resume_from = self._usable_checkpoint(task, newest)
        if isinstance(resume_from, Failed):
            task_status.started()
            return resume_from
        guest = _Guest(task, resume_from, next_seq=(newest.seq + 1) if newest else 1)
        self._guests[task.task_id] = guest
        scratch = self._scratch_root / task.task_id
        try:
            await trio.to_thread.run_sync(_fresh_folder, scratch)
            async with trio.open_nursery() as nursery:
                try:
                    await self._spawn(guest, scratch, nursery)
                except OSError as error:
                    self._finish(guest, Failed(f"start: could not start the guest process: {error}", retryable=True))
                task_status.started()
                await guest.finished.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self._reap(guest)
                await trio.to_thread.run_sync(functools.partial(shutil.rmtree, scratch, ignore_errors=True))
            del self._guests[task.task_id]
        assert guest.outcome is not None
        self._report_outcome(guest)
        return guest.outcome

    def _usable_checkpoint(self, task: GuestTask, record: CheckpointRecord | None) -> CheckpointRecord | Failed | None:
        if record is None:
            return None
        if record.epoch > task.epoch:
            return Failed(
                f"task {task.task_id} has a checkpoint from ownership epoch {record.epoch}, newer than this "
                f"assignment's epoch {task.epoch}: another node owns it now",
                retryable=False,
            )
        if (record.plugin_hash, record.unit_index) != (task.plugin_hash, task.unit.index):
            self._emit(task.task_id, "error", f"ignoring checkpoint {record.seq}: it was taken with other "
                       "plugin code or another unit; starting the unit afresh", "warning")
            return None
        return record

    async def _spawn(self, guest: _Guest, scratch: Path, nursery: trio.Nursery) -> None:
        task, settings = guest.task, self.settings
        child = await self._take_spare() or await _start_child(scratch)
        process = guest.process = child.process
        guest.channel = child.channel
        if self._paused:
            self._signal(guest, signal.SIGSTOP)
            guest.paused = True
        resumed = f" from checkpoint {guest.resume_from.seq}" if guest.resume_from else ""
        self._emit(task.task_id, "start",
                   f"guest {task.plugin_name} unit {task.unit.index} started{resumed} (pid {process.pid})")
        nursery.start_soon(self._read_messages, guest)
        nursery.start_soon(self._forward_output, guest, process.stdout, "info")
        nursery.start_soon(self._forward_output, guest, process.stderr, "warning")
        nursery.start_soon(self._watch, guest, psutil.Process(process.pid))
        nursery.start_soon(self._checkpoint_periodically, guest)
        start = GuestStart(
            task_id=task.task_id,
            plugin_path=str(task.plugin_path),
            unit=encode_plain(task.unit.to_plain(), "work unit", MAX_MESSAGE_SIZE - 4096),
            max_state_bytes=settings.max_state_bytes,
            progress_interval=settings.progress_interval,
            resume=guest.resume_from is not None,
            scratch=str(scratch),
            address_space=address_space_cap(task.unit.memory_bytes, settings.address_space_baseline_bytes),
        )
        try:
            await guest.channel.send_bulk(start, guest.resume_from.state if guest.resume_from else b"")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # The guest died before reading; the message reader reports why.

    async def _reap(self, guest: _Guest) -> None:
        self._kill(guest)
        if guest.process is not None:
            assert guest.channel is not None
            await _close_child(_Child(guest.process, guest.channel))

    # --- the warm spare ----------------------------------------------------------------------

    async def keep_warm(self) -> None:
        """Keep one guest process started and waiting, while `settings.warm_spare` says so.

        Starting the interpreter and importing the guest runtime is ~0.1 s, most of what a
        small unit's move or start costs; a spare has done it already. It lowered itself to
        guest priority first and then blocks on its pipe: no CPU, ~15 MiB of memory. It
        learns its unit, scratch folder and memory cap from GuestStart.
        """
        folder = self._scratch_root / SPARE_FOLDER
        await trio.to_thread.run_sync(_fresh_folder, folder)
        try:
            while True:
                if self._spare is not None and self._spare.process.returncode is not None:
                    dead, self._spare = self._spare, None  # killed from outside: start another
                    await _close_child(dead)
                if self.settings.warm_spare and self._spare is None:
                    self._spare = await _start_child(folder)
                elif not self.settings.warm_spare and self._spare is not None:
                    spare, self._spare = self._spare, None
                    await _close_child(spare)
                self._spare_taken = trio.Event()
                with trio.move_on_after(SPARE_CHECK_INTERVAL):
                    await self._spare_taken.wait()
        finally:
            spare, self._spare = self._spare, None
            if spare is not None:
                await _close_child(spare)

    async def _take_spare(self) -> _Child | None:
        """The spare, if one waits and is still alive; `keep_warm` then starts the next."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        self._spare_taken.set()
        if spare.process.returncode is not None:  # killed from outside meanwhile
            await _close_child(spare)
            return None
        return spare

    def _finish(self, guest: _Guest, outcome: Outcome) -> None:
        """Decide how the guest ended (first decision wins) and stop its process group at once."""
        if guest.outcome is not None:
            return
        self._kill(guest)
        guest.outcome = outcome
        guest.finished.set()

    def _kill(self, guest: _Guest) -> None:
        guest.killed = True
        self._signal(guest, signal.SIGKILL)

    @staticmethod
    def _signal(guest: _Guest, signum: int) -> None:
        if guest.process is None or guest.process.returncode is not None:
            return
        try:
            os.killpg(guest.process.pid, signum)
        except ProcessLookupError:
            pass  # Already gone: the reader reports how it ended.

    # --- messages from the guest -------------------------------------------------------------

    async def _read_messages(self, guest: _Guest) -> None:
        assert guest.channel is not None
        try:
            while True:
                message = await guest.channel.receive()
                await self._handle(guest, message)
        except trio.EndOfChannel:
            problem = None
        except ProtocolError as error:
            problem = error.message
        if guest.killed or guest.outcome is not None:
            return
        assert guest.process is not None
        if problem is not None:
            # A guest that died mid-frame crashed; one still alive after this broke the protocol.
            with trio.move_on_after(PROTOCOL_GRACE):
                await guest.process.wait()
            if guest.process.returncode is None:
                self._finish(guest, Failed(f"protocol: the guest broke the pipe protocol: {problem}", retryable=False))
                return
        code = await guest.process.wait()
        tail = "; ".join(guest.stderr_tail)
        self._finish(
            guest,
            Failed(f"crashed: the guest {_describe_exit(code)}" + (f" (stderr: {tail})" if tail else ""),
                   retryable=True),
        )

    async def _handle(self, guest: _Guest, message: object) -> None:
        assert guest.channel is not None and guest.process is not None
        if guest.priority_floor is None:
            # The child lowers itself before it sends anything: what it runs at now is its floor.
            guest.priority_floor = read_priority(guest.process.pid)
        if isinstance(message, GuestProgress):
            guest.progress = message.progress
            guest.steps_seen = guest.steps_seen or message.steps > 0
            guest.progress_cpu = self._sample_cpu(guest)
            guest.asleep_since = None
        elif isinstance(message, GuestCheckpoint):
            data = await guest.channel.receive_bulk_data(max_size=self.settings.max_state_bytes)
            guest.progress = message.progress
            await self._store_checkpoint(guest, message, data)
        elif isinstance(message, GuestResult):
            data = await guest.channel.receive_bulk_data(max_size=MAX_RESULT_BYTES)
            try:
                result, files = envelope.unpack(envelope.RESULT, data)
            except PluginError as error:
                raise ProtocolError(error.message) from error
            guest.progress = 1.0
            self._finish(guest, Completed(result, files))
        elif isinstance(message, GuestFileRequest):
            guest.fetching = True
            try:
                reply = await self._find_input(guest.task, message.name)
            finally:
                guest.fetching = False
                guest.asleep_since = None
            try:
                await guest.channel.send(reply)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # The guest is gone; the reader reports how it ended.
        elif isinstance(message, GuestFailed):
            failure = Failed(f"{message.kind}: {message.reason}", retryable=message.kind not in _PLUGIN_FAULTS)
            self._finish(guest, failure)
        elif isinstance(message, GuestLog):
            self._emit(guest.task.task_id, "guest-log", message.text, message.level)
        else:
            raise ProtocolError(f"the guest sent an unexpected {type(message).__name__}")

    async def _find_input(self, task: GuestTask, name: str) -> GuestFileReady | GuestFileRefused:
        """Answer a guest's open_input; meanwhile the guest waits mid-step, deferring checkpoint requests."""
        wanted = next((f for f in task.inputs if f.name == name), None)
        if wanted is None:
            known = ", ".join(f.name for f in task.inputs) or "none"
            return GuestFileRefused(name=name, reason=f"no input file named {name!r} (this assignment has: {known})",
                                    retryable=False)
        if self.open_input is None:
            return GuestFileRefused(name=name, reason="this node cannot fetch input files", retryable=True)
        try:
            path = await self.open_input(task, wanted)
        except FrostError as error:
            self._emit(task.task_id, "error", f"input file {name}: {error.message}", "warning")
            return GuestFileRefused(name=name, reason=f"input file {name!r} is unavailable: {error.message}",
                                    retryable=True)
        self._emit(task.task_id, "guest-log", f"input file {name} ready ({wanted.size} bytes)")
        return GuestFileReady(name=name, path=str(path))

    async def _store_checkpoint(self, guest: _Guest, message: GuestCheckpoint, data: bytes) -> None:
        pending = guest.pending
        if pending is None or pending.request_id != message.request_id:
            raise ProtocolError(f"the guest answered checkpoint request {message.request_id}, which is not open")
        pending.received.set()
        task = guest.task
        commit = functools.partial(
            self.store.commit,
            task_id=task.task_id, plugin_name=task.plugin_name, plugin_version=task.plugin_version,
            plugin_hash=task.plugin_hash, unit_index=task.unit.index, epoch=task.epoch,
            seq=guest.next_seq, taken_at=time.time(), state=data,
        )
        cpu = self._sample_cpu(guest)
        try:
            record = await trio.to_thread.run_sync(commit)
        except CheckpointError as error:
            self._emit(task.task_id, "error", error.message, "warning")
        else:
            guest.next_seq += 1
            guest.last_record = pending.record = record
            guest.checkpoint_at = time.monotonic()
            guest.checkpoint_cpu = cpu
            guest.checkpoint_cost = guest.checkpoint_at - pending.sent_at
            self._emit(task.task_id, "checkpoint", f"checkpoint {record.seq}: {record.size} bytes in "
                       f"{guest.checkpoint_cost * 1000:.0f} ms (encode {message.encode_seconds * 1000:.0f} ms)")
            if self.on_checkpoint is not None:
                self.on_checkpoint(task, record)
        finally:
            guest.pending = None
            pending.done.set()

    async def _forward_output(self, guest: _Guest, stream: trio.abc.ReceiveStream | None, level: str) -> None:
        """Plugin prints become guest-log events, at most `log_lines_per_second` per second."""
        if stream is None:
            return
        budget, window, dropped = self.settings.log_lines_per_second, time.monotonic(), 0
        buffer = b""
        while data := await stream.receive_some(65536):
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > MAX_LOG_LINE:
                lines.append(buffer)
                buffer = b""
            for raw in lines:
                line = raw.decode(errors="replace").rstrip()[:MAX_LOG_LINE]
                if level == "warning":
                    guest.stderr_tail.append(line)
                now = time.monotonic()
                if now - window >= 1.0:
                    if dropped:
                        self._emit(guest.task.task_id, "guest-log", f"({dropped} lines of output dropped)", "warning")
                    budget, window, dropped = self.settings.log_lines_per_second, now, 0
                if budget > 0:
                    budget -= 1
                    self._emit(guest.task.task_id, "guest-log", line, level)
                else:
                    dropped += 1

    # --- watching ------------------------------------------------------------------------------

    async def _watch(self, guest: _Guest, process: psutil.Process) -> None:
        """Memory, priority and progress checks every `watch_interval`; the figures come from here."""
        window: deque[tuple[float, float]] = deque()
        while True:
            settings = self.settings
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    rss = process.memory_info().rss
                    status = process.status()
            except psutil.Error:
                return  # Gone: the message reader reports how it ended.
            now = time.monotonic()
            guest.cpu = times.user + times.system
            guest.rss = rss
            window.append((now, guest.cpu))
            while now - window[0][0] > CPU_WINDOW:
                window.popleft()
            elapsed = now - window[0][0]
            guest.cpu_percent = 100.0 * (guest.cpu - window[0][1]) / elapsed if elapsed > 0 else 0.0
            verdict = memory_verdict(rss, guest.task.unit.memory_bytes, settings.memory_slack_bytes)
            if verdict:
                self._finish(guest, Failed(verdict, retryable=False))
                return
            raised = guest.priority_floor and read_priority(process.pid).raised_from(guest.priority_floor)
            if raised:
                self._finish(guest, Failed(f"priority: the guest raised its priority ({raised}); guests must "
                                           "stay at the lowest priority", retryable=False))
                return
            stuck = self._stuck(guest, status)
            if stuck:
                self._finish(guest, Failed(stuck, retryable=False))
                return
            await trio.sleep(settings.watch_interval)

    def _stuck(self, guest: _Guest, status: str) -> str | None:
        if guest.paused or guest.evicting or guest.fetching:
            return None
        timeout = self.settings.step_timeout
        cpu = guest.cpu - guest.progress_cpu
        if cpu > timeout:
            return f"no progress: a step ran {cpu:.1f} s of CPU without finishing (step timeout {timeout:g} s)"
        # A starved guest stays runnable; only one asleep at every look since its last step is stuck.
        now = time.monotonic()
        if status not in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP):
            guest.asleep_since = None
        elif guest.asleep_since is None:
            guest.asleep_since = now
        elif now - guest.asleep_since > timeout:
            blocked = now - guest.asleep_since
            return f"no progress: a step has been blocked for {blocked:.1f} s (step timeout {timeout:g} s)"
        return None

    def _sample_cpu(self, guest: _Guest) -> float:
        if guest.process is None:
            return guest.cpu
        try:
            times = psutil.Process(guest.process.pid).cpu_times()
        except psutil.Error:
            return guest.cpu
        guest.cpu = times.user + times.system
        return guest.cpu

    # --- checkpoints ---------------------------------------------------------------------------

    async def _checkpoint_periodically(self, guest: _Guest) -> None:
        attempted = guest.checkpoint_at
        while True:
            settings = self.settings
            interval = young_interval(
                guest.checkpoint_cost, settings.interruptions_per_hour,
                lower=settings.min_checkpoint_interval, upper=settings.max_checkpoint_interval,
            )
            await trio.sleep_until(_trio_time(max(guest.checkpoint_at, attempted) + interval))
            while guest.paused or guest.evicting:
                await trio.sleep(settings.watch_interval)
            attempted = time.monotonic()
            await self._checkpoint(guest, settings.checkpoint_deadline)

    async def _request_checkpoint(self, guest: _Guest) -> _Pending | None:
        """The checkpoint request in flight, sending a new one if none is; None if the guest is gone."""
        if guest.channel is None:
            return None  # still starting: nothing to ask yet
        if guest.pending is None:
            pending = guest.pending = _Pending(next(self._request_ids), time.monotonic())
            try:
                await guest.channel.send(GuestCheckpointRequest(request_id=pending.request_id))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                guest.pending = None
        return guest.pending

    async def _checkpoint(self, guest: _Guest, deadline: float) -> CheckpointRecord | None:
        """Ask for the state at the next migration point; the last durable checkpoint if it is late."""
        pending = await self._request_checkpoint(guest)
        if pending is None:
            return guest.last_record
        with trio.move_on_after(deadline):
            await pending.received.wait()
        if not pending.received.is_set():
            self._emit(guest.task.task_id, "error", f"the guest did not answer a checkpoint request within "
                       f"{deadline:g} s; the last checkpoint stands", "warning")
            return guest.last_record
        await pending.done.wait()
        return pending.record or guest.last_record

    async def checkpoint_now(self, task_id: str, deadline: float = 2.0) -> CheckpointRecord | None:
        """Checkpoint one guest now; after `deadline` seconds without an answer, its last checkpoint.

        A paused guest cannot answer (its owner wants the CPU), so it gets its last checkpoint too.
        """
        guest = self._guests.get(task_id)
        if guest is None or guest.outcome is not None:
            raise KeyError(f"no guest {task_id} is running here")
        if guest.paused:
            return guest.last_record
        return await self._checkpoint(guest, deadline)

    # --- the owner's commands ------------------------------------------------------------------

    def guest_pids(self) -> tuple[int, ...]:
        """Process ids of the running guests: the information policy counts their CPU as the guests'.

        Not the warm spare's: it runs no unit, and its ~0.1 s of start-up CPU at the lowest
        priority is too little to move the owner's figures.
        """
        return tuple(g.process.pid for g in self._guests.values() if g.process is not None and g.outcome is None)

    def pause_all(self) -> None:
        """Stop every guest's process group now (SIGSTOP); new guests start stopped until resume."""
        self._paused = True
        for guest in self._guests.values():
            if guest.paused or guest.evicting or guest.outcome is not None:
                continue
            self._signal(guest, signal.SIGSTOP)
            guest.paused = True
            self._emit(guest.task.task_id, "pause", "guest paused")

    def resume_all(self) -> None:
        """Let every paused guest run again (SIGCONT)."""
        self._paused = False
        for guest in self._guests.values():
            if not guest.paused:
                continue
            self._signal(guest, signal.SIGCONT)
            guest.paused = False
            guest.asleep_since = None  # time spent stopped is not time spent stuck
            self._emit(guest.task.task_id, "resume", "guest resumed")

    def update_settings(self, settings: GuestSettings) -> None:
        """New settings (the owner saved the config); running guests follow from their next check."""
        self.settings = settings

    def discard_checkpoints(self, task_id: str) -> None:
        """Forget a task's checkpoints, once its result is safe with its master."""
        self.store.discard(task_id)

    async def cancel_assignment(self, assignment_id: str) -> tuple[str, ...]:
        """Stop the guests of a cancelled assignment at once and drop their checkpoints."""
        tasks = tuple(g.task.task_id for g in self._guests.values() if g.task.assignment_id == assignment_id)
        return await self.stop(tasks, f"cancelled: assignment {assignment_id} was cancelled")

    async def stop(self, task_ids: tuple[str, ...], reason: str) -> tuple[str, ...]:
        """Stop these guests at once and drop their checkpoints: their work is not wanted any more
        (cancelled, or superseded by a newer copy elsewhere). Their run() returns Failed(reason)."""
        guests = [g for g in self._guests.values() if g.task.task_id in task_ids and g.outcome is None]
        for guest in guests:
            self._finish(guest, Failed(reason, retryable=False))
        for guest in guests:
            if guest.process is not None:
                await guest.process.wait()
            await trio.to_thread.run_sync(self.store.discard, guest.task.task_id)
        return tuple(g.task.task_id for g in guests)

    async def evict(self, task_id: str | None = None, *, deadline: float | None = None) -> tuple[str, ...]:
        """Checkpoint (within `deadline`, default `evict_deadline`) and stop one guest or all; their
        run() returns Evicted with the state taken at the migration point, or the last checkpoint."""
        guests = [g for g in self._guests.values() if task_id is None or g.task.task_id == task_id]
        async with trio.open_nursery() as nursery:
            for guest in guests:
                nursery.start_soon(self._evict_one, guest, self.settings.evict_deadline if deadline is None else deadline)
        return tuple(g.task.task_id for g in guests)

    def has_guest(self, task_id: str) -> bool:
        guest = self._guests.get(task_id)
        return guest is not None and guest.outcome is None

    async def _evict_one(self, guest: _Guest, deadline: float) -> None:
        if guest.outcome is not None or guest.evicting:
            return
        guest.evicting = True
        self._emit(guest.task.task_id, "evict", "evicting: checkpoint now, then leave")
        if guest.paused:
            # It must run to answer; at idle priority that costs the owner nothing noticeable.
            self._signal(guest, signal.SIGCONT)
            guest.paused = False
        record = await self._checkpoint_then_kill(guest, deadline)
        self._finish(guest, Evicted(record))
        if guest.process is not None:
            await guest.process.wait()  # gone, not just signalled, when evict() returns

    async def _checkpoint_then_kill(self, guest: _Guest, deadline: float) -> CheckpointRecord | None:
        pending = await self._request_checkpoint(guest)
        if pending is None:
            self._kill(guest)
            return guest.last_record
        with trio.move_on_after(deadline):
            await pending.received.wait()
        self._kill(guest)  # the state is in hand (or late): free the CPU before the disk write
        if pending.received.is_set():
            await pending.done.wait()
        return pending.record or guest.last_record

    # --- figures and events --------------------------------------------------------------------

    def figures(self) -> tuple[GuestFigures, ...]:
        """Live figures of every guest, from the watcher's latest sample (never blocks)."""
        now = time.monotonic()
        return tuple(
            GuestFigures(
                task_id=g.task.task_id,
                assignment_id=g.task.assignment_id,
                plugin=g.task.plugin_name,
                origin=g.task.origin,
                state=g.state(),
                progress=g.progress,
                cpu_seconds=g.cpu,
                cpu_percent=g.cpu_percent,
                wall_seconds=now - g.started_at,
                since_checkpoint_seconds=now - g.checkpoint_at,
                cpu_since_checkpoint_seconds=max(g.cpu - g.checkpoint_cpu, 0.0),
                checkpoint_bytes=g.last_record.size if g.last_record else 0,
                memory_bytes=g.rss,
                last_checkpoint_seq=g.last_record.seq if g.last_record else None,
            )
            for g in self._guests.values()
        )

    def _report_outcome(self, guest: _Guest) -> None:
        task_id, outcome = guest.task.task_id, guest.outcome
        if isinstance(outcome, Completed):
            self._emit(task_id, "completed", f"unit finished ({len(outcome.result)} result bytes)")
        elif isinstance(outcome, Failed):
            self._emit(task_id, "failed", outcome.reason, "error")
        elif isinstance(outcome, Evicted):
            where = f"checkpoint {outcome.checkpoint.seq}" if outcome.checkpoint else "no checkpoint (starts over)"
            self._emit(task_id, "evict", f"guest left this machine with {where}")

    def _emit(self, task_id: str, kind: str, message: str, level: str = "info") -> None:
        self.on_event(GuestEvent(task_id=task_id, kind=kind, message=message, level=level))


async def _start_child(folder: Path) -> _Child:
    """Start a guest process in `folder`: it lowers its priority at once, then waits for GuestStart."""
    to_child_read, to_child_write = os.pipe()
    from_child_read, from_child_write = os.pipe()
    for pipe_end in (to_child_write, from_child_write):
        _widen_pipe(pipe_end)
    command = [
        sys.executable, "-P", "-m", "frost_core.guest.child",
        "--read-fd", str(to_child_read), "--write-fd", str(from_child_write),
    ]
    try:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(to_child_read, from_child_write),
            start_new_session=True,  # its own session, so its own autogroup (see priority.py)
            cwd=folder,
            env=_guest_environment(folder),
        )
    except BaseException:
        os.close(to_child_write)
        os.close(from_child_read)
        raise
    finally:
        os.close(to_child_read)
        os.close(from_child_write)
    return _Child(process, Channel(trio.lowlevel.FdStream(to_child_write), trio.lowlevel.FdStream(from_child_read)))


def _widen_pipe(fd: int) -> None:
    """Give a pipe 1 MiB of buffer where the OS allows (Linux), from the usual 64 KiB.

    A state crosses the pipe in 64 KiB turns otherwise, and the guest, at the lowest priority,
    may wait for a CPU at each turn: on a busy machine a 10 MiB state took ten times longer.
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return  # macOS and the BSDs size pipes themselves
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size for an unprivileged node
        fcntl.fcntl(fd, set_size, PIPE_BUFFER_BYTES)


async def _close_child(child: _Child) -> None:
    """Kill the process group (if still there), wait for it, close every pipe; even when cancelled,
    as nothing else holds the process once its caller let go of it."""
    with trio.CancelScope(shield=True):
        if child.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
        await child.process.wait()
        for stream in (child.process.stdout, child.process.stderr):
            if stream is not None:
                await stream.aclose()
        await child.channel.aclose()


def _fresh_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)


def _guest_environment(scratch: Path) -> dict[str, str]:
    """A small environment: no secrets of the node's, temp files in the scratch folder."""
    env = {
        "PATH": os.defpath,
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code} without reporting why"


def _trio_time(monotonic_deadline: float) -> float:
    """Convert a time.monotonic() deadline to trio's clock."""
    return trio.current_time() + (monotonic_deadline - time.monotonic())

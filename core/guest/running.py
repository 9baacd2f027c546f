"""One running guest: its bookkeeping and the tasks that speak its pipe, watch it and checkpoint it.

The supervisor starts a `RunningGuest` per unit and waits for `finished`; everything that
happens to one guest between its start and its outcome happens here. Its process may have run
other units before (see `warm.py`): what it reports (CPU time, progress, checkpoints, events) is
this unit's own.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from typing import Protocol, TypeVar

import psutil
import trio

from frost_core.api.wording import counted
from frost_core.api.errors import CheckpointError, FrostError, PluginError, ProtocolError
from frost_core.guest import checks, envelope
from frost_core.guest.capture_feed import CaptureFeed, FeedingSink
from frost_core.guest.cgroups import GuestCgroup
from frost_core.guest.kernel_files import PROC_STAT, cpu_seconds
from frost_core.guest.containment import Containment
from frost_core.guest.handoff import KEEP_OUTBOX_BYTES, hand_outbox, open_outbox, sealed_state, send_sealed
from frost_core.guest.limits import address_space_cap, memory_kill_reason, memory_verdict, outbox_room
from frost_core.guest.priority import PriorityView, read_priority
from frost_core.guest.protocol import (
    GuestCheckpoint,
    GuestCheckpointHash,
    GuestCheckpointRequest,
    GuestDenied,
    GuestFailed,
    GuestFileReady,
    GuestFileRefused,
    GuestFileRequest,
    GuestLog,
    GuestProgress,
    GuestResult,
    GuestStart,
)
from frost_core.guest.spawn import Child, close_child
from frost_core.guest.views import (
    Completed,
    Evicted,
    Failed,
    GuestFigures,
    GuestSettings,
    GuestTask,
    InputFile,
    Outcome,
    Stopped,
)
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import encode_plain
from frost_core.policies.checkpoint_interval import young_interval
from frost_core.storage.checkpoints import HEADER_CAP, CheckpointRecord, CheckpointStore, identity_prefix
from frost_core.storage.staging import STAGE_FROM, StagingSink
from frost_core.wire.channel import Channel
from frost_core.wire.framing import encode_frame
from frost_core.wire.lent import LentInterrupted, LentPipe
from frost_core.wire.messages import MAX_MESSAGE_SIZE, BulkBegin, encode_message
from frost_core.wire.pipe import read_bulk_data, read_frame

MAX_LOG_LINE = 1000
CPU_WINDOW = 1.0
PROTOCOL_GRACE = 1.0
STDERR_TAIL = 5

log = logging.getLogger("frost.guest")
T = TypeVar("T")


def settle_handed(commit: Callable[[], CheckpointRecord], outbox: int, *, empty: bool) -> CheckpointRecord:
    """A state handed through the checkpoint memfd `outbox`, made durable or waited for (in a worker thread);
    then, if `empty` (past `handoff.KEEP_OUTBOX_BYTES`), the memfd emptied: a big state's pages are charged to
    its guest, which must not hold it twice, while a smaller one's stay for its next checkpoint."""
    try:
        return commit()
    finally:
        if empty:
            try:
                os.ftruncate(outbox, 0)
            except OSError as error:
                log.debug("a checkpoint memfd stays full: %s", error)


def answer_up_the_pipe(pipe: LentPipe, request_id: int, limit: int,
                       commit: Callable[[bytes, Callable[[], str] | None], T], *,
                       take: Callable[[], bool]) -> tuple[object, T | None]:
    """In a thread, with a guest's pipe lent (`Channel.lend_pipe`): its next message, and where that answers
    checkpoint request `request_id` up the pipe with a state under STAGE_FROM bytes (and `take()` still
    holds), the state read and `commit(state, claimed)`'s outcome: `claimed()` reads the hash the guest sends
    after the state where its answer says so (`hash_follows`; else `claimed` is None), so the commit writes
    the state while the guest still hashes it. Anything else (a handed or staged state, another message) is
    left on the pipe from after the message on, for the loop: (message, None)."""
    pipe.between_frames()
    message = read_frame(pipe)
    if not isinstance(message, GuestCheckpoint) or message.handed or message.request_id != request_id:
        return message, None
    begin = read_frame(pipe)
    if not isinstance(begin, BulkBegin) or begin.size is None or begin.size >= STAGE_FROM or not take():
        pipe.unread(encode_frame(begin.CODE, encode_message(begin)))
        return message, None
    state = read_bulk_data(pipe, max_size=limit, begin=begin)
    if not message.hash_follows:
        return message, commit(state, None)
    hash_after = HashAfterState(pipe, request_id)
    outcome = commit(state, hash_after.claimed)
    hash_after.settle()
    return message, outcome


class HashAfterState:
    """The hash a guest sends after its state (`GuestCheckpoint.hash_follows`), read from its lent pipe when the
    commit asks for it. A pipe that breaks first fails the commit (CheckpointError, which leaves the previous
    checkpoint) and is raised by `settle` once the commit is over, so the slot is never left half written."""

    def __init__(self, pipe: LentPipe, request_id: int) -> None:
        self._pipe, self._request_id = pipe, request_id
        self._read = False
        self._sha256: str | None = None
        self._broken: BaseException | None = None

    def claimed(self) -> str:
        self._take()
        if self._sha256 is None:
            raise CheckpointError(f"the guest's hash after its answer to checkpoint request {self._request_id} "
                                  f"did not come: {self._broken}")
        return self._sha256

    def settle(self) -> None:
        """Read the hash if the commit did not (it failed before it asked), then raise what broke the pipe."""
        self._take()
        if self._broken is not None:
            raise self._broken

    def _take(self) -> None:
        if self._read:
            return
        self._read = True
        try:
            message = read_frame(self._pipe)
        except (ProtocolError, EOFError, LentInterrupted, OSError) as error:
            self._broken = error
            return
        if not isinstance(message, GuestCheckpointHash) or message.request_id != self._request_id:
            self._broken = ProtocolError(f"the guest sent {type(message).__name__} where the hash of checkpoint "
                                         f"request {self._request_id} belongs")
            return
        self._sha256 = message.sha256


class GuestPhase(enum.Enum):
    """Where a running guest is in its life; `PHASE_CHANGES` says which way it may go."""

    RUNNING = "running"      # may use the CPU: starting, stepping, checkpointing, waiting for a file
    PAUSED = "paused"        # frozen (or SIGSTOPped) while its owner wants the CPU
    EVICTING = "evicting"    # asked for its state, killed once it answers or the deadline passes
    ENDED = "ended"          # its outcome is decided and its process group killed


PHASE_CHANGES: Mapping[GuestPhase, frozenset[GuestPhase]] = {
    GuestPhase.RUNNING: frozenset({GuestPhase.PAUSED, GuestPhase.EVICTING, GuestPhase.ENDED}),
    GuestPhase.PAUSED: frozenset({GuestPhase.RUNNING, GuestPhase.EVICTING, GuestPhase.ENDED}),
    GuestPhase.EVICTING: frozenset({GuestPhase.ENDED}),  # an eviction is not taken back
    GuestPhase.ENDED: frozenset(),
}
"""The allowed changes of `RunningGuest.phase`; `RunningGuest.change` refuses the others."""


class GuestHost(Protocol):
    """What a running guest uses of its supervisor: the settings of the moment, the store, the news."""

    settings: GuestSettings
    store: CheckpointStore
    on_checkpoint: Callable[[GuestTask, CheckpointRecord], None] | None
    open_input: Callable[[GuestTask, InputFile], Awaitable[Path]] | None
    containment: Containment

    def next_request_id(self) -> int: ...

    def settle_behind(self, task_id: str, settle: Callable[[], Awaitable[None]]) -> bool: ...

    def take_feed(self, task_id: str) -> CaptureFeed | None: ...

    def emit(self, task_id: str, kind: str, message: str, level: str = "info") -> None: ...


@dataclasses.dataclass(eq=False)
class _Pending:
    """One checkpoint request in flight."""

    request_id: int
    sent_at: float
    received: trio.Event = dataclasses.field(default_factory=trio.Event)
    arrived: trio.Event = dataclasses.field(default_factory=trio.Event)
    """The whole state is off the pipe (set with `received`, or before it while a move still sends it on)."""
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    record: CheckpointRecord | None = None
    identity: dict[str, Any] | None = None
    """The checkpoint's identity when the request let the guest answer through the checkpoint memfd."""


class RunningGuest:
    """Mutable bookkeeping for one running guest; the outside world sees `GuestFigures`."""

    def __init__(self, host: GuestHost, task: GuestTask, resume_from: CheckpointRecord | None,
                 next_seq: int) -> None:
        now = trio.current_time()
        self.host = host
        self.task = task
        self.resume_from = resume_from
        self.last_record = resume_from
        self.next_seq = next_seq
        self.child: Child | None = None
        self.process: trio.Process | None = None
        self.channel: Channel | None = None
        self.outcome: Outcome | None = None
        self.finished = trio.Event()
        self.phase = GuestPhase.RUNNING
        self.killed = False  # SIGKILL sent: its death is ours, not a crash to report
        self.fetching = False  # waiting for an input file is not being stuck
        self.pending: _Pending | None = None
        self.awake = trio.Event()
        """Set unless the guest is paused: what its watcher and checkpoint timer wait on meanwhile."""
        self.awake.set()
        self.started_at = now
        self.progress = 0.0
        self.steps_seen = False
        self.cpu = 0.0
        self.cpu_base = 0.0
        """The process's CPU time when this unit began (a warm process ran units before): not this unit's."""
        self.cgroup_cpu_base = 0.0
        """The same for its cgroup's count, which holds the process's forks."""
        self.cgroup_cpu_seen = 0.0
        """That count as `settle_cpu` last read it."""
        self.cpu_percent = 0.0
        self.rss = 0
        self.progress_cpu = 0.0
        self.asleep_since: float | None = None
        self.checkpoint_at = now
        self.checkpoint_cpu = 0.0
        self.checkpoint_cost = 0.0
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.priority_floor: PriorityView | None = None
        self.cgroup: GuestCgroup | None = None
        """The guest's own cgroup (see containment.py); None where the machine offers none."""
        self.scratch: Path | None = None
        self.fork_refusals = 0
        self.outbox: int | None = None
        """The checkpoint memfd sent to the guest (see handoff.py), once a request let it answer through one."""
        self.outbox_closed = False
        """Its message reader has ended: no checkpoint comes through a memfd any more."""
        self.receiving: trio.CancelScope | None = None
        """The loop's read of the guest's pipe while no checkpoint request is open (see `_receive`)."""
        self.handed_in = False
        """No saved state is still to go on the hand-off socket (a checkpoint memfd sent there goes after it)."""

    @property
    def paused(self) -> bool:
        return self.phase is GuestPhase.PAUSED

    @property
    def evicting(self) -> bool:
        return self.phase is GuestPhase.EVICTING

    def change(self, phase: GuestPhase) -> bool:
        """Go to `phase` if `PHASE_CHANGES` allows it from here; False (and no change) if not."""
        if phase not in PHASE_CHANGES[self.phase]:
            return False
        self.phase = phase
        if phase is GuestPhase.PAUSED:
            self.awake = trio.Event()
        else:
            self.awake.set()
        return True

    def state(self) -> str:
        if isinstance(self.outcome, Failed):
            return "failed"
        if isinstance(self.outcome, Stopped):
            return "stopped"
        if self.evicting or isinstance(self.outcome, Evicted):
            return "evicting"
        if self.paused:
            return "paused"
        if self.pending is not None:
            return "checkpointing"
        return "running" if self.steps_seen else "starting"

    def figures(self, now: float) -> GuestFigures:
        """Live figures from the watcher's latest sample (never blocks)."""
        return GuestFigures(
            task_id=self.task.task_id,
            assignment_id=self.task.assignment_id,
            plugin=self.task.plugin_name,
            origin=self.task.origin,
            state=self.state(),
            progress=self.progress,
            cpu_seconds=self.cpu,
            cpu_percent=self.cpu_percent,
            wall_seconds=now - self.started_at,
            since_checkpoint_seconds=now - self.checkpoint_at,
            cpu_since_checkpoint_seconds=max(self.cpu - self.checkpoint_cpu, 0.0),
            checkpoint_bytes=self.last_record.size if self.last_record else 0,
            memory_bytes=self.rss,
            last_checkpoint_seq=self.last_record.seq if self.last_record else None,
        )

    def emit(self, kind: str, message: str, level: str = "info") -> None:
        self.host.emit(self.task.task_id, kind, message, level)

    # --- starting and ending -------------------------------------------------------------------

    async def start(self, child: Child, scratch: Path, nursery: trio.Nursery, *, paused: bool,
                    cgroup: GuestCgroup | None = None, readable: tuple[str, ...] = (),
                    ready: Callable[[], Awaitable[None]] | None = None) -> None:
        """Give `child` (already in `cgroup`) this unit: start the tasks that serve it in `nursery`, then
        send GuestStart; the guest may read only `readable` besides `scratch` (all where it is empty).

        `ready`: awaited between GuestStart and the state (the guest settles in and loads its plugin
        meanwhile); if it raises CheckpointError, the guest ends without its state."""
        task, settings = self.task, self.host.settings
        self.child = child
        process = self.process = child.process
        self.channel = child.channel
        self.cgroup = child.cgroup = cgroup
        self.scratch = child.scratch = scratch
        warm = ""
        if child.units:
            self.cpu_base, self.cgroup_cpu_base, self.rss = child.cpu_seen, child.cgroup_cpu_seen, child.rss
            self.priority_floor = child.floor
            self.fork_refusals = child.fork_refusals
            warm = f", warm: its unit {child.units + 1}"
        if paused:
            self.change(GuestPhase.PAUSED)
        if self.paused:  # also when the pause came while its process was being readied: nothing to stop then
            self._freeze()
        resumed = f" from checkpoint {self.resume_from.seq}" if self.resume_from else ""
        self.emit("start", f"guest {task.plugin_name} unit {task.unit.index} started{resumed} (pid {process.pid}{warm})")
        nursery.start_soon(self._read_messages)
        nursery.start_soon(self._forward_output, process.stdout, "info")
        nursery.start_soon(self._forward_output, process.stderr, "warning")
        nursery.start_soon(self._watch, child.seen())
        nursery.start_soon(self._checkpoint_periodically)
        state = self.resume_from.state if self.resume_from else b""
        handing = bool(state) and child.handoff is not None
        start = GuestStart(
            task_id=task.task_id,
            plugin_path=str(task.plugin_path),
            unit=encode_plain(task.unit.to_plain(), "work unit", MAX_MESSAGE_SIZE - 4096),
            max_state_bytes=settings.max_state_bytes,
            progress_interval=settings.progress_interval,
            resume=self.resume_from is not None,
            scratch=str(scratch),
            address_space=address_space_cap(task.unit.memory_bytes, settings.address_space_baseline_bytes),
            readable=readable,
            handed=len(state) if handing else 0,
        )
        self.handed_in = not handing
        sealed: list[int] = []
        try:
            await self.channel.send_bulk(start, self._hand_over(child, state, sealed) if handing else state,
                                         ready=self._sealing(state, sealed, ready) if handing else ready)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # The guest died before reading; the message reader reports why.
        except CheckpointError as error:
            self.finish(Failed(f"checkpoint: {error.message}", retryable=True))
        finally:
            self.handed_in = True
            for fd in sealed:
                os.close(fd)  # the guest's copy of the fd (in flight, then received) keeps it alive

    def _sealing(self, state: bytes, sealed: list[int],
                 ready: Callable[[], Awaitable[None]] | None) -> Callable[[], Awaitable[None]]:
        """`ready` with `state` copied into a sealed memfd beside it (into `sealed`; nothing there if that failed).

        Both run while the guest settles in and loads its plugin, which the GuestStart before them
        set going: a moved-in guest's state is copied for it while it is made durable here (one
        pass over 100 MiB, ~45 ms, that came after the sync), and is handed over only after."""

        async def seal() -> None:
            try:
                sealed.append(await trio.to_thread.run_sync(sealed_state, state))
            except OSError as error:
                log.debug("task %s: its state goes through the pipe: %s", self.task.task_id, error)

        async def sealed_and_ready() -> None:
            refused: list[CheckpointError] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(seal)
                if ready is not None:
                    try:
                        await ready()
                    except CheckpointError as error:  # raised as itself once the copy is done, not in a group
                        refused.append(error)
            if refused:
                raise refused[0]

        return sealed_and_ready

    async def _hand_over(self, child: Child, state: bytes, sealed: list[int]) -> AsyncIterator[bytes]:
        """The bulk data after a GuestStart that announced `state` handed over: none once its `sealed` memfd
        went to `child` (see handoff.py), else the state itself; a failure costs the pipe's speed, never the unit.
        The guest takes the fd only after this data's end."""
        assert child.handoff is not None
        try:
            if not sealed:
                yield state  # (`_sealing` said why)
                return
            send_sealed(child.handoff, sealed[0])
        except OSError as error:
            log.debug("task %s: its state goes through the pipe: %s", self.task.task_id, error)
            yield state
        finally:
            self.handed_in = True

    async def reap(self) -> None:
        self.kill()
        if self.child is not None:
            await close_child(self.child)
        if self.cgroup is not None:
            self.report_fork_refusals()  # a guest may end between two looks of the watcher
            self.settle_cpu()
            await trio.to_thread.run_sync(self.cgroup.remove)  # waits for the kernel to empty it

    def settle_cpu(self) -> None:
        """Count what its cgroup saw too (forks, and the last steps after the watcher's last look)."""
        if self.cgroup is not None:
            self.cgroup_cpu_seen = self.cgroup.cpu_seconds() or 0.0
            self.cpu = max(self.cpu, self.cgroup_cpu_seen - self.cgroup_cpu_base)

    def finish(self, outcome: Outcome, *, kill: bool = True) -> None:
        """Decide how the guest ended (first decision wins) and stop its process group at once,
        unless `kill` is False: a completed unit's process waits for the next unit (see `warm.py`)."""
        if self.outcome is not None:
            return
        if kill:
            self.kill()
        self.outcome = outcome
        self.change(GuestPhase.ENDED)
        self.finished.set()

    def kill(self) -> None:
        """SIGKILL the guest and everything it forked (its cgroup holds those that left its process group)."""
        self.killed = True
        if self.cgroup is not None:
            self.cgroup.kill()
        self.signal(signal.SIGKILL)

    def signal(self, signum: int) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass  # Already gone: the reader reports how it ended.

    # --- messages from the guest -------------------------------------------------------------

    async def _read_messages(self) -> None:
        assert self.channel is not None
        try:
            while True:
                message = await self._receive()
                if message is not None:
                    await self._handle(message)
        except trio.EndOfChannel:
            problem = None
        except ProtocolError as error:
            problem = error.message
        finally:
            self._close_outbox()  # only this task copies from it, and it is done
        if self.killed or self.outcome is not None:
            return
        assert self.process is not None
        if problem is not None:
            # A guest that died mid-frame crashed; one still alive after this broke the protocol.
            with trio.move_on_after(PROTOCOL_GRACE):
                await self.process.wait()
            if self.process.returncode is None:
                self.finish(Failed(f"protocol: the guest broke the pipe protocol: {problem}", retryable=False))
                return
        code = await self.process.wait()
        if code == -signal.SIGKILL and self.cgroup is not None and self.cgroup.memory_kills():
            reason = memory_kill_reason(self.task.unit.memory_bytes, self.host.settings.memory_slack_bytes)
            self.finish(Failed(reason, retryable=True))  # the kernel's verdict, counted against max_retries
            return
        self.finish(checks.crash_failure(code, list(self.stderr_tail)))

    async def _receive(self) -> object | None:
        """The guest's next message, or None for none yet. While a checkpoint request is open (and no eviction),
        a thread reads the pipe (`_answer`) and commits a state that comes up it: its arrival wakes that
        thread, not this loop, and the loop learns once, of the durable checkpoint (None then: it is taken).
        Otherwise the loop reads, until a request opens (`_request_checkpoint` cancels that read)."""
        assert self.channel is not None
        pending = self.pending
        if pending is not None and not pending.received.is_set() and not self.evicting and self.channel.lendable:
            try:
                message, taken = await self.channel.lend_pipe(functools.partial(self._answer, pending))
            except EOFError:
                pending.done.set()
                raise trio.EndOfChannel("the guest closed its pipe") from None
            except BaseException:
                pending.done.set()  # no state: an eviction that waits for it takes the last checkpoint
                if self.channel.torn:
                    self.kill()  # it stopped mid-frame: its pipe can carry nothing more, for this unit or another
                raise
            if taken is None:
                return message
            self._first_message()
            self.progress = message.progress  # type: ignore[attr-defined]
            pending.arrived.set()
            pending.received.set()
            self._stored(pending, message, *taken)  # type: ignore[arg-type]
            return None
        message = None
        with trio.CancelScope() as self.receiving:
            message = await self.channel.receive()
        self.receiving = None
        return message

    def _answer(self, pending: _Pending,
                pipe: LentPipe) -> tuple[object, tuple[float, CheckpointRecord | CheckpointError] | None]:
        """In a thread, with the guest's pipe lent (`answer_up_the_pipe`): the state committed, with the guest's
        CPU time and the identity (its time) at its arrival, unless an eviction began (a move sends it on as
        it comes: the loop's). The request stays open meanwhile, so `next_seq` cannot change."""

        def commit(data: bytes, claimed: Callable[[], str] | None) -> tuple[float, CheckpointRecord | CheckpointError]:
            cpu = self._sample_cpu()
            if claimed is not None and pending.identity is None:
                raise ProtocolError("the guest sent the hash of a checkpoint it was not asked to hash")
            try:
                if claimed is None:
                    return cpu, self.host.store.commit(**self._identity(), state=data)
                return cpu, self.host.store.commit_claimed(data, claimed, **pending.identity)
            except CheckpointError as error:
                return cpu, error

        return answer_up_the_pipe(pipe, pending.request_id, self.host.settings.max_state_bytes, commit,
                                  take=lambda: not self.evicting)

    def _first_message(self) -> None:
        assert self.process is not None
        if self.priority_floor is None:
            # The child lowers itself before it sends anything: what it runs at now is its floor.
            self.priority_floor = read_priority(self.process.pid)

    async def _handle(self, message: object) -> None:
        assert self.channel is not None and self.process is not None
        self._first_message()
        if isinstance(message, GuestProgress):
            self.progress = message.progress
            self.steps_seen = self.steps_seen or message.steps > 0
            self.progress_cpu = self._sample_cpu()
            self.asleep_since = None
        elif isinstance(message, GuestCheckpoint):
            await self._take_checkpoint(message)
        elif isinstance(message, GuestResult):
            data = await self.channel.receive_bulk_data(max_size=MAX_RESULT_BYTES)
            try:
                result, files = envelope.unpack(envelope.RESULT, data)
            except PluginError as error:
                raise ProtocolError(error.message) from error
            self.progress = 1.0
            self._sample_cpu()   # its last figure, for the ledger: the process is killed or waits for its next unit
            self.finish(Completed(result, files), kill=False)
        elif isinstance(message, GuestFileRequest):
            self.fetching = True
            try:
                reply = await self._find_input(message.name)
            finally:
                self.fetching = False
                self.asleep_since = None
            try:
                await self.channel.send(reply)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # The guest is gone; the reader reports how it ended.
        elif isinstance(message, GuestFailed):
            self.finish(checks.reported_failure(message.kind, message.reason))
        elif isinstance(message, GuestLog):
            self.emit("guest-log", message.text, message.level)
        elif isinstance(message, GuestDenied):
            self.emit("refused", f"guest {self.task.plugin_name} unit {self.task.unit.index} was refused: "
                      f"{message.attempt} ({message.reason})", "warning")
        else:
            raise ProtocolError(f"the guest sent an unexpected {type(message).__name__}")

    async def _find_input(self, name: str) -> GuestFileReady | GuestFileRefused:
        """Answer a guest's open_input; meanwhile the guest waits mid-step, deferring checkpoint requests."""
        task = self.task
        wanted = next((f for f in task.inputs if f.name == name), None)
        if wanted is None:
            known = ", ".join(f.name for f in task.inputs) or "none"
            return GuestFileRefused(name=name, reason=f"no input file named {name!r} (this assignment has: {known})",
                                    retryable=False)
        if self.host.open_input is None:
            return GuestFileRefused(name=name, reason="this node cannot fetch input files", retryable=True)
        try:
            path = await self.host.open_input(task, wanted)
        except (FrostError, OSError) as error:   # (OSError: the cache's disk, full or failing)
            why = error.message if isinstance(error, FrostError) else f"this node could not keep it: {error}"
            self.emit("error", f"input file {name}: {why}", "warning")
            return GuestFileRefused(name=name, reason=f"input file {name!r} is unavailable: {why}", retryable=True)
        assert self.scratch is not None
        try:
            path = await trio.to_thread.run_sync(self.host.containment.hand_over, path, self.scratch)
        except OSError as error:
            self.emit("error", f"input file {name}: cannot hand it to the guest: {error}", "warning")
            return GuestFileRefused(name=name, reason=f"input file {name!r} could not be handed to the guest: {error}",
                                    retryable=True)
        self.emit("guest-log", f"input file {name} ready ({wanted.size} bytes)")
        return GuestFileReady(name=name, path=str(path))

    def _identity(self) -> dict[str, Any]:
        """The identity fields of the checkpoint the guest is asked for now (`checkpoints.IDENTITY`)."""
        task = self.task
        return dict(task_id=task.task_id, plugin_name=task.plugin_name, plugin_version=task.plugin_version,
                    plugin_hash=task.plugin_hash, unit_index=task.unit.index, epoch=task.epoch,
                    seq=self.next_seq, taken_at=time.time())

    async def _take_checkpoint(self, message: GuestCheckpoint) -> None:
        """Receive the state the guest sends for the open request; a big one is written to disk and
        hashed while it comes up the pipe, so only the fsync and the rename wait for its end."""
        assert self.channel is not None
        pending = self.pending
        if pending is None or pending.request_id != message.request_id:
            raise ProtocolError(f"the guest answered checkpoint request {message.request_id}, which is not open")
        if message.handed:
            await self._take_handed(pending, message)
            return
        store = self.host.store
        identity = self._identity()
        staging = StagingSink(functools.partial(store.receiving, **identity), from_size=STAGE_FROM)
        feed = self.host.take_feed(self.task.task_id) if self.evicting else None  # a move sends it on as it comes
        sink = staging if feed is None else FeedingSink(staging, feed, identity, pending.arrived.set)
        behind = False
        try:
            try:
                data = await self.channel.receive_bulk_data(max_size=self.host.settings.max_state_bytes, sink=sink)
            except BaseException:
                pending.done.set()  # no state: an eviction that waits for it takes the last checkpoint
                raise
            self.progress = message.progress
            pending.arrived.set()
            pending.received.set()
            if self.evicting:
                behind = await self._settle_behind(pending, message, identity, data, staging, feed)
            if not behind:
                await self._store_checkpoint(pending, message, functools.partial(
                    store.commit, **identity, state=data, staged=staging.incoming))
                if feed is not None and pending.record is not None and pending.record.seq == identity["seq"]:
                    feed.seal(pending.record.sha256)
            if message.hash_follows:  # taken by the guest, unused: this path hashed the state as it came
                await self._receive_hash(message.request_id)  # (after the commit: an eviction may kill it first)
        finally:
            if feed is not None:
                feed.close("the guest's state did not come whole")  # (a no-op once sealed)
            if not behind:
                await staging.abort()  # a no-op once the checkpoint is in place

    async def _take_handed(self, pending: _Pending, message: GuestCheckpoint) -> None:
        """The state is in the checkpoint memfd: copied to disk kernel to kernel (never through this process's
        memory) while the guest hashes it (a big one while the guest still writes it), its hash coming after."""
        assert self.channel is not None
        if pending.identity is None or self.outbox is None:
            raise ProtocolError("the guest answered through a checkpoint memfd it was not asked to use")
        store, limit, size = self.host.store, self.host.settings.max_state_bytes, message.handed
        sha256: Future[str] = Future()
        commit = store.copy_handed(self.outbox, size, limit, sha256, **pending.identity).result
        try:
            sha256.set_result(await self._receive_hash(message.request_id))
        except BaseException:
            sha256.set_exception(CheckpointError("the guest's hash of its checkpoint never came"))
            pending.done.set()  # no state: an eviction that waits for it takes the last checkpoint
            raise
        self.progress = message.progress
        pending.arrived.set()  # the guest may go now: the state stays in the memfd this node holds
        pending.received.set()
        await self._store_checkpoint(pending, message, functools.partial(
            settle_handed, commit, self.outbox, empty=size > KEEP_OUTBOX_BYTES))

    async def _receive_hash(self, request_id: int) -> str:
        assert self.channel is not None
        message = await self.channel.receive()
        if not isinstance(message, GuestCheckpointHash) or message.request_id != request_id:
            raise ProtocolError(f"the guest sent {type(message).__name__} where the hash of checkpoint request "
                                f"{request_id} belongs")
        return message.sha256

    def _open_outbox(self) -> bool:
        """Whether the guest may answer the next request through its checkpoint memfd, sending it one if it has
        none yet. Not for a move's capture (the node sends that on as it comes up the pipe), nor before the
        unit's saved state has been handed over (it comes first on that socket)."""
        if self.outbox is not None:
            return not self.evicting
        handoff = self.child.handoff if self.child is not None else None
        if handoff is None or self.evicting or not self.handed_in or self.outbox_closed:
            return False
        try:
            fd = open_outbox()
        except OSError as error:
            log.debug("task %s: checkpoints go through the pipe: %s", self.task.task_id, error)
            return False
        try:
            hand_outbox(handoff, fd)
        except OSError as error:
            os.close(fd)
            log.debug("task %s: checkpoints go through the pipe: %s", self.task.task_id, error)
            return False
        self.outbox = fd
        return True

    def _outbox_room(self) -> int:
        """The biggest state the guest may put in its checkpoint memfd now, as its memory stands."""
        kept = os.fstat(self.outbox).st_size if self.outbox is not None else 0
        return outbox_room(self.rss, kept, self.task.unit.memory_bytes, self.host.settings.memory_slack_bytes)

    def _close_outbox(self) -> None:
        self.outbox_closed = True
        if self.outbox is not None:
            os.close(self.outbox)
            self.outbox = None

    async def _settle_behind(self, pending: _Pending, message: GuestCheckpoint, identity: dict,
                             data: bytes, staging: StagingSink, feed: CaptureFeed | None) -> bool:
        """A capture leaves as soon as its hash is known (or, with a `feed`, while it arrives, its hash
        sealed after it): the move sends it while this disk syncs and installs it behind (the
        supervisor's `settle_behind`, which the move waits for before it lets go of the unit here).
        False where nothing can run behind: the caller writes it first then."""
        incoming = staging.incoming
        try:
            if incoming is not None:  # hashed while it came up the pipe: only the last piece is left
                digest = await trio.to_thread.run_sync(incoming.digest, data)
                record = CheckpointRecord(**identity, state=data, sha256=digest, verified=True)
            else:
                record = await trio.to_thread.run_sync(functools.partial(CheckpointRecord.seal, **identity, state=data))
        except OSError:
            return False  # the durable write reports it, as for any checkpoint
        store = self.host.store

        def commit() -> CheckpointRecord:
            store.write(dataclasses.replace(record, staged=incoming))
            return record

        async def settle() -> None:
            try:
                await self._store_checkpoint(pending, message, commit)
            finally:
                await staging.abort()

        if not self.host.settle_behind(self.task.task_id, settle):
            return False
        pending.record = record
        if feed is not None:
            feed.seal(record.sha256)
        pending.done.set()
        return True

    async def _store_checkpoint(self, pending: _Pending, message: GuestCheckpoint,
                                commit: Callable[[], CheckpointRecord]) -> None:
        cpu = self._sample_cpu()
        try:
            record: CheckpointRecord | CheckpointError = await trio.to_thread.run_sync(commit)
        except CheckpointError as error:
            record = error
        except BaseException:
            self.pending = None
            pending.done.set()
            raise
        self._stored(pending, message, cpu, record)

    def _stored(self, pending: _Pending, message: GuestCheckpoint, cpu: float,
                record: CheckpointRecord | CheckpointError) -> None:
        """The bookkeeping of a checkpoint made durable (or not: `record` is why) for the open request."""
        try:
            if isinstance(record, CheckpointError):
                self.emit("error", record.message, "warning")
                return
            self.next_seq += 1
            self.last_record = pending.record = record
            self.checkpoint_at = trio.current_time()
            self.checkpoint_cpu = cpu
            self.checkpoint_cost = self.checkpoint_at - pending.sent_at
            self.emit("checkpoint", f"checkpoint {record.seq}: {record.size} bytes in "
                      f"{self.checkpoint_cost * 1000:.0f} ms (encode {message.encode_seconds * 1000:.0f} ms)")
            if self.host.on_checkpoint is not None:
                self.host.on_checkpoint(self.task, record)
        finally:
            self.pending = None
            pending.done.set()

    async def _forward_output(self, stream: trio.abc.ReceiveStream | None, level: str) -> None:
        """Plugin prints become guest-log events, at most `log_lines_per_second` per second."""
        if stream is None:
            return
        budget, window, dropped = self.host.settings.log_lines_per_second, trio.current_time(), 0
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
                    self.stderr_tail.append(line)
                now = trio.current_time()
                if now - window >= 1.0:
                    if dropped:
                        self.emit("guest-log", f"({dropped} lines of output dropped)", "warning")
                    budget, window, dropped = self.host.settings.log_lines_per_second, now, 0
                if budget > 0:
                    budget -= 1
                    self.emit("guest-log", line, level)
                else:
                    dropped += 1

    # --- watching ------------------------------------------------------------------------------

    async def _watch(self, process: psutil.Process) -> None:
        """Memory, priority and progress checks every `watch_interval`; the figures come from here.

        A paused guest is stopped: it cannot grow, raise its priority or make progress, so the
        watcher sleeps until it runs again instead of looking every `watch_interval`.
        """
        window: deque[tuple[float, float]] = deque()
        if self.child is not None and self.child.units:
            # A warm process was looked at as its last unit ended (see `GuestSupervisor._keep_warm`): its next
            # look is due in an interval, and most units of a sweep of short ones are over by then.
            await trio.sleep(self.host.settings.watch_interval)
        while True:
            if self.paused:
                self.cpu_percent = 0.0
                window.clear()
                await self.awake.wait()
            settings = self.host.settings
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    rss = process.memory_info().rss
                    status = process.status()
            except psutil.Error:
                return  # Gone: the message reader reports how it ended.
            now = trio.current_time()
            self.cpu = times.user + times.system - self.cpu_base
            self.rss = rss
            window.append((now, self.cpu))
            while now - window[0][0] > CPU_WINDOW:
                window.popleft()
            self.cpu_percent = checks.cpu_percent(window[0], now, self.cpu)
            # A memory cgroup is the cap where there is one: it counts forks and page cache too.
            verdict = None if self._memory_contained() else memory_verdict(
                rss, self.task.unit.memory_bytes, settings.memory_slack_bytes)
            if verdict:
                self.finish(Failed(verdict, retryable=False))
                return
            self.report_fork_refusals()
            raised = self.priority_floor and read_priority(process.pid).raised_from(self.priority_floor)
            if raised:
                self.finish(Failed(f"priority: the guest raised its priority ({raised}); guests must "
                                   "stay at the lowest priority", retryable=False))
                return
            stuck = self._stuck(status)
            if stuck:
                self.finish(Failed(stuck, retryable=False))
                return
            await trio.sleep(settings.watch_interval)

    def _memory_contained(self) -> bool:
        return self.cgroup is not None and "memory" in self.cgroup.folders

    def report_fork_refusals(self) -> None:
        refusals = self.cgroup.fork_refusals() if self.cgroup is not None else 0
        if refusals > self.fork_refusals:
            self.emit("error", f"the guest hit its process limit ({self.host.settings.max_processes} processes and "
                      f"threads): {counted(refusals, 'fork')} refused so far", "warning")
            self.fork_refusals = refusals

    def _stuck(self, status: str) -> str | None:
        if self.paused or self.evicting or self.fetching:
            return None
        now = trio.current_time()
        self.asleep_since = checks.asleep_since(self.asleep_since, status, now)
        return checks.stuck_reason(
            cpu_since_progress=self.cpu - self.progress_cpu,
            asleep_for=None if self.asleep_since is None else now - self.asleep_since,
            step_timeout=self.host.settings.step_timeout,
        )

    def _sample_cpu(self) -> float:
        if self.child is None:
            return self.cpu
        try:
            if PROC_STAT:
                used = cpu_seconds(self.child.process.pid)
            else:   # macOS, BSD
                times = self.child.seen().cpu_times()
                used = times.user + times.system
        except (OSError, psutil.Error):   # gone
            return self.cpu
        self.cpu = used - self.cpu_base
        return self.cpu

    # --- checkpoints ---------------------------------------------------------------------------

    async def _checkpoint_periodically(self) -> None:
        attempted = self.checkpoint_at
        while True:
            settings = self.host.settings
            interval = young_interval(
                self.checkpoint_cost, settings.interruptions_per_hour,
                lower=settings.min_checkpoint_interval, upper=settings.max_checkpoint_interval,
            )
            await trio.sleep_until(max(self.checkpoint_at, attempted) + interval)
            if self.phase in (GuestPhase.EVICTING, GuestPhase.ENDED):
                await trio.sleep_forever()  # the eviction takes its checkpoint, then the guest ends
            if self.paused:
                await self.awake.wait()  # a stopped guest cannot answer; ask once it runs again
                continue
            attempted = trio.current_time()
            await self.checkpoint(settings.checkpoint_deadline)

    async def _request_checkpoint(self) -> _Pending | None:
        """The checkpoint request in flight, sending a new one if none is; None if the guest is gone."""
        if self.channel is None:
            return None  # still starting: nothing to ask yet
        if self.pending is None:
            pending = self.pending = _Pending(self.host.next_request_id(), trio.current_time())
            request = GuestCheckpointRequest(request_id=pending.request_id)
            identity = self._identity()
            prefix = identity_prefix(identity)
            if not self.evicting and len(prefix) <= HEADER_CAP:  # (a longer one fails either way)
                pending.identity = identity  # the guest hashes its state under it
                room = self._outbox_room()
                request = dataclasses.replace(request, hash_prefix=prefix,
                                              outbox_room=room if room and self._open_outbox() else 0)
            try:
                # Shielded: a frame cut by a cancel would garble the pipe a warm process keeps for its next unit.
                with trio.CancelScope(shield=True):
                    await self.channel.send(request)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.pending = None
            else:
                if self.receiving is not None:
                    self.receiving.cancel()  # the reader hands the pipe to a thread for the answer (`_receive`)
        return self.pending

    async def checkpoint(self, deadline: float) -> CheckpointRecord | None:
        """Ask for the state at the next migration point; the last durable checkpoint if it is late."""
        pending = await self._request_checkpoint()
        if pending is None:
            return self.last_record
        with trio.move_on_after(deadline):
            await pending.received.wait()
        if not pending.received.is_set():
            self.emit("error", f"the guest did not answer a checkpoint request within "
                      f"{deadline:g} s; the last checkpoint stands", "warning")
            return self.last_record
        await pending.done.wait()
        return pending.record or self.last_record

    # --- the owner's commands ------------------------------------------------------------------

    def pause(self) -> None:
        """Stop the guest now (its cgroup frozen, or SIGSTOP), unless it is leaving or gone."""
        if not self.change(GuestPhase.PAUSED):
            return
        self._freeze()
        self.emit("pause", "guest paused")

    def resume(self) -> None:
        """Let a paused guest run again (thawed, or SIGCONT)."""
        if not self.paused or not self.change(GuestPhase.RUNNING):
            return
        self._thaw()
        self.asleep_since = None  # time spent stopped is not time spent stuck
        self.emit("resume", "guest resumed")

    def _freeze(self) -> None:
        """Freeze the guest's whole cgroup at once; SIGSTOP its process group where there is no freezer."""
        if self.cgroup is not None and self.cgroup.can_freeze:
            try:
                self.cgroup.freeze()
                return
            except OSError as error:
                self.emit("error", f"could not freeze the guest's cgroup ({error}); stopping it by signal", "warning")
        self.signal(signal.SIGSTOP)

    def _thaw(self) -> None:
        if self.cgroup is not None and self.cgroup.can_freeze:
            try:
                self.cgroup.thaw()
            except OSError as error:
                self.emit("error", f"could not thaw the guest's cgroup: {error}", "warning")
        self.signal(signal.SIGCONT)

    async def evict(self, deadline: float) -> None:
        """Checkpoint within `deadline` and stop: the outcome is Evicted with that checkpoint or the last."""
        was_paused = self.paused
        if not self.change(GuestPhase.EVICTING):
            return
        self.emit("evict", "evicting: checkpoint now, then leave")
        if was_paused:
            # It must run to answer; at idle priority that costs the owner nothing noticeable.
            self._thaw()
        record = await self._checkpoint_then_kill(deadline)
        if record is not None:  # it leaves: a state handed through the memfd is read back once, off the loop
            record = await trio.to_thread.run_sync(record.loaded)
        self.finish(Evicted(record, progress=self.progress))
        if self.process is not None:
            await self.process.wait()  # gone, not just signalled, when evict() returns

    async def _checkpoint_then_kill(self, deadline: float) -> CheckpointRecord | None:
        pending = await self._request_checkpoint()
        if pending is None:
            self._sample_cpu()
            self.kill()
            return self.last_record
        with trio.move_on_after(deadline):
            await pending.arrived.wait()  # (a move may still be sending it on: the guest need not wait for that)
        self._sample_cpu()  # its last CPU time, which its Evicted outcome carries
        self.kill()  # the state is in hand (or late): free the CPU before the disk write
        if pending.arrived.is_set():
            await pending.done.wait()
        return pending.record or self.last_record


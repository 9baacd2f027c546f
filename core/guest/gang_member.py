"""The node's handle on one gang member in a guest: start it, step it, checkpoint it at a barrier, end it.

A member runs in the sandbox a unit's guest gets (its own cgroup and scratch folder, confined
files, no network, another user, the lowest priority: `containment`, `spawn`), but the node
drives it one request at a time (see `member.py` for the child's side): `step` hands it its
inbox and returns its answer, `checkpoint` returns its MemberCheckpoint at the barrier,
`finish` its result. Plugin code shares the child's process, so every answer is checked here
again. What a lost member means for its gang (a restart from the last global checkpoint) is
the gang coordinator's business: `evict` only stops it, at once.

Errors: PluginError when the plugin broke the contract or its memory cap (the gang fails the same anywhere);
trio.BrokenResourceError when the member is gone (evicted, killed, crashed, or it failed for a
reason another host may not have); ProtocolError when its pipe carried garbage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import os
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import psutil
import trio

from frost_core.api.errors import ConfigError, PluginError, ProtocolError
from frost_core.guest import checks
from frost_core.guest.cgroups import GuestCgroup
from frost_core.guest.containment import Containment
from frost_core.guest.inbox import encode_inbox
from frost_core.guest.limits import address_space_cap, memory_kill_reason
from frost_core.guest.running import MAX_LOG_LINE, STDERR_TAIL   # a member's guest reports like a unit's
from frost_core.guest.protocol import (
    MAX_ANSWER_BYTES,
    GuestDenied,
    GuestFailed,
    GuestLog,
    GuestMemberCheckpoint,
    GuestMemberCheckpointRequest,
    GuestMemberFinish,
    GuestMemberReady,
    GuestMemberResult,
    GuestMemberStart,
    GuestSuperstep,
    GuestSuperstepAnswer,
)
from frost_core.guest.spawn import Child, close_child, fresh_folder, remove_folder, start_child
from frost_core.guest.views import GuestEvent, GuestSettings
from frost_core.plugin.gang import Inbox, MemberCheckpoint, Superstep
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.storage.checkpoints import check_task_id
from frost_core.wire.messages import MAX_MESSAGE_SIZE, Message


@dataclasses.dataclass(frozen=True)
class MemberSpec:
    """Member `rank` of a gang of `size`: its location-independent task id, plugin, parameters and memory need."""

    task_id: str
    plugin_path: str
    params: Mapping[str, object]
    rank: int
    size: int
    memory_bytes: int


class MemberPhase(enum.Enum):
    """What a member's guest is doing: the UI shows it, `pause`/`evict` go by it."""

    WAITING = "waiting"          # blocked on its pipe between two requests: no CPU
    STEPPING = "stepping"        # running a superstep
    CHECKPOINTING = "checkpointing"
    FINISHING = "finishing"
    PAUSED = "paused"            # frozen (or SIGSTOPped) while its owner wants the CPU
    ENDED = "ended"              # evicted, stopped, failed or finished: its process is gone


@dataclasses.dataclass(frozen=True)
class MemberFigures:
    """Live figures of one member's guest, as a unit guest's `GuestFigures`."""

    task_id: str
    rank: int
    phase: str
    superstep: int
    """The superstep it runs next."""
    cpu_seconds: float
    memory_bytes: int


class MemberGuest:
    """One gang member's guest process; made by `open_member`, which also ends it."""

    def __init__(self, spec: MemberSpec, child: Child, cgroup: GuestCgroup | None, *, superstep: int,
                 settings: GuestSettings, emit: Callable[..., None]) -> None:
        self.spec = spec
        self.settings = settings
        self.child = child
        self.cgroup = cgroup
        self.superstep = superstep
        """The superstep it runs next (where its checkpoint left it, or 0)."""
        self.emit = emit
        self.phase = MemberPhase.WAITING
        self.busy = MemberPhase.WAITING
        """What it does while paused, so `resume` knows what to go back to."""
        self.done = False
        self.cpu = 0.0
        self.rss = 0
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.ready = False
        """Whether it said it is up (GuestMemberReady): its step timeout counts from then, not during its start."""
        self.step_cpu = 0.0
        """Its CPU time when its running superstep was asked for (or when it became ready, if later)."""
        self._turn = trio.Lock()
        self._gone: str | None = None
        self._fault: str | None = None
        """Why this node stopped it for a fault of the plugin's (the same anywhere), if it did."""

    @property
    def pid(self) -> int:
        return self.child.process.pid

    async def step(self, inbox: Inbox) -> Superstep:
        """Run its next superstep on `inbox`; its answer (state None): the checked outbox and done."""
        superstep, sent = self.superstep, encode_inbox(inbox, self.spec.size)
        self._sample()
        self.step_cpu = self.cpu
        async with self._request(MemberPhase.STEPPING):
            await self.child.channel.send_bulk(GuestSuperstep(superstep=superstep), sent)
            header, data = await self._answer(GuestSuperstepAnswer, MAX_ANSWER_BYTES)
            self._expect(header.superstep, superstep)
            answer = Superstep.from_plain(self._decode(data, "its answer"), self.spec.rank, self.spec.size, superstep)
            if answer.state is not None:
                raise ProtocolError(f"superstep {superstep}: rank {self.spec.rank} sent its state with its answer")
        self.superstep, self.done = superstep + 1, answer.done
        return answer

    async def checkpoint(self, inbox: Inbox) -> bytes:
        """Its MemberCheckpoint at this barrier (state before its next superstep, and `inbox` for it), checked."""
        superstep, sent = self.superstep, encode_inbox(inbox, self.spec.size)
        async with self._request(MemberPhase.CHECKPOINTING):
            await self.child.channel.send_bulk(GuestMemberCheckpointRequest(superstep=superstep), sent)
            header, data = await self._answer(GuestMemberCheckpoint, self.settings.max_state_bytes)
            self._expect(header.superstep, superstep)
            checkpoint = MemberCheckpoint.from_bytes(data, self.spec.size)
            if (checkpoint.rank, checkpoint.superstep) != (self.spec.rank, superstep):
                raise ProtocolError(f"rank {self.spec.rank} answered with the checkpoint of rank {checkpoint.rank} "
                                    f"before superstep {checkpoint.superstep}, not {superstep}")
        return data

    async def finish(self) -> Any:
        """Its `finish` result, once its gang said done; its process then ends."""
        if not self.done:
            raise ProtocolError(f"rank {self.spec.rank} cannot finish before its gang said done")
        superstep = self.superstep - 1
        async with self._request(MemberPhase.FINISHING):
            await self.child.channel.send(GuestMemberFinish(superstep=superstep))
            header, data = await self._answer(GuestMemberResult, MAX_RESULT_BYTES)
            self._expect(header.superstep, superstep)
            result = self._decode(data, "its result")
        self.end("finished")  # it exits by itself once its result is sent
        return result

    # --- the owner's commands ------------------------------------------------------------------

    def pause(self) -> None:
        """Stop it now (its cgroup frozen, or SIGSTOP); a request under way waits until `resume`."""
        if self.phase in (MemberPhase.PAUSED, MemberPhase.ENDED):
            return
        self.busy, self.phase = self.phase, MemberPhase.PAUSED
        if self.cgroup is not None and self.cgroup.can_freeze:
            try:
                self.cgroup.freeze()
                return
            except OSError as error:
                self.emit("error", f"could not freeze the member's cgroup ({error}); stopping it by signal", "warning")
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.phase is not MemberPhase.PAUSED:
            return
        self.phase = self.busy
        if self.cgroup is not None and self.cgroup.can_freeze:
            with contextlib.suppress(OSError):
                self.cgroup.thaw()
        self._signal(signal.SIGCONT)

    def evict(self, reason: str = "evicted") -> None:
        """Stop it at once, without a checkpoint: its gang restarts from its last global one.
        A request under way raises trio.BrokenResourceError naming `reason`."""
        if self.end(reason):
            self.emit("evict", f"gang member {self.spec.rank} of {self.spec.task_id}: {reason}")

    def end(self, reason: str) -> bool:
        """Kill its process and everything it forked, now; False if it had ended already."""
        if self.phase is MemberPhase.ENDED:
            return False
        self._sample()
        self._gone = reason
        self.phase = MemberPhase.ENDED
        if self.cgroup is not None:
            self.cgroup.kill()
        self._signal(signal.SIGKILL)
        return True

    def figures(self) -> MemberFigures:
        """Its live figures (a look at /proc: microseconds)."""
        if self.phase is not MemberPhase.ENDED:
            self._sample()
        return MemberFigures(self.spec.task_id, self.spec.rank, self.phase.value, self.superstep, self.cpu, self.rss)

    # --- the pipe ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _request(self, phase: MemberPhase) -> AsyncIterator[None]:
        """One request at a time; a guest that is gone or goes meanwhile raises BrokenResourceError.
        A request that fails in any way ends the member: it and its gang no longer agree where they are."""
        async with self._turn:
            if self._gone is not None:
                raise trio.BrokenResourceError(f"gang member {self.spec.rank} is gone: {self._gone}")
            if self.phase is MemberPhase.PAUSED:
                self.busy = phase
            else:
                self.phase = phase
            try:
                yield
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel, ProtocolError) as error:
                lost = await self._lost()
                if lost is None:
                    self.end(f"its pipe broke: {error}")
                    raise
                if self._fault is not None:
                    raise PluginError(self._fault) from error
                if self.cgroup is not None and self.cgroup.memory_kills():  # its own fault: the same anywhere
                    raise PluginError(f"superstep {self.superstep}: rank {self.spec.rank}: "
                                      + memory_kill_reason(self.spec.memory_bytes, self.settings.memory_slack_bytes)) from error
                raise trio.BrokenResourceError(lost) from error
            except PluginError:
                self.end("it broke the gang contract")  # a member's answers and state are no longer the gang's
                raise
            except trio.Cancelled:
                self.end("its request was cancelled")  # half a frame may be on the pipe: it cannot go on
                raise
            finally:
                if self.phase is MemberPhase.PAUSED:
                    self.busy = MemberPhase.WAITING
                elif self.phase is not MemberPhase.ENDED:
                    self.phase = MemberPhase.WAITING

    async def _answer(self, kind: type[Message], max_size: int) -> tuple[Any, bytes]:
        """Read until the answer `kind` (a bulk header) and its data; log lines and refusals on the way become events."""
        channel = self.child.channel
        while True:
            message = await channel.receive()
            if isinstance(message, kind):
                return message, await channel.receive_bulk_data(max_size=max_size)
            if isinstance(message, GuestFailed):
                self._sample()
                failure = checks.reported_failure(message.kind, message.reason)
                self._gone = failure.reason
                self.phase = MemberPhase.ENDED
                if failure.retryable:
                    raise trio.BrokenResourceError(f"gang member {self.spec.rank}: {failure.reason}")
                raise PluginError(message.reason)
            if isinstance(message, GuestMemberReady) and not self.ready and message.rank == self.spec.rank:
                self.ready = True
                self._sample()
                self.step_cpu = max(self.step_cpu, self.cpu)
            elif isinstance(message, GuestLog):
                self.emit("guest-log", message.text, message.level)
            elif isinstance(message, GuestDenied):
                self.emit("refused", f"gang member {self.spec.rank} was refused: {message.attempt} ({message.reason})",
                          "warning")
            else:
                raise ProtocolError(f"gang member {self.spec.rank} sent an unexpected {type(message).__name__}")

    async def _lost(self) -> str | None:
        """Why the guest is gone, once its process has ended; None if it still runs (it garbled the pipe)."""
        if self._gone is not None:
            return f"gang member {self.spec.rank} is gone: {self._gone}"
        with trio.move_on_after(1.0):
            await self.child.process.wait()
        code = self.child.process.returncode
        if code is None:
            return None
        self._gone = checks.crash_failure(code, list(self.stderr_tail)).reason
        self.phase = MemberPhase.ENDED
        return f"gang member {self.spec.rank} {self._gone}"

    def _expect(self, answered: int, asked: int) -> None:
        if answered != asked:
            raise ProtocolError(f"rank {self.spec.rank} answered for superstep {answered}; it was asked about {asked}")

    def _decode(self, data: bytes, what: str) -> Any:
        try:
            return decode_plain(data, f"rank {self.spec.rank}'s {what}")
        except PluginError as error:
            raise ProtocolError(error.message) from error

    async def watch(self) -> None:
        """While a superstep runs, stop the member as stuck once it has used `step_timeout` CPU seconds
        (or slept as long) without an answer: its gang would wait for it forever. Runs until it ends."""
        asleep_since = None
        while self.phase is not MemberPhase.ENDED:
            await trio.sleep(self.settings.watch_interval)
            if self.phase is not MemberPhase.STEPPING or not self.ready:
                asleep_since = None  # paused, starting, or waiting for its next superstep: not stuck
                continue
            status, now = self._sample(), trio.current_time()
            asleep_since = checks.asleep_since(asleep_since, status, now)
            stuck = checks.stuck_reason(cpu_since_progress=self.cpu - self.step_cpu, step_timeout=self.settings.step_timeout,
                                        asleep_for=None if asleep_since is None else now - asleep_since)
            if stuck is not None:
                self._fault = f"superstep {self.superstep}: rank {self.spec.rank}: {stuck}"
                self.end(self._fault)

    def _sample(self) -> str:
        """CPU time and memory now: its cgroup's count where it has one (forks included), else its process's.
        Returns its process's status ("" once it is gone)."""
        status = ""
        try:
            process = psutil.Process(self.pid)
            with process.oneshot():
                times = process.cpu_times()
                self.rss = process.memory_info().rss
                status = process.status()
            self.cpu = max(self.cpu, times.user + times.system)
        except psutil.Error:
            pass  # gone: its last figures stand
        if self.cgroup is not None:
            self.cpu = max(self.cpu, self.cgroup.cpu_seconds() or 0.0)
        return status

    def _signal(self, signum: int) -> None:
        if self.child.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)


@contextlib.asynccontextmanager
async def open_member(spec: MemberSpec, *, containment: Containment, settings: GuestSettings, scratch_root: Path,
                      checkpoint: bytes | None = None,
                      on_event: Callable[[GuestEvent], None] | None = None) -> AsyncIterator[MemberGuest]:
    """Start member `spec.rank`'s guest, afresh or from its `checkpoint` (MemberCheckpoint bytes); kill it on exit.

    It is in its own cgroup before it is told what to run, and its scratch folder
    (`scratch_root/task_id`) is emptied before and removed after. Raises ConfigError where strict
    isolation refuses guests here, PluginError for a checkpoint that is not this member's.
    """
    check_task_id(spec.task_id)
    refusal = containment.report().refusal()
    if refusal:
        raise ConfigError(f"isolation: {refusal}")
    superstep = _checked_superstep(checkpoint, spec) if checkpoint else 0

    def emit(kind: str, message: str, level: str = "info") -> None:
        if on_event is not None:
            on_event(GuestEvent(spec.task_id, kind, message, level))

    scratch = scratch_root / spec.task_id
    await trio.to_thread.run_sync(fresh_folder, scratch)
    containment.prepare_scratch(scratch)
    child = await start_child(scratch, containment.child_options())
    child.scratch = scratch
    cgroup = None
    try:
        try:
            cgroup = containment.cgroup_sized(child.process.pid, spec.memory_bytes)
        except OSError as error:
            emit("error", f"the gang member runs without its own cgroup: {error}", "warning")
        member = MemberGuest(spec, child, cgroup, superstep=superstep, settings=settings, emit=emit)
        start = GuestMemberStart(
            task_id=spec.task_id, plugin_path=str(spec.plugin_path),
            params=encode_plain(dict(spec.params), "the assignment's parameters", MAX_MESSAGE_SIZE - 4096),
            rank=spec.rank, size=spec.size, max_state_bytes=settings.max_state_bytes, scratch=str(scratch),
            address_space=address_space_cap(spec.memory_bytes, settings.address_space_baseline_bytes),
            readable=containment.readable_for(str(spec.plugin_path)),
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_forward_output, child.process.stdout, member, "info", settings.log_lines_per_second)
                nursery.start_soon(_forward_output, child.process.stderr, member, "warning", settings.log_lines_per_second)
                nursery.start_soon(member.watch)
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await child.channel.send_bulk(start, checkpoint or b"")  # if it died, its first answer says why
                emit("start", f"gang member {spec.rank} of {spec.size} started"
                     + (f" from its checkpoint before superstep {superstep}" if checkpoint else "")
                     + f" (pid {child.process.pid})")
                try:
                    yield member
                finally:
                    member.end("stopped")
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:  # the caller's own error, which it catches by its type
                raise group.exceptions[0] from None
            raise
    finally:
        with trio.CancelScope(shield=True):
            await close_child(child)
            if cgroup is not None:
                await trio.to_thread.run_sync(cgroup.remove)
            await trio.to_thread.run_sync(remove_folder, scratch)


def _checked_superstep(checkpoint: bytes, spec: MemberSpec) -> int:
    """The superstep a member restarts at: its checkpoint must be one of this rank of this gang."""
    restored = MemberCheckpoint.from_bytes(checkpoint, spec.size)
    if restored.rank != spec.rank:
        raise PluginError(f"rank {spec.rank} of {spec.task_id} was given the checkpoint of rank {restored.rank}")
    return restored.superstep


async def _forward_output(stream: trio.abc.ReceiveStream | None, member: MemberGuest, level: str,
                          per_second: int) -> None:
    """Plugin prints become guest-log events, at most `per_second` lines a second; the rest are dropped."""
    if stream is None:
        return
    buffer, window, budget = b"", trio.current_time(), per_second
    while data := await stream.receive_some(65536):
        *lines, buffer = (buffer + data).split(b"\n")
        if len(buffer) > MAX_LOG_LINE:
            lines, buffer = [*lines, buffer], b""
        for raw in lines:
            line = raw.decode(errors="replace").rstrip()[:MAX_LOG_LINE]
            if level == "warning":
                member.stderr_tail.append(line)
            if trio.current_time() - window >= 1.0:
                window, budget = trio.current_time(), per_second
            if budget > 0:
                budget -= 1
                member.emit("guest-log", line, level)

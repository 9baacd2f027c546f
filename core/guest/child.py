"""The guest subprocess (`python -m frost_core.guest.child`): lower itself, then step plugin units in turn.

Order matters: priority, memory caps and confinement (confine.py) are set before any plugin code
runs, so none ever runs at a higher priority, without its cap, unconfined or as root: the plugin
file and the modules it imports are read as the node's user (preload.py), then the child confines
its files and drops its user and capabilities, then it executes the plugin. The protocol runs on two
private pipe fds given on the command line, a saved state may come as a sealed memfd on a third
(handoff.py), and its checkpoints may leave through a memfd the node sends on it; fd 1 and 2 belong to the plugin (its prints go to the node's event log), so a stray
print cannot corrupt a frame.

After a unit's result the process stays warm: it waits on its pipe for the next unit of the same
assignment (same plugin, same folder, same caps) and runs it with its plugin module already
imported; its sandbox is per process and stays as it is. It exits when the node closes the pipe.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import mmap
import os
import select
import socket
import sys
import time
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import Any, BinaryIO

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.guest.limits import MIB, apply_memory_limits
from frost_core.guest import envelope
from frost_core.guest.confine import become_user, leave_network, restrict_files
from frost_core.guest.failure import GuestFailure, PipeLost
from frost_core.guest.handoff import KEEP_OUTBOX_BYTES, GuestHandoff, fill_outbox
from frost_core.guest.member import run_member
from frost_core.guest.preload import import_codecs, import_named_modules, read_plugin
from frost_core.guest.priority import drop_capabilities, forbid_raising, lower_priority
from frost_core.guest.refusals import RefusalLog, watch_refusals
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
    GuestMemberStart,
    GuestProgress,
    GuestResult,
    GuestStart,
)
from frost_core.guest.state_codec import encode_state_pieces
from frost_core.plugin.api import Done, Plugin, WorkUnit, collect_outputs, unit_files
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_plain
from frost_core.plugin.loader import describe_exception, load_plugin_file
from frost_core.storage.checkpoints import in_thread
from frost_core.wire.pipe import read_bulk_data, read_frame, write_bulk, write_frame

EXIT_FAILED = 3
HAND_OUT_FROM = 4 << 20
"""A checkpoint from this size on leaves through the checkpoint memfd where the node offers one; a smaller one goes
up the pipe, hashed by this process after it is sent (from HASH_AFTER_FROM on) or by the node, not by this
one-threaded process before it answers. bench/checkpoint_throughput.py, 2026-11-26 14:08 UTC, load 3-4, three runs,
each path with a child of its own and the variants in shuffled order, the pipe's against the memfd's (medians,
ms): 0.98-1.07 against 1.15-1.29 at 0.1 MB; in the two runs of three whose disk did not stall, 2.52-2.61 against
2.64-2.84 at 1 MB, 3.75-4.17 against 3.98-4.32 at 2 MB, 6.36-7.00 against 7.01-7.37 at 4 MB. A handed state is
answered once it is written and its hash follows, so the node copies it (and its blocks to disk) while this
process hashes. The hash runs in the guest's one thread: a second one beside the writing did not pay on 2 shared
cores (10 MiB written and hashed side by side took 9.2 ms, one after the other 2.1 + 6.2 ms, at load 2; 1 MiB with
the benchmark's other variants between, 2.4-2.5 against 2.1-2.2 ms on tmpfs at load 4)."""
HASH_AFTER_FROM = 256 << 10
"""A state up the pipe from this size on carries its hash after it (`GuestCheckpoint.hash_follows`), taken here
while the node writes the state: the node's hash was its checkpoint's longest step, and a guest pays for its
own at the lowest priority. Under it the node hashes faster than it wakes for one more frame: bench/
checkpoint_throughput.py, 2026-11-28 12:13 UTC, five alternating runs, medians of the guest path (ms): at 0.1 MB
0.86-0.89 the node's way, 0.89-0.98 with the hash after; at 1 MiB 2.08-2.26 against 1.84-2.05."""
EXIT_PROTOCOL = 2
MAX_REASON_BYTES = 4000


class GuestRunner:
    """Steps one unit and answers the node between steps (each gap is a migration point).

    It is also the unit's `plugin_api.UnitFiles`: input files are asked of the node by name,
    output files live in scratch/out/ and travel inside every checkpoint and the result.
    """

    def __init__(self, inbox: BinaryIO, outbox: BinaryIO, *, strict: bool = False,
                 unconfined: tuple[str, ...] = (), user: tuple[int, int] | None = None,
                 handoff: socket.socket | None = None) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.handoff = GuestHandoff(handoff) if handoff is not None else None
        """Where the node hands a unit's saved state over as a sealed memfd, and the memfd checkpoints go out
        through (see handoff.py); None where it cannot."""
        self.strict = strict
        self.user = user
        """The (uid, gid) to drop to before plugin code runs (a root node's guests); None keeps the node's."""
        self.scratch_fd: int | None = None
        self.refusals = RefusalLog()
        """Refuse to run plugin code with any confinement step failed (`guests.isolation = "strict"`)."""
        self.unconfined = list(unconfined)
        """The confinement steps that failed, as "name: why"."""
        self.output_dir = Path("out")  # in the unit's scratch folder, which GuestStart names and we move into
        self.steps = 0
        self.max_state_bytes = 0
        self.address_space = 0
        self.input_paths: dict[str, str] = {}
        self.deferred: list[GuestCheckpointRequest] = []
        """Checkpoint requests that arrived while a step waited for a file: answered at the next migration point."""

    def run(self) -> int:
        start = read_frame(self.inbox)
        if not isinstance(start, GuestStart | GuestMemberStart):
            raise ProtocolError(f"expected GuestStart or GuestMemberStart, got {type(start).__name__}")
        self.address_space = start.address_space
        try:
            sources = self._settle_in(start)
            plugin = load_plugin_file(start.plugin_path, sources)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        if isinstance(start, GuestMemberStart):
            return run_member(self.inbox, self.outbox, start, plugin, self.report_refusals)
        first = start
        while start is not None:
            self._run_unit(start, plugin)
            start = self._next_start(first)
        return 0

    def _run_unit(self, start: GuestStart, plugin: Plugin) -> None:
        """One unit, from its GuestStart (its saved state follows as bulk data) to its result."""
        self.max_state_bytes = start.max_state_bytes
        self.steps = 0
        self.input_paths = {}  # the node emptied the folder: the last unit's copies are gone
        self.deferred = []
        os.environ.update(HOME=start.scratch, TMPDIR=start.scratch)
        saved: bytes | mmap.mmap = read_bulk_data(self.inbox, max_size=start.max_state_bytes)
        if start.handed and not saved:  # else the node could not hand it over, and sent it
            saved = self._handed_state(start)
        try:
            unit = WorkUnit.from_plain(decode_plain(start.unit, "work unit"))
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        with unit_files(self):
            self._run(start, plugin, unit, saved)

    def _handed_state(self, start: GuestStart) -> mmap.mmap:
        """The state the node handed over instead of sending it (after the empty bulk data, so only once the
        node let it go), mapped read-only."""
        if self.handoff is None or not 0 < start.handed <= start.max_state_bytes:
            raise ProtocolError(f"a handed state of {start.handed} bytes that this guest cannot take")
        return self.handoff.state(start.handed)

    def _next_start(self, first: GuestStart) -> GuestStart | None:
        """Wait, blocked on the pipe (no CPU), for the next unit; None once the node closes the pipe.

        A checkpoint request that crossed the last result is stale and dropped. The next unit
        must be of the same plugin in the same folder (renamed by the node) under the same cap:
        those were fixed when this process confined itself.
        """
        while True:
            try:
                message = read_frame(self.inbox)
            except EOFError:
                return None
            if isinstance(message, GuestCheckpointRequest):
                continue
            if not isinstance(message, GuestStart):
                raise ProtocolError(f"unexpected {type(message).__name__} between units")
            if (message.plugin_path, message.address_space, message.readable) != (
                    first.plugin_path, first.address_space, first.readable):
                raise ProtocolError("a warm guest was handed a unit of other plugin code or another cap")
            return message

    def _settle_in(self, start: GuestStart | GuestMemberStart) -> dict[str, bytes]:
        """Move into the unit's scratch folder, cap memory, read the plugin, confine files, drop the user: before any state
        or plugin code is read. Returns the plugin's files, read while they could be."""
        scratch = Path(start.scratch)
        os.chdir(scratch)
        self.scratch_fd = os.open(".", os.O_PATH | os.O_DIRECTORY)  # the guest's user may not pass the folders above
        os.environ.update(HOME=str(scratch), TMPDIR=str(scratch))
        steps = apply_memory_limits(start.address_space) if start.address_space > 0 else ()
        for name, outcome in steps:
            if outcome != "ok":
                write_frame(self.outbox, GuestLog(level="warning", text=f"guest limit step {name}: {outcome}"))
        sources = read_plugin(start.plugin_path)
        plugin_root = Path(start.plugin_path).resolve()
        import_named_modules(sources, plugin_root if plugin_root.is_dir() else plugin_root.parent)
        confinement = []
        if start.readable:
            confinement.append(("files", restrict_files(start.readable, (str(scratch),))))
        become = (lambda: become_user(*self.user)) if self.user else None
        confinement += drop_capabilities(become).steps
        for name, outcome in confinement:
            if outcome != "ok":
                if name in _CONFINEMENT:
                    self.unconfined.append(f"{name}: {outcome}")
                write_frame(self.outbox, GuestLog(level="warning", text=f"guest confinement step {name}: {outcome}"))
        if self.strict and self.unconfined:
            raise GuestFailure("isolation", "strict isolation: the guest could not confine itself: "
                               + "; ".join(self.unconfined))
        watch_refusals(self.refusals)  # from here on plugin code may run
        return sources

    def _run(self, start: GuestStart, plugin: Plugin, unit: WorkUnit, saved: bytes | mmap.mmap) -> None:
        if start.resume:
            state = self._restore(saved)
        else:
            self.output_dir.mkdir(exist_ok=True)
            state = self._call("start", plugin.start, unit)
            self._encode_state(state)  # a state that cannot be checkpointed fails now, not later
        self._send_progress(plugin, state)
        last_progress = time.monotonic()
        while True:
            self._answer_requests(plugin, state)
            outcome = self._call("step", plugin.step, state)
            self.steps += 1
            self.report_refusals()
            if isinstance(outcome, Done):
                result = self._encode(outcome.result, "result", MAX_RESULT_BYTES)
                packed = self._pack(envelope.RESULT, result, MAX_RESULT_BYTES)
                write_bulk(self.outbox, GuestResult(steps=self.steps), packed)
                return
            state = outcome
            if time.monotonic() - last_progress >= start.progress_interval:
                self._send_progress(plugin, state)
                last_progress = time.monotonic()

    def report_refusals(self) -> None:
        """Tell the node what the kernel refused plugin code since the last migration point."""
        for attempt, reason in self.refusals.take():
            write_frame(self.outbox, GuestDenied(attempt=attempt, reason=reason))

    def _answer_requests(self, plugin: Plugin, state: Any) -> None:
        while self.deferred or select.select([self.inbox], [], [], 0)[0]:
            request = self.deferred.pop(0) if self.deferred else read_frame(self.inbox)
            if not isinstance(request, GuestCheckpointRequest):
                raise ProtocolError(f"unexpected {type(request).__name__} while running")
            began = time.perf_counter()
            data = self._pack(envelope.STATE, self._encode_state(state), self.max_state_bytes)
            header = GuestCheckpoint(
                request_id=request.request_id,
                progress=self._progress(plugin, state),
                steps=self.steps,
                encode_seconds=time.perf_counter() - began,
            )
            self._answer(request, header, data)

    def _answer(self, request: GuestCheckpointRequest, header: GuestCheckpoint, pieces: list[bytes]) -> None:
        """Through the checkpoint memfd where `_hand_out` may, else up the pipe: for a request with a hash prefix
        and a state from HASH_AFTER_FROM bytes on, the hash after the state, taken while the node writes it (the
        node then never hashes it). A state from HAND_OUT_FROM on that could not be handed goes unhashed, as
        the node hashes it while it comes."""
        if self._hand_out(request, header, pieces):
            return
        if not request.hash_prefix or not HASH_AFTER_FROM <= sum(len(piece) for piece in pieces) < HAND_OUT_FROM:
            write_bulk(self.outbox, header, pieces)
            return
        write_bulk(self.outbox, dataclasses.replace(header, hash_follows=True), pieces)
        sha256 = hashlib.sha256(request.hash_prefix)
        for piece in pieces:
            sha256.update(piece)
        write_frame(self.outbox, GuestCheckpointHash(request_id=request.request_id, sha256=sha256.hexdigest()))

    def _hand_out(self, request: GuestCheckpointRequest, header: GuestCheckpoint, pieces: list[bytes]) -> bool:
        """Answer through the checkpoint memfd where the request allows it, the node sent one and the state has
        HAND_OUT_FROM bytes or more; False if not (the pipe then). The answer goes once the state is written and
        the hash follows it, so the node copies and syncs while this process hashes; past KEEP_OUTBOX_BYTES (an
        emptied memfd) the answer goes even before the writing, and the node's copy follows it (the memfd's
        size shows how far it got)."""
        size = sum(len(piece) for piece in pieces)
        if size < HAND_OUT_FROM:
            return False  # faster up the pipe; asked first, as it costs no system call
        outbox = self.handoff.newest_outbox() if request.hash_prefix and self.handoff is not None else None
        if outbox is None:
            return False
        if size > request.outbox_room:
            return False  # its pages would count against this guest's memory cap, beside the state
        announce = size > KEEP_OUTBOX_BYTES
        sha256 = hashlib.sha256(request.hash_prefix)
        beside = None
        announced = False
        try:
            if announce:
                os.ftruncate(outbox, 0)  # what the node may copy is what it holds: nothing yet
                write_frame(self.outbox, dataclasses.replace(header, handed=size))
                announced = True
                beside = _hash_beside(sha256, pieces)
            fill_outbox(outbox, pieces)
        except OSError as error:
            if not announced:
                write_frame(self.outbox, GuestLog(level="warning", text=f"checkpoint through the pipe: its memfd: {error}"))
                return False
            if beside is not None:
                beside.result()  # (its thread holds the pieces)
            write_frame(self.outbox, GuestLog(level="warning", text=f"checkpoint lost: its memfd: {error}"))
            write_frame(self.outbox, GuestCheckpointHash(request_id=request.request_id, sha256=""))  # fails it
            return True
        if not announce:
            write_frame(self.outbox, dataclasses.replace(header, handed=size))
        if beside is not None:
            beside.result()
        else:
            for piece in pieces:
                sha256.update(piece)
        write_frame(self.outbox, GuestCheckpointHash(request_id=request.request_id, sha256=sha256.hexdigest()))
        return True

    # --- files (plugin_api.UnitFiles) -------------------------------------------------------

    def open_input(self, name: str) -> BinaryIO:
        """Runs inside plugin code: ask the node once per name, then open the local copy."""
        if name not in self.input_paths:
            try:
                write_frame(self.outbox, GuestFileRequest(name=name))
                answer = self._wait_for_file(name)
            except (ProtocolError, EOFError, OSError) as error:
                raise PipeLost(str(error)) from error
            if isinstance(answer, GuestFileRefused):
                if answer.retryable:
                    raise GuestFailure("files", answer.reason)
                raise FileNotFoundError(answer.reason)
            self.input_paths[name] = answer.path
        # A relative path is in the scratch folder (a root node's guest cannot pass the folders above it).
        return open(self.input_paths[name], "rb", opener=lambda path, flags: os.open(path, flags, dir_fd=self.scratch_fd))

    def _wait_for_file(self, name: str) -> GuestFileReady | GuestFileRefused:
        while True:
            message = read_frame(self.inbox)
            if isinstance(message, GuestCheckpointRequest):
                self.deferred.append(message)  # mid-step: the state is not whole until the step ends
            elif isinstance(message, GuestFileReady | GuestFileRefused) and message.name == name:
                return message
            else:
                raise ProtocolError(f"unexpected {type(message).__name__} while waiting for input file {name!r}")

    def _pack(self, kind: str, payload: list[bytes], limit: int) -> list[bytes]:
        """The envelope of state or result and the output files, which must fit every checkpoint.

        As pieces that go to the pipe as they are: the state's long byte strings are never copied here.
        """
        try:
            return envelope.pack_pieces(kind, payload, collect_outputs(self.output_dir, self.max_state_bytes), limit)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error
        except OSError as error:
            raise GuestFailure("state", f"cannot read the output files: {error}") from error

    def _restore(self, saved: bytes | mmap.mmap) -> Any:
        try:
            with memoryview(saved) as view:
                state, files = envelope.open_envelope(envelope.STATE, view)
                start = len(view) - len(state)
                state.release()
            envelope.restore_outputs(self.output_dir, files)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error
        value = self._decode_state(saved, start)
        if isinstance(saved, mmap.mmap):
            saved.close()  # its pages are charged to the node until the last mapping goes
        return value

    def _send_progress(self, plugin: Plugin, state: Any) -> None:
        write_frame(self.outbox, GuestProgress(progress=self._progress(plugin, state), steps=self.steps))

    def _progress(self, plugin: Plugin, state: Any) -> float:
        value = self._call("progress", plugin.progress, state)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise GuestFailure("plugin", f"progress() returned {value!r}; it must be a number in [0, 1]")
        return float(value)

    def _encode_state(self, state: Any) -> list[bytes]:
        return self._encode(state, "state", self.max_state_bytes)

    @staticmethod
    def _encode(value: Any, what: str, limit: int) -> list[bytes]:
        try:
            return encode_state_pieces(value, what, limit)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error

    @staticmethod
    def _decode_state(data: bytes | mmap.mmap, start: int) -> Any:
        """Decoded where it lies in the received envelope (from `start` on, its end): the state's
        bytes are copied once, into its values."""
        try:
            return decode_plain(data, "checkpointed state", start=start)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error

    @staticmethod
    def _call(what: str, function: Any, argument: Any) -> Any:
        try:
            return function(argument)
        except MemoryError:
            raise
        except (Exception, SystemExit) as error:  # plugin code may raise anything: report it
            traceback.print_exc()
            raise GuestFailure("plugin", f"{what}() raised {describe_exception(error)}") from error


def main(argv: list[str] | None = None) -> int:
    """Run one guest; the exit code matters only when the pipe is gone (the node reads messages).

    The priority is lowered first, at once; the unit (and with it the memory cap) may come much
    later when this process waits as the node's warm spare.
    """
    parser = argparse.ArgumentParser(prog="frost_core.guest.child")
    parser.add_argument("--read-fd", type=int, required=True)
    parser.add_argument("--write-fd", type=int, required=True)
    parser.add_argument("--handoff-fd", type=int, help="a unix socket a saved state may come on as a sealed memfd")
    parser.add_argument("--no-network", action="store_true", help="enter a network namespace of its own")
    parser.add_argument("--user", default="", help="UID:GID to run as (a root node's guests)")
    parser.add_argument("--strict", action="store_true", help="fail rather than run with a layer missing")
    args = parser.parse_args(argv)
    steps = lower_priority().steps + _leave_the_desk(args) + forbid_raising().steps
    uid, _, gid = args.user.partition(":")
    if args.user:
        import_codecs()  # while it may still read the standard library, and before a warm spare is needed
    inbox = os.fdopen(args.read_fd, "rb", buffering=0)  # unbuffered, so select() sees every byte
    outbox = os.fdopen(args.write_fd, "wb")
    for name, outcome in steps:
        if outcome != "ok":
            write_frame(outbox, GuestLog(level="warning", text=f"guest start step {name}: {outcome}"))
    unconfined = tuple(f"{name}: {outcome}" for name, outcome in steps if name in _CONFINEMENT and outcome != "ok")
    runner = GuestRunner(inbox, outbox, strict=args.strict, unconfined=unconfined,
                         user=(int(uid), int(gid)) if args.user else None,
                         handoff=socket.socket(fileno=args.handoff_fd) if args.handoff_fd is not None else None)
    try:
        return runner.run()
    except GuestFailure as failure:
        reason = failure.reason.encode()[:MAX_REASON_BYTES].decode(errors="ignore")  # fits GuestFailed.MAX_SIZE
        runner.report_refusals()  # what was refused may be why it failed
        write_frame(outbox, GuestFailed(kind=failure.kind, reason=reason))
        return EXIT_FAILED
    except MemoryError:
        reason = f"the guest ran out of its {runner.address_space / MIB:.0f} MiB address-space cap"
        runner.report_refusals()
        write_frame(outbox, GuestFailed(kind="memory", reason=reason))
        return EXIT_FAILED
    except (ProtocolError, EOFError, BrokenPipeError, PipeLost) as error:
        print(f"guest pipe failed: {error}", file=sys.stderr)
        return EXIT_PROTOCOL


_CONFINEMENT = ("network", "files", "user")


def _hash_beside(sha256: Any, pieces: list[bytes]) -> Future[None] | None:
    """Hash `pieces` into `sha256` in a long-lived thread (`checkpoints.in_thread`) while the caller writes them
    into fresh memfd pages (100 MiB: 105 ms side by side, 134 one after the other, at load 4); None where no
    thread can start (the guest's process limit), and the caller hashes them itself."""
    try:
        return in_thread(functools.partial(_hash_all, sha256, pieces))
    except RuntimeError:
        return None


def _hash_all(sha256: Any, pieces: list[bytes]) -> None:
    for piece in pieces:
        sha256.update(piece)


def _leave_the_desk(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The network namespace, made at once: it needs the node's privileges, which the guest drops once its unit is known."""
    return (("network", leave_network()),) if args.no_network else ()


if __name__ == "__main__":
    sys.exit(main())

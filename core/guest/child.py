"""The guest subprocess (`python -m frost_core.guest.child`): lower itself, then step one plugin unit.

Order matters: priority and memory caps are set before the plugin file is even read, so no
plugin code ever runs at a higher priority or without its cap. The protocol runs on two
private pipe fds given on the command line; fd 1 and 2 belong to the plugin (its prints go to
the node's event log), so a stray print cannot corrupt a frame.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
import traceback
from typing import Any, BinaryIO

from frost_core.errors import PluginError, ProtocolError
from frost_core.guest.limits import MIB, apply_memory_limits
from frost_core.guest.priority import enter_guest_priority
from frost_core.guest.protocol import (
    GuestCheckpoint,
    GuestCheckpointRequest,
    GuestFailed,
    GuestLog,
    GuestProgress,
    GuestResult,
    GuestStart,
)
from frost_core.guest.state_codec import encode_state
from frost_core.plugin_api import MAX_RESULT_BYTES, Done, Plugin, WorkUnit, decode_plain
from frost_core.plugin_registry import load_plugin_file
from frost_core.plugin_loader import describe_exception
from frost_core.wire.channel import read_bulk_data, read_frame, write_bulk, write_frame

EXIT_FAILED = 3
EXIT_PROTOCOL = 2
MAX_REASON_BYTES = 4000


class GuestFailure(Exception):
    """The unit cannot go on; `kind` tells the node whose fault it was."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class GuestRunner:
    """Steps one unit and answers the node between steps (each gap is a migration point)."""

    def __init__(self, inbox: BinaryIO, outbox: BinaryIO) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.steps = 0
        self.max_state_bytes = 0

    def run(self) -> int:
        start = read_frame(self.inbox)
        if not isinstance(start, GuestStart):
            raise ProtocolError(f"expected GuestStart, got {type(start).__name__}")
        self.max_state_bytes = start.max_state_bytes
        saved = read_bulk_data(self.inbox, max_size=start.max_state_bytes)
        try:
            unit = WorkUnit.from_plain(decode_plain(start.unit, "work unit"))
            plugin = load_plugin_file(start.plugin_path)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        if start.resume:
            state = self._decode_state(saved)
        else:
            state = self._call("start", plugin.start, unit)
            self._encode_state(state)  # a state that cannot be checkpointed fails now, not later
        self._send_progress(plugin, state)
        last_progress = time.monotonic()
        while True:
            self._answer_requests(plugin, state)
            outcome = self._call("step", plugin.step, state)
            self.steps += 1
            if isinstance(outcome, Done):
                result = self._encode(outcome.result, "result", MAX_RESULT_BYTES)
                write_bulk(self.outbox, GuestResult(steps=self.steps), result)
                return 0
            state = outcome
            if time.monotonic() - last_progress >= start.progress_interval:
                self._send_progress(plugin, state)
                last_progress = time.monotonic()

    def _answer_requests(self, plugin: Plugin, state: Any) -> None:
        while select.select([self.inbox], [], [], 0)[0]:
            request = read_frame(self.inbox)
            if not isinstance(request, GuestCheckpointRequest):
                raise ProtocolError(f"unexpected {type(request).__name__} while running")
            began = time.perf_counter()
            data = self._encode_state(state)
            header = GuestCheckpoint(
                request_id=request.request_id,
                progress=self._progress(plugin, state),
                steps=self.steps,
                encode_seconds=time.perf_counter() - began,
            )
            write_bulk(self.outbox, header, data)

    def _send_progress(self, plugin: Plugin, state: Any) -> None:
        write_frame(self.outbox, GuestProgress(progress=self._progress(plugin, state), steps=self.steps))

    def _progress(self, plugin: Plugin, state: Any) -> float:
        value = self._call("progress", plugin.progress, state)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
            raise GuestFailure("plugin", f"progress() returned {value!r}; it must be a number in [0, 1]")
        return float(value)

    def _encode_state(self, state: Any) -> bytes:
        return self._encode(state, "state", self.max_state_bytes)

    @staticmethod
    def _encode(value: Any, what: str, limit: int) -> bytes:
        try:
            return encode_state(value, what, limit)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error

    @staticmethod
    def _decode_state(data: bytes) -> Any:
        try:
            return decode_plain(data, "checkpointed state")
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
    """Run one guest; the exit code matters only when the pipe is gone (the node reads messages)."""
    parser = argparse.ArgumentParser(prog="frost_core.guest.child")
    parser.add_argument("--read-fd", type=int, required=True)
    parser.add_argument("--write-fd", type=int, required=True)
    parser.add_argument("--address-space", type=int, required=True, help="RLIMIT_AS in bytes; 0 for none")
    args = parser.parse_args(argv)
    steps = enter_guest_priority().steps
    if args.address_space > 0:
        steps += apply_memory_limits(args.address_space)
    inbox = os.fdopen(args.read_fd, "rb", buffering=0)  # unbuffered, so select() sees every byte
    outbox = os.fdopen(args.write_fd, "wb")
    for name, outcome in steps:
        if outcome != "ok":
            write_frame(outbox, GuestLog(level="warning", text=f"guest priority/limit step {name}: {outcome}"))
    runner = GuestRunner(inbox, outbox)
    try:
        return runner.run()
    except GuestFailure as failure:
        reason = failure.reason.encode()[:MAX_REASON_BYTES].decode(errors="ignore")  # fits GuestFailed.MAX_SIZE
        write_frame(outbox, GuestFailed(kind=failure.kind, reason=reason))
        return EXIT_FAILED
    except MemoryError:
        reason = f"the guest ran out of its {args.address_space / MIB:.0f} MiB address-space cap"
        write_frame(outbox, GuestFailed(kind="memory", reason=reason))
        return EXIT_FAILED
    except (ProtocolError, EOFError, BrokenPipeError) as error:
        print(f"guest pipe failed: {error}", file=sys.stderr)
        return EXIT_PROTOCOL


if __name__ == "__main__":
    sys.exit(main())

"""A gang member inside a guest child: one superstep per inbox the node sends, blocked on the pipe in between.

The node drives it: GuestSuperstep (+ inbox) -> GuestSuperstepAnswer (+ outbox and done);
GuestMemberCheckpointRequest (+ inbox) -> GuestMemberCheckpoint (+ MemberCheckpoint bytes);
GuestMemberFinish -> GuestMemberResult (+ result). Between two requests the process sleeps in
read() on its pipe, using no CPU, while the rest of the gang catches up. Every request names
the superstep it is about, which must be the member's own: a node and a member that disagree
on where the gang is must not go on. A broken contract comes back as a plugin failure naming
rank and superstep; the node checks every answer again, since plugin code shares this process.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from frost_core.api.errors import PluginError, ProtocolError
from frost_core.guest.failure import GuestFailure
from frost_core.guest.inbox import decode_inbox, inbox_limit
from frost_core.guest.protocol import (
    MAX_ANSWER_BYTES,
    GuestMemberCheckpoint,
    GuestMemberCheckpointRequest,
    GuestMemberFinish,
    GuestMemberReady,
    GuestMemberResult,
    GuestMemberStart,
    GuestSuperstep,
    GuestSuperstepAnswer,
)
from frost_core.plugin.api import parse_params
from frost_core.plugin.gang import GangPlugin, Inbox, MemberCheckpoint, Superstep, check_members, check_superstep
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.loader import describe_exception
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.wire.pipe import read_bulk_data, read_frame, write_bulk, write_frame


def run_member(inbox: BinaryIO, outbox: BinaryIO, start: GuestMemberStart, plugin: object,
               report_refusals: Callable[[], None]) -> int:
    """Run one gang member until its result is sent or the node closes the pipe; 0 either way."""
    if not isinstance(plugin, GangPlugin):
        raise GuestFailure("plugin", f"{start.plugin_path} is not a gang plugin: it cannot run as a gang member")
    return Member(inbox, outbox, start, plugin, report_refusals).run()


class Member:
    """Member `rank` of a gang: its state and the superstep it runs next."""

    def __init__(self, inbox: BinaryIO, outbox: BinaryIO, start: GuestMemberStart, plugin: GangPlugin,
                 report_refusals: Callable[[], None]) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.plugin = plugin
        self.rank = start.rank
        self.size = start.size
        self.max_state_bytes = start.max_state_bytes
        self.report_refusals = report_refusals
        self.superstep = 0
        """The superstep it runs next; after the one that said done, one past it."""
        self.done = False
        saved = read_bulk_data(inbox, max_size=start.max_state_bytes)
        write_frame(outbox, GuestMemberReady(rank=start.rank))
        if not 0 <= start.rank < start.size:
            raise ProtocolError(f"rank {start.rank} is not one of a gang of {start.size}")
        self.params = self._params(start)
        self.state = self._restore(saved) if saved else self._start()

    def run(self) -> int:
        self.report_refusals()
        while True:
            try:
                message = read_frame(self.inbox)
            except EOFError:
                return 0  # the node let the member go (its gang stopped or moved on)
            if isinstance(message, GuestSuperstep) and not self.done:
                self._expect(message.superstep)
                self._step(self._read_inbox())
            elif isinstance(message, GuestMemberCheckpointRequest) and not self.done:
                self._expect(message.superstep)
                self._checkpoint(self._read_inbox())
            elif isinstance(message, GuestMemberFinish) and self.done:
                self._expect(message.superstep + 1)
                result = self._call("finish", self.plugin.finish, self.state, self.rank, self.size)
                data = self._encode(result, f"superstep {message.superstep}: the result of rank {self.rank}",
                                    MAX_RESULT_BYTES)
                write_bulk(self.outbox, GuestMemberResult(superstep=message.superstep), data)
                return 0
            else:
                raise ProtocolError(f"unexpected {type(message).__name__} for gang member {self.rank} "
                                    f"{'after it said done' if self.done else f'before superstep {self.superstep}'}")

    def _params(self, start: GuestMemberStart) -> dict:
        try:
            raw = decode_plain(start.params, "the assignment's parameters")
            if not isinstance(raw, dict):
                raise PluginError("the assignment's parameters must be a map")
            params = parse_params(self.plugin, raw)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        size = self._call("members", self.plugin.members, params)
        try:
            size = check_members(size)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        if size != self.size:
            raise GuestFailure("plugin", f"members() says {size} for these parameters, but the gang has {self.size}")
        return params

    def _start(self) -> Any:
        state = self._call("start", self.plugin.start, self.params, self.rank, self.size)
        self._encode(state, f"the start state of rank {self.rank}", self.max_state_bytes)  # fails now, not at a barrier
        return state

    def _restore(self, saved: bytes) -> Any:
        try:
            checkpoint = MemberCheckpoint.from_bytes(saved, self.size)
        except PluginError as error:
            raise GuestFailure("state", error.message) from error
        if checkpoint.rank != self.rank:
            raise GuestFailure("state", f"rank {self.rank} was given the checkpoint of rank {checkpoint.rank}")
        self.superstep = checkpoint.superstep
        return checkpoint.state

    def _expect(self, superstep: int) -> None:
        if superstep != self.superstep:
            raise ProtocolError(f"gang member {self.rank} was asked about superstep {superstep}; "
                                f"it is at superstep {self.superstep}")

    def _read_inbox(self) -> Inbox:
        return decode_inbox(read_bulk_data(self.inbox, max_size=inbox_limit(self.size)), self.size)

    def _step(self, inbox: Inbox) -> None:
        superstep = self.superstep
        answer = self._call("step", self.plugin.step, self.state, self.rank, self.size, inbox)
        self.report_refusals()
        try:
            answer = check_superstep(answer, self.rank, self.size, superstep)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error
        self.state, self.done, self.superstep = answer.state, answer.done, superstep + 1
        plain = Superstep(None, answer.outbox, answer.done).to_plain()
        data = self._encode(plain, f"superstep {superstep}: the messages of rank {self.rank}", MAX_ANSWER_BYTES)
        write_bulk(self.outbox, GuestSuperstepAnswer(superstep=superstep), data)

    def _checkpoint(self, inbox: Inbox) -> None:
        began = time.perf_counter()
        try:
            data = MemberCheckpoint(self.rank, self.superstep, self.state, inbox).to_bytes()
        except PluginError as error:
            raise GuestFailure("state", error.message) from error
        if len(data) > self.max_state_bytes:
            raise GuestFailure("state", f"rank {self.rank}'s checkpoint before superstep {self.superstep} is "
                               f"{len(data)} bytes, over this node's limit of {self.max_state_bytes}")
        header = GuestMemberCheckpoint(superstep=self.superstep, encode_seconds=time.perf_counter() - began)
        write_bulk(self.outbox, header, data)

    @staticmethod
    def _encode(value: Any, what: str, limit: int) -> bytes:
        try:
            return encode_plain(value, what, limit)
        except PluginError as error:
            raise GuestFailure("plugin", error.message) from error

    def _call(self, what: str, function: Any, *arguments: Any) -> Any:
        try:
            return function(*arguments)
        except MemoryError:
            raise
        except (Exception, SystemExit) as error:  # plugin code may raise anything: report it
            traceback.print_exc()
            when = {"step": f"superstep {self.superstep}: ", "finish": f"after superstep {self.superstep - 1}: "}
            raise GuestFailure("plugin", f"{when.get(what, '')}rank {self.rank}: {what}() raised "
                               f"{describe_exception(error)}") from error

"""A host's gang members: the trio driver of `cluster.gang_site`, running each member through its guest handle.

Every gang with a member here has a GangSite; messages from the coordinator and from other
hosts go in, and its actions come out: messages are posted (`cluster.gang_post`), and
LaunchMember, RunStep, WriteCheckpoint and KillMember go to the member's own task, which owns
the member's guest (`open_member`: in the product a sandboxed guest, `guest.gang_member`) and
does one thing at a time. A member's predicate answer to a check is worked out here from this
host's merged table. A member that ends before its gang (the owner evicts, its guest dies, its
plugin breaks the contract) is reported to the coordinator as GangLost; all other decisions
stay in the site and the coordinator.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, AsyncContextManager, Protocol

import trio

from frost_core.api.errors import FrostError, PluginError
from frost_core.cluster.gang_post import GangPost
from frost_core.cluster.gang_site import (
    COORDINATOR,
    CheckpointReport,
    EvictMembers,
    GangSite,
    KillMember,
    LaunchMember,
    Mail,
    RunStep,
    Send,
    SendFailed,
    StartMember,
    StepDone,
    StopMember,
    WriteCheckpoint,
)
from frost_core.cluster.messages import GangHostState, GangLost, GangSpec
from frost_core.plugin.gang import Inbox, Superstep
from frost_core.policies.views import NodeView

log = logging.getLogger("frost.gang")


class MemberHandle(Protocol):
    """One member's guest as the driver uses it (`guest.gang_member.MemberGuest`)."""

    @property
    def pid(self) -> int: ...
    async def step(self, inbox: Inbox) -> Superstep: ...
    async def checkpoint(self, inbox: Inbox) -> bytes: ...
    async def finish(self) -> Any: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...


OpenMember = Callable[[GangSpec, str, int, int, int, "bytes | None"], AsyncContextManager[MemberHandle]]
"""(spec, gang id, rank, epoch, size, MemberCheckpoint bytes or None) -> the member's guest, ended on exit."""


@dataclass
class _Member:
    epoch: int
    queue: trio.MemorySendChannel
    scope: trio.CancelScope
    handle: MemberHandle | None = None   # once its guest is open


class GangHost:
    """The gang members hosted on node `node_id` (their tasks in the nursery given to `run_in`); `receive` takes gang messages."""

    def __init__(self, node_id: str, open_member: OpenMember, post: GangPost,
                 table: Callable[[], Iterable[NodeView]]) -> None:
        self.node_id = node_id
        self._open_member = open_member
        self._post = post
        self._table = table
        self._sites: dict[str, GangSite] = {}
        self._masters: dict[str, str] = {}                          # gang -> its coordinator's node
        self._specs: dict[str, GangSpec] = {}
        self._sizes: dict[str, int] = {}
        self._images: dict[tuple[str, int, int], bytes | None] = {}  # (gang, rank, epoch) -> its checkpoint
        self._members: dict[tuple[str, int], _Member] = {}
        self._nursery: trio.Nursery | None = None
        self._paused = False
        self._held = ""                             # why the owner holds the members here ("": not held)
        self._told_held: dict[str, tuple[int, int]] = {}   # gang told so -> a rank and epoch it had here

    def run_in(self, nursery: trio.Nursery) -> None:
        """Start its tasks in `nursery` from now on (the node's gang runtime owns it)."""
        self._nursery = nursery

    def receive(self, peer: str, message: object, spec: GangSpec | None = None) -> None:
        """A gang message for this host from node `peer` (a StartMember comes from the coordinator with its `spec`)."""
        gang_id = message.gang_id if not hasattr(message, "mail") else message.mail.gang_id  # type: ignore[attr-defined]
        if isinstance(message, StartMember):
            assert spec is not None
            self._masters[gang_id], self._specs[gang_id], self._sizes[gang_id] = peer, spec, message.size
            self._images[gang_id, message.rank, message.epoch] = message.checkpoint
        if gang_id not in self._sites:
            if not isinstance(message, StartMember) and gang_id not in self._masters:
                log.info("gang %s: %s from %s for a gang not hosted here", gang_id, type(message).__name__, peer[:8])
            self._sites[gang_id] = GangSite(gang_id, self.node_id)
        self._apply(gang_id, message)

    def evict(self, reason: str = "evicting") -> int:
        """The owner evicts: every member here ends at once and each gang's coordinator hears so; how many ended."""
        ended = 0
        for gang_id in list(self._sites):
            ranks = [(rank, epoch) for rank, epoch in self._sites[gang_id].members().items()]
            self._apply(gang_id, EvictMembers())
            for rank, epoch in ranks:
                self._lost(gang_id, rank, epoch, reason)
                ended += 1
        return ended

    def pause_all(self) -> None:
        """The owner paused this machine or needs it: every member here stops at once, like a unit's guest
        (its gang waits at the next barrier; the owner never waits on a gang), and members opened meanwhile
        start stopped."""
        self._paused = True
        for member in self._members.values():
            if member.handle is not None:
                member.handle.pause()

    def resume_all(self) -> None:
        self._paused = False
        for member in self._members.values():
            if member.handle is not None:
                member.handle.resume()

    def owner_holds(self, reason: str) -> None:
        """Whether this host's owner holds its guests (`reason`, "" for no): each gang with a member here hears of
        a change, so its coordinator leaves this host at its next check instead of waiting for the member."""
        if reason == self._held or (reason and self._held):
            return
        self._held = reason
        if reason:
            self._told_held = {gang_id: next(iter(ranks.items())) for gang_id, ranks in self.hosted().items()}
            self._tell(self._told_held, "held", reason)
        else:   # its gangs may have left meanwhile: the ones told it was held hear it is free again
            told, self._told_held = self._told_held, {}
            self._tell(told, "free", reason)

    def leave(self, reason: str) -> int:
        """The owner is finishing: every gang with a member here leaves at its next barrier (`move`'s way); how
        many members were asked to go."""
        members = {gang_id: member for gang_id, ranks in self.hosted().items() for member in ranks.items()}
        self._tell(members, "leaving", reason)
        return len(members)

    def _tell(self, members: dict[str, tuple[int, int]], state: str, reason: str) -> None:
        for gang_id, (rank, epoch) in members.items():
            self._post.post(self._masters[gang_id], GangHostState(gang_id, rank, epoch, state, reason))

    def guest_pids(self) -> list[int]:
        """The processes of the members running here: guests, as the owner's measurements count them."""
        return [member.handle.pid for member in self._members.values() if member.handle is not None]

    def hosted(self) -> dict[str, dict[int, int]]:
        """Gang -> rank -> epoch of the members running here."""
        return {gang_id: site.members() for gang_id, site in self._sites.items() if site.members()}

    def memory_held(self) -> int:
        """The memory the members placed here declared (each its gang's `member_memory`): the units' memory pool
        on this host is what is left of the desk's pool beside them."""
        return sum(len(ranks) * self._specs[gang_id].memory_bytes for gang_id, ranks in self.hosted().items()
                   if gang_id in self._specs)

    def send_failed(self, to: str, message: object, reason: str) -> None:
        """GangPost could not deliver `message` to `to`: mail goes home instead (the site decides)."""
        if isinstance(message, Mail) and message.gang_id in self._sites:
            self._apply(message.gang_id, SendFailed(message))

    def _apply(self, gang_id: str, event: object) -> None:
        for action in self._sites[gang_id].handle(event):
            if isinstance(action, Send):
                self._send(gang_id, action.to, action.message)
            elif isinstance(action, LaunchMember):
                self._launch(gang_id, action)
            elif isinstance(action, KillMember):
                member = self._members.get((gang_id, action.rank))
                if member is not None and member.epoch <= action.epoch:
                    del self._members[gang_id, action.rank]
                    member.scope.cancel()
            else:   # RunStep, WriteCheckpoint: the member's own task does them in order
                member = self._members.get((gang_id, action.rank))
                if member is not None and member.epoch == action.epoch:
                    member.queue.send_nowait(action)

    def _send(self, gang_id: str, to: str, message: object) -> None:
        if to == COORDINATOR:
            self._post.post(self._masters[gang_id], message, home=True)
        else:
            self._post.post(to, message)

    def _launch(self, gang_id: str, launch: LaunchMember) -> None:
        assert self._nursery is not None, "run_in() first"
        image = self._images.pop((gang_id, launch.rank, launch.epoch), None)
        queue, inbox = trio.open_memory_channel(math.inf)
        member = self._members[gang_id, launch.rank] = _Member(launch.epoch, queue, trio.CancelScope())
        self._nursery.start_soon(self._run, gang_id, launch.rank, member, inbox, image)

    async def _run(self, gang_id: str, rank: int, member: _Member, inbox: trio.MemoryReceiveChannel,
                   image: bytes | None) -> None:
        spec, size = self._specs[gang_id], self._sizes[gang_id]
        with member.scope:
            try:
                async with self._open_member(spec, gang_id, rank, member.epoch, size, image) as handle, inbox:
                    member.handle = handle
                    if self._paused:
                        handle.pause()
                    async for action in inbox:
                        await self._do(gang_id, rank, size, handle, action)
            except PluginError as error:
                self._end(gang_id, rank, member, error.message, plugin_fault=True)
            except (FrostError, trio.BrokenResourceError, OSError) as error:
                self._end(gang_id, rank, member, f"its guest ended: {getattr(error, 'message', error)}")

    async def _do(self, gang_id: str, rank: int, size: int, handle: MemberHandle, action: object) -> None:
        if isinstance(action, RunStep):
            answer = await handle.step(action.inbox)
            move = None if action.check is None else action.check.answer(tuple(self._table()), size, self.node_id)
            result = await handle.finish() if answer.done else None
            self._apply(gang_id, StepDone(rank, action.epoch, action.superstep, dict(answer.outbox), answer.done,
                                          move, result))
        elif isinstance(action, WriteCheckpoint):
            data = await handle.checkpoint(action.inbox)
            self._send(gang_id, COORDINATOR, CheckpointReport(gang_id, action.epoch, rank, action.superstep, data))

    def _end(self, gang_id: str, rank: int, member: _Member, reason: str, *, plugin_fault: bool = False) -> None:
        """The member's guest ended on its own: its slot goes (as on an eviction) and its coordinator hears why."""
        if self._members.get((gang_id, rank)) is not member:
            return   # killed on purpose meanwhile
        del self._members[gang_id, rank]
        self._apply(gang_id, StopMember(gang_id, rank, member.epoch + 1))   # its slot here ends with it
        self._lost(gang_id, rank, member.epoch, reason, plugin_fault)

    def _lost(self, gang_id: str, rank: int, epoch: int, reason: str, plugin_fault: bool = False) -> None:
        self._post.post(self._masters[gang_id], GangLost(gang_id, rank, epoch, reason, plugin_fault))

"""Moving a running unit from this host to another (FROST 5.4.2, DynamicPVM's move(task, host)).

A move goes in the order that keeps exactly one live copy whatever fails:

1. negotiation: the destination is offered the unit (task id, memory, state size) and answers
   with its fresh figures, or refuses (already receiving, no memory, plugin not allowed). A
   refusal leaves the guest untouched.
2. capture: the guest is stopped at its next migration point with its state, or with its last
   checkpoint when it misses the deadline. The CPU is free from here on.
3. transfer: the checkpoint goes straight to the destination under the next ownership epoch,
   on a channel kept open to it, and is written to its disk while it arrives. It leaves here as
   soon as its hash is known: this disk has been writing it while it came up the guest's pipe,
   and its fsync and rename run beside the send (`GuestSupervisor.settle_behind`). On an
   eviction it leaves sooner still: each piece goes on as it comes up the pipe, and the hash
   follows the state as a trailer (`prepare`, `Links.start_fed`).
4. hand-off: the destination checks the hash against what arrived and answers only once the
   checkpoint is durable there and the guest runs; only then, and once the capture is durable
   here too, is the copy here dropped. If anything fails before that answer (a hash that does
   not match included: the destination keeps nothing of it) the unit resumes here from the
   capture, durable by then.
5. the master learns the new location. If that message is lost, the destination's first report
   (with the higher epoch) tells it; a copy with an older epoch is stopped at its next report.

What a crash at each point leaves (kill -9 of one side; the other side sees a broken channel):
- the source dies before or while it sends, its capture not yet synced: the destination removes
  its temp file and runs nothing; the source's disk holds its previous checkpoint (an install is
  a rename, never a half file), its master a replica: the unit goes on from a checkpoint, the
  work since it redone.
- the source dies after the destination's answer: the destination runs the unit under the new
  epoch; the source's copy is dropped at its restart (another master's unit) or superseded.
- the destination dies while it receives, or before it answers: the source's move fails, it waits
  for its capture to be durable and resumes the unit here from it; the destination's temp file
  goes at its next write of that task.
- the destination dies after it answered: its master restarts the unit from the newest replica,
  as for any host that dies.

An eviction never waits for a peer (the owner wants the CPU within a second): the capture starts
at once, and `prepare` negotiates beside it with the location policy's first candidate that takes
the unit, then sends it the capture as it comes (the guest is stopped once its whole state is in,
and killed once it is in hand, as without a move). `relocate`, once the guest is gone, waits for
that destination's answer; if it refused or failed, or the guest missed its deadline, it hands
the capture in hand to it whole, then tries the other candidates in order, as before, and, if
none takes the unit, returns it to its master's queue with its checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

import trio

from frost_core.storage.checkpoints import CheckpointRecord
from frost_core.cluster.host import Hosted, HostService, Stay
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.guest.supervisor import GuestSupervisor
from frost_core.cluster.links import Links
from frost_core.cluster.messages import UnitOffer, Verdict
from frost_core.api.errors import FrostError, NodeUnavailableError, StorageError
from frost_core.events import EventLog

log = logging.getLogger("frost.migration")

RETURN_RETRY = 5.0
"""Seconds between attempts to give an evicted unit back to a master that is out of reach."""


@dataclasses.dataclass(eq=False)
class _Ahead:
    """An evicted unit's move prepared while its guest is captured (`Migrator.prepare`)."""

    hosted: Hosted
    began: float = dataclasses.field(default_factory=time.monotonic)
    destination: str | None = None
    fed: CaptureFeed | None = None
    """Where the capture went as it came, once the destination took the offer."""
    verdict: Verdict | None = None
    negotiated: trio.Event = dataclasses.field(default_factory=trio.Event)
    done: trio.Event = dataclasses.field(default_factory=trio.Event)


class Migrator:
    """The host's `Relocator`: moves and relocations, each given the host it leaves (`home`)."""

    def __init__(
        self, *, node_id: str, supervisor: GuestSupervisor, links: Links, events: EventLog,
        destinations: Callable[[Hosted, int], Sequence[str]],
        observe_transfer: Callable[[str, int, float], None],
        move_deadline: Callable[[], float],
        named: Callable[[str], str] = lambda node_id: node_id[:8],
    ) -> None:
        """`named`: a peer as the events name it (`api.wording.peer_named`)."""
        self._node_id = node_id
        self._peer = named
        self._supervisor = supervisor
        self._links = links
        self._events = events
        self._destinations = destinations
        self._observe_transfer = observe_transfer
        self._move_deadline = move_deadline
        self._ahead: dict[str, _Ahead] = {}
        """By task id: evicted units whose destination is found, and their capture sent, while they are captured."""

    async def move_out(self, home: HostService, hosted: Hosted, destination: str) -> Verdict:
        """Move a running guest to `destination` now; a refusal or failure leaves it running here."""
        task_id = hosted.task.task_id
        if destination == self._node_id:
            return Verdict(ok=False, reason=f"{task_id} already runs on this node")
        if task_id in self._ahead and self._ahead[task_id].hosted is hosted:
            return Verdict(ok=False, reason=f"{task_id} is being evicted: it leaves for the peer that takes it")
        last = self._supervisor.figures()
        state_bytes = next((f.checkpoint_bytes for f in last if f.task_id == task_id), 0)
        refusal = await self._negotiate(hosted, destination, state_bytes)
        if refusal is not None:  # whoever asked says so: the owner's move as its error, the balancer once per reason
            return Verdict(ok=False, reason=refusal)
        began = time.monotonic()
        hosted.change(Stay.MOVING)  # before the guest stops, so the host leaves its Evicted outcome to this move
        feed = CaptureFeed()
        fed: list[Verdict] = []
        async with trio.open_nursery() as nursery:
            if self._supervisor.feed_capture(task_id, feed):  # sent as it comes up the guest's pipe

                async def send() -> None:
                    fed.append(await self._feed_to(destination, hosted, feed))

                nursery.start_soon(send)
            try:
                # The checkpoint stays on this disk until the destination confirms it runs the unit.
                record = await self._supervisor.capture(task_id, self._move_deadline())
            except KeyError:
                feed.close(f"{task_id} ended before it could move")
                hosted.change(Stay.RUNNING)
                return Verdict(ok=False, reason=f"{task_id} ended before it could move")
            feed.close("the unit left without it")  # the capture came, or never will now
        if fed and fed[0].ok:
            await self._handed_over(home, hosted, record, destination, began, feed.began_at,
                                    how="sent while it was captured")
            return fed[0]
        verdict = await self._hand_over(home, hosted, record, destination, began)  # whole, as before
        if not verdict.ok:
            self._events.add("move", f"{task_id}: the move to {self._peer(destination)} failed ({verdict.reason}); "
                             "it resumes here", severity="warning")
            await self._supervisor.settled(task_id)  # it resumes from the capture, durable here by then
            home.resume_here(hosted)
            if record is not None:
                home.replicate(hosted, record)
        return verdict

    def prepare(self, hosted: Hosted, nursery: trio.Nursery) -> None:
        """The owner evicts `hosted`: while its guest is captured, find the peer that takes it and send
        it the capture as it comes up the guest's pipe (`relocate` then learns how that went)."""
        ahead = self._ahead[hosted.task.task_id] = _Ahead(hosted)
        nursery.start_soon(self._send_ahead, ahead)

    async def _send_ahead(self, ahead: _Ahead) -> None:
        hosted = ahead.hosted
        task_id = hosted.task.task_id
        # Asked for before any peer is: a guest at its migration point answers within the offer's round trip
        # (2 ms steps), and a state that began to come before it was asked for went whole, after the guest.
        feed = CaptureFeed()
        fed = self._supervisor.feed_capture(task_id, feed)
        try:
            last = self._supervisor.figures()
            state_bytes = next((f.checkpoint_bytes for f in last if f.task_id == task_id), 0)
            for destination in self._destinations(hosted, state_bytes):
                if await self._negotiate(hosted, destination, state_bytes) is None:
                    ahead.destination = destination
                    break
            ahead.negotiated.set()
            if ahead.destination is None or not fed:
                return
            ahead.fed = feed
            ahead.verdict = await self._feed_to(ahead.destination, hosted, feed)
        finally:
            feed.close("no peer took the unit")  # (a no-op once sent): the guest's side waits for no sender
            feed.release()
            ahead.negotiated.set()
            ahead.done.set()

    async def _feed_to(self, destination: str, hosted: Hosted, feed: CaptureFeed) -> Verdict:
        """Hand the unit over under the next epoch with the capture `feed` brings, sent as it comes."""
        spec = dataclasses.replace(hosted.spec, epoch=hosted.spec.epoch + 1)
        try:
            return await self._links.start_fed(destination, spec, feed)
        except FrostError as error:
            return Verdict(ok=False, reason=error.message)
        finally:
            feed.close("the move that sent it ended")  # never leave the guest's side waiting for it
            feed.release()

    async def relocate(self, home: HostService, hosted: Hosted, record: CheckpointRecord | None) -> None:
        """An evicted unit (already stopped): to the best peer that takes it, else back to its master."""
        began = time.monotonic()
        state_bytes = record.size if record is not None else 0
        ahead = self._ahead.pop(hosted.task.task_id, None)
        tried = None
        why: list[str] = []
        if ahead is not None and ahead.hosted is hosted:
            await ahead.negotiated.wait()
            tried = ahead.destination
            if ahead.fed is not None:
                ahead.fed.close("the unit left without it")  # the capture came, or never will now
                await ahead.done.wait()
            if ahead.fed is not None and ahead.verdict is not None and ahead.verdict.ok:
                await self._handed_over(home, hosted, record, ahead.destination, ahead.began, ahead.fed.began_at,
                                        how="sent while it was captured")
                return
            if tried is not None:
                verdict = await self._hand_over(home, hosted, record, tried, began)
                if verdict.ok:
                    return  # (fed or not: the capture in hand, durable here, sent whole as before)
                why.append(f"{self._peer(tried)}: {verdict.reason}")
        for destination in self._destinations(hosted, state_bytes):
            if destination == tried:
                continue
            refusal = await self._negotiate(hosted, destination, state_bytes)
            if refusal is None:
                verdict = await self._hand_over(home, hosted, record, destination, began)
                if verdict.ok:
                    return
                refusal = verdict.reason
            why.append(f"{self._peer(destination)}: {refusal}")
        await self._return_to_master(home, hosted, record, "; ".join(why) or "no peer is ranked to take it")

    async def _negotiate(self, hosted: Hosted, destination: str, state_bytes: int) -> str | None:
        """None if `destination` takes the unit, else its reason (or why it could not be asked)."""
        offer = UnitOffer(task_id=hosted.task.task_id, plugin_hash=hosted.task.plugin_hash,
                          memory_bytes=hosted.task.unit.memory_bytes, state_bytes=state_bytes, moving=True)
        try:
            reply = await self._links.host(destination).offer(self._node_id, offer)
        except NodeUnavailableError as error:
            return error.message
        return None if reply.accepted else reply.reason

    async def _hand_over(self, home: HostService, hosted: Hosted, record: CheckpointRecord | None,
                         destination: str, began: float) -> Verdict:
        """Transfer under the next epoch; drop the local copy only once the destination runs the unit."""
        spec = dataclasses.replace(hosted.spec, epoch=hosted.spec.epoch + 1)
        sent = time.monotonic()
        try:
            verdict = await self._links.host(destination).start(self._node_id, spec, record, moved=True)
        except FrostError as error:
            verdict = Verdict(ok=False, reason=error.message)
        if verdict.ok:
            await self._handed_over(home, hosted, record, destination, began, sent)
        return verdict

    async def _handed_over(self, home: HostService, hosted: Hosted, record: CheckpointRecord | None,
                           destination: str, began: float, sent: float, how: str = "sent whole") -> None:
        """The destination runs the unit under the next epoch: drop the copy here, tell the master."""
        task_id, epoch = hosted.task.task_id, hosted.spec.epoch + 1
        size = record.size if record is not None else 0
        if size:
            self._observe_transfer(destination, size, time.monotonic() - sent)
        await self._supervisor.settled(task_id)  # its write here ends before the copy is dropped, not after
        home.forget(hosted, moved_to=destination)
        self._events.add("move", f"{task_id} moved to {self._peer(destination)} with "
                         f"{f'checkpoint {record.seq} ({size} bytes, {how})' if record else 'no checkpoint'} "
                         f"in {(time.monotonic() - began) * 1000:.0f} ms (epoch {epoch})")
        try:
            await self._links.master(hosted.master).host_moved(self._node_id, task_id, epoch, destination)
        except (NodeUnavailableError, StorageError) as error:
            log.info("master not told of the move of %s (%s); the destination's report will", task_id, error.message)

    async def _return_to_master(self, home: HostService, hosted: Hosted, record: CheckpointRecord | None,
                                why: str) -> None:
        """No peer took the unit (`why`): its master queues it again, from this checkpoint."""
        task = hosted.task
        while True:
            try:
                await self._links.master(hosted.master).host_return(self._node_id, task.task_id, task.epoch,
                                                                    record, *hosted.standing_at(record, captured=True))
            except (NodeUnavailableError, StorageError) as error:
                if hosted.change(Stay.STRANDED):
                    why = "is out of reach" if isinstance(error, NodeUnavailableError) else "could not store it"
                    self._events.add("evict", f"{task.task_id}: no peer took it and its master {why} "
                                     f"({error.message}); keeping its checkpoint and trying again", severity="warning")
                await trio.sleep(RETURN_RETRY)
                continue
            break
        await self._supervisor.settled(task.task_id)
        home.forget(hosted)
        self._events.add("evict", f"{task.task_id} went back to its master's queue"
                         + (f" with checkpoint {record.seq}" if record else "") + f" (no peer took it: {why})")

"""How a node reaches a unit's master or a host: by a direct call when that is this node, else over the network.

The master's own machine is a host like any other, so the master and host services never ask
whether the other side is local: they ask `Links` for a link to a node id and call it. A
remote call sends one request, with bulk bytes where a checkpoint or result travels, and waits
for one reply, on an authenticated channel kept open to that peer (the handshake proves the
cluster key, so only peers of this cluster can place, move or report units here; it is done
once per channel, not per call: see wire.pool). Every failure to get an answer,
whether the peer is gone, refused the handshake or broke the protocol, is one
NodeUnavailableError naming the peer and the cause: callers treat all of them alike.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from frost_core.storage.checkpoints import IDENTITY, CheckpointRecord, CheckpointStore, StoredCheckpoint
from frost_core.storage.staging import StagingSink
from frost_core.api.errors import CheckpointError, FrostError, NodeUnavailableError, ProtocolError, StorageError
from frost_core.cluster.messages import (
    CheckpointMeta, CheckpointReplica, Figures, FiguresQuery, FiguresReply, Holdings, HoldingsQuery, MoveCommand, ReplicaFetch, UnitMoved, UnitFailed, UnitOffer, UnitOfferReply, UnitReport,
    SlotKept, SpentRun, UnitReportReply, UnitResult, UnitReturn, UnitSpec, UnitStart, UnitStatus, Verdict, WorkRequest,
)
from frost_core.cluster.messages import (
    TRAILED, CheckpointTrailer, OffersWithdrawn, UnitOfferReplies, UnitOffers, UnitStarts, Verdicts,
)
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.cluster.messages import GANG_MESSAGES
from frost_core.cluster.gang_wire import has_bulk
from frost_core.plugin.limits import MAX_RESULT_BYTES, MAX_STATE_BYTES
from frost_core.policies.views import NodeView
from frost_core.wire.transport import NetworkTransport
from frost_core.wire.channel import Address, BulkSink, Channel
from frost_core.wire.messages import Message
from frost_core.wire.stall import StallDeadline, stall_deadline

log = logging.getLogger("frost.cluster")

CALL_TIMEOUT = 10.0
"""Seconds for one request and its reply; a start waits longer (see START_TIMEOUT). A call with bulk bytes (a
result, a checkpoint) fails only after this long without any of them moving (`wire.stall`)."""
START_TIMEOUT = 60.0
"""A start carries a checkpoint and answers only once it is durable and the guest runs (counted as CALL_TIMEOUT)."""
MOVE_TIMEOUT = 90.0


class MasterSide(Protocol):
    """What hosts ask of a unit's master (implemented by master.scheduler.MasterScheduler)."""

    async def host_report(self, host: str, units: tuple[UnitStatus, ...],
                          spent: tuple[SpentRun, ...] = ()) -> tuple[str, ...]: ...
    async def host_result(self, host: str, task_id: str, epoch: int, result: bytes, cpu_seconds: float = 0.0) -> bool: ...
    async def host_return(self, host: str, task_id: str, epoch: int, record: CheckpointRecord | None,
                          progress: float = 0.0, cpu_seconds: float = 0.0) -> bool: ...
    async def host_failed(self, host: str, task_id: str, epoch: int, reason: str, retryable: bool) -> None: ...
    async def host_moved(self, host: str, task_id: str, epoch: int, destination: str) -> bool: ...
    async def host_replica(self, host: str, record: CheckpointRecord, progress: float = 0.0,
                           cpu_seconds: float = 0.0) -> None: ...
    async def slot_kept(self, host: str) -> bool: ...


class HostSide(Protocol):
    """What masters and other hosts ask of a host (implemented by cluster.host.HostService)."""

    async def offer(self, source: str, offer: UnitOffer) -> UnitOfferReply: ...
    async def start(self, source: str, spec: UnitSpec, record: CheckpointRecord | None, *,
                    moved: bool = False) -> Verdict: ...
    async def withdraw(self, source: str, task_ids: tuple[str, ...]) -> None: ...
    async def move(self, task_id: str, destination: str) -> Verdict: ...
    async def work_request(self, requester: NodeView) -> Verdict: ...
    async def figures(self) -> NodeView: ...
    async def holdings(self, master: str) -> Holdings: ...


class KeeperSide(Protocol):
    """What a master asks of the k peers that hold extra copies of its units' checkpoints."""

    async def keep(self, master: str, record: CheckpointRecord) -> None: ...
    async def fetch(self, task_id: str, after_seq: int) -> CheckpointRecord | None: ...


class GangSide(Protocol):
    """Where gang messages arriving from peers go (implemented by node.gangs.Gangs)."""

    def receive(self, peer: str, header: Message, data: bytes | None) -> None: ...


class Links:
    """Links to any node by id; `serve` answers the same calls arriving from the network."""

    def __init__(self, *, node_id: str, address_of: Callable[[str], Address | None],
                 checkpoints: CheckpointStore | None = None,
                 disk_refused: Callable[[StorageError], None] = lambda error: None) -> None:
        """`checkpoints`: the host's store, where a unit's checkpoint is written while it arrives
        (None: it is gathered in memory and written once whole); `disk_refused` hears of each call this node
        could not answer because its disk refused a write (the caller is told to send it again later)."""
        self.node_id = node_id
        self._disk_refused = disk_refused
        self._address_of = address_of
        self._checkpoints = checkpoints
        self._transport: NetworkTransport | None = None
        self._master: MasterSide | None = None
        self._host: HostSide | None = None
        self._keeper: KeeperSide | None = None
        self._gangs: GangSide | None = None

    def bind_gangs(self, gangs: GangSide) -> None:
        """Hand gang messages from peers to `gangs` (refused until this is called)."""
        self._gangs = gangs

    def bind(self, *, master: MasterSide, host: HostSide, keeper: KeeperSide) -> None:
        self._master, self._host, self._keeper = master, host, keeper

    def install(self, transport: NetworkTransport) -> None:
        """Answer master and host calls from peers on `transport` (and use it for outgoing ones)."""
        self._transport = transport
        for code in (UnitReport, UnitResult, UnitReturn, UnitFailed, UnitMoved, CheckpointReplica,
                     UnitOffer, UnitStart, MoveCommand, WorkRequest, ReplicaFetch, FiguresQuery, HoldingsQuery,
                     UnitOffers, UnitStarts, OffersWithdrawn, SlotKept, *GANG_MESSAGES):
            transport.set_call_handler(code.CODE, self._answer)

    def forget(self, address: Address) -> None:
        """The node at `address` died or left: close the channels kept open to it."""
        if self._transport is not None:
            self._transport.pool.forget(address)

    def master(self, node_id: str) -> MasterSide:
        assert self._master is not None, "bind() first"
        return self._master if node_id == self.node_id else _RemoteMaster(self, node_id)

    def host(self, node_id: str) -> HostSide:
        assert self._host is not None, "bind() first"
        return self._host if node_id == self.node_id else _RemoteHost(self, node_id)

    def keeper(self, node_id: str) -> KeeperSide:
        assert self._keeper is not None, "bind() first"
        return self._keeper if node_id == self.node_id else _RemoteKeeper(self, node_id)

    # -- outgoing -----------------------------------------------------------------------------

    async def offer_units(self, node_id: str, offers: tuple[UnitOffer, ...]) -> tuple[UnitOfferReply, ...]:
        """Several offers to one host in one call (a placement round), answered in order."""
        if node_id == self.node_id:
            return await offer_each(self.host(node_id), node_id, offers)
        answer = await self.call(node_id, UnitOffers(offers=offers), reply=UnitOfferReplies)
        if len(answer.replies) != len(offers):
            raise NodeUnavailableError(f"node {node_id[:8]} answered {len(offers)} offers with "
                                       f"{len(answer.replies)} replies", title="Peer unreachable")
        return answer.replies

    async def start_units(self, node_id: str, specs: tuple[UnitSpec, ...]) -> tuple[Verdict, ...]:
        """Start several units without checkpoints on one host in one call; each verdict once it runs or not."""
        if node_id == self.node_id:
            return await start_each(self.host(node_id), node_id, specs)
        answer = await self.call(node_id, UnitStarts(specs=specs), reply=Verdicts, timeout=START_TIMEOUT)
        if len(answer.verdicts) != len(specs):
            raise NodeUnavailableError(f"node {node_id[:8]} answered {len(specs)} starts with "
                                       f"{len(answer.verdicts)} verdicts", title="Peer unreachable")
        return answer.verdicts

    async def withdraw_offers(self, node_id: str, task_ids: tuple[str, ...]) -> None:
        """Tell a host that units it accepted will not be started after all, so it frees the room they hold."""
        await self.host(node_id).withdraw(self.node_id, task_ids)

    async def start_fed(self, node_id: str, spec: UnitSpec, feed: CaptureFeed) -> Verdict:
        """Hand a unit over with the capture `feed` brings, sent while it still comes up the guest's
        pipe and its hash after it (`TRAILED`); the verdict comes once the destination runs it."""
        if node_id == self.node_id:
            raise NodeUnavailableError("a capture is not fed to this node itself", title="Peer unreachable")

        async def send(channel: Channel, deadline: StallDeadline) -> None:
            await feed.begun()
            meta = CheckpointMeta(**{name: feed.identity[name] for name in IDENTITY}, sha256=TRAILED)
            await channel.send_bulk(UnitStart(spec=spec, checkpoint=meta, moved=True), deadline.paced(feed.pieces()),
                                    size=feed.size)
            await channel.send(CheckpointTrailer(sha256=await feed.sealed()))

        answer = await self.call(node_id, UnitStart(spec=spec, moved=True), timeout=START_TIMEOUT, send=send)
        assert isinstance(answer, Verdict)
        return answer

    async def call(
        self, node_id: str, request: Message, data: bytes | None = None, *, reply: type[Message] = Verdict,
        timeout: float = CALL_TIMEOUT, send: Callable[[Channel, StallDeadline], Awaitable[None]] | None = None,
    ) -> Message:
        """One request (with bulk `data` if given) and its reply, on a channel kept open to `node_id`;
        `send`, if given, sends the request instead (`request` then only names it in errors). `timeout`
        counts from the last bulk bytes that went out (`wire.stall`): a big transfer takes what the link
        needs, a stalled one fails."""
        address = self._address_of(node_id)
        if address is None or self._transport is None:
            raise NodeUnavailableError(f"node {node_id[:8]} is not known to be alive", title="Peer unreachable")
        pool = self._transport.pool

        async def send_request(channel: Channel, deadline: StallDeadline) -> None:
            if data is None:
                await channel.send(request)
            else:
                await channel.send_bulk(request, deadline.paced(data), size=len(data))

        try:
            with stall_deadline(timeout) as deadline:
                answer = await pool.call(address, functools.partial(send or send_request, deadline=deadline),
                                         Channel.receive)
        except trio.TooSlowError:
            raise NodeUnavailableError(f"node {node_id[:8]} did not answer {type(request).__name__} "
                                       f"within {timeout:g} s" + (" of the last bytes that moved" if data or send else ""),
                                       title="Peer unreachable") from None
        except (OSError, trio.BrokenResourceError, trio.EndOfChannel) as error:
            raise NodeUnavailableError(f"node {node_id[:8]} at {address[0]}:{address[1]} is unreachable: "
                                       f"{error}", title="Peer unreachable") from None
        except ProtocolError as error:
            raise NodeUnavailableError(f"node {node_id[:8]} broke the protocol: {error.message}",
                                       title="Peer unreachable") from None
        if not isinstance(answer, reply):
            raise NodeUnavailableError(f"node {node_id[:8]} answered {type(request).__name__} with "
                                       f"{type(answer).__name__}", title="Peer unreachable")
        return answer

    async def send_gang(self, node_id: str, header: Message, data: bytes | None) -> None:
        """One gang message (`cluster.gang_wire`) to another node, returning once it took it in."""
        answer = await self.call(node_id, header, data, timeout=START_TIMEOUT if data is not None else CALL_TIMEOUT)
        assert isinstance(answer, Verdict)
        if not answer.ok:
            raise NodeUnavailableError(f"node {node_id[:8]} refused {type(header).__name__}: {answer.reason}",
                                       title="Peer unreachable")

    async def fetch_replica(self, node_id: str, request: ReplicaFetch) -> CheckpointRecord | None:
        """Ask a holder for its copy: a CheckpointReplica with bulk state, then a Verdict; None if it has none."""
        address = self._address_of(node_id)
        if address is None or self._transport is None:
            return None

        async def receive(channel: Channel, deadline: StallDeadline) -> tuple[Message, bytes]:
            answer = await channel.receive()
            if not isinstance(answer, CheckpointReplica):
                return answer, b""
            state = await channel.receive_bulk_data(max_size=MAX_STATE_BYTES, sink=deadline.watching())
            await channel.receive()  # the Verdict that closes the answer
            return answer, state

        try:
            with stall_deadline(START_TIMEOUT) as deadline:  # (from the last bytes that came: a slow link takes long)
                answer, state = await self._transport.pool.call(address, lambda channel: channel.send(request),
                                                                functools.partial(receive, deadline=deadline))
            if not isinstance(answer, CheckpointReplica):
                return None
        except (trio.TooSlowError, OSError, trio.BrokenResourceError, trio.EndOfChannel, ProtocolError) as error:
            log.info("no replica of %s from %s: %s", request.task_id, node_id[:8], error)
            return None
        try:
            return answer.checkpoint.record(state).verify()  # now: a corrupt copy must yield to an older one
        except CheckpointError as error:
            log.warning("replica of %s from %s is corrupt: %s", request.task_id, node_id[:8], error.message)
            return None

    # -- incoming -----------------------------------------------------------------------------

    async def _answer(self, channel: Channel, request: Message) -> None:
        """Run one call from a peer and send the reply; a FrostError becomes a refusal naming it."""
        assert self._master is not None and self._host is not None
        peer = channel.peer_node_id
        try:
            answer = await self._dispatch(channel, peer, request)
        except CheckpointError as error:
            answer = Verdict(ok=False, reason=error.message)
        except StorageError as error:   # (this node's disk: the caller keeps what it sent, and sends it again)
            self._disk_refused(error)
            answer = Verdict(ok=False, reason=error.message, later=True)
        except FrostError as error:
            if isinstance(error, ProtocolError):
                raise
            log.info("refused %s from %s: %s", type(request).__name__, peer[:8], error.message)
            answer = Verdict(ok=False, reason=error.message)
        await channel.send(answer)

    async def _dispatch(self, channel: Channel, peer: str, request: Message) -> Message:
        master, host, keeper = self._master, self._host, self._keeper
        assert master is not None and host is not None and keeper is not None
        match request:
            case UnitReport(units=units, spent=spent):
                return UnitReportReply(stop=await master.host_report(peer, units, spent))
            case UnitResult(task_id=task_id, epoch=epoch, cpu_seconds=cpu_seconds):
                result = await _received(channel, max_size=MAX_RESULT_BYTES)
                return Verdict(ok=await master.host_result(peer, task_id, epoch, result, cpu_seconds))
            case UnitReturn(task_id=task_id, epoch=epoch, checkpoint=meta, progress=progress, cpu_seconds=cpu_seconds):
                record = await _receive_checkpoint(channel, meta)
                return Verdict(ok=await master.host_return(peer, task_id, epoch, record, progress, cpu_seconds))
            case UnitFailed(task_id=task_id, epoch=epoch, reason=reason, retryable=retryable):
                await master.host_failed(peer, task_id, epoch, reason, retryable)
                return Verdict(ok=True)
            case UnitMoved(task_id=task_id, epoch=epoch, destination=destination):
                current = await master.host_moved(peer, task_id, epoch, destination)
                return Verdict(ok=current, reason="" if current else f"epoch {epoch} of {task_id} is not current")
            case CheckpointReplica(checkpoint=meta, held_for=held_for, progress=progress, cpu_seconds=cpu_seconds):
                record = await _receive_checkpoint(channel, meta)
                assert record is not None
                if held_for:
                    await keeper.keep(held_for, record)
                else:
                    await master.host_replica(peer, record, progress, cpu_seconds)
                return Verdict(ok=True)
            case ReplicaFetch(task_id=task_id, after_seq=after_seq):
                held = await keeper.fetch(task_id, after_seq)
                if held is None:
                    return Verdict(ok=False, reason=f"no copy of {task_id} newer than checkpoint {after_seq} here")
                await channel.send_bulk(CheckpointReplica(checkpoint=CheckpointMeta.of(held)), held.state)
                return Verdict(ok=True)
            case SlotKept():
                wanted = await master.slot_kept(peer)
                return Verdict(ok=wanted, reason="" if wanted else "no unit waits here")
            case UnitOffer():
                return await host.offer(peer, request)
            case UnitOffers(offers=offers):
                return UnitOfferReplies(replies=await offer_each(host, peer, offers))
            case UnitStarts(specs=specs):
                return Verdicts(verdicts=await start_each(host, peer, specs))
            case OffersWithdrawn(task_ids=task_ids):
                await host.withdraw(peer, task_ids)
                return Verdict(ok=True)
            case UnitStart(spec=spec, checkpoint=meta, moved=moved):
                if meta is None or self._checkpoints is None:
                    return await host.start(peer, spec, await _receive_checkpoint(channel, meta), moved=moved)
                if meta.sha256 == TRAILED:  # sent while it came up the source's pipe: hashed here as it lands
                    identity = {name: getattr(meta, name) for name in IDENTITY}
                    staging = StagingSink(functools.partial(self._checkpoints.receiving, **identity))
                else:
                    staging = StagingSink(functools.partial(self._checkpoints.incoming, meta.record(b"")))
                try:
                    state = await _received(channel, max_size=MAX_STATE_BYTES, sink=staging)
                    record = dataclasses.replace(meta.record(state), staged=staging.incoming)
                    if meta.sha256 == TRAILED:  # checked against what arrived when it is made durable (`write`)
                        record = dataclasses.replace(record, sha256=await _receive_trailer(channel))
                    return await host.start(peer, spec, record, moved=moved)
                finally:  # a unit not taken leaves no temp file behind (one taken was renamed into place)
                    await staging.abort()
            case MoveCommand(task_id=task_id, destination=destination):
                return await host.move(task_id, destination)
            case WorkRequest(requester=requester):
                if requester.node_id != peer:
                    raise ProtocolError(f"{peer[:8]} asked for work in the name of {requester.node_id[:8]}")
                return await host.work_request(requester.view())
            case FiguresQuery():
                return FiguresReply(figures=Figures.of(await host.figures()))
            case HoldingsQuery():
                return await host.holdings(peer)
            case _ if isinstance(request, GANG_MESSAGES):
                data = await _received(channel, max_size=MAX_STATE_BYTES) if has_bulk(request) else None
                if self._gangs is None:
                    return Verdict(ok=False, reason="this node runs no gangs yet")
                self._gangs.receive(peer, request, data)
                return Verdict(ok=True)
        raise ProtocolError(f"no handler for {type(request).__name__}")


async def offer_each(host: HostSide, source: str, offers: tuple[UnitOffer, ...]) -> tuple[UnitOfferReply, ...]:
    """In order: each accepted offer reserves its room before the next is judged."""
    return tuple([await host.offer(source, offer) for offer in offers])


async def start_each(host: HostSide, source: str, specs: tuple[UnitSpec, ...]) -> tuple[Verdict, ...]:
    """All at once (each start waits for its guest to run), a refusal as its verdict."""
    verdicts: list[Verdict] = [Verdict(ok=False, reason="not started")] * len(specs)

    async def start(i: int, spec: UnitSpec) -> None:
        try:
            verdicts[i] = await host.start(source, spec, None)
        except FrostError as error:
            verdicts[i] = Verdict(ok=False, reason=error.message)

    async with trio.open_nursery() as nursery:
        for i, spec in enumerate(specs):
            nursery.start_soon(start, i, spec)
    return tuple(verdicts)


async def _receive_checkpoint(channel: Channel, meta: CheckpointMeta | None) -> CheckpointRecord | None:
    """The bulk state after a header, as an unverified record (the side that keeps it checks it)."""
    if meta is None:
        await _received(channel, max_size=0)
        return None
    record = meta.record(await _received(channel, max_size=MAX_STATE_BYTES))
    if meta.sha256 == TRAILED:
        record = dataclasses.replace(record, sha256=await _receive_trailer(channel))
    return record


async def _received(channel: Channel, *, max_size: int, sink: BulkSink | None = None) -> bytes:
    """The bulk bytes a peer's call brings. Given up once none came for START_TIMEOUT (ProtocolError: the
    connection is dropped): a peer gone mid-transfer without a word (a laptop closed, no FIN) would otherwise hold
    the buffer, up to 256 MiB, and the staged file here for as long as the connection stays open."""
    try:
        with stall_deadline(START_TIMEOUT) as deadline:
            return await channel.receive_bulk_data(max_size=max_size, sink=deadline.watching(sink))
    except trio.TooSlowError:
        raise ProtocolError(f"nothing came for {START_TIMEOUT:g} s in the middle of a transfer") from None


async def _receive_trailer(channel: Channel) -> str:
    """The hash sent after a state whose header said `TRAILED` (at most START_TIMEOUT after the state)."""
    trailer = None
    with trio.move_on_after(START_TIMEOUT):
        trailer = await channel.receive()
    if trailer is None:
        raise ProtocolError(f"no trailer came for {START_TIMEOUT:g} s after a state")
    if not isinstance(trailer, CheckpointTrailer):
        raise ProtocolError(f"expected the checkpoint's trailer, got {type(trailer).__name__}")
    return trailer.sha256


async def _checkpoint_parts(record: CheckpointRecord | None) -> tuple[CheckpointMeta | None, bytes]:
    """What a call sends of `record`: its description and its state, a guest's handed state read back from its
    file in a worker thread (up to a few hundred MB: never on the event loop)."""
    if record is None:
        return None, b""
    if isinstance(record, StoredCheckpoint):
        record = await trio.to_thread.run_sync(record.loaded)
    return CheckpointMeta.of(record), record.state


class _RemoteMaster:
    def __init__(self, links: Links, node_id: str) -> None:
        self._links, self._node = links, node_id

    async def host_report(self, host: str, units: tuple[UnitStatus, ...],
                          spent: tuple[SpentRun, ...] = ()) -> tuple[str, ...]:
        answer = await self._links.call(self._node, UnitReport(units=units, spent=spent), reply=UnitReportReply)
        assert isinstance(answer, UnitReportReply)
        return answer.stop

    async def host_result(self, host: str, task_id: str, epoch: int, result: bytes, cpu_seconds: float = 0.0) -> bool:
        return (await self._verdict(UnitResult(task_id=task_id, epoch=epoch, cpu_seconds=cpu_seconds), result)).ok

    async def host_return(self, host: str, task_id: str, epoch: int, record: CheckpointRecord | None,
                          progress: float = 0.0, cpu_seconds: float = 0.0) -> bool:
        meta, state = await _checkpoint_parts(record)
        return (await self._verdict(UnitReturn(task_id=task_id, epoch=epoch, checkpoint=meta, progress=progress,
                                               cpu_seconds=cpu_seconds), state, timeout=START_TIMEOUT)).ok

    async def host_failed(self, host: str, task_id: str, epoch: int, reason: str, retryable: bool) -> None:
        await self._verdict(UnitFailed(task_id=task_id, epoch=epoch, reason=reason[:4000], retryable=retryable))

    async def host_moved(self, host: str, task_id: str, epoch: int, destination: str) -> bool:
        return (await self._verdict(UnitMoved(task_id=task_id, epoch=epoch, destination=destination))).ok

    async def host_replica(self, host: str, record: CheckpointRecord, progress: float = 0.0,
                           cpu_seconds: float = 0.0) -> None:
        meta, state = await _checkpoint_parts(record)
        assert meta is not None
        answer = await self._verdict(CheckpointReplica(checkpoint=meta, progress=progress, cpu_seconds=cpu_seconds),
                                     state, timeout=START_TIMEOUT)
        if not answer.ok:
            raise NodeUnavailableError(f"master {self._node[:8]} refused the replica: {answer.reason}")

    async def slot_kept(self, host: str) -> bool:
        return (await self._verdict(SlotKept())).ok

    async def _verdict(self, request: Message, data: bytes | None = None, *, timeout: float | None = None) -> Verdict:
        """The master's answer; StorageError if its disk refused what it was given (it wants it again later)."""
        answer = await self._links.call(self._node, request, data, timeout=timeout or CALL_TIMEOUT)
        assert isinstance(answer, Verdict)
        if answer.later:
            raise StorageError(f"on {self._node[:8]}: {answer.reason}")
        return answer


class _RemoteKeeper:
    def __init__(self, links: Links, node_id: str) -> None:
        self._links, self._node = links, node_id

    async def keep(self, master: str, record: CheckpointRecord) -> None:
        meta, state = await _checkpoint_parts(record)
        assert meta is not None
        await self._links.call(self._node, CheckpointReplica(checkpoint=meta, held_for=master), state,
                               timeout=START_TIMEOUT)

    async def fetch(self, task_id: str, after_seq: int) -> CheckpointRecord | None:
        return await self._links.fetch_replica(self._node, ReplicaFetch(task_id=task_id, after_seq=after_seq))


class _RemoteHost:
    def __init__(self, links: Links, node_id: str) -> None:
        self._links, self._node = links, node_id

    async def offer(self, source: str, offer: UnitOffer) -> UnitOfferReply:
        answer = await self._links.call(self._node, offer, reply=UnitOfferReply)
        assert isinstance(answer, UnitOfferReply)
        return answer

    async def start(self, source: str, spec: UnitSpec, record: CheckpointRecord | None, *,
                    moved: bool = False) -> Verdict:
        meta, state = await _checkpoint_parts(record)
        return await self._verdict(UnitStart(spec=spec, checkpoint=meta, moved=moved), state, START_TIMEOUT)

    async def withdraw(self, source: str, task_ids: tuple[str, ...]) -> None:
        await self._verdict(OffersWithdrawn(task_ids=task_ids), None, CALL_TIMEOUT)

    async def move(self, task_id: str, destination: str) -> Verdict:
        return await self._verdict(MoveCommand(task_id=task_id, destination=destination), None, MOVE_TIMEOUT)

    async def work_request(self, requester: NodeView) -> Verdict:
        return await self._verdict(WorkRequest(requester=Figures.of(requester)), None, MOVE_TIMEOUT)

    async def figures(self) -> NodeView:
        answer = await self._links.call(self._node, FiguresQuery(), reply=FiguresReply)
        assert isinstance(answer, FiguresReply)
        return answer.figures.view()

    async def holdings(self, master: str) -> Holdings:
        answer = await self._links.call(self._node, HoldingsQuery(), reply=Holdings)
        assert isinstance(answer, Holdings)
        return answer

    async def _verdict(self, request: Message, data: bytes | None, timeout: float) -> Verdict:
        answer = await self._links.call(self._node, request, data, timeout=timeout)
        assert isinstance(answer, Verdict)
        return answer

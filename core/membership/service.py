"""The trio driver of membership: one object that gossips, probes, discovers and reports changes."""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import trio

from frost_core.api.errors import ProtocolError, WrongClusterKey
from frost_core.membership.awareness import Awareness
from frost_core.membership.config import MembershipConfig
from frost_core.membership.discovery import Discovery
from frost_core.membership.gossip import Gossip
from frost_core.membership.messages import (
    Ack,
    Announce,
    AnnounceReply,
    Leave,
    MemberEntry,
    Nack,
    Ping,
    PingReq,
    ResourceUpdate,
    check_datagram,
    entry_from_record,
    record_from_entry,
)
from frost_core.membership.records import (
    Address,
    MemberState,
    NodeRecord,
    ResourceFigures,
    declare,
    figures_moved,
    refute,
)
from frost_core.membership.swim import Prober
from frost_core.membership.ticks import sleep_to_tick
from frost_core.membership.table import MemberTable
from frost_core.membership.transport_protocol import Transport
from frost_core.wire.codes import PROTOCOL_VERSION, MessageCode
from frost_core.wire.messages import Message

log = logging.getLogger("frost.membership")

_STATE_EVENTS = {
    MemberState.ALIVE: "alive",
    MemberState.SUSPECT: "suspect",
    MemberState.DEAD: "dead",
    MemberState.LEFT: "left",
}


@dataclass(frozen=True)
class MemberEvent:
    """A change the UI's event log shows: kind is joined, alive, suspect, dead or left."""

    kind: str
    record: NodeRecord
    at: float


class Membership:
    """This node's view of the cluster, kept fresh by gossip and failure detection.

    Construct it, then run `serve(transport)` in a nursery; read `members()` any time; feed
    `set_local_figures()` with the information policy's figures; call `leave()` before
    shutting down. Randomness comes from `rng` and time from trio's clock, so a MockClock run
    is instant and repeatable.
    """

    def __init__(
        self,
        *,
        node_id: str,
        name: str,
        address: Address,
        rng: random.Random,
        config: MembershipConfig = MembershipConfig(),
        seeds: Iterable[Address] = (),
        figures: ResourceFigures = ResourceFigures(),
        on_event: Callable[[MemberEvent], None] | None = None,
        on_refused: Callable[[Address, str], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.address = address
        self.config = config
        self.rng = rng
        self.on_event = on_event
        self.on_refused = on_refused
        """Told (once per address) when a peer we reach refuses us, with its reason: the owner must hear it."""
        self.awareness = Awareness(config.max_awareness)
        own = NodeRecord(node_id=node_id, name=name, address=address, protocol_version=PROTOCOL_VERSION, figures=figures)
        self.table = MemberTable(own)
        self.gossip = Gossip(self)
        self.prober = Prober(self)
        self.discovery = Discovery(self, tuple(seeds))
        self._last_pushed = figures
        self._push_wanted = trio.Event()
        self._leaving = False
        self._warned: set[Address] = set()
        self._transport: Transport | None = None
        self._nursery: trio.Nursery | None = None

    # -- what the node and the UI read ----------------------------------------------------------

    def members(self) -> tuple[NodeRecord, ...]:
        """Every known node, ourselves included, in any state."""
        return self.table.records()

    def member(self, node_id: str) -> NodeRecord | None:
        return self.table.get(node_id)

    def rtt_ms(self, node_id: str) -> float | None:
        """Smoothed round-trip time of direct probes to `node_id` in ms; None if never measured."""
        rtt = self.prober.rtt.get(node_id)
        return None if rtt is None else rtt * 1000.0

    def last_heard(self, node_id: str) -> float:
        """Wall-clock time (time.time()) we last heard from `node_id`, directly or through gossip.

        Through gossip counts only news the node itself made (figures, a refutation), not
        others' rumours of its death. Records keep trio's clock, which need not be the wall
        clock; the age converts at read time. Raises KeyError for a node not in the table.
        """
        record = self.table.get(node_id)
        if record is None:
            raise KeyError(f"no member {node_id!r}")
        if node_id == self.node_id:
            return time.time()
        return time.time() - (trio.current_time() - max(record.heard_at, record.news_at))

    def set_local_figures(self, figures: ResourceFigures) -> None:
        """Publish new figures: always by the next push-pull, at once if `available` moved >= 5 %."""
        own = self.table.own
        self.table.put(
            dataclasses.replace(own, figures=figures, figures_version=own.figures_version + 1, updated_at=trio.current_time())
        )
        if figures_moved(self._last_pushed, figures, self.config.push_threshold):
            self._push_wanted.set()

    # -- running --------------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        assert self._transport is not None, "Membership is not serving"
        return self._transport

    @property
    def nursery(self) -> trio.Nursery:
        assert self._nursery is not None, "Membership is not serving"
        return self._nursery

    async def serve(self, transport: Transport, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Gossip, probe and discover until cancelled."""
        self._transport = transport
        transport.set_exchange_handler(MessageCode.PUSH_PULL, self.gossip.answer_push_pull)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._receive_datagrams)
            nursery.start_soon(self.discovery.announce_periodically)
            nursery.start_soon(self.discovery.join_through_seeds)
            nursery.start_soon(self.gossip.run_rounds)
            nursery.start_soon(self._push_on_change)
            nursery.start_soon(self.prober.run)
            nursery.start_soon(self.prober.sweep_suspicions)
            nursery.start_soon(self._watch_own_lag)
            task_status.started()

    async def leave(self) -> None:
        """Say goodbye so peers mark us left (not dead) at once; stop serving afterwards."""
        self._leaving = True
        own = self.table.own
        self.table.put(declare(own, MemberState.LEFT, trio.current_time()))
        goodbye = Leave(node_id=self.node_id, incarnation=own.incarnation)
        for peer in self.table.active_peers():
            await self.send(peer.address, goodbye)

    async def rejoin(self) -> None:
        """Back after a goodbye that was not a stop (the machine woke from sleep): alive again, one
        incarnation above the goodbye so it wins everywhere, pushed to the peers at once."""
        self._leaving = False
        now = trio.current_time()
        await self._outbid(state=MemberState.ALIVE, suspectors=(), state_since=now)

    async def join_another_cluster(self) -> int:
        """The transport speaks another cluster's key now (after `leave`): forget every peer of the last cluster and
        find the new one's, alive again one incarnation above the goodbye. Returns how many peers were forgotten."""
        dropped = self.table.drop_peers()
        self.prober.rtt.clear()
        self._warned.clear()   # a refusal under the new key is news again
        self._leaving = False
        await self._outbid(state=MemberState.ALIVE, suspectors=(), state_since=trio.current_time())
        await self.discovery.look_again()
        return dropped

    async def readdress(self, address: Address) -> None:
        """This machine is reached at `address` now (another network, another lease): the own record says so,
        one incarnation up so it wins everywhere, pushed to the peers at once (from the new address: a peer
        that answers has it)."""
        self.address = address
        await self._outbid(address=address)

    async def _outbid(self, **changes: object) -> None:
        own = self.table.own
        record = dataclasses.replace(own, incarnation=own.incarnation + 1, updated_at=trio.current_time(), **changes)
        self.table.put(record)
        await self.gossip.push([record], self.table.active_peers())

    # -- the plumbing the protocol parts share --------------------------------------------------

    def own_entry(self) -> MemberEntry:
        return entry_from_record(self.table.own, trio.current_time())

    async def send(self, address: Address, message: Message) -> None:
        try:
            await self.transport.send_datagram(address, message)
        except OSError as exc:
            log.debug("datagram to %s failed: %s", address, exc)

    def absorb(self, entries: Iterable[MemberEntry]) -> None:
        for entry in entries:
            self.absorb_one(entry)

    def absorb_one(self, entry: MemberEntry, *, first_hand: bool = False) -> str | None:
        """Merge one record a peer sent; returns its node id unless it was about ourselves.

        A `first_hand` entry is the sender's own record: if we hold that node dead or gone at
        its incarnation, it is evidently back (a healed partition, a long stall), so we tell it
        what we believe and it refutes.
        """
        now = trio.current_time()
        record = record_from_entry(entry, now)
        if record.node_id == self.node_id:
            self._answer_rumour(record, now)
            return None
        change = self.table.merge(record, now)
        if change is not None:
            self._report(*change)
        held = self.table.get(record.node_id)
        if first_hand and held is not None and not held.is_active and record.state == MemberState.ALIVE:
            self.nursery.start_soon(self.gossip.push, [held], [record])
        return record.node_id

    def store(self, before: NodeRecord, after: NodeRecord) -> None:
        """Put a record changed by a local decision, reporting the change."""
        self.table.put(after)
        self._report(before, after)

    def report_bad_input(self, address: Address, error: ProtocolError) -> None:
        """One warning per source address, then quiet: a broken peer must not flood the log."""
        if address not in self._warned and len(self._warned) < 1024:
            self._warned.add(address)
            if isinstance(error, WrongClusterKey) and self.on_refused is not None:
                self.on_refused(address, error.message)
                return
            log.warning("bad membership message from %s: %s", address, error.message)
        else:
            log.debug("bad membership message from %s: %s", address, error.message)

    def _answer_rumour(self, heard: NodeRecord, now: float) -> None:
        if self._leaving:
            return
        refuted = refute(self.table.own, heard, now)
        if refuted is None:
            return
        self.table.put(refuted)
        self.awareness.apply(1)  # being suspected hints that we are the slow one
        # Every peer at once, not k of them and then the news: a node back from a 10 s stall
        # finds its suspicion about to time out everywhere, and news takes rounds (pushing to the
        # suspectors and k peers gave 27 false deaths in 20 simulated minutes of
        # gossip_failure_detection.py, against 0).
        self.nursery.start_soon(self.gossip.push, [refuted], self.table.active_peers())

    def _report(self, before: NodeRecord | None, after: NodeRecord) -> None:
        if after.state == MemberState.SUSPECT:
            self.prober.note_suspect()
        if after.is_active:
            self.prober.note_peer()
        if self.on_event is None:
            return
        if before is None:
            kind = "joined" if after.is_active else None
        else:
            kind = _STATE_EVENTS[after.state] if after.state != before.state else None
        if kind is not None:
            self.on_event(MemberEvent(kind=kind, record=after, at=trio.current_time()))

    async def _receive_datagrams(self) -> None:
        while True:
            address, message = await self.transport.receive_datagram()
            await self.handle_datagram(address, message)

    async def handle_datagram(self, address: Address, message: Message) -> None:
        """Dispatch one datagram; bad content costs one log line, never the node."""
        try:
            check_datagram(message)
            if isinstance(message, Ping):
                await self.prober.on_ping(address, message)
            elif isinstance(message, Ack):
                self.prober.on_ack(message)
            elif isinstance(message, Nack):
                self.prober.on_nack(message)
            elif isinstance(message, PingReq):
                self.nursery.start_soon(self.prober.on_ping_req, address, message)
            elif isinstance(message, ResourceUpdate):
                self.absorb(message.entries)
            elif isinstance(message, Announce):
                self.discovery.on_announce(address, message)
            elif isinstance(message, AnnounceReply):
                self.discovery.on_reply(address, message)
            elif isinstance(message, Leave):
                self._on_leave(message)
            else:
                raise ProtocolError(f"{type(message).__name__} is not a membership datagram")
        except ProtocolError as exc:
            self.report_bad_input(address, exc)

    def _on_leave(self, leave: Leave) -> None:
        now = trio.current_time()
        if leave.node_id == self.node_id:
            own = self.table.own
            self._answer_rumour(dataclasses.replace(own, incarnation=leave.incarnation, state=MemberState.LEFT), now)
            return
        record = self.table.get(leave.node_id)
        if record is None or leave.incarnation < record.incarnation or record.state == MemberState.LEFT:
            return
        left = declare(dataclasses.replace(record, incarnation=leave.incarnation), MemberState.LEFT, now)
        self.store(record, left)

    async def _push_on_change(self) -> None:
        """Send our figures to k peers at once whenever they moved enough (FROST's 5 % rule)."""
        while True:
            await self._push_wanted.wait()
            self._push_wanted = trio.Event()
            own = self.table.own
            self._last_pushed = own.figures
            await self.gossip.push([own], self.table.random_peers(self.config.fanout, self.rng))

    async def _watch_own_lag(self) -> None:
        """Notice our own loop being starved (by the UI, or a busy owner) and stretch our timeouts."""
        interval = self.config.lag_check_interval
        while True:
            deadline = await sleep_to_tick(interval)
            overshoot = trio.current_time() - deadline
            if overshoot > self.config.lag_tolerance:
                self.awareness.apply(1 + int(overshoot / self.config.probe_interval))

"""SWIM failure detection: probe one member per interval, ask others when it is silent, suspect, then declare dead."""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field

import trio

from frost_core.membership.local import LocalMember
from frost_core.membership.messages import Ack, Nack, Ping, PingReq
from frost_core.membership.records import Address, MemberState, NodeRecord, add_suspicion, declare
from frost_core.membership.suspicion import suspicion_timeout

log = logging.getLogger("frost.membership")

_IDLE_SWEEP_INTERVAL = 60.0
"""Seconds between sweeps while nobody is suspect: only forgetting old dead members is left to do."""


@dataclass
class _Pending:
    """A probe waiting for its ack; nacks prove that our helpers (and we) still work."""

    acked: trio.Event = field(default_factory=trio.Event)
    acked_at: float = 0.0
    nacks: int = 0


class Prober:
    """Round-robin probes over a shuffled member list, Lifeguard-style.

    A probe only counts against a member if our own loop kept time during it: when the send
    itself or the wait overshoots (our thread was starved by the UI), the result is void and our
    awareness rises instead, stretching our timeouts.
    """

    def __init__(self, node: LocalMember) -> None:
        self.node = node
        self._seq = itertools.count(node.rng.randrange(1 << 30))
        self._pending: dict[int, _Pending] = {}
        self._order: list[str] = []
        self._checking: set[str] = set()
        self._new_suspect = trio.Event()
        self._new_peer = trio.Event()
        self.rtt: dict[str, float] = {}
        """Smoothed round-trip time in seconds per member, from direct probes only."""

    async def run(self) -> None:
        node = self.node
        await trio.sleep(node.rng.uniform(0, node.config.probe_interval))
        while True:
            started = trio.current_time()
            interval = node.awareness.scale(node.config.probe_interval)
            target = self._next_target()
            if target is None:  # alone: no wake-ups (four a second) until a peer appears
                self._new_peer = trio.Event()
                await self._new_peer.wait()
                continue
            outcome = await self.probe(target, started + interval)
            if outcome is False:
                self.suspect(target)
            await trio.sleep_until(started + interval)

    def _next_target(self) -> NodeRecord | None:
        """The next member of a random round-robin: each active peer once per pass, in random order.

        The pass is shuffled as it is taken (one swap per probe) rather than all at its start:
        5,000 nodes starting together would otherwise shuffle 25 million ids in their first probe.
        """
        order = self._order
        rng = self.node.rng
        while True:
            if not order:
                order.extend(self.node.table.active_ids())
                if not order:
                    return None
            index = rng.randrange(len(order))
            order[index], order[-1] = order[-1], order[index]
            record = self.node.table.get(order.pop())
            if record is not None and record.is_active:
                return record

    async def probe(self, target: NodeRecord, deadline: float) -> bool | None:
        """Ping `target`, then via helpers until `deadline`: True answered, False silent, None void."""
        node = self.node
        seq = next(self._seq)
        pending = self._pending[seq] = _Pending()
        timeout = node.awareness.scale(node.config.probe_timeout)
        tolerance = node.config.lag_tolerance
        try:
            started = trio.current_time()
            await node.send(target.address, Ping(seq=seq, target_id=target.node_id))
            if trio.current_time() - started > timeout:
                node.awareness.apply(1)  # we could not even send in time: our loop is starved
                return None
            with trio.move_on_after(timeout):
                await pending.acked.wait()
            if pending.acked.is_set():
                self._note_rtt(target.node_id, pending.acked_at - started)
                return self._answered(target)
            helpers = node.table.random_peers(node.config.indirect_probes, node.rng, exclude=(target.node_id,))
            request = PingReq(seq=seq, target_id=target.node_id, target_host=target.address[0], target_port=target.address[1])
            for helper in helpers:
                await node.send(helper.address, request)
            wait_until = max(deadline, trio.current_time() + timeout)
            with trio.move_on_at(wait_until):
                await pending.acked.wait()
            if pending.acked.is_set():
                return self._answered(target)
            if trio.current_time() - wait_until > tolerance:
                node.awareness.apply(1)
                return None
            missing_nacks = len(helpers) - pending.nacks if helpers else 1
            node.awareness.apply(max(0, missing_nacks))  # silent helpers hint that we are the slow one
            return False
        finally:
            del self._pending[seq]

    def _note_rtt(self, node_id: str, sample: float) -> None:
        """TCP's smoothing (RFC 6298, gain 1/8): steady enough to show, quick enough to follow a change."""
        previous = self.rtt.get(node_id)
        self.rtt[node_id] = sample if previous is None else previous + (sample - previous) / 8

    def _answered(self, target: NodeRecord) -> bool:
        self.node.awareness.apply(-1)
        self.node.table.touch(target.node_id, trio.current_time())
        return True

    def suspect(self, target: NodeRecord) -> None:
        """Our probe failed: start or confirm a suspicion and tell the suspect, so it can refute."""
        node = self.node
        now = trio.current_time()
        current = node.table.get(target.node_id)
        if current is None or current.incarnation != target.incarnation or not current.is_active:
            return
        updated = add_suspicion(current, node.node_id, now)
        if updated is current:
            return
        node.store(current, updated)
        peers = node.table.random_peers(node.config.fanout, node.rng, exclude=(target.node_id,))
        node.nursery.start_soon(node.gossip.push, [updated], [updated, *peers])

    async def sweep_suspicions(self) -> None:
        """Declare dead the suspects whose time is up, after one last probe of our own.

        With no suspect in the table the sweeper sleeps until one appears (`note_suspect`), so
        a quiet cluster costs no wake-ups here; it still forgets old dead members now and then.
        """
        node = self.node
        next_due = math.inf
        while True:
            if node.table.suspects:
                await trio.sleep_until(min(next_due, trio.current_time() + node.config.probe_interval))
            else:
                with trio.move_on_after(_IDLE_SWEEP_INTERVAL):
                    await self._new_suspect.wait()
                self._new_suspect = trio.Event()
            now = trio.current_time()
            size = node.table.active_count()
            next_due = math.inf
            for node_id in list(node.table.suspects):
                record = node.table.get(node_id)
                if record is None or node_id in self._checking:
                    continue
                confirmations = max(0, len(record.suspectors) - 1)
                due = record.state_since + suspicion_timeout(size, confirmations, node.config)
                if now >= due:
                    self._checking.add(node_id)
                    node.nursery.start_soon(self._last_chance, record)
                else:
                    next_due = min(next_due, due)
            for gone in node.table.forget(now - node.config.dead_retention):
                self.rtt.pop(gone.node_id, None)

    def note_peer(self) -> None:
        """A peer is active (it joined or came back): wake the prober if it waits alone."""
        self._new_peer.set()

    def note_suspect(self) -> None:
        """A record turned suspect (our decision or news): wake the sweeper if it sleeps."""
        self._new_suspect.set()

    async def _last_chance(self, record: NodeRecord) -> None:
        node = self.node
        try:
            interval = node.awareness.scale(node.config.probe_interval)
            outcome = await self.probe(record, trio.current_time() + interval)
            current = node.table.get(record.node_id)
            if current is None or current.incarnation != record.incarnation or current.state != MemberState.SUSPECT:
                return
            if outcome is False:
                dead = declare(current, MemberState.DEAD, trio.current_time())
                node.store(current, dead)
                await node.gossip.push([dead], node.table.active_peers())
            elif outcome is True:
                await node.gossip.push([current], [current])  # still there: make it refute
        finally:
            self._checking.discard(record.node_id)

    async def on_ping(self, address: Address, ping: Ping) -> None:
        if ping.target_id == self.node.node_id:
            await self.node.send(address, Ack(seq=ping.seq))

    async def on_ping_req(self, address: Address, request: PingReq) -> None:
        """Probe the target for a member that cannot reach it; answer ack or nack."""
        node = self.node
        seq = next(self._seq)
        pending = self._pending[seq] = _Pending()
        try:
            await node.send((request.target_host, request.target_port), Ping(seq=seq, target_id=request.target_id))
            with trio.move_on_after(node.awareness.scale(node.config.probe_timeout)):
                await pending.acked.wait()
        finally:
            del self._pending[seq]
        answer = Ack(seq=request.seq) if pending.acked.is_set() else Nack(seq=request.seq)
        await node.send(address, answer)

    def on_ack(self, ack: Ack) -> None:
        pending = self._pending.get(ack.seq)
        if pending is not None and not pending.acked.is_set():
            pending.acked_at = trio.current_time()
            pending.acked.set()

    def on_nack(self, nack: Nack) -> None:
        pending = self._pending.get(nack.seq)
        if pending is not None:
            pending.nacks += 1

"""Finding the cluster: broadcast announcements, delayed unicast replies (FROST fig. 5.1), and seed peers."""

from __future__ import annotations

import random

import trio

from frost_core.membership.local import LocalMember
from frost_core.membership.messages import Announce, AnnounceReply
from frost_core.membership.records import Address, MemberState

REJOIN_PEERS = 4
"""Members a node that lost every peer tries each round, the most recently lost first."""


def reply_delay(rng: random.Random, delay_max: float) -> float:
    """How long to wait before answering a newcomer: spread over [0, max] so it is not flooded."""
    return rng.uniform(0.0, delay_max)


class Discovery:
    """Announce ourselves by broadcast; answer strangers' announcements; join through seeds.

    A newcomer needs one answer: it then pulls the whole table from that peer and announces
    again saying so. A node skips its reply if, by the time its random delay is over, the
    newcomer has said so or has already talked to it.
    """

    def __init__(self, node: LocalMember, seeds: tuple[Address, ...]) -> None:
        self.node = node
        self.seeds = seeds
        self.replies_sent = 0
        self.replies_received = 0
        self._settled: dict[str, float] = {}
        self._said_settled = False
        self._joining = False

    async def announce_periodically(self) -> None:
        node = self.node
        while True:
            await self._announce()
            period = node.config.announce_interval
            await trio.sleep(node.rng.uniform(0.9 * period, 1.1 * period))

    async def join_through_seeds(self) -> None:
        """While we know no live member, push-pull with the seeds and the members we knew, backing off.

        A node that lost every peer at once is usually the one cut off (its link went down, its
        process was stopped), and the others will not look for it: they have each other. So it
        looks for them, from `seed_retry_interval` seconds up to `rejoin_max`, and a healed
        partition re-forms within seconds instead of at the next announcement. Attempts run in the
        background (an unreachable address takes `exchange_timeout` to fail). An exchange that
        answers is followed at once by another: the first one told each side the other's news of
        its death, which each refutes; the second carries the refutations.
        """
        node = self.node
        wait = node.config.seed_retry_interval
        while True:
            if node.table.active_peer_count():
                wait = node.config.seed_retry_interval
            else:
                for address in self._rejoin_addresses():
                    node.nursery.start_soon(self._rejoin_through, address)
                wait = min(wait * 2, node.config.rejoin_max)
            await trio.sleep(wait)

    async def look_again(self) -> None:
        """Find the cluster as a node that just started would (this node joined another one): announce, and ask the
        seeds at once rather than when `join_through_seeds` next wakes, which may be `rejoin_max` away."""
        self._settled.clear()
        self._said_settled = False
        await self._announce()
        for address in self._rejoin_addresses():
            self.node.nursery.start_soon(self._rejoin_through, address)

    def _rejoin_addresses(self) -> list[Address]:
        """The seeds, and the last few members we knew (most recently lost first), but never ourselves."""
        node = self.node
        known = sorted((r for r in node.table.records() if r.node_id != node.node_id and r.state == MemberState.DEAD),
                       key=lambda r: -r.state_since)[:REJOIN_PEERS]
        return [a for a in dict.fromkeys([*self.seeds, *(r.address for r in known)]) if a != node.address]

    async def _rejoin_through(self, address: Address) -> None:
        if await self.node.gossip.push_pull(address):
            await self.node.gossip.push_pull(address)

    def on_announce(self, address: Address, announce: Announce) -> None:
        node = self.node
        now = trio.current_time()
        known = node.table.get(announce.node[0])  # position 0 of an entry is the node id
        newcomer = node.absorb_one(announce.node, first_hand=True)
        if newcomer is not None and announce.known > 1:
            if len(self._settled) > 4096:
                self._settled.clear()
            self._settled[newcomer] = now
        elif newcomer is not None and (known is None or not known.is_active):
            node.nursery.start_soon(self._reply_later, newcomer, now)

    async def _reply_later(self, node_id: str, announced_at: float) -> None:
        node = self.node
        await trio.sleep(reply_delay(node.rng, node.config.reply_delay_max))
        record = node.table.get(node_id)
        if record is None or not record.is_active or record.heard_at > announced_at:
            return
        if self._settled.pop(node_id, -1.0) > announced_at:
            return
        self.replies_sent += 1
        await node.send(record.address, AnnounceReply(node=node.own_entry()))

    def on_reply(self, address: Address, reply: AnnounceReply) -> None:
        """Someone answered our announcement: pull the whole table from it at once, then say so.

        Whatever gossip brought before the reply, the pull is made: exchanges carry news, not
        tables, so the members a newcomer heard of by then may be a handful (10 of 31 in a
        simulated run) and the rest would wait for a full exchange (`full_sync_interval`). The
        other members hold their replies only once it says so.
        """
        node = self.node
        self.replies_received += 1
        peer = node.absorb_one(reply.node, first_hand=True)
        if peer is None:
            return
        node.table.touch(peer, trio.current_time())
        if not self._said_settled and not self._joining:
            self._joining = True
            node.nursery.start_soon(self._join_through, node.table.get(peer).address)

    async def _join_through(self, address: Address) -> None:
        try:
            if await self.node.gossip.push_pull(address):
                self._said_settled = True
                await self._announce()
        finally:
            self._joining = False  # a failed pull waits for the next reply

    async def _announce(self) -> None:
        """Broadcast who we are and how many members we know (more than one: "no more replies")."""
        node = self.node
        known = node.table.active_count()
        if known <= 1:
            self._said_settled = False  # asking again: the next reply is worth a "settled" too
        await node.transport.broadcast(Announce(node=node.own_entry(), known=known))

"""Push-pull anti-entropy of the resource table (BSPlib), and immediate pushes of fresh news."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from frost_core.api.errors import ProtocolError
from frost_core.membership.local import LocalMember
from frost_core.membership.messages import PushPull, PushPullReply, ResourceUpdate, entry_from_record
from frost_core.membership.news import full_sync_interval, news_rounds
from frost_core.membership.records import Address, NodeRecord

log = logging.getLogger("frost.membership")

MAX_PUSHED = 64
"""Records in one immediate push: pushes carry fresh news, never whole tables."""


class Gossip:
    """Each interval, exchange the news with k random members; both sides end with the fresher records.

    News is what changed in our table in the last few rounds (`news.news_rounds`, about
    log N): a round costs a digest of the news (about 10 bytes a changed record) one way, the
    keys wanted back, and only the records that differ (about 80 bytes each). So news reaches
    everyone in O(log N) rounds while an exchange costs what changed, not the table. Every
    `full_sync_interval` (stretched with log N, as memberlist's push-pull) one exchange
    compares whole tables instead, to repair what the news missed; joins do the same.

    Why this and not the alternatives: a digest of the whole table in every exchange (what this
    replaced) cost 10 bytes a member per exchange, 97 % of the bytes at N = 1,000 and O(N^2) work
    a round for a simulator; memberlist's counted retransmits of whole records would send each
    record to each node several times (about 8x a digest item each), and Scuttlebutt's
    per-origin version vectors are a digest entry per member again. Offering digests of recent
    changes keeps both costs: each record crosses to each node about once, and exchanges
    between nodes that know the same news carry a few items.
    """

    def __init__(self, node: LocalMember) -> None:
        self.node = node

    async def run_rounds(self) -> None:
        node = self.node
        await trio.sleep(node.rng.uniform(0, node.config.gossip_interval))  # desynchronise nodes
        next_full = trio.current_time() + node.rng.uniform(0, node.config.full_sync_interval)
        while True:
            now = trio.current_time()
            full = now >= next_full
            if full:
                next_full = now + full_sync_interval(node.table.active_count(), node.config.full_sync_interval)
            for index, peer in enumerate(node.table.random_peers(node.config.fanout, node.rng)):
                node.nursery.start_soon(self.push_pull, peer.address, full and index == 0)
            await trio.sleep(node.config.gossip_interval)

    def news_since(self) -> float:
        """The moment before which a change is no longer news to offer."""
        node = self.node
        rounds = news_rounds(node.table.active_count(), node.config.fanout)
        return trio.current_time() - rounds * node.config.gossip_interval

    async def push_pull(self, address: Address, full: bool = True) -> bool:
        """One exchange with `address`, of whole tables or (`full` False) of news; True if the peer answered."""
        node = self.node
        timeout = node.awareness.scale(node.config.exchange_timeout)
        digest = node.table.digest(None if full else self.news_since())
        request = PushPull(sender=node.own_entry(), digest=digest, full=full)
        try:
            reply = await node.transport.exchange(address, request, timeout=timeout)
            if not isinstance(reply, PushPullReply):
                raise ProtocolError(f"expected PUSH_PULL_REPLY, got {type(reply).__name__}")
            node.absorb(reply.entries)
            wanted = node.table.wanted(reply.wants)
            if wanted:
                push = PushPull(sender=node.own_entry(), digest=None, entries=self._entries(wanted))
                await node.transport.exchange(address, push, timeout=timeout)
        except (trio.TooSlowError, OSError) as exc:
            log.debug("push-pull with %s failed: %s", address, exc or type(exc).__name__)
            return False
        except ProtocolError as exc:
            node.report_bad_input(address, exc)
            return False
        return True

    async def answer_push_pull(self, address: Address, request: PushPull) -> PushPullReply:
        """The responder's half: merge what came, send back what the asker lacks, ask for the rest."""
        node = self.node
        if not isinstance(request, PushPull):
            raise ProtocolError(f"expected PUSH_PULL, got {type(request).__name__}")
        sender = node.absorb_one(request.sender, first_hand=True)
        node.absorb(request.entries)
        if sender is not None:
            node.table.touch(sender, trio.current_time())
        if request.digest is None:
            return PushPullReply()
        send, wants = node.table.compare(request.digest, since=None if request.full else self.news_since())
        return PushPullReply(entries=self._entries(send), wants=wants)

    async def push(self, records: Sequence[NodeRecord], peers: Sequence[NodeRecord]) -> None:
        """Send news at once by datagram; the next push-pull rounds repair any loss."""
        update = ResourceUpdate(entries=self._entries(records[:MAX_PUSHED]))
        for peer in peers:
            await self.node.send(peer.address, update)

    def _entries(self, records: Sequence[NodeRecord]) -> tuple:
        now = trio.current_time()
        freshest = sorted(records, key=lambda r: r.updated_at, reverse=True)
        return tuple(entry_from_record(r, now) for r in freshest[: self.node.config.max_entries_per_exchange])

"""A formed cluster of real Membership services on the in-memory network, shared by the gossip benchmarks."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from frost_core.membership.table import digest_key
from frost_core.membership.testing import SimCluster, open_sim_cluster

FORMED_AGE = 3600.0
"""Seconds since the records of a formed cluster last changed."""


@asynccontextmanager
async def formed_cluster(
    n: int, *, loss: float, seed: int, codec: bool = True, latency: float = 0.0005
) -> AsyncIterator[SimCluster]:
    """N nodes already serving, each table holding every node's record (a cluster long since formed).

    Joining through discovery would cost O(N²) announcements before the first measured round;
    the tables are filled with the nodes' own records instead, as a completed join leaves them,
    an hour old (news long since spread: exchanges carry news only), and broadcasts reach
    nobody (each node's announcement at start, and every 30 s, would cost N deliveries:
    25 million at N = 5,000; a formed cluster needs none of them).
    With `codec` off messages are not encoded (memory_transport.MemoryNetwork): for timings only;
    `latency` 0 delivers datagrams at once (fewer wake-ups of the simulator).
    """
    async with open_sim_cluster(seed, loss=loss, codec=codec, broadcasts=False, latency=latency) as cluster:
        nodes = [await cluster.start_node() for _ in range(n)]
        records = {node.node_id: dataclasses.replace(node.membership.table.own, updated_at=-FORMED_AGE) for node in nodes}
        keys = {digest_key(node_id): node_id for node_id in records}
        for node in nodes:
            node.membership.table.put_formed(records, keys)
            node.membership.prober.note_peer()  # a prober that found itself alone waits for a peer to be reported
        yield cluster

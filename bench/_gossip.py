"""A formed cluster of real Membership services on the in-memory network, shared by the gossip benchmarks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from frost_core.membership.testing import SimCluster, open_sim_cluster


@asynccontextmanager
async def formed_cluster(n: int, *, loss: float, seed: int, codec: bool = True) -> AsyncIterator[SimCluster]:
    """N nodes already serving, each table holding every node's record (a cluster long since formed).

    Joining through discovery would cost O(N²) announcements before the first measured round;
    the tables are filled with the nodes' own records instead, as a completed join leaves them.
    With `codec` off messages are not encoded (memory_transport.MemoryNetwork): for timings only.
    """
    async with open_sim_cluster(seed, loss=loss, codec=codec) as cluster:
        nodes = [await cluster.start_node() for _ in range(n)]
        records = [node.membership.table.own for node in nodes]
        for node in nodes:
            table = node.membership.table
            for record in records:
                if record.node_id != node.node_id:
                    table.put(record)
        yield cluster

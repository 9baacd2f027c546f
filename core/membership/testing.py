"""Many membership nodes on one in-memory network: the harness of the scenario tests and benchmarks."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from frost_core.membership.config import MembershipConfig
from frost_core.membership.memory_transport import MemoryNetwork, open_memory_network
from frost_core.membership.records import Address, MemberState, ResourceFigures
from frost_core.membership.service import MemberEvent, Membership


@dataclass
class SimNode:
    """One simulated node: its membership, its cancel scope (to crash it) and what it reported."""

    membership: Membership
    scope: trio.CancelScope
    events: list[MemberEvent] = field(default_factory=list)

    @property
    def node_id(self) -> str:
        return self.membership.node_id

    @property
    def address(self) -> Address:
        return self.membership.address

    def state_of(self, node_id: str) -> MemberState | None:
        record = self.membership.member(node_id)
        return None if record is None else record.state


class SimCluster:
    """Start, crash, stall and stop nodes on a MemoryNetwork; all randomness from one seed."""

    def __init__(self, network: MemoryNetwork, nursery: trio.Nursery, seed: int, config: MembershipConfig) -> None:
        self.network = network
        self.nursery = nursery
        self.rng = random.Random(seed)
        self.config = config
        self.nodes: list[SimNode] = []

    async def start_node(self, *, seeds: tuple[Address, ...] = (), config: MembershipConfig | None = None, name: str = "") -> SimNode:
        index = len(self.nodes)
        address = (f"10.0.{index // 250}.{index % 250 + 1}", 7946)
        node_id = f"{self.rng.getrandbits(128):032x}"
        holder: list[SimNode] = []
        membership = Membership(
            node_id=node_id,
            name=name or f"node{index}",
            address=address,
            rng=random.Random(self.rng.getrandbits(64)),
            config=config or self.config,
            seeds=seeds,
            figures=ResourceFigures(available=1.0, cpus=4),
            on_event=lambda event: holder[0].events.append(event),
        )
        transport = self.network.attach(address)
        scope = trio.CancelScope()
        node = SimNode(membership, scope)
        holder.append(node)

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await membership.serve(transport, task_status=task_status)

        await self.nursery.start(run)
        self.nodes.append(node)
        return node

    def crash(self, node: SimNode) -> None:
        """The process dies without a word."""
        self.network.crash(node.address)
        node.scope.cancel()

    async def stop(self, node: SimNode) -> None:
        """A clean shutdown: goodbye first."""
        await node.membership.leave()
        node.scope.cancel()

    def running(self) -> list[SimNode]:
        return [node for node in self.nodes if not node.scope.cancel_called]


@asynccontextmanager
async def open_sim_cluster(
    seed: int,
    *,
    loss: float = 0.0,
    latency: float = 0.0005,
    config: MembershipConfig = MembershipConfig(),
    codec: bool = True,
    broadcasts: bool = True,
) -> AsyncIterator[SimCluster]:
    async with open_memory_network(
        random.Random(seed), loss=loss, latency=latency, codec=codec, broadcasts=broadcasts
    ) as network:
        async with trio.open_nursery() as nursery:
            yield SimCluster(network, nursery, seed, config)
            nursery.cancel_scope.cancel()

"""The in-memory twin of `cluster.links.Links`: the same calls between nodes of one process, for scenario tests.

Host, migration and scheduler only ever ask `Links` for a master, host or keeper by node id
and call it; here the call goes straight to that node's bound side after one trio checkpoint,
so whole hand-offs run under MockClock without sockets. A node cut off by `MemoryNetwork.cut`
fails every call to or from it with NodeUnavailableError, as an unreachable peer does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from frost_core.api.errors import NodeUnavailableError
from frost_core.cluster.links import HostSide, KeeperSide, MasterSide, offer_each, start_each
from frost_core.cluster.messages import UnitOffer, UnitOfferReply, UnitSpec, Verdict
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.storage.checkpoints import CheckpointRecord


class MemoryNetwork:
    """The nodes of one in-memory cluster by id, and the ones cut off from the rest."""

    def __init__(self) -> None:
        self._nodes: dict[str, MemoryLinks] = {}
        self._cut: set[str] = set()

    def links(self, node_id: str) -> MemoryLinks:
        """The links of node `node_id` on this network, made on first use (bind its sides before calls reach it)."""
        if node_id not in self._nodes:
            self._nodes[node_id] = MemoryLinks(self, node_id)
        return self._nodes[node_id]

    def cut(self, node_id: str) -> None:
        """Cut `node_id` off: calls to and from it fail until `heal`."""
        self._cut.add(node_id)

    def heal(self, node_id: str) -> None:
        self._cut.discard(node_id)

    def reach(self, source: str, target: str) -> MemoryLinks:
        """The links of `target` as `source` reaches them; NodeUnavailableError if it cannot."""
        links = self._nodes.get(target)
        if links is None or links.sides is None:
            raise NodeUnavailableError(f"node {target[:8]} is not known to be alive", title="Peer unreachable")
        if {source, target} & self._cut:
            raise NodeUnavailableError(f"node {target[:8]} is unreachable: cut off", title="Peer unreachable")
        return links


class MemoryLinks:
    """`Links` for a node of a `MemoryNetwork`: itself by a direct call, the others by a call in memory."""

    def __init__(self, network: MemoryNetwork, node_id: str) -> None:
        self.node_id = node_id
        self._network = network
        self.sides: tuple[MasterSide, HostSide, KeeperSide] | None = None

    def bind(self, *, master: MasterSide, host: HostSide, keeper: KeeperSide) -> None:
        self.sides = (master, host, keeper)

    def master(self, node_id: str) -> MasterSide:
        return self._side(node_id, 0)  # type: ignore[return-value]

    def host(self, node_id: str) -> HostSide:
        return self._side(node_id, 1)  # type: ignore[return-value]

    def keeper(self, node_id: str) -> KeeperSide:
        return self._side(node_id, 2)  # type: ignore[return-value]

    async def offer_units(self, node_id: str, offers: tuple[UnitOffer, ...]) -> tuple[UnitOfferReply, ...]:
        return await offer_each(self.host(node_id), self.node_id, offers)

    async def start_units(self, node_id: str, specs: tuple[UnitSpec, ...]) -> tuple[Verdict, ...]:
        return await start_each(self.host(node_id), self.node_id, specs)

    async def withdraw_offers(self, node_id: str, task_ids: tuple[str, ...]) -> None:
        await self.host(node_id).withdraw(self.node_id, task_ids)

    async def start_fed(self, node_id: str, spec: UnitSpec, feed: CaptureFeed) -> Verdict:
        """The capture gathered as it comes (there is no wire here), then started with its trailer's hash."""
        await feed.begun()
        state = b"".join([bytes(piece) async for piece in feed.pieces()])
        record = CheckpointRecord(**feed.identity, state=state, sha256=await feed.sealed())
        return await self.host(node_id).start(self.node_id, spec, record, moved=True)

    def _side(self, node_id: str, which: int) -> Any:
        assert self.sides is not None, "bind() first"
        if node_id == self.node_id:
            return self.sides[which]
        return _Remote(lambda: self._network.reach(self.node_id, node_id), which)


class _Remote:
    """A side of another node: each call checks the node can be reached, yields once, then runs there."""

    def __init__(self, reach: Callable[[], MemoryLinks], which: int) -> None:
        self._reach = reach
        self._which = which

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            target = self._reach()
            await trio.lowlevel.checkpoint()  # a network call is never instant
            assert target.sides is not None
            return await getattr(target.sides[self._which], name)(*args, **kwargs)

        return call

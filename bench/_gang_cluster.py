"""The node's gang runtime on several hosts in one process, members in real guests: the gang benchmarks' cluster.

Each host is a real `node.gangs.Gangs` (its GangPost, GangRuns and GangHost, as a node wires
them), and its members run in sandboxed guests (`guest.gang_member.open_member`: cgroup, scratch,
lowest priority), as on a node. What is left out is the network and gossip: a message between
hosts is encoded to its wire header and decoded again (`wire.messages`: the CBOR a socket would
carry, its bulk as bytes), then handed to the other host's `receive`; the master keeps each global checkpoint on disk as a node does
(`master.gang_checkpoints`); every host reads the one
resource table the benchmark sets (`rows`), as if gossip were instant. The coordinator lives on
a master that hosts no member, so all hosts are alike. Starting real node processes costs each
run several seconds and a loaded machine's noise; the benchmarks that need whole nodes use
`_nodes.py`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import trio

from frost_core.cluster.messages import GangSpec
from frost_core.guest.containment import Containment
from frost_core.guest.gang_member import MemberGuest, MemberSpec, open_member
from frost_core.guest.views import GuestSettings
from frost_core.master.gang import GangView, GlobalCheckpoint
from frost_core.master.gang_checkpoints import GangCheckpoints
from frost_core.node.gangs import Gangs
from frost_core.plugin.plain import decode_plain, encode_plain
from frost_core.policies.gang_migration import CheckCadence
from frost_core.policies.views import NodeView
from frost_core.wire.messages import Message, decode_message, encode_message

MASTER = "master"
MEMORY = 256 * 1024 * 1024


@dataclass
class Outcome:
    """How a gang ended: its results by rank (None if it failed), why it failed, when."""

    results: tuple | None = None
    failure: str = ""
    at: float = 0.0
    ended: trio.Event = field(default_factory=trio.Event)


class GangCluster:
    """Hosts `names` and a master, their members' guests under `folder`; use as `async with GangCluster(...)`."""

    def __init__(self, names: list[str], folder: Path) -> None:
        self.names = names
        self.folder = folder
        self.settings = GuestSettings()
        self.containment = Containment(data_dir=folder, input_roots=(), settings=self.settings)
        self.rows = {name: NodeView(name, available=1.0, guests=0) for name in names}
        self.nodes = {name: Gangs(name, self._sender(name), self._opener(name), self.table, time.monotonic)
                      for name in [MASTER, *names]}
        self.plugins: dict[str, str] = {}
        self.messages = 0
        self.wire_bytes = 0
        self.checkpoints = GangCheckpoints(folder / "gang-checkpoints")
        self.kept: dict[tuple[str, int], float] = {}
        """(gang, superstep) -> when the master's global checkpoint before it was on disk (as a node keeps it)."""
        self._nursery: trio.Nursery | None = None
        self.sent: dict[tuple[str, str, int], tuple[float, float]] = {}
        """(message type, gang, superstep) -> when the first and the last of them were sent (barrier times)."""

    def table(self) -> list[NodeView]:
        return list(self.rows.values())

    def set_rows(self, rows: dict[str, NodeView]) -> None:
        """New figures for some hosts: every host reads them at once, and the master's gangs are told."""
        self.rows.update(rows)
        self.master.table_changed(self.table())

    @property
    def master(self):
        return self.nodes[MASTER].runs

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[GangCluster]:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for node in self.nodes.values():
                    await nursery.start(node.serve)
                yield self
                nursery.cancel_scope.cancel()
        finally:
            self.containment.close()

    def submit(self, gang_id: str, plugin_path: Path, params: dict, size: int,
               cadence: CheckCadence = CheckCadence(), x: float = 1.0) -> Outcome:
        """Run a gang; placed at once on the best `size` hosts of the table."""
        outcome = Outcome()

        def done(results: tuple) -> None:
            outcome.results, outcome.at = results, time.monotonic()
            outcome.ended.set()

        def failed(reason: str) -> None:
            outcome.failure, outcome.at = reason, time.monotonic()
            outcome.ended.set()

        self.plugins[plugin_path.stem] = str(plugin_path)
        def keep(checkpoint: GlobalCheckpoint) -> None:
            assert self._nursery is not None
            self._nursery.start_soon(self._keep, spec, checkpoint)

        spec = GangSpec(gang_id, MASTER, plugin_path.stem, "bench", "0" * 64, encode_plain(params, "parameters"), MEMORY)
        self.master.table_changed(self.table())
        self.master.submit(gang_id, size, spec, on_done=done, on_failed=failed, on_checkpoint=keep,
                           cadence=cadence, x=x)
        return outcome

    async def _keep(self, spec: GangSpec, checkpoint: GlobalCheckpoint) -> None:
        if await self.checkpoints.save(spec, checkpoint):
            self.kept[spec.assignment_id, checkpoint.superstep] = time.monotonic()

    def released(self, gang_id: str, superstep: int) -> float | None:
        """When the master first released `superstep` of the gang to a member (its barrier before it), or None."""
        return self.sent.get(("GangRelease", gang_id, superstep), (None,))[0]

    def view(self, gang_id: str) -> GangView:
        return next(v for v in self.master.views() if v.gang_id == gang_id)

    def _sender(self, name: str):
        async def send(to: str, header: Message, data: bytes | None) -> None:
            body = encode_message(header)   # what a socket would carry, and back
            self.messages += 1
            self.wire_bytes += len(body) + len(data or b"")
            key, now = (type(header).__name__, getattr(header, "gang_id", ""), getattr(header, "superstep", -1)), time.monotonic()
            self.sent[key] = (self.sent.get(key, (now,))[0], now)
            await trio.lowlevel.checkpoint()
            self.nodes[to].receive(name, decode_message(header.CODE, body), data)
        return send

    def _opener(self, name: str):
        @contextlib.asynccontextmanager
        async def open_guest(spec: GangSpec, gang_id: str, rank: int, epoch: int, size: int,
                             checkpoint: bytes | None) -> AsyncIterator[MemberGuest]:
            member = MemberSpec(f"{gang_id}.{rank}-e{epoch}", self.plugins[spec.plugin_name],
                                decode_plain(spec.params, "the gang's parameters"), rank, size, spec.memory_bytes)
            async with open_member(member, containment=self.containment, settings=self.settings,
                                   scratch_root=self.folder / "scratch" / name, checkpoint=checkpoint) as guest:
                yield guest
        return open_guest


"""Gang drivers on four nodes in memory: every gang message crosses the real wire codec between nodes.

The members here run heat-diffusion's own code in this process (a stand-in for the sandboxed
guest handle, test-only: the product opens `guest.gang_member`'s guests); each superstep takes a
second of MockClock time so an eviction can land mid-run.
"""

from __future__ import annotations

import contextlib

import trio
import trio.testing

from frost_core.api.errors import NodeUnavailableError
from frost_core.cluster.messages import GangSpec
from frost_core.node.gangs import Gangs
from frost_core.plugin.api import parse_params
from frost_core.plugin.gang import MemberCheckpoint, run_gang_locally
from frost_core.policies.gang_migration import CheckCadence
from frost_core.policies.views import NodeView
from frost_core.wire.codec import encode
from frost_core.wire.messages import decode_message, encode_message
from frost_plugins.heat_diffusion import plugin as heat

from tests.waiting import wait_until

PARAMS = {"height": "14", "width": "6", "members": "3", "iterations": "9"}
SPEC = GangSpec("a1", "n0", "heat-diffusion", "1", "ab" * 32, encode(PARAMS), 64 << 20)
NODES = ("n0", "n1", "n2", "n3")


class InProcessMember:
    """heat-diffusion's member code run in the test's process, its state kept here as a guest keeps it."""

    def __init__(self, rank: int, size: int, checkpoint: bytes | None) -> None:
        self.rank, self.size = rank, size
        self.params = parse_params(heat, PARAMS)
        if checkpoint is None:
            self.state, self.superstep = heat.start(self.params, rank, size), 0
        else:
            image = MemberCheckpoint.from_bytes(checkpoint, size)
            self.state, self.superstep = image.state, image.superstep
        self.running = trio.Event()
        self.running.set()

    def pause(self) -> None:
        """SIGSTOP's stand-in: the superstep under way does not end until `resume`."""
        self.running = trio.Event()

    def resume(self) -> None:
        self.running.set()

    async def step(self, inbox):
        await trio.sleep(1.0)
        await self.running.wait()
        answer = heat.step(self.state, self.rank, self.size, inbox)
        self.state, self.superstep = answer.state, self.superstep + 1
        return answer

    async def checkpoint(self, inbox) -> bytes:
        return MemberCheckpoint(self.rank, self.superstep, self.state, inbox).to_bytes()

    async def finish(self):
        return heat.finish(self.state, self.rank, self.size)


class Cluster:
    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.cut: set[str] = set()
        self.running: dict[str, set[int]] = {name: set() for name in NODES}
        self.resumed_at: list[int] = []     # the superstep of each member started from a global checkpoint
        self.table = tuple(NodeView(name, available=1.0, guests=0) for name in NODES)
        self.nodes = {name: Gangs(name, self._sender(name), self._opener(name), lambda: self.table, trio.current_time)
                      for name in NODES}

    async def tick(self) -> None:
        while True:
            await trio.sleep(1.0)
            self.nodes["n0"].runs.table_changed(self.table)

    async def start(self) -> None:
        for gangs in self.nodes.values():
            await self.nursery.start(gangs.serve)
        for gangs in self.nodes.values():
            gangs.runs.table_changed(self.table)

    def _sender(self, source: str):
        async def send(to: str, header, data) -> None:
            await trio.sleep(0.01)
            if {source, to} & self.cut:
                raise NodeUnavailableError(f"node {to} is unreachable: cut off")
            self.nodes[to].receive(source, decode_message(header.CODE, encode_message(header)), data)
        return send

    def _opener(self, host: str):
        @contextlib.asynccontextmanager
        async def open_member(spec: GangSpec, gang_id: str, rank: int, epoch: int, size: int, checkpoint: bytes | None):
            assert spec == SPEC
            self.running[host].add(rank)
            if checkpoint is not None:
                self.resumed_at.append(MemberCheckpoint.from_bytes(checkpoint, size).superstep)
            try:
                yield InProcessMember(rank, size, checkpoint)
            finally:
                self.running[host].discard(rank)
        return open_member


async def run_gang(evict_at: int | None = None, move_at: int | None = None, leave_at: int | None = None,
                   hold_at: int | None = None,
                   cadence: CheckCadence = CheckCadence(every_supersteps=2),
                   checkpoint_interval: float = 0.0) -> tuple[object, object, Cluster, list]:
    outcome: list = []
    kept: list = []     # the global checkpoints handed on to be kept on disk
    async with trio.open_nursery() as nursery:
        cluster = Cluster(nursery)
        await cluster.start()
        master = cluster.nodes["n0"].runs
        master.submit("g1", 3, SPEC, on_done=outcome.append, on_failed=outcome.append, on_checkpoint=kept.append,
                      cadence=cadence, checkpoint_interval=checkpoint_interval)
        view = lambda: master.views()[0]
        if move_at is not None:
            await wait_until(lambda: view().superstep >= move_at, timeout=600)
            master.move("g1", 0, "the owner asked to move rank 0")
            await wait_until(lambda: view().last_checkpoint is not None, timeout=600)
        if leave_at is not None:    # the owner of rank 1's host finishes (`f`)
            await wait_until(lambda: view().superstep >= leave_at, timeout=600)
            host = view().members[1].host
            assert cluster.nodes[host].host.leave("its owner is finishing") == 1
            cluster.evicted = host
        if hold_at is not None:     # the owner of rank 1's host needs the machine: its member stops
            await wait_until(lambda: view().superstep >= hold_at, timeout=600)
            host = view().members[1].host
            cluster.nodes[host].host.pause_all()
            cluster.nodes[host].host.owner_holds("is held by its owner")
            cluster.evicted = host
            nursery.start_soon(cluster.tick)     # the node's every-second table, on which a timed check falls due
        if evict_at is not None:
            await wait_until(lambda: view().superstep >= evict_at, timeout=600)
            host = view().members[1].host
            assert cluster.nodes[host].host.evict() >= 1
            cluster.evicted = host
        await wait_until(lambda: outcome, timeout=600)
        nursery.cancel_scope.cancel()
    assert not isinstance(outcome[0], str), outcome[0]
    output = heat.combine(parse_params(heat, PARAMS), list(outcome[0]))
    return output, view(), cluster, kept


async def test_a_gang_on_three_nodes_matches_the_single_process_run(autojump_clock) -> None:
    output, view, cluster, kept = await run_gang()
    assert output == run_gang_locally(heat, PARAMS)
    assert view.phase == "finished" and view.restarts == 0
    assert len({member.host for member in view.members}) == 3
    assert not any(cluster.running.values()), "every member's guest ended"
    assert kept == []


async def test_an_evicted_members_host_restarts_the_gang_from_its_last_global_checkpoint(autojump_clock) -> None:
    output, view, cluster, kept = await run_gang(move_at=2, evict_at=5)
    assert output == run_gang_locally(heat, PARAMS)
    assert view.restarts == 1 and view.moves >= 1
    assert view.last_checkpoint is not None and view.last_checkpoint.superstep >= 2
    assert [(c.superstep, c.at) for c in kept] == [(view.last_checkpoint.superstep, view.last_checkpoint.at)]
    assert cluster.evicted not in {member.host for member in view.members}


async def test_a_finishing_owner_sends_the_gang_away_at_its_next_barrier_from_a_checkpoint_taken_there(autojump_clock) -> None:
    output, view, cluster, kept = await run_gang(leave_at=3, cadence=CheckCadence(every_supersteps=None, every_seconds=None))
    assert output == run_gang_locally(heat, PARAMS)
    assert view.restarts == 0 and view.moves == 1 and view.last_checkpoint.superstep == 4   # nothing lost
    assert cluster.evicted not in {member.host for member in view.members}


async def test_a_member_its_owner_holds_sends_the_gang_away_at_the_next_timed_check(autojump_clock) -> None:
    output, view, cluster, kept = await run_gang(hold_at=3, cadence=CheckCadence(every_supersteps=None, every_seconds=5.0))
    assert output == run_gang_locally(heat, PARAMS)
    assert view.restarts == 1 and cluster.evicted not in {member.host for member in view.members}


async def test_a_gang_that_never_moves_checkpoints_every_interval_in_place_and_an_eviction_resumes_from_there(
        autojump_clock) -> None:
    # No checks, and a global checkpoint every 3 s (a superstep takes 1 s; the product's default is 600 s).
    never = CheckCadence(every_supersteps=None, every_seconds=None)
    output, view, cluster, kept = await run_gang(cadence=never, checkpoint_interval=3.0)
    assert output == run_gang_locally(heat, PARAMS)
    assert (view.epoch, view.moves, view.restarts) == (1, 0, 0) and cluster.resumed_at == []   # they stayed put
    assert len(kept) >= 2 and [c.superstep for c in kept] == sorted({c.superstep for c in kept}), kept

    output, view, cluster, kept = await run_gang(cadence=never, checkpoint_interval=3.0, evict_at=6)
    assert output == run_gang_locally(heat, PARAMS)
    assert view.restarts == 1 and cluster.evicted not in {member.host for member in view.members}
    assert len(cluster.resumed_at) == 3 and cluster.resumed_at[0] >= 3, cluster.resumed_at   # not from superstep 0

"""Units placed ahead of a free CPU (policies.prefetch): placed, not started, so a pause or an eviction gives them back.

A real master and real hosts over the in-memory links under MockClock; the guests are the stand-ins of
`test_host_migration`; each result is its unit's index.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from frost_core.api.errors import PluginError
from frost_core.cluster.memory_links import MemoryNetwork
from frost_core.events import EventLog
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit
from frost_core.policies.views import NodeView
from frost_core.storage.checkpoints import CheckpointStore
from tests.scenario.test_host_migration import MASTER, PLUGIN, A, B, Cluster, inline

UNITS = 9


def index_of(task_id: str) -> int:
    return int(task_id.rpartition(".")[2])


class NoCombine:
    """The registry the master combines with: this test stops at the units' results."""

    def by_hash(self, code_hash: str):
        raise PluginError("this test does not combine")


class World:
    def __init__(self, tmp_path: Path, nursery: trio.Nursery) -> None:
        self.store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
        self.assignment = self.store.create_assignment(
            plugin="p", plugin_version="1", plugin_hash=PLUGIN.hash, params={},
            units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(UNITS)])
        network = MemoryNetwork()
        links = network.links(MASTER)
        self.views = [NodeView(A, available=1.0, guests=0, cpus=2)]   # the gossiped table; B joins later
        self.scheduler = MasterScheduler(
            node_id=MASTER, store=self.store, registry=NoCombine(), links=links, events=EventLog(),  # type: ignore[arg-type]
            results_dir=tmp_path / "results", replicas=CheckpointStore(tmp_path / "replicas"),
            local_checkpoints=CheckpointStore(tmp_path / "local"), hosts=lambda: self.views,
            settings=lambda: MasterSettings(), on_change=lambda: None, alive=lambda: [MASTER, A, B],
            clock=trio.current_time, blocking=inline,
        )
        links.bind(master=self.scheduler, host=None, keeper=None)  # type: ignore[arg-type]
        self.cluster = Cluster(tmp_path, nursery, network=network)

    def placed(self) -> dict[str, str]:
        """Task id -> the host the master placed it on (running or placed ahead)."""
        return {p.task_id: p.host for p in self.store.running_units()}

    async def waiting_on(self, node: str) -> list[str]:
        """The units `node` holds placed ahead, as its report tells the master."""
        await self.cluster.hosts[node].report_now()
        return sorted(t for t, state in self.scheduler.reported_states().items()
                      if state == "waiting" and self.placed().get(t) == node)

    async def finish_everything_on(self, node: str) -> None:
        """Complete each unit `node`'s guests run, as they begin, until every unit is done."""
        guests = self.cluster.guests[node]
        with trio.fail_after(600):
            while any(self.store.unit(self.assignment, i).state != "done" for i in range(UNITS)):
                for task_id in guests.running():
                    guests.complete(task_id, index_of(task_id))
                await trio.sleep(0.5)

    def results(self) -> list:
        return self.store.unit_results(self.assignment)


@contextlib.asynccontextmanager
async def world_with_units_ahead_on_a(tmp_path: Path) -> AsyncIterator[World]:
    """Nine units for A's two CPUs: the first two finish at once (the master learns they are short), then two
    run, two wait ahead of them, three stay queued."""
    worlds = []
    try:
        async with trio.open_nursery() as nursery:
            world = World(tmp_path, nursery)
            worlds.append(world)
            for host in world.cluster.hosts.values():
                await nursery.start(host.serve)
            await nursery.start(world.scheduler.serve)
            with trio.fail_after(60):
                while len(world.cluster.guests[A].running()) < 2:
                    await trio.sleep(0.5)
            assert len(world.placed()) == 2   # how long its units take is not known yet: none goes ahead
            for task_id in world.cluster.guests[A].running():
                world.cluster.guests[A].complete(task_id, index_of(task_id))
            with trio.fail_after(60):
                while len(world.placed()) < 4 or len(world.cluster.guests[A].running()) < 2:
                    await trio.sleep(0.5)
            yield world
            nursery.cancel_scope.cancel()
    finally:
        for world in worlds:
            for outbox in world.cluster.outboxes:
                outbox.close()
            world.store.close()


async def test_a_host_takes_units_ahead_of_its_free_cpus_and_starts_each_the_moment_a_cpu_frees(
        tmp_path, autojump_clock):
    async with world_with_units_ahead_on_a(tmp_path) as world:
        running = world.cluster.guests[A].running()
        ahead = await world.waiting_on(A)
        assert len(running) == 2 and len(ahead) == 2 and set(world.placed()) == {*running, *ahead}
        assert world.scheduler.etas().keys().isdisjoint(ahead)   # waiting: no progress, no ETA
        world.cluster.guests[A].complete(running[0], index_of(running[0]))
        with trio.fail_after(5):
            while len(world.cluster.guests[A].running()) < 2 or running[0] in world.cluster.guests[A].running():
                await trio.sleep(0.01)
        started = set(world.cluster.guests[A].running()) - {running[1]}
        assert len(started) == 1 and started <= set(ahead)
        await world.finish_everything_on(A)
        assert world.results() == list(range(UNITS))


async def test_units_ahead_go_back_to_the_queue_when_the_owner_evicts_and_run_elsewhere(tmp_path, autojump_clock):
    async with world_with_units_ahead_on_a(tmp_path) as world:
        ahead = await world.waiting_on(A)
        # The owner evicts and holds A; B joins. The running units move to B; the ones ahead were never
        # started on A: they go back to the master's queue at once, and B gets them from there.
        world.cluster.accepting[A] = False
        world.views = [NodeView(A, available=1.0, guests=0, cpus=2, accepting=False),
                       NodeView(B, available=1.0, guests=0, cpus=2)]
        await world.cluster.hosts[A].evict()
        assert await world.waiting_on(A) == []
        with trio.fail_after(60):
            while not set(ahead) <= {t for t, host in world.placed().items() if host == B}:
                await trio.sleep(0.5)
        assert set(world.cluster.guests[A].started).isdisjoint(ahead)
        await world.finish_everything_on(B)
        assert world.results() == list(range(UNITS))
        assert all(world.store.unit(world.assignment, i).host == B for i in range(2, UNITS))


async def test_units_ahead_go_back_to_the_queue_when_the_owner_pauses_and_run_later(tmp_path, autojump_clock):
    async with world_with_units_ahead_on_a(tmp_path) as world:
        running = world.cluster.guests[A].running()
        ahead = await world.waiting_on(A)
        world.cluster.accepting[A] = False
        world.views = [NodeView(A, available=1.0, guests=0, cpus=2, accepting=False)]
        world.cluster.hosts[A].give_back_ahead("guests here are paused")   # (what the node does on a pause)
        with trio.fail_after(60):
            while set(world.placed()) != set(running):   # the running ones stand still where they are
                await trio.sleep(0.5)
        assert [world.store.unit(world.assignment, int(t.rpartition(".")[2])).state for t in ahead] == ["queued"] * 2
        assert await world.waiting_on(A) == []
        world.cluster.accepting[A] = True   # the owner resumes: they are placed again and run
        world.views = [NodeView(A, available=1.0, guests=0, cpus=2)]
        await world.finish_everything_on(A)
        assert world.results() == list(range(UNITS))

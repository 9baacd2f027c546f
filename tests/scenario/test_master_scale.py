"""The master at scale under MockClock: work per result independent of the queue's length, spread, group commit.

A real MasterScheduler over a real SQLite store; three in-process hosts take every unit offered, and
their gossiped figures never change (as figures a few seconds old look): what is counted is the
master's own SQLite work, statement by statement and VM step by step.
"""

from __future__ import annotations

import collections

import cbor2
import trio
import trio.testing

from frost_core.cluster.links import offer_each, start_each
from frost_core.cluster.messages import UnitOfferReply, Verdict
from frost_core.events import EventLog
from frost_core.guest import envelope
from frost_core.master import store as store_module
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit
from frost_core.policies.prefetch import AHEAD_BELOW_SECONDS
from frost_core.policies.views import NodeView
from frost_core.storage.checkpoints import CheckpointStore
from tests.waiting import wait_until

MASTER = "m" * 32
HOSTS = ("a" * 32, "b" * 32, "c" * 32)
RESULT = envelope.pack(envelope.RESULT, cbor2.dumps(42), {}, 1 << 20)


class StandInHost:
    """Takes a unit while it runs fewer than `cpus` of them (as the master's store counts them)."""

    def __init__(self, node_id, cpus, running) -> None:
        self.node_id, self.cpus, self.running = node_id, cpus, running
        self.offer_calls = 0
        self.start_calls = 0

    async def offer(self, source, offer):
        full = sum(host == self.node_id for host, _ in self.running().values()) >= self.cpus
        return UnitOfferReply(accepted=not full, reason="full" if full else "", available=1.0, guests=0,
                              free_memory=1 << 30)

    async def start(self, source, spec, record, *, moved=False):
        return Verdict(ok=True)


class StandInLinks:
    def __init__(self, cpus, running) -> None:
        self.hosts = {h: StandInHost(h, cpus, running) for h in HOSTS}

    def host(self, node_id):
        return self.hosts[node_id]

    async def offer_units(self, node_id, offers):
        self.hosts[node_id].offer_calls += 1
        return await offer_each(self.hosts[node_id], MASTER, offers)

    async def start_units(self, node_id, specs):
        self.hosts[node_id].start_calls += 1
        return await start_each(self.hosts[node_id], MASTER, specs)


class Inline:
    """Runs what the master would run in a worker thread inline, and names each such trip."""

    def __init__(self) -> None:
        self.trips: list[str] = []

    async def __call__(self, function, *args):
        self.trips.append(function.__name__)
        return function(*args)


class SqlWork:
    """Every statement and VM step on the store's connections, once `counting`."""

    def __init__(self, monkeypatch) -> None:
        self.statements: list[str] = []
        self.steps = 0
        self.counting = False
        opened = store_module.open_durably

        def open_counted(path, schema):
            db = opened(path, schema)
            db.set_trace_callback(self._statement)
            db.set_progress_handler(self._step, 1)
            return db

        monkeypatch.setattr(store_module, "open_durably", open_counted)

    def _statement(self, sql: str) -> None:
        """sqlite3 reports each step of a trigger (the store's tallies) as the statement that fired it, again."""
        if self.counting and (not self.statements or self.statements[-1] != sql):
            self.statements.append(sql)

    def _step(self) -> int:
        if self.counting:
            self.steps += 1
        return 0


def transactions(statements: list[str]) -> list[list[str]]:
    """The statements between each BEGIN and its COMMIT."""
    found: list[list[str]] = []
    for statement in statements:
        if statement.startswith("BEGIN"):
            found.append([])
        elif found and statement != "COMMIT":
            found[-1].append(statement)
    return found


class World:
    def __init__(self, tmp_path, *, units: int, cpus: int) -> None:
        self.store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
        self.assignment = self.store.create_assignment(
            plugin="noop", plugin_version="1", plugin_hash="h" * 64, params={},
            units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(units)])
        self.links = StandInLinks(cpus, self.running)
        self.blocking = Inline()
        # Figures that never change: every host looks empty to the master, whatever it placed there.
        views = [NodeView(node_id=h, available=1.0, guests=0, cpus=cpus) for h in HOSTS]
        self.scheduler = MasterScheduler(
            node_id=MASTER, store=self.store, registry=None, links=self.links, events=EventLog(),
            results_dir=tmp_path / "results", replicas=CheckpointStore(tmp_path / "replicas"),
            local_checkpoints=CheckpointStore(tmp_path / "local"), hosts=lambda: views,
            settings=MasterSettings, on_change=lambda: None, alive=lambda: [MASTER, *HOSTS],
            clock=trio.current_time, blocking=self.blocking,
        )

    def running(self) -> dict[str, tuple[str, int]]:
        return {p.task_id: (p.host, p.epoch) for p in self.store.running_units()}


def run(scenario, tmp_path, *, units: int, cpus: int = 4):
    async def main():
        world = World(tmp_path, units=units, cpus=cpus)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(world.scheduler.serve)
                await scenario(world)
                nursery.cancel_scope.cancel()
        finally:
            world.store.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def work_per_result(tmp_path, monkeypatch, units: int) -> tuple[int, int]:
    """(most statements, most VM steps) the master spends on one result and the placement that refills its slot."""
    sql = SqlWork(monkeypatch)
    most = [0, 0]

    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 12, timeout=10, what="twelve units running")
        # Units that take longer than policies.prefetch's bound: none is placed ahead (test_units_ahead's case).
        await trio.sleep(AHEAD_BELOW_SECONDS)
        for _ in range(15):
            task_id, (host, epoch) = sorted(world.running().items())[0]
            sql.statements.clear()
            sql.steps = 0
            sql.counting = True
            assert await world.scheduler.host_result(host, task_id, epoch, RESULT)
            await wait_until(lambda: len(world.running()) == 12 and task_id not in world.running(), timeout=10,
                             what="the freed slot filled again")
            await trio.sleep(AHEAD_BELOW_SECONDS)   # and a couple of idle wakes
            sql.counting = False
            most[0] = max(most[0], len(sql.statements))
            most[1] = max(most[1], sql.steps)

    run(scenario, tmp_path, units=units)
    return most[0], most[1]


def test_the_masters_work_per_result_does_not_depend_on_how_many_units_wait(tmp_path, monkeypatch):
    small = work_per_result(tmp_path / "small", monkeypatch, 100)
    large = work_per_result(tmp_path / "large", monkeypatch, 2000)
    assert large[0] == small[0], f"SQL statements per result: {small[0]} with 100 units, {large[0]} with 2,000"
    # B-tree depth may grow by a level between 100 and 2,000 rows: a few steps per statement, never per unit.
    assert large[1] <= small[1] + 10 * small[0], f"SQLite VM steps per result: {small[1]} with 100 units, " \
                                                  f"{large[1]} with 2,000"


def test_a_result_and_the_placement_that_refills_its_slot_take_two_trips_to_a_worker_thread(tmp_path):
    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 12, timeout=10, what="twelve units running")
        await trio.sleep(AHEAD_BELOW_SECONDS)
        task_id, (host, epoch) = sorted(world.running().items())[0]
        world.blocking.trips.clear()
        assert await world.scheduler.host_result(host, task_id, epoch, RESULT)
        await wait_until(lambda: len(world.running()) == 12 and task_id not in world.running(), timeout=10,
                         what="the freed slot filled again")
        # A trip costs the master ~0.1 ms of CPU: none goes to look for checkpoints no unit has here.
        assert world.blocking.trips == ["accept_results", "place_units"]

    run(scenario, tmp_path, units=100)


def test_placement_spreads_over_every_host_with_free_slots_even_on_stale_figures(tmp_path, monkeypatch):
    sql = SqlWork(monkeypatch)
    sql.counting = True

    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 6, timeout=10, what="six units running")
        await trio.sleep(5)   # several more rounds on the same (stale) figures
        per_host = collections.Counter(host for host, _ in world.running().values())
        assert per_host == {h: 2 for h in HOSTS}, "a host was given more units than it has free cores"
        assert world.scheduler.waiting_reasons()[f"{world.assignment}.6"] == "no peer with free CPU"
        # One offer call and one start call per host carried that host's units, one transaction all of them
        # (later offers to full hosts tell them who waits: fair share; they place nothing).
        assert [h.start_calls for h in world.links.hosts.values()] == [1] * 3
        placing = [t for t in transactions(sql.statements) if any("SET state = 'running'" in s for s in t)]
        assert [sum("SET state = 'running'" in s for s in t) for t in placing] == [6]

    run(scenario, tmp_path, units=8, cpus=2)


def test_results_that_arrive_together_commit_once_and_survive_a_restart_without_being_applied_twice(
        tmp_path, monkeypatch):
    sql = SqlWork(monkeypatch)

    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 12, timeout=10, what="twelve units running")
        first = sorted(world.running().items())[:5]
        sql.counting = True
        outcomes = {}

        async def deliver(task_id, host, epoch):
            outcomes[task_id] = await world.scheduler.host_result(host, task_id, epoch, RESULT)

        async with trio.open_nursery() as nursery:
            for task_id, (host, epoch) in first:
                nursery.start_soon(deliver, task_id, host, epoch)
        sql.counting = False
        assert outcomes == {task_id: True for task_id, _ in first}
        accepting = [t for t in transactions(sql.statements) if any("SET state = 'done'" in s for s in t)]
        assert [sum("SET state = 'done'" in s for s in t) for t in accepting] == [5], \
            "five results that arrived together were not committed in one transaction"

        # A restart between batches (a second store on the same file): the batch is there, applied once.
        reopened = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
        try:
            for task_id, (host, epoch) in first:
                index = int(task_id.rpartition(".")[2])
                assert reopened.unit(world.assignment, index).state == "done"
                assert not reopened.accept_result(world.assignment, index, epoch=epoch, result=cbor2.dumps(42))
            assert {p.task_id for p in reopened.running_units()} == set(world.running())
        finally:
            reopened.close()
        # The host repeats a delivery whose answer it lost: taken as already accepted, not applied again.
        task_id, (host, epoch) = first[0]
        assert await world.scheduler.host_result(host, task_id, epoch, RESULT)
        assert sum(1 for u in world.store.assignment(world.assignment).units if u.state == "done") == 5

    run(scenario, tmp_path, units=20)


def test_a_few_units_go_one_per_host_not_all_on_the_best_one(tmp_path):
    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 3, timeout=10, what="the units running")
        assert sorted(host for host, _ in world.running().values()) == sorted(HOSTS)

    run(scenario, tmp_path, units=3)


def test_a_round_reads_no_row_to_explain_the_waiting_units_until_somebody_asks(tmp_path, monkeypatch):
    sql = SqlWork(monkeypatch)

    async def scenario(world):
        await wait_until(lambda: len(world.running()) == 12, timeout=10, what="twelve units running")
        await trio.sleep(AHEAD_BELOW_SECONDS)
        task_id, (host, epoch) = sorted(world.running().items())[0]
        sql.statements.clear()
        sql.counting = True
        assert await world.scheduler.host_result(host, task_id, epoch, RESULT)
        await wait_until(lambda: len(world.running()) == 12 and task_id not in world.running(), timeout=10,
                         what="the freed slot filled again")
        sql.counting = False
        def one_unit_reads() -> list[str]:
            return [s for s in sql.statements if "FROM units u WHERE u.assignment_id" in s and "u.idx IN" not in s]

        assert len(one_unit_reads()) == 1, one_unit_reads()   # the result's own unit; none for the units waiting
        sql.counting = True
        assert world.scheduler.waiting_reasons()[f"{world.assignment}.99"] == "waiting for the next placement round"
        assert len(one_unit_reads()) == 2   # asked: the first unit the round did not look at is read now

    run(scenario, tmp_path, units=100)

"""Host, migration and master over the in-memory links under MockClock: moves, a refused move, a relocation.

The guests are a stand-in supervisor (no processes); the checkpoints, outboxes and hosts'
bookkeeping are the real ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import cbor2
import pytest
import trio

from frost_core.api.errors import CheckpointError, FrostError, NodeUnavailableError
from frost_core.api.snapshot import AssignmentView
from frost_core.cluster.host import Capacity, HostService, HostSettings, Stay
from frost_core.cluster.memory_links import MemoryNetwork
from frost_core.cluster.messages import STOPPED, UnitSpec, UnitStatus
from frost_core.cluster.migration import Migrator
from frost_core.cluster.outbox import Outbox, owed_result
from frost_core.config import Paths, load_config
from frost_core.events import EventLog
from frost_core.node.views import assignment_view
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit, UnitRecord
from frost_core.guest.views import Completed, Evicted, Failed, GuestFigures, GuestTask, Outcome
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.plain import encode_plain
from frost_core.plugin.registry import PluginInfo
from frost_core.policies.views import NodeView
from frost_core.guest.capture_feed import CaptureFeed
from frost_core.storage.checkpoints import IDENTITY, CheckpointRecord, CheckpointStore
from tests.waiting import wait_until

MASTER, A, B = "aaaaaaaa-master", "bbbbbbbb-host", "cccccccc-host"
TASK = "aaaaaaaa-1.0"
PLUGIN = PluginInfo(name="p", version="1", hash="ab" * 32, source="bundled", path="/nowhere/p.py", ok=True,
                    error=None)


async def inline(function, *args):
    """File work done at once: under MockClock a thread lets the clock jump past a move's deadline."""
    return function(*args)


class StandInGuests:
    """The supervisor's surface the host and the migrator use; a guest runs until captured or stopped."""

    def __init__(self, data_dir: Path) -> None:
        self.store = CheckpointStore(data_dir / "checkpoints")
        self.started: dict[str, CheckpointRecord | None] = {}
        self._ends: dict[str, tuple[trio.Event, list[Outcome]]] = {}
        self.state = "running"  # what every guest here reports (a test pauses them)
        self.cpu = 10.0         # the CPU each guest's process has used, at every look and at its end
        self._tasks: dict[str, GuestTask] = {}
        self.streams = False    # True: a capture goes to a move's feed as it comes, as from a real guest's pipe
        self.trailer: Callable[[str], str] = lambda sha256: sha256   # what the feed is sealed with
        self._feeds: dict[str, CaptureFeed] = {}
        # Called with a capture's record once its guest is gone, as a real guest's checkpoint reaches its host
        # (None: the host does not hear of captures, as in most tests here).
        self.on_checkpoint: Callable[[GuestTask, CheckpointRecord], None] | None = None

    async def run(self, task: GuestTask, *, checkpoint: CheckpointRecord | None = None, durable=None,
                  task_status=trio.TASK_STATUS_IGNORED) -> Outcome:
        if durable is not None:
            try:
                await durable()  # the guest gets its state once it is durable here
            except CheckpointError as error:
                task_status.started()
                return Failed(f"checkpoint: {error.message}", retryable=True)
        self.started[task.task_id] = checkpoint or self.store.latest(task.task_id)
        end = self._ends[task.task_id] = (trio.Event(), [])
        self._tasks[task.task_id] = task
        task_status.started()
        await end[0].wait()
        del self._ends[task.task_id], self._tasks[task.task_id]
        return end[1][0]

    async def capture(self, task_id: str, deadline: float) -> CheckpointRecord | None:
        if task_id not in self._ends:
            raise KeyError(task_id)
        await trio.sleep(0.05)  # the guest answers at its next migration point
        task = self._tasks[task_id]
        latest = self.store.latest(task_id)
        record = self.store.commit(task_id=task_id, plugin_name=task.plugin_name, plugin_version=task.plugin_version,
                                   plugin_hash=task.plugin_hash, unit_index=task.unit.index, epoch=task.epoch,
                                   seq=(latest.seq + 1) if latest else 1, taken_at=0.0, state=b"state of " + A.encode())
        feed = self._feeds.pop(task_id, None)
        if feed is not None:
            feed.begin({name: getattr(record, name) for name in IDENTITY}, record.size)
            feed.filled(memoryview(record.state))
            feed.seal(self.trailer(record.sha256))
        self._end(task_id, Evicted(record, cpu_seconds=self.cpu))
        if self.on_checkpoint is not None:
            await trio.sleep(0)
            self.on_checkpoint(task, record)
        return record

    async def settled(self, task_id: str) -> None:
        """Captures here are durable before capture() returns."""

    def feed_capture(self, task_id: str, feed: CaptureFeed) -> bool:
        """Unless `streams`, no pipe here: a capture is whole at once, so a move sends it whole."""
        if not self.streams or task_id not in self._ends:
            return False
        self._feeds[task_id] = feed
        return True

    async def evict(self, task_id: str | None = None, *, deadline: float | None = None) -> tuple[str, ...]:
        ids = [t for t in list(self._ends) if task_id in (None, t)]
        for t in ids:
            await self.capture(t, deadline or 1.0)
        return tuple(ids)

    async def stop(self, task_ids: tuple[str, ...], reason: str) -> tuple[str, ...]:
        for t in task_ids:
            self._end(t, Failed(reason, retryable=False, cpu_seconds=12.5))  # it ran on past its last look
        return task_ids

    def complete(self, task_id: str, value: int) -> None:
        self._end(task_id, Completed(cbor2.dumps(value), cpu_seconds=self.cpu))

    def running(self) -> list[str]:
        return list(self._ends)

    def _end(self, task_id: str, outcome: Outcome) -> None:
        event, box = self._ends[task_id]
        box.append(outcome)
        event.set()

    def figures(self) -> tuple[GuestFigures, ...]:
        return tuple(GuestFigures(task_id=t, assignment_id="aaaaaaaa-1", plugin="p", origin=MASTER, state=self.state,
                                  progress=0.5, cpu_seconds=self.cpu, cpu_percent=100.0, wall_seconds=10.0,
                                  since_checkpoint_seconds=1.0, cpu_since_checkpoint_seconds=1.0, checkpoint_bytes=0,
                                  memory_bytes=1 << 20, last_checkpoint_seq=None) for t in self._ends)

    def discard_checkpoints(self, task_id: str) -> None:
        self.store.discard(task_id)


class RecordingMaster:
    """The unit's master, as far as hosts talk to it: it records every call."""

    def __init__(self) -> None:
        self.moved: list[tuple[str, str, int, str]] = []
        self.told_of_a_move = trio.Event()
        self.returned: list[tuple[str, str, CheckpointRecord | None]] = []
        self.returned_at: list[tuple[float, float]] = []   # where each returned copy stood: progress, CPU
        self.failed: list[tuple[str, str, str]] = []
        self.replicas: list[tuple[str, int, float, float]] = []
        self.reports: list[tuple[UnitStatus, ...]] = []
        self.stop: tuple[str, ...] = ()   # what its next report's answer asks the host to stop
        self.results: list[tuple[str, str, int]] = []
        self.reachable = True             # False: a result sent to it does not arrive (a cut, its laptop closed)

    async def host_result(self, host, task_id, epoch, result, cpu_seconds=0.0):
        if not self.reachable:
            raise NodeUnavailableError(f"master {MASTER} is not known to be alive")
        self.results.append((host, task_id, epoch))
        return True

    async def host_report(self, host, units, spent=()):
        self.reports.append(units)
        stop, self.stop = self.stop, ()
        return stop

    async def host_moved(self, host, task_id, epoch, destination):
        self.moved.append((host, task_id, epoch, destination))
        self.told_of_a_move.set()
        return True

    async def host_return(self, host, task_id, epoch, record, progress=0.0, cpu_seconds=0.0):
        self.returned.append((host, task_id, record))
        self.returned_at.append((progress, cpu_seconds))
        return True

    async def host_failed(self, host, task_id, epoch, reason, retryable):
        self.failed.append((host, task_id, reason))

    async def host_replica(self, host, record, progress=0.0, cpu_seconds=0.0):
        self.replicas.append((host, record.seq, progress, cpu_seconds))


class Cluster:
    def __init__(self, tmp_path: Path, nursery: trio.Nursery, network: MemoryNetwork | None = None,
                 settings: HostSettings = HostSettings(report_interval=1.0)) -> None:
        self.network = network or MemoryNetwork()
        self.master = RecordingMaster()
        if network is None:  # else the caller's master is bound already
            self.network.links(MASTER).bind(master=self.master, host=None, keeper=None)  # type: ignore[arg-type]
        self.guests = {node: StandInGuests(tmp_path / node) for node in (A, B)}
        self.accepting = {A: True, B: True}   # False: the owner paused hosting there
        self.alive = [MASTER, A, B]           # the nodes the membership sees alive
        self.sent_away: dict[str, dict[str, float]] = {A: {}, B: {}}   # task -> until: the owner evicted it there
        self.outboxes: list[Outbox] = []
        self.events: dict[str, EventLog] = {}
        self.given: list[tuple[str, str, str, int, float]] = []   # (host, master, task, epoch, CPU) of every run
        self.settings = settings
        self.hosts = {node: self._host(node, tmp_path / node) for node in (A, B)}
        self.nursery = nursery

    def _host(self, node: str, data_dir: Path) -> HostService:
        links = self.network.links(node)
        events = self.events[node] = EventLog()
        others = tuple(n for n in (A, B) if n != node)
        migrator = Migrator(node_id=node, supervisor=self.guests[node], links=links, events=events,  # type: ignore[arg-type]
                            destinations=lambda hosted, state_bytes: others, observe_transfer=lambda *args: None,
                            move_deadline=lambda: 2.0)

        async def plugin_source(plugin_hash, nodes):
            return PLUGIN

        host = HostService(
            node_id=node, supervisor=self.guests[node], links=links,  # type: ignore[arg-type]
            capacity=lambda: Capacity(self.accepting[node], "paused by the owner", cpus=2, memory_pool_bytes=1 << 30,
                                      available=1.0, sent_away=self.sent_away[node]),
            plugin_source=plugin_source, has_plugin=lambda plugin_hash: True, outbox=self._outbox(data_dir),
            events=events, settings=lambda: self.settings, on_change=lambda: None,
            alive=lambda: list(self.alive), own_figures=lambda: NodeView(node, available=1.0, guests=0),
            answer_work_request=None, on_arrival=lambda task_id: None, relocator=migrator,  # type: ignore[arg-type]
            blocking=inline, on_spent=lambda hosted, cpu, at: self.given.append(
                (node, hosted.master, hosted.task.task_id, hosted.task.epoch, cpu)),
        )
        links.bind(master=None, host=host, keeper=None)  # type: ignore[arg-type]
        return host

    def _outbox(self, data_dir: Path) -> Outbox:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.outboxes.append(Outbox(data_dir / "outbox.sqlite"))
        return self.outboxes[-1]

    async def start(self) -> None:
        for host in self.hosts.values():
            await self.nursery.start(host.serve)
        spec = UnitSpec(task_id=TASK, assignment_id="aaaaaaaa-1", master=MASTER, plugin_name="p", plugin_version="1",
                        plugin_hash=PLUGIN.hash, unit=encode_plain(WorkUnit(0, {}, 1 << 20, 1.0).to_plain()),
                        memory_bytes=1 << 20, epoch=1)
        verdict = await self.network.links(MASTER).host(A).start(MASTER, spec, None)
        assert verdict.ok

    def running(self, node: str) -> list[str]:
        return [h.task.task_id for h in self.hosts[node].hosted() if h.stay is Stay.RUNNING]


@contextlib.asynccontextmanager
async def running_cluster(tmp_path: Path, *, away: tuple[str, ...] = (),
                          settings: HostSettings = HostSettings(report_interval=1.0)) -> AsyncIterator[Cluster]:
    """A master and two hosts, the unit running on A; everything stopped on the way out. The nodes `away` are not
    alive to the membership from the start."""
    async with trio.open_nursery() as nursery:
        built = Cluster(tmp_path, nursery, settings=settings)
        built.alive = [node for node in built.alive if node not in away]
        await built.start()
        yield built
        nursery.cancel_scope.cancel()
    for outbox in built.outboxes:
        outbox.close()


async def test_a_move_hands_the_captured_checkpoint_over_under_the_next_epoch(tmp_path, autojump_clock):
    async with running_cluster(tmp_path) as cluster:
        verdict = await cluster.network.links(MASTER).host(A).move(TASK, B)
        assert verdict.ok, verdict.reason
        assert cluster.running(A) == [] and cluster.running(B) == [TASK]
        arrived = cluster.guests[B].started[TASK]
        assert arrived is not None and arrived.seq == 1 and arrived.state == b"state of " + A.encode()
        assert cluster.hosts[B].hosted()[0].spec.epoch == 2
        assert cluster.master.moved == [(A, TASK, 2, B)]
        assert cluster.guests[A].store.latest(TASK) is None  # dropped here once B runs it
        assert cluster.hosts[A].forwarded_to(TASK) == B


async def test_a_move_whose_checkpoint_cannot_be_kept_at_the_destination_resumes_the_unit_where_it_was(
        tmp_path, autojump_clock, monkeypatch):
    async with running_cluster(tmp_path) as cluster:
        def disk_full(record):
            raise CheckpointError(f"checkpoint {record.seq} of task {record.task_id} was not written (disk full)")

        monkeypatch.setattr(cluster.guests[B].store, "write", disk_full)
        verdict = await cluster.network.links(MASTER).host(A).move(TASK, B)
        assert not verdict.ok and "disk full" in verdict.reason
        with trio.fail_after(60):
            while cluster.guests[A].started.get(TASK) is None:
                await trio.sleep(0.1)
        assert cluster.running(A) == [TASK] and cluster.running(B) == [] and cluster.master.moved == []
        assert cluster.guests[A].started[TASK].seq == 1   # from its capture, durable on A
        await trio.sleep(5)   # past B's next report: its guest that never got its state is no failure of the unit
        assert cluster.master.failed == []


async def test_a_move_to_a_node_cut_off_leaves_the_unit_running_untouched(tmp_path, autojump_clock):
    async with running_cluster(tmp_path) as cluster:
        cluster.network.cut(B)
        verdict = await cluster.network.links(MASTER).host(A).move(TASK, B)
        assert not verdict.ok and "cut off" in verdict.reason
        assert cluster.running(A) == [TASK] and cluster.guests[A].store.latest(TASK) is None  # never captured
        with pytest.raises(NodeUnavailableError):
            await cluster.network.links(A).host(B).figures()


async def test_an_evicted_unit_relocates_to_the_peer_the_ranking_names(tmp_path, autojump_clock):
    async with running_cluster(tmp_path) as cluster:
        assert await cluster.hosts[A].evict(TASK) == (TASK,)
        with trio.fail_after(60):
            await cluster.master.told_of_a_move.wait()  # the last step of the hand-over: B runs it, A let go
        assert cluster.running(B) == [TASK] and cluster.running(A) == [] and cluster.master.returned == []
        assert cluster.master.moved == [(A, TASK, 2, B)]


@pytest.mark.parametrize("trailer", ["sound", "damaged"])
async def test_an_evicted_units_capture_goes_as_it_comes_and_a_damaged_trailer_sends_it_again_whole(
        tmp_path, autojump_clock, trailer):
    async with running_cluster(tmp_path) as cluster:
        cluster.guests[A].streams = True
        if trailer == "damaged":
            cluster.guests[A].trailer = lambda sha256: ("1" if sha256[0] == "0" else "0") + sha256[1:]
        assert await cluster.hosts[A].evict(TASK) == (TASK,)
        with trio.fail_after(60):
            await cluster.master.told_of_a_move.wait()
        assert cluster.running(B) == [TASK] and cluster.running(A) == [] and cluster.master.moved == [(A, TASK, 2, B)]
        arrived = cluster.guests[B].started[TASK]
        assert arrived is not None and arrived.seq == 1 and arrived.state == b"state of " + A.encode()
        assert cluster.guests[B].store.latest(TASK) == arrived.verify(), "B keeps A's capture, bit-identical"
        moved = [e.message for e in cluster.events[A].recent() if e.kind == "move"]
        how = "sent while it was captured" if trailer == "sound" else "sent whole"
        assert len(moved) == 1 and how in moved[0], moved


async def test_a_replica_tells_the_master_the_progress_and_cpu_time_its_checkpoint_was_taken_at(tmp_path, autojump_clock):
    # Its master may place the unit again from this replica before the host's next report says where the
    # copy stood (a cut right after it): it must not have to guess from the copy's rate so far.
    async with running_cluster(tmp_path) as cluster:
        guests = cluster.guests[A]
        task = cluster.hosts[A].hosted()[0].task
        record = guests.store.commit(task_id=TASK, plugin_name="p", plugin_version="1", plugin_hash=PLUGIN.hash,
                                     unit_index=0, epoch=1, seq=1, taken_at=0.0, state=b"state")
        cluster.hosts[A].on_checkpoint(task, record)
        # The replica reads the checkpoint back in a worker thread, during which the autojump clock runs on:
        # each poll below is then a jump of 0.1 s, and 10 s of them were over before a thread on a loaded
        # machine was done (2 runs in 20 at load 5-7). An hour of mock time is tens of thousands of polls.
        with trio.fail_after(3600):
            while not cluster.master.replicas:
                await trio.sleep(0.1)
        # The stand-in guest is at 50 % after 10 CPU-seconds, 1 of them since this checkpoint.
        assert cluster.master.replicas == [(A, 1, 0.5, 9.0)]


async def test_a_copy_its_master_stops_is_reported_once_more_with_the_cpu_time_it_used_to_the_end(tmp_path, autojump_clock):
    # Its master asks the stop on a report that may be stale, and the guest runs until it is killed: the
    # master counts what it threw away to its last figure.
    async with running_cluster(tmp_path) as cluster:
        cluster.master.stop = (TASK,)
        await cluster.hosts[A].report_now()
        assert [s.cpu_seconds for s in cluster.master.reports[-1]] == [10.0]
        with trio.fail_after(10):
            while cluster.running(A):
                await trio.sleep(0.1)
        await cluster.hosts[A].report_now()
        assert [(s.task_id, s.state, s.cpu_seconds) for s in cluster.master.reports[-1]] == [(TASK, STOPPED, 12.5)]
        heard = len(cluster.master.reports)
        await cluster.hosts[A].report_now()
        assert len(cluster.master.reports) == heard          # heard once: nothing more to tell


def one_unit_master_store(tmp_path: Path) -> tuple[MasterStore, str]:
    """The master's store holding one assignment of one unit: (store, assignment id)."""
    store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
    return store, store.create_assignment(plugin="p", plugin_version="1", plugin_hash=PLUGIN.hash, params={},
                                          units=[NewUnit(data={}, memory_bytes=1 << 20, cost=1.0)])


def real_master(tmp_path: Path, store: MasterStore, links, **more) -> MasterScheduler:
    """A real master over `store` whose one host in view is A."""
    return MasterScheduler(
        node_id=MASTER, store=store, links=links, events=EventLog(), results_dir=tmp_path / "results",
        replicas=CheckpointStore(tmp_path / "replicas"), local_checkpoints=CheckpointStore(tmp_path / "local"),
        hosts=lambda: [NodeView(A, available=1.0, guests=0, cpus=2)], settings=lambda: MasterSettings(),
        on_change=lambda: None, alive=lambda: [MASTER, A, B], clock=trio.current_time, blocking=inline,
        **{"registry": None, **more},
    )


@dataclasses.dataclass
class RealMasterCluster:
    """A real master of one unit (`one_unit_master_store`, `real_master`), and hosts A and B serving."""

    cluster: Cluster
    scheduler: MasterScheduler
    store: MasterStore
    assignment: str
    results_dir: Path

    @property
    def task(self) -> str:
        return f"{self.assignment}.0"

    def unit(self) -> UnitRecord:
        return self.store.unit(self.assignment, 0)

    def view(self, **seen) -> AssignmentView:
        """The assignment as a screen shows it, with what the node knows beside its store (`assignment_view`)."""
        return assignment_view(self.store.assignment(self.assignment), now=0.0, results_dir=self.results_dir, **seen)


@contextlib.asynccontextmanager
async def real_master_cluster(tmp_path: Path, **more) -> AsyncIterator[RealMasterCluster]:
    """`more`: for `real_master`. Everything stopped on the way out."""
    store, assignment = one_unit_master_store(tmp_path)
    network = MemoryNetwork()
    links = network.links(MASTER)
    scheduler = real_master(tmp_path, store, links, **more)
    links.bind(master=scheduler, host=None, keeper=None)  # type: ignore[arg-type]
    try:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(tmp_path, nursery, network=network)
            for host in cluster.hosts.values():
                await nursery.start(host.serve)
            await nursery.start(scheduler.serve)
            yield RealMasterCluster(cluster, scheduler, store, assignment, results_dir=tmp_path / "results")
            nursery.cancel_scope.cancel()
        for outbox in cluster.outboxes:
            outbox.close()
    finally:
        store.close()


async def test_a_real_master_places_the_unit_and_follows_its_move_to_the_next_epoch(tmp_path, autojump_clock):
    async with real_master_cluster(tmp_path) as world:
        cluster, scheduler, task = world.cluster, world.scheduler, world.task
        with trio.fail_after(60):
            while cluster.running(A) != [task]:
                await trio.sleep(1)
        assert (world.unit().host, world.unit().epoch) == (A, 1)

        verdict = await cluster.network.links(MASTER).host(A).move(task, B)
        assert verdict.ok, verdict.reason
        assert (world.unit().state, world.unit().host, world.unit().epoch) == ("running", B, 2)
        await trio.sleep(30)  # reports from both hosts for a while: the master keeps the one copy at B
        assert (world.unit().state, world.unit().host, world.unit().epoch) == ("running", B, 2)
        assert cluster.running(B) == [task]

        # B's owner pauses: B's next report says so, and the master's screen shows it, with no ETA.
        cluster.guests[B].state = "paused"
        await cluster.hosts[B].report_now()
        assert scheduler.reported_states()[task] == "paused" and task not in scheduler.etas()
        shown = world.view(reported=scheduler.reported_states())
        assert (shown.units[0].state, shown.units[0].reported) == ("running", "paused")


async def test_an_evicted_unit_back_in_its_masters_queue_shows_how_far_its_checkpoint_took_it(tmp_path, autojump_clock):
    # Seen on a desk: the owner evicted two units at 6 %, no peer took them, and their master listed them
    # queued at 0 %, as if the work were lost, though they would go on from their checkpoints.
    async with real_master_cluster(tmp_path) as world:
        cluster, task = world.cluster, world.task
        cluster.guests[A].on_checkpoint = cluster.hosts[A].on_checkpoint
        with trio.fail_after(60):
            while cluster.running(A) != [task]:
                await trio.sleep(1)
            await trio.sleep(2)   # A has looked at its guest: 50 % (the stand-in's figure)
            cluster.accepting = {A: False, B: False}   # both owners keep their machines: it waits in the queue
            assert await cluster.hosts[A].evict(task) == (task,)
            while world.unit().state != "queued":
                await trio.sleep(0.1)
        queued = world.view()
        assert (queued.units[0].state, queued.units[0].progress, queued.progress) == ("queued", 0.5, 0.5)

        cluster.accepting[A] = True
        with trio.fail_after(60):
            while cluster.running(A) != [task]:
                await trio.sleep(1)
        kept = CheckpointStore(tmp_path / "replicas").latest(task)   # (`real_master`'s replicas)
        assert kept is not None and cluster.guests[A].started[task] == kept   # it goes on from there
        running = world.view(live=world.scheduler.progress())
        assert (running.units[0].state, running.units[0].progress, running.progress) == ("running", 0.5, 0.5)


async def test_what_each_host_gave_the_masters_units_is_what_the_master_received_from_it(tmp_path, autojump_clock):
    # One unit: it runs 10 CPU-s on A, whose owner evicts it (it moves to B), then 4 CPU-s on B, which
    # finishes it. A's run has no result: its CPU reaches the master with A's next report. What each host
    # gave the master's units must be what the master received from it (the ledger's two sides of the runs).
    received: list[tuple[str, str, int, float]] = []

    class NoCombine:
        def by_hash(self, plugin_hash):
            raise FrostError("this test counts CPU, not a plugin's combine")

    async with real_master_cluster(tmp_path, registry=NoCombine(),
                                   on_received=lambda host, task_id, epoch, cpu, ended_at: received.append(
                                       (host, task_id, epoch, cpu))) as world:
        cluster, task = world.cluster, world.task
        cluster.guests[B].cpu = 4.0
        with trio.fail_after(60):
            while cluster.running(A) != [task]:
                await trio.sleep(1)
            assert await cluster.hosts[A].evict(task) == (task,)
            while cluster.running(B) != [task]:
                await trio.sleep(1)
            cluster.guests[B].complete(task, 7)
            while world.unit().state != "done":
                await trio.sleep(1)
            await trio.sleep(5)   # A's next report
    assert [(host, t, cpu) for host, master, t, _, cpu in cluster.given] == [(A, task, 10.0), (B, task, 4.0)]
    for host in (A, B):
        given = sum(cpu for h, master, _, _, cpu in cluster.given if (h, master) == (host, MASTER))
        assert sum(cpu for h, _, _, cpu in received if h == host) == given, f"{host}: given {given}, got {received}"


async def test_an_evicted_units_capture_goes_as_it_comes_even_when_the_peer_answers_the_offer_after_the_guest(
        tmp_path, autojump_clock, monkeypatch):
    async with running_cluster(tmp_path) as cluster:
        cluster.guests[A].streams = True
        offer = cluster.hosts[B].offer

        async def slow_offer(source, unit_offer):
            await trio.sleep(0.2)  # past the guest's migration point (0.05 s here): its state is coming already
            return await offer(source, unit_offer)

        monkeypatch.setattr(cluster.hosts[B], "offer", slow_offer)
        assert await cluster.hosts[A].evict(TASK) == (TASK,)
        with trio.fail_after(60):
            await cluster.master.told_of_a_move.wait()
        assert cluster.running(B) == [TASK] and cluster.guests[B].started[TASK].state == b"state of " + A.encode()
        moved = [e.message for e in cluster.events[A].recent() if e.kind == "move"]
        assert len(moved) == 1 and "sent while it was captured" in moved[0], moved


async def test_an_evicted_unit_no_peer_takes_goes_back_to_its_master_and_the_event_says_why(tmp_path, autojump_clock):
    async with running_cluster(tmp_path) as cluster:
        cluster.accepting[B] = False   # B's owner paused hosting: it refuses the offer
        assert await cluster.hosts[A].evict(TASK) == (TASK,)
        with trio.fail_after(60):
            while not cluster.master.returned:
                await trio.sleep(0.1)
        assert [(host, task) for host, task, _ in cluster.master.returned] == [(A, TASK)]
        (back,) = [e.message for e in cluster.events[A].recent() if "went back to its master's queue" in e.message]
        assert f"no peer took it: {B[:8]}: not taking guests: paused by the owner" in back, back


@pytest.mark.parametrize("hold", ["ended", "on"])
async def test_an_evicted_unit_goes_to_a_peer_whose_owner_sent_it_away_only_once_that_hold_has_ended(
        tmp_path, autojump_clock, hold):
    async with running_cluster(tmp_path) as cluster:
        # B's owner evicted the unit before; the node drops an ended hold from its list only at its next tick.
        cluster.sent_away[B][TASK] = time.time() + (-1.0 if hold == "ended" else 60.0)
        assert await cluster.hosts[A].evict(TASK) == (TASK,)
        with trio.fail_after(60):
            while not (cluster.master.moved or cluster.master.returned):
                await trio.sleep(0.1)
        if hold == "ended":
            assert cluster.master.moved == [(A, TASK, 2, B)] and cluster.master.returned == []
        else:
            assert cluster.master.moved == [] and [task for _, task, _ in cluster.master.returned] == [TASK]
            (back,) = [e.message for e in cluster.events[A].recent() if "went back to its master's queue" in e.message]
            assert f"{B[:8]}: the owner evicted {TASK} from here" in back, back


async def test_a_result_its_master_could_not_take_is_kept_and_delivered_once_the_master_is_back(tmp_path, autojump_clock):
    async with running_cluster(tmp_path) as cluster:
        cluster.master.reachable = False
        cluster.guests[A].complete(TASK, 42)
        await wait_until(lambda: [o.task_id for o in cluster.outboxes[0].held()] == [TASK], timeout=5,
                         what="the result kept in A's outbox")
        await trio.sleep(10)            # tried again every report interval meanwhile
        assert cluster.master.results == []
        cluster.master.reachable = True
        await wait_until(lambda: cluster.master.results == [(A, TASK, 1)], timeout=5, what="the result delivered")
        await wait_until(lambda: cluster.outboxes[0].held() == [], timeout=5, what="the outbox emptied")
        assert any(f"{TASK}: result delivered to master" in e.message for e in cluster.events[A].recent())


async def test_results_held_over_a_long_weekend_reach_their_master_and_only_those_past_a_week_are_given_up(
        tmp_path, autojump_clock):
    """The submitter's laptop went home on Friday: the membership declared its node dead, and A's results for it
    waited in A's outbox. On the default configuration's hold, Monday's return brings it the results finished
    since Friday; one finished eight days ago is given up, and A's owner is told which."""
    day = 86400.0
    earlier = Outbox(tmp_path / A / "outbox.sqlite")   # what A held when it started
    for task, age in (("aaaaaaaa-1.7", 3.5 * day), ("aaaaaaaa-1.8", 8 * day)):
        earlier.put(dataclasses.replace(owed_result(task, MASTER, 1, b"result"), created_at=time.time() - age))
    earlier.close()
    desk = HostSettings.from_config(load_config(Paths.resolve(config_file=tmp_path / "none.toml",
                                                              data_dir=tmp_path / "data")))
    async with running_cluster(tmp_path, away=(MASTER,), settings=desk) as cluster:
        await trio.sleep(30)            # still away: A looks at what it holds every report interval
        assert cluster.master.results == []
        assert [h.task_id for h in cluster.outboxes[0].held()] == ["aaaaaaaa-1.7"]
        (given_up,) = [e for e in cluster.events[A].recent() if "gave up holding" in e.message]
        assert given_up.severity == "error" and "aaaaaaaa-1.8" in given_up.message, given_up
        cluster.alive.append(MASTER)    # Monday: the laptop is back on the network
        await wait_until(lambda: cluster.master.results == [(A, "aaaaaaaa-1.7", 1)], timeout=5,
                         what="the weekend's result delivered")
        await wait_until(lambda: cluster.outboxes[0].held() == [], timeout=5, what="the outbox emptied")

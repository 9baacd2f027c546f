"""The live balancing loop on fake node callables: what it sends, asks, refuses and explains, on a mock clock."""

from __future__ import annotations

from dataclasses import replace

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.cluster.balancer import Balancer, BalanceInputs, unit_view
from frost_core.api.errors import FrostError
from frost_core.guest.views import GuestFigures
from frost_core.policies import NodeView, PolicySettings
from frost_core.policies.balance import Step, remaining_work
from frost_core.policies.owner import GuestAction

SETTINGS = PolicySettings(band=0.25, min_stay=300.0, default_bandwidth=10e6)


def guest(task_id: str, progress: float = 0.5, cpu: float = 100.0, state: str = "running") -> GuestFigures:
    return GuestFigures(task_id=task_id, assignment_id="asg", plugin="pi", origin="home", state=state,
                        progress=progress, cpu_seconds=cpu, cpu_percent=100.0, wall_seconds=cpu,
                        since_checkpoint_seconds=0.0, cpu_since_checkpoint_seconds=0.0,
                        checkpoint_bytes=1_000_000, memory_bytes=0, last_checkpoint_seq=1)


class FakeNode:
    """The node's side of the balancer: figures to read, peers to query, and every call recorded."""

    def __init__(self, me: NodeView, table: list[NodeView], guests: list[GuestFigures],
                 owner: GuestAction = GuestAction.RUN) -> None:
        self.me = me
        self.table = table
        self.guests = guests
        self.owner = owner
        self.fresh: dict[str, NodeView | None] = {}
        self.refuse: str | None = None
        self.reads = 0
        self.queried: list[str] = []
        self.moved: list[tuple[str, str]] = []
        self.requested: list[str] = []

    def read(self) -> BalanceInputs:
        self.reads += 1
        return BalanceInputs(self.me, tuple(self.table), tuple(self.guests), {}, speed=1.0, owner=self.owner)

    async def query(self, node_id: str) -> NodeView | None:
        self.queried.append(node_id)
        if node_id in self.fresh:
            return self.fresh[node_id]
        return next(row for row in self.table if row.node_id == node_id)

    async def move(self, task_id: str, node_id: str) -> None:
        if self.refuse:
            raise FrostError(self.refuse, title="Move refused")
        self.moved.append((task_id, node_id))
        self.guests = [g for g in self.guests if g.task_id != task_id]
        self.me = replace(self.me, guests=self.me.guests - 1)

    async def request_work(self, node_id: str) -> None:
        self.requested.append(node_id)

    def balancer(self, **changes) -> Balancer:
        return Balancer(read=self.read, query=self.query, move=self.move, request_work=self.request_work,
                        settings=changes.pop("settings", SETTINGS), **changes)


def overloaded() -> FakeNode:
    # a: one CPU shared by three guests: offer 1/4 = 0.25; b and c: idle two-CPU machines, offer 1.0 each
    # average (0.25 + 1 + 1) / 3 = 0.75, thresholds 0.5625 .. 0.9375; sender mode (average nearer idle 1.0)
    me = NodeView("a", available=1.0, guests=3)
    peers = [NodeView(n, available=2.0, guests=0, cpus=2, idle_extremity=2.0) for n in ("b", "c")]
    return FakeNode(me, [me, *peers], [guest("t1", 0.5), guest("t2", 0.2), guest("t3", 0.9)])


def test_remaining_work_extrapolates_the_pace_so_far():
    assert remaining_work(0.25, 100.0, 2.0) == pytest.approx(600.0)   # 200 work done for a quarter: 600 left
    assert remaining_work(0.0, 50.0, 1.0) == 50.0                      # no progress yet: as long again
    assert remaining_work(1.0, 50.0, 1.0) == 0.0
    view = unit_view(guest("t", 0.5, 10.0), speed=1.5, arrived_at=7.0)
    assert (view.remaining_work, view.state_bytes, view.arrived_at) == (15.0, 1_000_000, 7.0)


async def test_two_low_readings_send_the_guest_that_gains_most_to_a_confirmed_peer(autojump_clock):
    node = overloaded()
    balancer = node.balancer()
    first = await balancer.step()
    assert first.step is Step.NOTHING and node.moved == []          # one reading is no tendency yet
    second = await balancer.step()
    # t2 has 400 work left (20 % done in 100 s), the most: at 1/3 here 1200 s, there 1.1 + 400 s
    assert node.moved == [("t2", "b")]
    assert node.queried == ["b"]                                   # asked afresh before sending
    assert second.step is Step.SEND and second.task_id == "t2" and second.node_id == "b"
    assert "to b" in second.why and balancer.last == second


async def test_a_target_whose_fresh_figures_fell_is_skipped_for_the_next(autojump_clock):
    node = overloaded()
    # b took two guests meanwhile: offer 2/3 < 1.0 × (1 - 0.25), so the table's judgement no longer holds
    node.fresh["b"] = NodeView("b", available=2.0, guests=2, cpus=2, idle_extremity=2.0)
    balancer = node.balancer()
    await balancer.step()
    decision = await balancer.step()
    assert node.queried == ["b", "c"] and node.moved == [("t2", "c")]
    assert decision.node_id == "c"


async def test_no_partner_backs_off_one_two_four_rounds(autojump_clock):
    node = overloaded()
    node.fresh = {"b": None, "c": None}                            # neither answers
    balancer = node.balancer(interval=10.0)
    await balancer.step()
    failed = await balancer.step()
    assert failed.step is Step.NOTHING and "did not answer" in failed.why
    asked = len(node.queried)
    await trio.sleep(10)
    assert await balancer.step() is None                           # skipping migration for now
    await trio.sleep(10)
    assert (await balancer.step()).step is Step.NOTHING            # tried again after two rounds
    assert len(node.queried) == 2 * asked
    await trio.sleep(30)
    assert await balancer.step() is None                           # then waits four rounds
    await trio.sleep(10)
    assert (await balancer.step()).step is Step.NOTHING


async def test_a_refused_move_is_explained_and_nothing_moves(autojump_clock):
    node = overloaded()
    node.refuse = "no room for 2 GB"
    balancer = node.balancer()
    await balancer.step()
    decision = await balancer.step()
    assert decision.step is Step.NOTHING and node.moved == []
    assert "refused t2: no room for 2 GB" in decision.why


async def test_a_refusal_is_news_once_per_reason_not_every_round(autojump_clock):
    node = overloaded()
    node.refuse = "no room for 2 GB"
    balancer = node.balancer(interval=10.0)
    await balancer.step()
    news = []
    for _ in range(12):                 # two minutes of rounds; the peer keeps refusing
        decision = await balancer.step()
        if decision is not None:
            news.append(decision.news)
        await trio.sleep(10)
    assert news.count(True) == 1 and len(news) > 2
    node.refuse = "its owner is at the desk"
    while (decision := await balancer.step()) is None:
        await trio.sleep(10)
    assert decision.news and "its owner is at the desk" in decision.why
    node.refuse = None
    while (decision := await balancer.step()) is None:
        await trio.sleep(10)
    assert decision.step is Step.SEND and decision.news


async def test_a_guest_that_arrived_recently_stays_unless_the_owner_returns(autojump_clock):
    node = overloaded()
    node.guests = [guest("t2", 0.2)]
    balancer = node.balancer()
    balancer.note_arrival("t2")
    await balancer.step()
    decision = await balancer.step()
    assert node.moved == [] and "less than 300 s ago" in decision.why
    node.owner = GuestAction.EVICT
    forced = await balancer.step()
    assert node.moved == [("t2", "b")] and forced.why.startswith("owner active")


async def test_an_owner_eviction_places_every_guest_at_once(autojump_clock):
    node = overloaded()
    node.owner = GuestAction.EVICT
    decision = await node.balancer().step()
    assert sorted(task for task, _ in node.moved) == ["t1", "t2", "t3"]
    assert decision.step is Step.SEND and "moved 3 of 3" in decision.why


async def test_while_the_owner_suspends_guests_the_balancer_waits(autojump_clock):
    node = overloaded()
    node.owner = GuestAction.SUSPEND
    balancer = node.balancer()
    await balancer.step()
    decision = await balancer.step()
    assert node.moved == [] and "owner policy holds" in decision.why


async def test_a_unit_about_to_finish_never_moves(autojump_clock):
    node = overloaded()
    node.guests = [guest("done-soon", progress=0.999, cpu=1000.0)]    # 1 work left: 2 s here, 1.1 s + 1 s there
    node.me = replace(node.me, available=0.5, guests=1)               # offer 0.25: below the lower threshold
    balancer = node.balancer()
    await balancer.step()
    decision = await balancer.step()
    assert node.moved == [] and "finish sooner elsewhere" in decision.why


async def test_an_idle_node_asks_the_most_loaded_node_in_receiver_mode(autojump_clock):
    # offers: idle 1.0, x 0.3/3 = 0.1, y 0.2/4 = 0.05; average 0.383 lies nearer the heavy extremity (0)
    me = NodeView("idle", available=1.0, guests=0)
    table = [me, NodeView("x", available=0.3, guests=2), NodeView("y", available=0.2, guests=3)]
    node = FakeNode(me, table, [])
    balancer = node.balancer()
    await balancer.step()
    decision = await balancer.step()
    assert node.requested == ["y"] and node.queried == ["y"]
    assert decision.step is Step.REQUEST and decision.node_id == "y"


async def test_a_request_from_an_idle_peer_gets_the_guest_that_gains_most(autojump_clock):
    node = overloaded()
    decision = await node.balancer().answer_request(NodeView("c", available=2.0, guests=0, cpus=2,
                                                             idle_extremity=2.0))
    assert node.moved == [("t2", "c")] and decision.why.startswith("c asked for work")


async def test_serve_plans_once_per_interval(autojump_clock):
    node = overloaded()
    async with trio.open_nursery() as nursery:
        await nursery.start(node.balancer(interval=10.0).serve)
        await trio.sleep(35)
        nursery.cancel_scope.cancel()
    assert node.reads == 4                                           # at 0, 10, 20 and 30 s


async def test_serve_as_the_node_runs_it_follows_the_configured_interval_its_lock_and_reports_each_round(
        autojump_clock):
    node = overloaded()
    configured = [0.0]  # cluster.balance_interval = 0: balancing off
    lock = trio.Lock()
    rounds = []
    balancer = node.balancer(interval=lambda: configured[0], lock=lock, on_round=rounds.append)
    async with trio.open_nursery() as nursery:
        await nursery.start(balancer.serve)
        await trio.sleep(30)
        assert node.reads == 0 and rounds == []
        configured[0] = 10.0  # the owner turns it on; the loop sees it within OFF_RECHECK
        await trio.sleep(2)
        assert node.reads == 1 and len(rounds) == 1
        async with lock:  # the node evicting: no round meanwhile
            await trio.sleep(25)
            assert node.reads == 1
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert node.reads == 2 and len(rounds) == 2


# -- two nodes balancing against each other ---------------------------------------------------------

class TwoNodes:
    """A world of two machines whose balancers move guests between them; it records every move."""

    def __init__(self, capacity: float, counts: tuple[int, int], progress: list[float]) -> None:
        self.capacity = capacity
        self.guests = {"a": [], "b": []}
        for n, (node_id, count) in enumerate(zip(("a", "b"), counts)):
            for i in range(count):
                self.guests[node_id].append(guest(f"{node_id}{i}", progress[(n * 7 + i) % len(progress)]))
        self.moves: list[tuple[str, str, str]] = []
        self.balancers = {node_id: self._balancer(node_id) for node_id in ("a", "b")}

    def view(self, node_id: str) -> NodeView:
        return NodeView(node_id, self.capacity, len(self.guests[node_id]), idle_extremity=self.capacity)

    def _balancer(self, node_id: str) -> Balancer:
        def read() -> BalanceInputs:
            return BalanceInputs(self.view(node_id), (self.view("a"), self.view("b")), tuple(self.guests[node_id]),
                                 {}, speed=1.0)

        async def query(peer: str) -> NodeView:
            return self.view(peer)

        async def move(task_id: str, destination: str) -> None:
            moving = next(g for g in self.guests[node_id] if g.task_id == task_id)
            self.guests[node_id].remove(moving)
            self.guests[destination].append(moving)
            self.moves.append((task_id, node_id, destination))
            self.balancers[destination].note_arrival(task_id)

        async def request_work(peer: str) -> None:
            await self.balancers[peer].answer_request(self.view(node_id))

        return Balancer(read=read, query=query, move=move, request_work=request_work, settings=SETTINGS)

    async def run(self, rounds: int) -> None:
        for _ in range(rounds):
            for balancer in self.balancers.values():
                await balancer.step()
            await trio.sleep(10)


capacities = st.floats(min_value=0.1, max_value=8.0, allow_nan=False)
progresses = st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(capacities, st.integers(1, 6), progresses)
def test_two_equally_loaded_nodes_never_move_a_unit(capacity, count, progress):
    world = TwoNodes(capacity, (count, count), progress)
    trio.run(world.run, 100, clock=trio.testing.MockClock(autojump_threshold=0))
    assert world.moves == []


@settings(max_examples=40, deadline=None)
@given(capacities, st.integers(0, 6), st.integers(0, 6), progresses)
def test_two_identical_machines_never_ping_pong_a_unit(capacity, count_a, count_b, progress):
    world = TwoNodes(capacity, (count_a, count_b), progress)
    trio.run(world.run, 100, clock=trio.testing.MockClock(autojump_threshold=0))   # 1000 s, past the minimum stay
    left: dict[str, str] = {}
    for task_id, source, destination in world.moves:
        assert left.get(task_id) != destination, f"{task_id} went back to {destination}: {world.moves}"
        left[task_id] = source

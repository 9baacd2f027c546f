"""Results checked by a second host, under MockClock: a host that corrupts one result in ten is outvoted,
quarantined and sent nothing more, and every unit's result is still the right one.

A real MasterScheduler over a real SQLite store; the hosts are in-process stand-ins that take every
unit, and the test delivers each placed unit's result as its host would, the bad host's corrupted.
"""

from __future__ import annotations

import cbor2
import trio
import trio.testing

from frost_core.api.errors import FrostError
from frost_core.cluster.links import offer_each, start_each
from frost_core.cluster.messages import UnitOfferReply, UnitStatus, Verdict
from frost_core.events import EventLog
from frost_core.guest import envelope
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit
from frost_core.policies.views import NodeView
from frost_core.storage.checkpoints import CheckpointStore
from tests.waiting import wait_until

MASTER = "m" * 32
GOOD = ("a" * 32, "b" * 32)
BAD = "c" * 32
UNITS = 10


class StandInHost:
    async def offer(self, source, offer):
        return UnitOfferReply(accepted=True, reason="", available=1.0, guests=0, free_memory=1 << 30)

    async def start(self, source, spec, record, *, moved=False):
        return Verdict(ok=True)


class StandInLinks:
    def host(self, node_id):
        return StandInHost()

    async def offer_units(self, node_id, offers):
        return await offer_each(StandInHost(), MASTER, offers)

    async def start_units(self, node_id, specs):
        return await start_each(StandInHost(), MASTER, specs)


class NoCombine:
    def by_hash(self, plugin_hash):
        raise FrostError("this test checks the unit results, not a plugin's combine")


async def inline(function, *args):
    return function(*args)


def result_bytes(value) -> bytes:
    return envelope.pack(envelope.RESULT, cbor2.dumps(value), {}, 1 << 20)


def scheduler_for(tmp_path, store: MasterStore, events: EventLog, views: list[NodeView]) -> MasterScheduler:
    """A master over `store` whose hosts are `views`, all of them alive."""
    return MasterScheduler(
        node_id=MASTER, store=store, registry=NoCombine(), links=StandInLinks(), events=events,
        results_dir=tmp_path / "results", replicas=CheckpointStore(tmp_path / "replicas"),
        local_checkpoints=CheckpointStore(tmp_path / "local"), hosts=lambda: views,
        settings=lambda: MasterSettings(), on_change=lambda: None,
        alive=lambda: [MASTER, *(view.node_id for view in views)], clock=trio.current_time, blocking=inline,
    )


def run_checked(tmp_path, verify: float, checked: frozenset[int]):
    """Run a 10-unit assignment on two good hosts and one that corrupts its first result and every tenth
    after; return (store, assignment id, events, scheduler's quarantine, hosts each unit ran on). Nothing is
    placed on the bad host once it is quarantined (copies placed before still deliver)."""
    store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
    aid = store.create_assignment(plugin="squares", plugin_version="1", plugin_hash="h" * 64, params={},
                                  units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(UNITS)],
                                  verify=verify, checked=checked)
    events = EventLog()
    views = [NodeView(node_id=h, available=1.0, guests=0, cpus=2) for h in (*GOOD, BAD)]
    ran_on: dict[int, list[str]] = {i: [] for i in range(UNITS)}
    returned = {BAD: 0}

    async def hosts_deliver(scheduler):
        while any(u.state != "done" for u in store.assignment(aid).units):
            for unit in store.running_units():
                value = unit.index * unit.index
                if unit.host == BAD:
                    returned[BAD] += 1
                    if returned[BAD] % 10 == 1:
                        value += 1     # a flipped bit in its RAM
                ran_on[unit.index].append(unit.host)
                await scheduler.host_result(unit.host, unit.task_id, unit.epoch, result_bytes(value), 1.0)
            await trio.sleep(0.5)

    async def main():
        scheduler = scheduler_for(tmp_path, store, events, views)
        async with trio.open_nursery() as nursery:
            await nursery.start(scheduler.serve)
            with trio.fail_after(600):
                await hosts_deliver(scheduler)
            await wait_until(lambda: store.assignment(aid).state != "running", timeout=60, what="the combine")
            nursery.cancel_scope.cancel()
        return scheduler.quarantined()

    quarantined = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    messages = [e.message for e in events.recent()]
    caught = next((n for n, m in enumerate(messages) if "quarantined" in m), len(messages))
    assert not [m for m in messages[caught:] if f"placed on {BAD[:8]}" in m], "placed on the bad host after its quarantine"
    return store, aid, messages, quarantined, ran_on


def test_with_every_unit_checked_a_corrupting_host_is_outvoted_and_quarantined(tmp_path):
    store, aid, messages, quarantined, ran_on = run_checked(tmp_path, 1.0, frozenset(range(UNITS)))
    assert store.unit_results(aid) == [i * i for i in range(UNITS)]   # every result right, the bad one outvoted
    assert list(quarantined) == [BAD]
    assert any(f"{BAD[:8]} returned a wrong result" in m and "quarantined" in m for m in messages)
    # Each unit ran on different hosts; after its wrong result the bad host got nothing more.
    assert all(len(hosts) == len(set(hosts)) >= 2 for hosts in ran_on.values())
    caught = min(i for i, hosts in ran_on.items() if BAD in hosts)   # its first result was the wrong one
    assert ran_on[caught][-1] != BAD and len(ran_on[caught]) == 3
    assert store.assignment(aid).verified == UNITS
    store.close()


def test_with_verify_zero_nothing_is_checked_and_the_summary_says_so(tmp_path):
    store, aid, messages, quarantined, ran_on = run_checked(tmp_path, 0.0, frozenset())
    assert quarantined == {} and all(len(hosts) == 1 for hosts in ran_on.values())
    assert store.unit_results(aid) != [i * i for i in range(UNITS)]   # unchecked: the corrupted result stands
    from frost_core.master.verification import summary
    record = store.assignment(aid)
    assert summary(record.verify, len(record.units), record.verified) == "not verified"
    store.close()


def test_with_no_second_host_a_checked_units_result_is_taken_unverified(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
    aid = store.create_assignment(plugin="squares", plugin_version="1", plugin_hash="h" * 64, params={},
                                  units=[NewUnit(data={}, memory_bytes=1 << 20, cost=1.0)], verify=1.0,
                                  checked=frozenset({0}))
    only = [NodeView(node_id=GOOD[0], available=1.0, guests=0, cpus=2)]
    in_threads: list[str] = []

    async def in_a_thread(function, *args):   # what the node runs in a worker thread, off its event loop
        in_threads.append(getattr(function, "func", function).__name__)
        return function(*args)

    async def main():
        scheduler = MasterScheduler(
            node_id=MASTER, store=store, registry=NoCombine(), links=StandInLinks(), events=EventLog(),
            results_dir=tmp_path / "results", replicas=CheckpointStore(tmp_path / "replicas"),
            local_checkpoints=CheckpointStore(tmp_path / "local"), hosts=lambda: only,
            settings=lambda: MasterSettings(), on_change=lambda: None, alive=lambda: [MASTER, GOOD[0]],
            clock=trio.current_time, blocking=in_a_thread,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(scheduler.serve)
            await wait_until(lambda: store.unit(aid, 0).state == "running", timeout=60, what="the unit placed")
            assert await scheduler.host_result(GOOD[0], f"{aid}.0", 1, result_bytes(7), 1.0)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    unit = store.unit(aid, 0)
    assert (unit.state, unit.checked) == ("done", False) and store.unit_results(aid) == [7]
    assert store.assignment(aid).verified == 0
    assert {"record_copy", "settle_unchecked"} <= set(in_threads)   # their fsyncs never stall the loop
    store.close()


def test_a_quarantined_hosts_copies_already_placed_are_stopped_and_their_results_refused(tmp_path):
    # The bad host's RAM corrupts every result. Unit 2 is checked and placed on it first; unit 5 is not
    # checked and runs there too. Once the check of unit 2 outvotes it, its copy of unit 5 is taken back: the
    # result it still sends is refused, its next report is told to stop it, and unit 5 runs on a good host.
    store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
    aid = store.create_assignment(plugin="squares", plugin_version="1", plugin_hash="h" * 64, params={},
                                  units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(6)],
                                  verify=0.2, checked=frozenset({2}))
    events = EventLog()
    views = [NodeView(node_id=h, available=1.0, guests=0, cpus=2) for h in (*GOOD, BAD)]
    held: list[tuple[str, int]] = []   # the bad host's unchecked copies, their results sent after its quarantine

    async def main():
        scheduler = scheduler_for(tmp_path, store, events, views)
        async with trio.open_nursery() as nursery:
            await nursery.start(scheduler.serve)
            with trio.fail_after(600):
                while any(u.state != "done" for u in store.assignment(aid).units):
                    for unit in store.running_units():
                        value = unit.index * unit.index
                        if unit.host == BAD and not store.unit(aid, unit.index).checked:
                            if (unit.task_id, unit.epoch) not in held:
                                held.append((unit.task_id, unit.epoch))
                            continue
                        value += unit.host == BAD   # its bad RAM
                        await scheduler.host_result(unit.host, unit.task_id, unit.epoch, result_bytes(value), 1.0)
                    if scheduler.quarantined() and held:
                        task_id, epoch = held[0]
                        stop = await scheduler.host_report(BAD, (UnitStatus(task_id, epoch, 0.5, 1.0),))
                        assert stop == (task_id,), "the quarantined host was not told to stop its copy"
                        refused = await scheduler.host_result(BAD, task_id, epoch, result_bytes(-1), 1.0)
                        assert not refused, "a quarantined host's result was accepted"
                        held.clear()
                    await trio.sleep(0.5)
            await wait_until(lambda: store.assignment(aid).state != "running", timeout=60, what="the combine")
            nursery.cancel_scope.cancel()
        return scheduler.quarantined()

    assert list(trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))) == [BAD]
    assert store.unit_results(aid) == [i * i for i in range(6)]
    assert store.unit(aid, 5).host in GOOD
    messages = [e.message for e in events.recent()]
    assert any("quarantined" in m and f"{aid}.5" in m and "stopped and run again elsewhere" in m for m in messages)
    assert any(f"{aid}.5: the result from {BAD[:8]} is refused" in m for m in messages)
    store.close()

"""A free CPU a host keeps for a submitter (a share hold) is taken by that submitter's master at once, not a round later.

Two real masters and a real host over the in-memory links under MockClock, fair share off (equal share);
the guests are the stand-ins of `test_host_migration`.
"""

from __future__ import annotations

import trio

from frost_core.cluster.host import HostSettings
from frost_core.cluster.memory_links import MemoryNetwork
from frost_core.events import EventLog
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit
from frost_core.policies.fair_share import ShareSettings
from frost_core.policies.views import NodeView
from frost_core.storage.checkpoints import CheckpointStore
from tests.scenario.test_host_migration import MASTER, PLUGIN, A, B, Cluster, inline
from tests.scenario.test_units_ahead import NoCombine, index_of

BOBS_MASTER = "dddddddd-master"
ALICE, BOB = "alice@" + MASTER, "bob@" + BOBS_MASTER
OFF = ShareSettings(enabled=False)


def master(node_id: str, submitter: str, network: MemoryNetwork, tmp_path, hosts) -> tuple[MasterScheduler, MasterStore]:
    store = MasterStore(tmp_path / f"{node_id}.sqlite", node_id=node_id, submitter=submitter)
    store.create_assignment(plugin="p", plugin_version="1", plugin_hash=PLUGIN.hash, params={},
                            units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(6)])
    links = network.links(node_id)
    scheduler = MasterScheduler(
        node_id=node_id, store=store, registry=NoCombine(), links=links, events=EventLog(),  # type: ignore[arg-type]
        results_dir=tmp_path / f"{node_id}-results", replicas=CheckpointStore(tmp_path / f"{node_id}-replicas"),
        local_checkpoints=CheckpointStore(tmp_path / f"{node_id}-local"), hosts=hosts,
        settings=lambda: MasterSettings(), on_change=lambda: None, alive=lambda: [MASTER, BOBS_MASTER, A, B],
        clock=trio.current_time, blocking=inline, shares=lambda: OFF,
    )
    links.bind(master=scheduler, host=None, keeper=None)  # type: ignore[arg-type]
    return scheduler, store


async def serve_one_host(nursery: trio.Nursery, tmp_path, network: MemoryNetwork) -> Cluster:
    """Host A serving with fair share off; B takes no guests (one host in these stories)."""
    cluster = Cluster(tmp_path, nursery, network=network)
    cluster.accepting[B] = False
    host = cluster.hosts[A]
    host._settings = lambda: HostSettings(report_interval=1.0, shares=OFF)
    await nursery.start(host.serve)
    return cluster


def close_all(cluster: Cluster, stores: list[MasterStore]) -> None:
    for outbox in cluster.outboxes:
        outbox.close()
    for store in stores:
        store.close()


async def test_a_cpu_kept_for_a_waiting_submitter_goes_to_his_master_at_once_not_at_its_next_round(
        tmp_path, autojump_clock):
    # Alice's two units fill A's two CPUs; Bob submits: his master's first round finds no CPU free, so A only
    # learns that he waits. When one of Alice's units ends, A keeps that CPU for Bob (none of his running, one
    # of hers). None of Bob's units finished, so nothing but A can bring his master back before its next timed
    # round a second later: A tells it, and it places on A at once, though the gossiped figures still show A full.
    network = MemoryNetwork()
    stores = []
    try:
        async with trio.open_nursery() as nursery:
            cluster = await serve_one_host(nursery, tmp_path, network)
            guests = cluster.guests[A]
            alice, alice_store = master(MASTER, ALICE, network, tmp_path, lambda: [NodeView(A, 1.0, 0, cpus=2)])
            stores.append(alice_store)
            await nursery.start(alice.serve)
            with trio.fail_after(30):
                while len(guests.running()) < 2:
                    await trio.sleep(0.01)
            full = NodeView(A, 1.0, 2, cpus=2)   # what gossip says of A for Bob's master, all along
            bob, bob_store = master(BOBS_MASTER, BOB, network, tmp_path, lambda: [full])
            stores.append(bob_store)
            await nursery.start(bob.serve)
            await trio.sleep(0.1)   # Bob's first round: his offer to A is refused, no CPU free
            assert all(t.startswith("aaaaaaaa-") for t in guests.running())
            first = guests.running()[0]
            ended = trio.current_time()
            guests.complete(first, index_of(first))
            with trio.fail_after(30):
                while not any(t.startswith("dddddddd-") for t in guests.running()):
                    await trio.sleep(0.01)
            waited = trio.current_time() - ended
            assert waited < 0.5, f"Bob's unit took A's kept CPU {waited:.2f} s after it freed: at his next round"
            assert sum(t.startswith("aaaaaaaa-") for t in guests.running()) == 1
            nursery.cancel_scope.cancel()
    finally:
        close_all(cluster, stores)

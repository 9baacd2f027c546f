"""A unit whose assignment is cancelled between its master's offer and the placement leaves no CPU held on the host.

A real master and a real host over the in-memory links under MockClock; the guests are the stand-ins of
`test_host_migration`. Seen on three real nodes: the host that had accepted the offer refused every unit for a
minute ("no free CPU") while it showed no guest.
"""

from __future__ import annotations

import trio

from frost_core.cluster.memory_links import MemoryNetwork
from frost_core.policies.views import NodeView
from tests.scenario.test_host_migration import MASTER, A
from tests.scenario.test_slot_kept import ALICE, BOB, BOBS_MASTER, close_all, master, serve_one_host


async def test_a_cancel_between_the_offer_and_the_placement_frees_the_cpus_the_host_had_accepted_for_it(
        tmp_path, autojump_clock):
    network = MemoryNetwork()
    stores = []
    try:
        async with trio.open_nursery() as nursery:
            cluster = await serve_one_host(nursery, tmp_path, network)
            guests, host = cluster.guests[A], cluster.hosts[A]
            free_a = lambda: [NodeView(A, 1.0, 0, cpus=2)]   # noqa: E731 - what gossip says of A, all along
            alice, alice_store = master(MASTER, ALICE, network, tmp_path, free_a)
            stores.append(alice_store)
            (alices,) = alice_store.assignments()

            # The owner cancels Alice's assignment while her master's offers are on their way: A has accepted
            # both (two CPUs), and the master finds the units no longer queued when it comes to place them.
            accept = host.offer

            async def offer_then_cancel(source, offer):
                reply = await accept(source, offer)
                if alice_store.assignment(alices.id).state == "running":
                    alice_store.cancel_assignment(alices.id)
                return reply

            host.offer = offer_then_cancel
            await nursery.start(alice.serve)
            with trio.fail_after(5):
                while alice_store.assignment(alices.id).state == "running":
                    await trio.sleep(0.01)
            await trio.sleep(1.0)   # Alice's master places nothing more: her units are cancelled

            host.offer = accept
            bob, bob_store = master(BOBS_MASTER, BOB, network, tmp_path, free_a)
            stores.append(bob_store)
            await nursery.start(bob.serve)
            # Both of A's CPUs go to Bob at once: none is held for Alice's units that will never start, nor kept
            # for Alice, whose master has nothing left to place.
            with trio.fail_after(5):
                while len(guests.running()) < 2:
                    await trio.sleep(0.01)
            assert all(t.startswith("dddddddd-") for t in guests.running())
            nursery.cancel_scope.cancel()
    finally:
        close_all(cluster, stores)

"""A master tells full hosts whose units wait for their next free CPU: the shares they keep slots by (fair share,
or equal share with it off) know only who asked. A real MasterScheduler under MockClock; the hosts are stand-ins."""

from __future__ import annotations

import dataclasses

import trio
import trio.testing

from frost_core.cluster.messages import UnitOfferReply
from frost_core.master.store import NewUnit
from frost_core.policies.prefetch import units_held
from tests.scenario.test_master_silence import HOSTS, World
from tests.waiting import wait_until


class FullHost:
    """A host with no CPU free: it refuses every offer, and the test sees when each came."""

    def __init__(self, node_id: str, offered: list[tuple[float, str, str]]) -> None:
        self.node_id, self.offered = node_id, offered

    async def offer(self, source, offer):
        self.offered.append((trio.current_time(), self.node_id, offer.task_id))
        return UnitOfferReply(accepted=False, reason="no free CPU", available=0.0, guests=2, free_memory=1 << 30)


def told_at(offered: list[tuple[float, str, str]], assignment_id: str) -> dict[str, float]:
    """When each host first heard of a unit of `assignment_id`."""
    told: dict[str, float] = {}
    for at, host, task_id in offered:
        if task_id.startswith(assignment_id + "."):
            told.setdefault(host, at)
    return told


def test_a_submitter_who_waits_again_is_told_to_the_full_hosts_at_once(tmp_path):
    # Two equal assignments race with fair share off. Bob cancelled his earlier one a moment ago, and his new one
    # finds every host full of Alice's units (her master heard first that her cancelled ones freed their CPUs).
    # Unless the hosts hear at once that Bob waits, each gives its next free CPU to Alice again.
    async def main():
        world = World(tmp_path, units=3)
        offered: list[tuple[float, str, str]] = []
        world.links.hosts = {h: FullHost(h, offered) for h in HOSTS}
        world.views = [dataclasses.replace(v, guests=units_held(v.cpus)) for v in world.views]
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(world.scheduler.serve)
                await wait_until(lambda: told_at(offered, world.assignment).keys() == set(HOSTS),
                                 what="the first assignment's demand told to both hosts")
                await trio.sleep(0.2)
                world.store.cancel_assignment(world.assignment)   # and at once, with no round between, a new one:
                again = world.store.create_assignment(
                    plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
                    units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(3)])
                submitted = trio.current_time()
                world.scheduler.wake()
                told = await wait_until(lambda: (t := told_at(offered, again)).keys() == set(HOSTS) and t,
                                        what="the new assignment's demand told to both hosts")
                assert max(told.values()) - submitted < 0.1, (submitted, told)
                nursery.cancel_scope.cancel()
        finally:
            world.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

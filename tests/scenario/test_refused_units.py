"""Units their last host refused step aside for the ones queued behind them: a real MasterScheduler under MockClock,
one stand-in desk that will not take back the units its owner just evicted (they went back to the head of the queue)."""

from __future__ import annotations

import trio
import trio.testing

from frost_core.cluster.messages import UnitOfferReply, Verdict
from frost_core.master.scheduler import REFUSAL_REMEMBERED
from frost_core.policies.views import NodeView
from tests.scenario.test_master_silence import HOSTS, World
from tests.waiting import wait_until

DESK = HOSTS[0]
CPUS = 2


class EvictingDesk:
    """A desk of two CPUs whose owner evicted `held`: it refuses those, takes the others while a CPU is free."""

    def __init__(self, world: World, held: set[str]) -> None:
        self.world, self.held = world, held
        self.running: list[str] = []

    def view(self) -> NodeView:
        return NodeView(node_id=DESK, available=float(CPUS), guests=len(self.running), cpus=CPUS,
                        idle_extremity=float(CPUS))

    async def offer(self, source, offer):
        if offer.task_id in self.held:
            return UnitOfferReply(accepted=False, reason=f"the owner evicted {offer.task_id} from here; not taking "
                                  "it back before 09:41:54", available=0.0, guests=len(self.running), free_memory=1 << 30)
        if len(self.running) >= CPUS:
            return UnitOfferReply(accepted=False, reason="no free CPU", available=0.0, guests=CPUS, free_memory=1 << 30)
        return UnitOfferReply(accepted=True, reason="", available=1.0, guests=len(self.running), free_memory=1 << 30)

    async def start(self, source, spec, record, *, moved=False):
        self.running.append(spec.task_id)
        self.world.views = [self.view()]
        return Verdict(ok=True)


def test_units_the_desk_refuses_at_the_head_of_the_queue_let_the_units_behind_them_take_its_cpus(tmp_path):
    # Before: a round offers as many units as CPUs are free, in queue order; the two evicted units at the head were
    # offered again every second and refused, and the desk stood idle for the whole hold (300 s by default).
    async def main():
        world = World(tmp_path, units=5)
        for index in (0, 1):   # they ran on the desk, and its owner evicted them (the master had no other host)
            epoch = world.store.place_unit(world.assignment, index, host=DESK)
            world.store.requeue_unit(world.assignment, index, epoch=epoch, progress=0.5)
        desk = EvictingDesk(world, held={world.task(0), world.task(1)})
        world.links.hosts = {DESK: desk}
        world.views = [desk.view()]
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(world.scheduler.serve)
                await wait_until(lambda: len(desk.running) == CPUS, timeout=5, what="the desk's CPUs taken")
                assert sorted(desk.running) == [world.task(2), world.task(3)]
                assert trio.current_time() < 3.0   # the next round after the refusals: about a second
                why = world.scheduler.waiting_reasons()
                for held in (world.task(0), world.task(1)):
                    assert why[held].startswith("refused by ") and "the owner evicted" in why[held], why[held]
                await trio.sleep(60)   # offered again now and then (as the desk's demand too), never taken
                assert sorted(desk.running) == [world.task(2), world.task(3)]
                assert [world.unit(i).state for i in (0, 1, 4)] == ["queued"] * 3
                desk.held.clear()   # the hold is over, and a CPU frees: the refused unit goes first
                desk.running.remove(world.task(2))
                world.views = [desk.view()]
                await wait_until(lambda: world.task(0) in desk.running, timeout=REFUSAL_REMEMBERED + 2,
                                 what="the first refused unit placed once the desk takes it")
                assert world.unit(4).state == "queued"
                nursery.cancel_scope.cancel()
        finally:
            world.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

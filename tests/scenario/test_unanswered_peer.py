"""A peer alive in the membership but out of the master's reach holds placement once, not round after round.

A real MasterScheduler over a real SQLite store under MockClock (test_master_silence's world); the
hosts are stand-ins, one of which lets offers run out (a one-way firewall: its neighbours still hear it).
"""

from __future__ import annotations

import dataclasses

import trio

from frost_core.cluster.messages import UnitOfferReply
from frost_core.master.scheduler import OFFER_TIMEOUT
from frost_core.master.unanswered import REST_FIRST
from tests.scenario.test_master_silence import HOSTS, SETTINGS, CutOffHost, StandInHost, StandInLinks, placed, run
from tests.waiting import wait_until

UNITS = 10
CUT_OFF, ANSWERING = HOSTS


class LinksWithCutOffHost(StandInLinks):
    def __init__(self) -> None:
        super().__init__()
        self.hosts[CUT_OFF] = CutOffHost(CUT_OFF)


async def fail_all_where_they_run(world) -> float:
    """Every unit's copy fails on its host (retryable): all are queued again at once. Returns when."""
    began = trio.current_time()
    for index in range(UNITS):
        unit = world.unit(index)
        await world.scheduler.host_failed(unit.host, world.task(index), unit.epoch, "guest crashed", retryable=True)
    return began


async def all_running(world, epoch: int) -> None:
    await wait_until(lambda: all(world.unit(i).epoch == epoch and world.unit(i).state == "running"
                                 for i in range(UNITS)), timeout=120, what=f"every unit running under epoch {epoch}")


def test_a_host_that_lets_offers_run_out_is_left_out_of_the_next_rounds_and_asked_again_after_its_rest(tmp_path):
    async def scenario(world):
        # Room for every unit on the answering host, so where a unit goes says only whom the master offered it.
        world.views = [dataclasses.replace(view, cpus=UNITS) for view in world.views]
        cut_off = world.links.hosts[CUT_OFF]
        await placed(world, 1, UNITS - 1)
        await all_running(world, 1)
        assert cut_off.offers > 0, "the first round offered the cut-off host nothing: the test shows nothing"
        assert {world.unit(i).host for i in range(UNITS)} == {ANSWERING}
        offered_first = cut_off.offers
        warnings = [m for m in world.messages() if "did not answer an offer" in m]
        assert len(warnings) == 1 and f"left out of placement for {REST_FIRST:.0f} s" in warnings[0], warnings

        # Within its rest, the units come back: they go to the answering host at once. Before, the round offered
        # the cut-off host its share again and waited OFFER_TIMEOUT for it, every round.
        began = await fail_all_where_they_run(world)
        await all_running(world, 2)
        took = trio.current_time() - began
        assert took < OFFER_TIMEOUT / 2, f"re-placing took {took:.1f} s: the round waited for the cut-off host again"
        assert cut_off.offers == offered_first
        assert {world.unit(i).host for i in range(UNITS)} == {ANSWERING}

        # It is reachable again; once its rest is over the next round offers it units, and it takes them.
        cut_off.out_of_reach = False
        await trio.sleep(REST_FIRST)
        await fail_all_where_they_run(world)
        await all_running(world, 3)
        assert CUT_OFF in {world.unit(i).host for i in range(UNITS)}

    # The stand-in hosts never report: host_timeout out of the way, or their units go silent meanwhile.
    run(scenario, tmp_path, settings=dataclasses.replace(SETTINGS, host_timeout=3600), units=UNITS,
        links=LinksWithCutOffHost)


class RefusingHost(StandInHost):
    async def offer(self, source, offer):
        return UnitOfferReply(accepted=False, reason="its owner is busy", available=0.0, guests=0, free_memory=0)


class LinksWithNoTaker(LinksWithCutOffHost):
    def __init__(self) -> None:
        super().__init__()
        self.hosts[ANSWERING] = RefusingHost(ANSWERING)


def test_a_unit_no_host_takes_while_one_rests_says_so_and_when_it_is_asked_again(tmp_path):
    async def scenario(world):
        def reason() -> str:
            return world.scheduler.waiting_reasons().get(world.task(0), "")

        began = trio.current_time()
        said = await wait_until(lambda: "asked again in" in reason() and reason(), timeout=60, what="the reason")
        assert said.startswith(f"refused by {CUT_OFF[:8]}: did not answer in time; asked again in "), said
        # The round waited once for the cut-off host; each unit the other refused then went on to the cut-off
        # host, rested by then, and is not offered there again in the same round (it waited 3 s per unit).
        took = trio.current_time() - began
        assert took < 2 * OFFER_TIMEOUT, f"the round took {took:.0f} s"

    run(scenario, tmp_path, settings=dataclasses.replace(SETTINGS, host_timeout=3600), units=UNITS,
        links=LinksWithNoTaker)

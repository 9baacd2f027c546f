"""A master re-placing units that ran before asks their replica holders for newer copies all at once.

A real MasterScheduler over a real SQLite store under MockClock (test_master_silence's world); the
holders are stand-ins: one keeps a newer copy of every unit, one is alive but never answers.
"""

from __future__ import annotations

import dataclasses

import trio

from frost_core.cluster.replication import replica_holders
from frost_core.master.scheduler import OFFER_TIMEOUT
from frost_core.storage.checkpoints import CheckpointRecord
from tests.scenario.test_master_silence import HOSTS, MASTER, SETTINGS, CutOffHost, StandInLinks, placed, run
from tests.waiting import wait_until

UNITS = 20
HOLDING, SILENT = HOSTS
"""Both hosts are the units' replica holders (replica_peers 1 ranks two nodes, and only they are not the master)."""
NEWER_SEQ = 7


class StandInKeeper:
    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.asked = 0

    async def fetch(self, task_id: str, after_seq: int) -> CheckpointRecord | None:
        self.asked += 1
        if not self.answers:
            await trio.sleep_forever()   # alive in the membership, out of reach on the network
        if after_seq >= NEWER_SEQ:
            return None
        index = task_id.rsplit(".", 1)[1]
        return CheckpointRecord.seal(task_id=task_id, plugin_name="pi", plugin_version="1", plugin_hash="h" * 64,
                                     unit_index=int(index), epoch=1, seq=NEWER_SEQ, taken_at=0.0,
                                     state=f"state of {task_id}".encode())


class LinksWithKeepers(StandInLinks):
    def __init__(self) -> None:
        super().__init__()
        self.keepers = {HOLDING: StandInKeeper(answers=True), SILENT: StandInKeeper(answers=False)}
        self.hosts[SILENT] = CutOffHost(SILENT)
        self.hosts[SILENT].out_of_reach = False   # until the units it holds come back
        self.started_with: dict[str, CheckpointRecord | None] = {}
        for host in self.hosts.values():
            host.start = self._recording(host.start)

    def keeper(self, node_id: str) -> StandInKeeper:
        return self.keepers[node_id]

    def _recording(self, start):
        async def recorded(source, spec, record, *, moved=False):
            self.started_with[spec.task_id] = record
            return await start(source, spec, record, moved=moved)
        return recorded


def test_a_holder_out_of_reach_costs_a_round_one_wait_not_one_per_unit_and_every_unit_gets_the_newer_copy(tmp_path):
    async def scenario(world):
        world.views = [dataclasses.replace(view, cpus=UNITS) for view in world.views]   # room for them all at once
        for index in range(UNITS):
            await placed(world, 1, index)
        tasks = [world.task(i) for i in range(UNITS)]
        assert all(set(replica_holders(t, world.alive, MASTER, 1)) == {HOLDING, SILENT} for t in tasks)
        world.links.hosts[SILENT].out_of_reach = True   # offers to it run out too, from now on
        began = trio.current_time()
        for index, task in enumerate(tasks):   # every copy fails where it runs: each is placed again, epoch 2
            await world.scheduler.host_failed(world.unit(index).host, task, 1, "guest crashed", retryable=True)
        await wait_until(lambda: all(world.unit(i).epoch == 2 and world.unit(i).state == "running"
                                     for i in range(UNITS)), timeout=UNITS * 2 * OFFER_TIMEOUT + 60,
                         what="every unit placed again")
        took = trio.current_time() - began
        # Asked one unit after the other, the silent holder held the round for OFFER_TIMEOUT per unit: 30 s here
        # (each host's ten in turn). Its offer runs out too: its units then go to the other host one at a time,
        # and each asked it again (30 s more) before it rested after the first wait.
        assert took <= 2 * OFFER_TIMEOUT + 5, f"re-placing {UNITS} units took {took:.0f} s"
        # Asked for every unit: first, or after the other holder's copy, for one newer still.
        assert world.links.keepers[SILENT].asked == UNITS
        await wait_until(lambda: all(t in world.links.started_with for t in tasks), timeout=10, what="the starts")
        seqs = {t: getattr(world.links.started_with[t], "seq", None) for t in tasks}
        assert set(seqs.values()) == {NEWER_SEQ}, f"started without the holder's newer copy: {seqs}"
        assert sum("held a newer checkpoint" in m for m in world.messages()) == UNITS

        # The silent holder now rests (master/unanswered.py): units that come back within its rest are placed in
        # the next round, not after another OFFER_TIMEOUT, and it is not asked.
        began = trio.current_time()
        for index, task in enumerate(tasks):
            await world.scheduler.host_failed(world.unit(index).host, task, 2, "guest crashed", retryable=True)
        await wait_until(lambda: all(world.unit(i).epoch == 3 and world.unit(i).state == "running"
                                     for i in range(UNITS)), timeout=60, what="every unit placed a third time")
        took = trio.current_time() - began
        assert took < OFFER_TIMEOUT / 2, f"re-placing {UNITS} units took {took:.1f} s with the silent holder resting"
        assert world.links.keepers[SILENT].asked == UNITS
        assert sum("did not answer a request for its copy" in m for m in world.messages()) == 1

    # The hosts never report (stand-ins): host_timeout out of the way, or their units go silent meanwhile.
    run(scenario, tmp_path, settings=dataclasses.replace(SETTINGS, replica_peers=1, host_timeout=3600), units=UNITS,
        links=LinksWithKeepers)

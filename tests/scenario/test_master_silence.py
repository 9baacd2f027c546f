"""The master under MockClock: per-copy silence clocks, a master cut off from every peer, first result wins.

A real MasterScheduler over a real SQLite store; the hosts are in-process stand-ins that accept
every unit and answer `holdings` from a dict, so what the master decides is all that is tested.
"""

from __future__ import annotations

import dataclasses

import cbor2
import pytest
import trio
import trio.testing

from frost_core.cluster.links import offer_each, start_each
from frost_core.cluster.messages import STOPPED, Holdings, UnitOfferReply, UnitStatus, Verdict
from frost_core.events import EventLog
from frost_core.guest import envelope
from frost_core.master import waste
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore, NewUnit
from frost_core.membership import MembershipConfig
from frost_core.membership.suspicion import death_settle
from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore
from frost_core.policies.views import NodeView
from tests.full_disk import connections_of, refuse_writes
from tests.waiting import wait_until

MASTER = "m" * 32
HOSTS = ("a" * 32, "b" * 32)
SETTINGS = MasterSettings()   # the defaults: host_timeout 30 s, unit_lease 300 s


class StandInHost:
    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.held: list[UnitStatus] = []
        self.silent = False   # it went out of reach: a start sent to it is never answered
        self.slow_link: trio.Event | None = None   # a checkpoint sent to it is in only once this is set
        self.receiving = 0

    async def offer(self, source, offer):
        return UnitOfferReply(accepted=True, reason="", available=1.0, guests=0, free_memory=1 << 30)

    async def start(self, source, spec, record, *, moved=False):
        if self.silent:
            await trio.sleep_forever()
        if record is not None and self.slow_link is not None:
            self.receiving += 1
            await self.slow_link.wait()
            self.receiving -= 1
        return Verdict(ok=True)

    async def holdings(self, master):
        return Holdings(running=tuple(self.held))


class CutOffHost(StandInHost):
    """Alive in the membership, out of the master's reach (a one-way firewall): an offer to it runs out."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.out_of_reach = True
        self.offers = 0

    async def offer(self, source, offer):
        self.offers += 1
        if self.out_of_reach:
            await trio.sleep_forever()
        return await super().offer(source, offer)


class StandInLinks:
    def __init__(self) -> None:
        self.hosts = {h: StandInHost(h) for h in HOSTS}

    def host(self, node_id):
        return self.hosts[node_id]

    async def offer_units(self, node_id, offers):
        return await offer_each(self.hosts[node_id], MASTER, offers)

    async def start_units(self, node_id, specs):
        return await start_each(self.hosts[node_id], MASTER, specs)


async def inline(function, *args):
    return function(*args)


class World:
    def __init__(self, tmp_path, *, units: int = 2, settings: MasterSettings = SETTINGS,
                 links: type[StandInLinks] = StandInLinks) -> None:
        self.store = MasterStore(tmp_path / "master.sqlite", node_id=MASTER)
        self.assignment = self.store.create_assignment(
            plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
            units=[NewUnit(data={"i": i}, memory_bytes=1 << 20, cost=1.0) for i in range(units)])
        self.events = EventLog()
        self.links = links()
        self.alive = [MASTER, *HOSTS]
        # Only the stand-in hosts take guests: the master's own machine does not (its units never go silent).
        self.views = [NodeView(node_id=h, available=1.0, guests=0, cpus=4) for h in HOSTS]
        self._tmp_path, self._settings = tmp_path, settings
        self.scheduler = self.started_scheduler()

    def started_scheduler(self) -> MasterScheduler:
        """A master over this world's store, as a (re)started node builds it: it remembers only what is durable."""
        return MasterScheduler(
            node_id=MASTER, store=self.store, registry=None, links=self.links, events=self.events,
            results_dir=self._tmp_path / "results", replicas=CheckpointStore(self._tmp_path / "replicas"),
            local_checkpoints=CheckpointStore(self._tmp_path / "local"), hosts=lambda: self.views,
            settings=lambda: self._settings, on_change=lambda: None, alive=lambda: list(self.alive),
            clock=trio.current_time, blocking=inline,
        )

    def unit(self, index: int = 0):
        return self.store.unit(self.assignment, index)

    def task(self, index: int = 0) -> str:
        return f"{self.assignment}.{index}"

    def messages(self) -> list[str]:
        return [e.message for e in self.events.recent()]

    def close(self) -> None:
        self.store.close()


def run(test, tmp_path, settings: MasterSettings = SETTINGS, units: int = 2,
        links: type[StandInLinks] = StandInLinks) -> None:
    async def main():
        world = World(tmp_path, settings=settings, units=units, links=links)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(world.scheduler.serve)
                await test(world)
                nursery.cancel_scope.cancel()
        finally:
            world.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def placed(world, epoch: int, index: int = 0) -> float:
    await wait_until(lambda: world.unit(index).state == "running" and world.unit(index).epoch == epoch,
                     timeout=120, what=f"unit {index} placed under epoch {epoch}")
    return trio.current_time()


def test_a_unit_placed_again_is_not_silent_until_its_own_limit_passed_despite_news_of_its_older_copy(tmp_path):
    async def scenario(world):
        await placed(world, 1)
        old_host = world.unit().host
        # Nobody reports: after the silence limit the unit is given up and placed again (epoch 2).
        again = await placed(world, 2)
        assert again >= SETTINGS.host_timeout
        first_host = world.unit().host
        # The older copy speaks up in between: a stale report, a retryable failure, an eviction's return.
        await trio.sleep(3)
        assert await world.scheduler.host_report(old_host, (UnitStatus(world.task(), 1, 0.4),)) == (world.task(),)
        await world.scheduler.host_failed(old_host, world.task(), 1, "guest crashed", retryable=True)
        assert not await world.scheduler.host_return(old_host, world.task(), 1, None)
        await trio.sleep(SETTINGS.host_timeout - 8)
        unit = world.unit()
        assert (unit.state, unit.epoch, unit.host, unit.failures) == ("running", 2, first_host, 0), \
            "the new copy was declared silent before its own limit"
        # Its own limit does run out, counted from its own placement.
        await placed(world, 3)
        assert trio.current_time() - again > SETTINGS.host_timeout - 0.5

    run(scenario, tmp_path)


def test_a_master_cut_off_from_every_peer_keeps_its_units_in_place_and_reconciles_when_it_hears_them(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        await placed(world, 1, 1)
        hosts = {world.unit(i).host for i in (0, 1)}
        for index in (0, 1):
            world.links.hosts[world.unit(index).host].held.append(UnitStatus(world.task(index), 1, 0.5))
        world.alive = [MASTER]                       # every peer silent at once: this master is cut off
        for host in hosts:
            world.scheduler.host_lost(host)          # membership declares them dead on the way
        await trio.sleep(75)                         # well past host_timeout
        assert [world.unit(i).state for i in (0, 1)] == ["running", "running"]
        assert [world.unit(i).epoch for i in (0, 1)] == [1, 1]
        assert world.scheduler.reach.status.startswith("out of reach of all peers since")
        assert any("2 units left running on them" in m for m in world.messages())
        world.alive = [MASTER, *HOSTS]               # healed: the hosts are asked what they hold
        await wait_until(lambda: any("reachable again" in m for m in world.messages()), timeout=5,
                         what="the heal noticed")
        await trio.sleep(SETTINGS.host_timeout - 2)
        assert [(world.unit(i).state, world.unit(i).epoch) for i in (0, 1)] == [("running", 1), ("running", 1)]
        assert world.store.assignment(world.assignment).wasted_seconds == 0
        assert world.scheduler.reach.status == ""

    run(scenario, tmp_path)


def test_a_cut_off_master_re_places_only_after_the_unit_lease(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        world.alive = [MASTER]
        await trio.sleep(SETTINGS.unit_lease - 10)
        assert world.unit().epoch == 1 and world.unit().state == "running"
        await wait_until(lambda: any("longer than the unit lease" in m for m in world.messages()), timeout=20,
                         what="the lease to run out")
        await trio.sleep(30)
        assert world.unit().epoch == 2, "a copy placed after the cut gets a lease of its own"

    run(scenario, tmp_path)


def test_a_dead_host_is_evidence_only_while_other_peers_stay_reachable(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        dead = world.unit().host
        world.alive = [MASTER, *(h for h in HOSTS if h != dead)]
        world.scheduler.host_lost(dead)
        await placed(world, 2, 0)
        assert any("is dead while other peers are reachable" in m for m in world.messages())

    run(scenario, tmp_path)


def test_a_host_that_falls_silent_while_a_start_is_on_its_way_holds_up_nothing_once_it_is_declared_dead(tmp_path):
    # A laptop host whose lid closes as the master's start reaches it: the start is never answered. Once
    # membership declares it dead the master's round stops waiting for it (its start timeout is a minute), the
    # unit counts as placed there, and it restarts on the other host as any unit of a dead host does.
    async def scenario(world):
        silent = world.links.hosts[HOSTS[0]]
        silent.silent = True
        world.views = [NodeView(node_id=HOSTS[0], available=1.0, guests=0, cpus=4)]   # only it looks free
        await wait_until(lambda: world.unit().state == "running", timeout=5, what="the unit placed on the silent host")
        await trio.sleep(5)
        world.views = [NodeView(node_id=HOSTS[1], available=1.0, guests=0, cpus=4)]   # the living peers' figures
        world.alive = [MASTER, HOSTS[1]]
        lost = trio.current_time()
        world.scheduler.host_lost(HOSTS[0])
        await placed(world, 2, 0)
        assert world.unit().host == HOSTS[1]
        assert trio.current_time() - lost < SETTINGS.death_settle + 2, "the round waited out the start's timeout"
        assert any("went out of reach before it said the unit runs" in m for m in world.messages())

    run(scenario, tmp_path, units=1)


def test_a_start_whose_checkpoint_crosses_a_slow_link_holds_up_no_other_placement_nor_counts_as_silence(tmp_path):
    # A unit resumes from its replica on a host whose link takes minutes for the checkpoint (wire.stall lets a
    # transfer take what the link needs). Meanwhile the master places everything else, and the unit's silence
    # clock starts only once its host says it runs: no report can come before.
    async def scenario(world):
        await placed(world, 1, 0)
        await world.scheduler.host_report(world.unit().host, (UnitStatus(world.task(), 1, 0.2, 2.0),))
        await world.scheduler.host_replica(world.unit().host, replica(world, 0, epoch=1, seq=2))
        slow, free = "c" * 32, "d" * 32
        for host in (slow, free):
            world.links.hosts[host] = StandInHost(host)
        world.links.hosts[slow].slow_link = trio.Event()
        world.views = [NodeView(node_id=slow, available=1.0, guests=0, cpus=1)]
        world.alive.append(slow)
        await placed(world, 2, 0)      # its first host fell silent: placed again, from the replica, on the slow one
        await wait_until(lambda: world.links.hosts[slow].receiving, timeout=5, what="the checkpoint on its way")
        other = world.store.create_assignment(plugin="pi", plugin_version="1", plugin_hash="h" * 64, params={},
                                              units=[NewUnit(data={"i": 0}, memory_bytes=1 << 20, cost=1.0)])
        world.views.append(NodeView(node_id=free, available=1.0, guests=0, cpus=1))
        world.alive.append(free)
        world.scheduler.wake()
        await wait_until(lambda: world.store.unit(other, 0).state == "running", timeout=5,
                         what="the other assignment placed while the checkpoint is still on its way")
        assert world.store.unit(other, 0).host == free
        await trio.sleep(3 * SETTINGS.host_timeout)     # minutes on the wire, and no report meanwhile
        assert (world.unit().state, world.unit().epoch, world.unit().host) == ("running", 2, slow), \
            "given up as silent while its checkpoint was still on its way"
        world.links.hosts[slow].slow_link.set()
        await wait_until(lambda: any(f"placed on {slow[:8]} from checkpoint 2" in m for m in world.messages()),
                         timeout=5, what="the unit running on the slow host")
        await trio.sleep(SETTINGS.host_timeout + 1)     # from its verdict on, its host must report it as any
        assert world.unit().epoch == 3, "a unit whose host never reports it after its start is never given up"

    run(scenario, tmp_path, units=1)


def test_a_death_waits_out_a_slower_probe_round_before_it_counts_against_the_host(tmp_path):
    # Probes once a second: stretched to 9 s each by the awareness of a cut-off node, the peers of a
    # three-node cluster may be suspected up to 26 s after the first death (membership.suspicion).
    slow = MasterSettings(death_settle=death_settle(2, MembershipConfig(probe_interval=1.0, probe_timeout=0.5)))
    assert slow.death_settle == 26.0

    async def scenario(world):
        await placed(world, 1, 0)
        dead = world.unit().host
        world.alive = [MASTER, *(h for h in HOSTS if h != dead)]
        world.scheduler.host_lost(dead)
        await trio.sleep(10)                 # past the old fixed 3 s, within the slower round
        world.alive = [MASTER]               # the other peer falls silent too: this master was cut off
        await trio.sleep(30)
        assert (world.unit().state, world.unit().epoch) == ("running", 1), "placed again on no evidence"
        world.alive = [MASTER, *(h for h in HOSTS if h != dead)]
        healed = trio.current_time()
        # Hearing the other peer again, with the dead host still dead: now the death is evidence.
        again = await placed(world, 2, 0)
        assert any(f"its host {dead[:8]} is dead while other peers are reachable" in m for m in world.messages())
        assert again - healed >= slow.death_settle - 1

    run(scenario, tmp_path, slow)


def test_a_host_that_answers_it_no_longer_has_the_unit_loses_it_at_once(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        host = world.unit().host
        await world.scheduler.reconcile(host)       # it holds nothing
        await placed(world, 2, 0)
        assert any(f"its host {host[:8]} no longer has it" in m for m in world.messages())

    run(scenario, tmp_path)


def test_an_older_copy_s_complete_result_wins_and_the_newer_copy_is_stopped_and_counted_as_waste(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        old_host = world.unit().host
        await world.scheduler.host_report(old_host, (UnitStatus(world.task(), 1, 0.3),))
        again = await placed(world, 2, 0)            # given up after its silence
        new_host = world.unit().host
        await trio.sleep(10)
        result = envelope.pack(envelope.RESULT, cbor2.dumps(42), {}, 1 << 20)
        assert await world.scheduler.host_result(old_host, world.task(), 1, result)
        # The same result again (the newer copy's, or a delivery whose answer was lost) is taken as
        # delivered, not accepted twice; a different one is refused.
        assert await world.scheduler.host_result(new_host, world.task(), 2, result)
        other = envelope.pack(envelope.RESULT, cbor2.dumps(43), {}, 1 << 20)
        assert not await world.scheduler.host_result(new_host, world.task(), 2, other)
        assert sum(" result accepted" in m for m in world.messages()) == 1
        assert world.store.holds_result(world.assignment, 0, cbor2.dumps(42))
        assert world.unit().state == "done"
        assert await world.scheduler.host_report(new_host, (UnitStatus(world.task(), 2, 0.1),)) == (world.task(),)
        record = world.store.assignment(world.assignment)
        assert set(dict(record.waste)) == {waste.SUPERSEDED}          # the lost copy's work was kept after all
        # The newer copy's whole run, from its placement to the older copy's result (10 s and a bit).
        assert 10 <= record.wasted_seconds <= trio.current_time() - again + 0.5

    run(scenario, tmp_path)


def replica(world, index: int, *, epoch: int, seq: int) -> CheckpointRecord:
    return CheckpointRecord.seal(task_id=world.task(index), plugin_name="pi", plugin_version="1",
                                 plugin_hash="h" * 64, unit_index=index, epoch=epoch, seq=seq, taken_at=0.0,
                                 state=b"state %d" % seq)


def test_a_copy_whose_host_has_a_newer_checkpoint_than_the_master_s_replica_is_kept_when_it_is_heard_again(tmp_path):
    async def scenario(world):
        for index in (0, 1):
            await placed(world, 1, index)
            host = world.unit(index).host
            await world.scheduler.host_report(host, (UnitStatus(world.task(index), 1, 0.2, 2.0),))
            await world.scheduler.host_replica(host, replica(world, index, epoch=1, seq=2))
        old_hosts = [world.unit(i).host for i in (0, 1)]
        third = "c" * 32                        # where they go next
        world.links.hosts[third] = StandInHost(third)
        world.views = [NodeView(node_id=third, available=1.0, guests=0, cpus=4)]
        world.alive.append(third)
        # Both copies fall silent (their hosts cut off) and are placed again from checkpoint 2 (20 %).
        await placed(world, 2, 0)
        await placed(world, 2, 1)
        assert sum(f"placed on {third[:8]} from checkpoint 2" in m for m in world.messages()) == 2
        for index in (0, 1):
            await world.scheduler.host_report(world.unit(index).host, (UnitStatus(world.task(index), 2, 0.25, 0.5),))
        # The cut-off hosts come back. Unit 0's copy ran on and checkpointed at 60 %: it is further
        # along than anything this master could restart from, so it is kept. Unit 1's copy has no
        # checkpoint newer than the replica the new copy resumed from: it is stopped.
        ahead = UnitStatus(world.task(0), 1, 0.7, 7.0, checkpoint_seq=6, checkpoint_progress=0.6)
        behind = UnitStatus(world.task(1), 1, 0.3, 3.0, checkpoint_seq=2, checkpoint_progress=0.2)
        world.links.hosts[old_hosts[0]].held.append(ahead)
        world.links.hosts[old_hosts[1]].held.append(behind)
        for host in set(old_hosts):
            await world.scheduler.reconcile(host)
        assert await world.scheduler.host_report(old_hosts[0], (ahead,)) == ()
        assert await world.scheduler.host_report(old_hosts[1], (behind,)) == (world.task(1),)
        assert any(f"{world.task(0)}: {old_hosts[0][:8]} still runs epoch 1 with checkpoint 6" in m
                   for m in world.messages())
        # Whichever copy finishes first wins; here the kept one, and the newer copy is stopped.
        result = envelope.pack(envelope.RESULT, cbor2.dumps(42), {}, 1 << 20)
        assert await world.scheduler.host_result(old_hosts[0], world.task(0), 1, result)
        assert await world.scheduler.host_report(world.unit(0).host, (UnitStatus(world.task(0), 2, 0.3, 1.0),)) \
            == (world.task(0),)
        assert (world.unit(0).state, world.unit(1).state) == ("done", "running")

    run(scenario, tmp_path)


def test_a_cut_off_copy_s_waste_is_its_own_cpu_time_past_the_checkpoint_its_replacement_resumed_from(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        await placed(world, 1, 1)
        old_hosts = [world.unit(i).host for i in (0, 1)]
        # Unit 0's host reports it at 30 % after 3 CPU-seconds, with a checkpoint at 25 % taken at 1.5
        # (its first rows were cheap), and replicates that checkpoint. Unit 1's host never reports.
        await world.scheduler.host_report(old_hosts[0], (UnitStatus(world.task(0), 1, 0.3, 3.0, checkpoint_seq=2,
                                                                     checkpoint_progress=0.25, checkpoint_cpu=1.5),))
        await world.scheduler.host_replica(old_hosts[0], replica(world, 0, epoch=1, seq=2))
        third = "c" * 32
        world.links.hosts[third] = StandInHost(third)
        world.views = [NodeView(node_id=third, available=1.0, guests=0, cpus=4)]
        world.alive.append(third)
        await placed(world, 2, 0)                   # both cut off: given up, placed again on the third host
        await placed(world, 2, 1)
        result = envelope.pack(envelope.RESULT, cbor2.dumps(42), {}, 1 << 20)
        for index in (0, 1):
            assert await world.scheduler.host_result(third, world.task(index), 2, result, 5.0)
        # Healed, the cut-off copies' results come late with the CPU time their guests took: 9 and 4 s.
        await world.scheduler.host_result(old_hosts[0], world.task(0), 1, result, 9.0)
        await world.scheduler.host_result(old_hosts[1], world.task(1), 1, result, 4.0)
        # Unit 0: 3 − 1.5 = 1.5 s redone when it was placed again, 9 − 3 = 6 s in a refused result.
        # Unit 1: nothing was known when it was placed again; all its 4 s were computed again.
        wasted = dict(world.store.assignment(world.assignment).waste)
        assert wasted == {waste.REDONE: pytest.approx(1.5 + 4.0), waste.REFUSED: pytest.approx(6.0)}

    run(scenario, tmp_path, units=3)   # (the third unit keeps the assignment from being combined)


async def replaced_from_replica(world, last_heard: UnitStatus) -> tuple[str, bytes]:
    """Unit 0's host reports `last_heard`, sends a replica of its checkpoint at 10 % taken at 1.0 CPU-seconds,
    and is cut off: the unit is placed again from that replica on a third host, whose result is accepted.
    Its old host, and that result."""
    await placed(world, 1, 0)
    old_host = world.unit().host
    await world.scheduler.host_report(old_host, (last_heard,))
    await world.scheduler.host_replica(old_host, replica(world, 0, epoch=1, seq=1), 0.1, 1.0)
    third = "c" * 32
    world.links.hosts[third] = StandInHost(third)
    world.views = [NodeView(node_id=third, available=1.0, guests=0, cpus=4)]
    world.alive.append(third)
    await placed(world, 2, 0)
    assert any(f"placed on {third[:8]} from checkpoint 1" in m for m in world.messages())
    result = envelope.pack(envelope.RESULT, cbor2.dumps(42), {}, 1 << 20)
    assert await world.scheduler.host_result(third, world.task(), 2, result, 5.0)
    return old_host, result


def test_a_copy_cut_off_right_after_its_replica_counts_from_the_cpu_time_the_replica_was_taken_at(tmp_path):
    async def scenario(world):
        # Last heard at 2 % after 0.5 CPU-seconds, most of them its process's start: at that rate the checkpoint
        # at 10 % would have been taken at 2.5. It was taken at 1.0, as its replica says; the cut came before
        # the report that would have said so too.
        old_host, result = await replaced_from_replica(world, UnitStatus(world.task(), 1, 0.02, 0.5))
        # Healed, its late result says its guest used 4 CPU-seconds: 3 of them past the checkpoint.
        await world.scheduler.host_result(old_host, world.task(), 1, result, 4.0)
        wasted = dict(world.store.assignment(world.assignment).waste)
        assert wasted == {waste.REFUSED: pytest.approx(3.0)}                 # nothing redone

    run(scenario, tmp_path)


def test_a_stopped_copy_counts_to_its_final_cpu_time_whatever_order_its_late_figures_come_in(tmp_path):
    async def scenario(world):
        old_host, _ = await replaced_from_replica(world, UnitStatus(world.task(), 1, 0.1, 1.0))
        # Healed: a report its host sent as the cut began (at 1.4 CPU-seconds) comes after all, then a fresh
        # one (3.5); each gets the answer to stop it. The host stopped it at 3.8, and says so.
        for cpu in (1.4, 3.5):
            assert await world.scheduler.host_report(old_host, (UnitStatus(world.task(), 1, 0.5, cpu),)) \
                == (world.task(),)
        assert await world.scheduler.host_report(old_host, (UnitStatus(world.task(), 1, 0.6, 3.8, state=STOPPED),)) \
            == ()
        await world.scheduler.host_report(old_host, (UnitStatus(world.task(), 1, 0.5, 1.4),))   # later still: nothing
        wasted = dict(world.store.assignment(world.assignment).waste)
        assert wasted == {waste.SUPERSEDED: pytest.approx(3.8 - 1.0)}

    run(scenario, tmp_path)


def test_a_master_that_was_stopped_gives_its_hosts_a_full_timeout_when_it_resumes(tmp_path):
    async def scenario(world):
        for index in (0, 1):
            await placed(world, 1, index)
            world.links.hosts[world.unit(index).host].held.append(UnitStatus(world.task(index), 1, 0.5))
        await trio.sleep(3)
        # Nothing in trio runs while the process is stopped: move the clock under it, as SIGSTOP does.
        trio.lowlevel.current_clock().jump(SETTINGS.host_timeout * 3)
        await trio.sleep(SETTINGS.host_timeout - 5)
        assert (world.unit().state, world.unit().epoch) == ("running", 1)
        assert any("this machine was stopped for" in m for m in world.messages())
        await placed(world, 2, 0)    # still silent a full timeout after the resume: given up

    run(scenario, tmp_path)


def test_a_copy_given_up_as_lost_is_taken_back_while_its_unit_still_waits_but_a_returned_one_is_not(tmp_path):
    async def scenario(world):
        await placed(world, 1, 0)
        await placed(world, 1, 1)
        # Nobody takes units any more: what is queued stays queued.
        world.views = []
        lost_host, returned_host = world.unit(0).host, world.unit(1).host
        assert await world.scheduler.host_return(returned_host, world.task(1), 1, None)   # evicted, given back
        await wait_until(lambda: world.unit(0).state == "queued", timeout=SETTINGS.host_timeout + 5,
                         what="unit 0 given up as silent")
        reports = (UnitStatus(world.task(0), 1, 0.6), UnitStatus(world.task(1), 1, 0.2))
        stop = await world.scheduler.host_report(lost_host, reports[:1])
        stop += await world.scheduler.host_report(returned_host, reports[1:])
        assert stop == (world.task(1),)
        assert [(world.unit(i).state, world.unit(i).epoch) for i in (0, 1)] == [("running", 1), ("queued", 1)]

    run(scenario, tmp_path)


def test_a_unit_given_back_with_a_checkpoint_the_master_cannot_keep_is_queued_all_the_same(tmp_path):
    # On its own node the master is called in process: a refused checkpoint raised through the host's eviction
    # and stopped the node. A disk that refuses the replica fails alike (CheckpointError is a FrostError).
    async def scenario(world):
        await placed(world, 1, 0)
        foreign = dataclasses.replace(replica(world, 0, epoch=1, seq=3), plugin_hash="f" * 64)
        assert await world.scheduler.host_return(world.unit(0).host, world.task(0), 1, foreign)
        assert any("the checkpoint it came back with was not kept (the replica of" in m for m in world.messages())
        await placed(world, 2, 0)   # and runs again

    run(scenario, tmp_path)


def test_a_restarted_master_asks_its_hosts_at_once_and_re_places_only_the_unit_its_host_lost(tmp_path):
    async def main():
        world = World(tmp_path)
        try:
            async with trio.open_nursery() as before:
                await before.start(world.scheduler.serve)
                for index in (0, 1):
                    await placed(world, 1, index)
                before.cancel_scope.cancel()            # the master's process ends
            # Unit 0's host still runs it; unit 1's host lost it (its machine rebooted meanwhile).
            world.links.hosts[world.unit(0).host].held.append(UnitStatus(world.task(0), 1, 0.5))
            world.scheduler = world.started_scheduler()
            restarted = trio.current_time()
            async with trio.open_nursery() as after:
                await after.start(world.scheduler.serve)
                again = await placed(world, 2, 1)
                assert again - restarted < SETTINGS.host_timeout / 3, "the lost unit waited out the silence limit"
                assert any("no longer has it" in m for m in world.messages())
                await trio.sleep(SETTINGS.host_timeout - 5)
                assert (world.unit(0).state, world.unit(0).epoch) == ("running", 1), "a running copy was given up"
                after.cancel_scope.cancel()
        finally:
            world.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_host_that_leaves_while_the_masters_disk_refuses_writes_has_its_unit_queued_once_the_disk_takes_them(
        tmp_path):
    """Requeueing a left host's units is a write: refused, it stopped the node (from membership's task); now the
    master's rounds go on, and the requeue is done at the first round the disk takes it."""
    async def scenario(world):
        await placed(world, 1)
        host = world.unit().host
        refuse_writes(*connections_of(world.store))
        world.scheduler.host_lost(host, left=True)
        await trio.sleep(5)   # five of the master's rounds, each refused
        assert (world.unit().state, world.unit().epoch) == ("running", 1)
        refuse_writes(*connections_of(world.store), refused=False)
        await placed(world, 2)
        assert any(f"its host {host[:8]} left the cluster" in m for m in world.messages())

    run(scenario, tmp_path)


def test_a_report_the_disk_refuses_part_of_still_counts_for_the_copies_that_need_no_write(tmp_path):
    """A report in which one copy needs a write (a move this master missed) is not lost whole on a full disk:
    before, the refused write ended it, the copies after it went unheard, and after `host_timeout` their units
    were taken for silent and placed again."""
    async def scenario(world):
        await placed(world, 1, 0)
        await placed(world, 1, 1)
        host = world.unit(1).host
        refuse_writes(*connections_of(world.store))
        moved = UnitStatus(world.task(0), 2, 0.5)   # a move this master missed: adopting it is a write
        for _ in range(8):   # past host_timeout (30 s), a report each 5 s
            await world.scheduler.host_report(host, (moved, UnitStatus(world.task(1), 1, 0.5)))
            await trio.sleep(5)
        assert (world.unit(1).state, world.unit(1).epoch) == ("running", 1), "a reported copy was taken for silent"
        refuse_writes(*connections_of(world.store), refused=False)
        await world.scheduler.host_report(host, (moved,))
        assert (world.unit(0).epoch, world.unit(0).host) == (2, host)

    run(scenario, tmp_path)

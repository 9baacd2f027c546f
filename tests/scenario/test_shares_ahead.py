"""Shares and units placed ahead (policies.prefetch) on a real host: nothing goes ahead for a submitter behind in line."""

from __future__ import annotations

import dataclasses

import trio

from frost_core.cluster.host import HostSettings
from frost_core.cluster.messages import UnitOffer, UnitSpec
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.plain import encode_plain
from frost_core.policies.fair_share import ShareSettings
from tests.scenario.test_host_migration import MASTER, PLUGIN, TASK, A, running_cluster

ALICE, BOB = "alice@" + "a" * 32, "bob@" + "b" * 32


async def test_no_unit_is_taken_ahead_for_a_submitter_behind_in_line_however_long_the_other_waits(tmp_path):
    # A's two CPUs are busy. Bob (no recent use) waits for one: his master offers again and again and A has
    # no CPU free. Alice (an hour of use) offers units ahead all along: a unit ahead would begin on the next
    # free CPU without asking, so none is taken while Bob waits, however long past the time a free CPU is held.
    async with running_cluster(tmp_path) as cluster:
        host = cluster.hosts[A]
        # The host's share timers run on the real monotonic clock: shorter than their defaults (a 0.3 s hold,
        # demand remembered 1 s) keeps this test short; the rule is the same.
        host._settings = lambda: HostSettings(report_interval=1.0, shares=ShareSettings(hold=0.3, demand_memory=1.0))
        spec = UnitSpec(task_id="aaaaaaaa-1.1", assignment_id="aaaaaaaa-1", master=MASTER, plugin_name="p",
                        plugin_version="1", plugin_hash=PLUGIN.hash,
                        unit=encode_plain(WorkUnit(1, {}, 1 << 20, 1.0).to_plain()), memory_bytes=1 << 20, epoch=1)
        assert (await host.start(MASTER, spec, None)).ok
        assert sorted(h.task.task_id for h in host.hosted()) == [TASK, spec.task_id]
        bob = UnitOffer(task_id="bbbbbbbb-1.0", plugin_hash=PLUGIN.hash, memory_bytes=1 << 20, state_bytes=0,
                        submitter=BOB, usage=0.0, queued=5)
        for turn in range(12):
            assert not (await host.offer("bbbbbbbb", bob)).accepted      # no CPU free: A only learns he waits
            alice = UnitOffer(task_id=f"aaaaaaaa-2.{turn}", plugin_hash=PLUGIN.hash, memory_bytes=1 << 20,
                              state_bytes=0, submitter=ALICE, usage=3600.0, queued=5, ahead=True)
            reply = await host.offer(MASTER, alice)
            assert not reply.accepted and reply.reason.startswith("fair share: kept for bob"), (turn, reply)
            await trio.sleep(0.05)
        # Once Bob's master has stopped asking (his demand is forgotten), Alice's unit goes ahead.
        await trio.sleep(1.5)
        reply = await host.offer(MASTER, dataclasses.replace(alice, task_id="aaaaaaaa-3.0"))
        assert reply.accepted, reply.reason

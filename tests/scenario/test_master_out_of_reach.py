"""A host whose calls to one master run out goes on reporting to, and delivering for, its other masters.

A master alive in the membership but out of this host's reach (a one-way firewall, a wedged node)
lets every call run out after the links' CALL_TIMEOUT. The host's reports and held results went to
its masters one after the other, so each round waited that out before the next master's turn: the
others' reports came 10 s apart (their units count as silent after `host_timeout`), and results held
for the unreachable master went first, each costing 10 s. The host, outbox and in-memory links are
the real ones (test_host_migration's cluster), under MockClock.
"""

from __future__ import annotations

import dataclasses
import time

import trio

from frost_core.api.errors import NodeUnavailableError
from frost_core.cluster.links import CALL_TIMEOUT
from frost_core.cluster.memory_links import MemoryNetwork
from frost_core.cluster.messages import UnitSpec
from frost_core.cluster.outbox import Outbox, owed_result
from frost_core.plugin.api import WorkUnit
from frost_core.plugin.plain import encode_plain
from tests.scenario.test_host_migration import A, MASTER, PLUGIN, Cluster, RecordingMaster
from tests.waiting import wait_until

OTHER = "dddddddd-master"
HELD_FOR_UNREACHABLE = 5


class UnreachableMaster(RecordingMaster):
    """Alive to the membership; every call to it runs out as the real links' would."""

    async def host_report(self, host, units, spent=()):
        await trio.sleep(CALL_TIMEOUT)
        raise NodeUnavailableError(f"master {MASTER} did not answer within {CALL_TIMEOUT:g} s")

    async def host_result(self, host, task_id, epoch, result, cpu_seconds=0.0):
        await trio.sleep(CALL_TIMEOUT)
        raise NodeUnavailableError(f"master {MASTER} did not answer within {CALL_TIMEOUT:g} s")


async def test_a_master_out_of_reach_delays_neither_the_other_masters_reports_nor_their_held_results(
        tmp_path, autojump_clock):
    held = Outbox(tmp_path / A / "outbox.sqlite")   # what A holds when it starts: the unreachable master's first
    for i in range(HELD_FOR_UNREACHABLE):
        held.put(dataclasses.replace(owed_result(f"aaaaaaaa-1.{i + 1}", MASTER, 1, b"result"),
                                     created_at=time.time() - 3600 + i))
    held.put(dataclasses.replace(owed_result("dddddddd-1.0", OTHER, 1, b"result"), created_at=time.time() - 60))
    held.close()
    network = MemoryNetwork()
    other = RecordingMaster()
    network.links(OTHER).bind(master=other, host=None, keeper=None)  # type: ignore[arg-type]
    network.links(MASTER).bind(master=UnreachableMaster(), host=None, keeper=None)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        cluster = Cluster(tmp_path, nursery, network=network)
        cluster.alive.append(OTHER)
        await cluster.start()
        spec = UnitSpec(task_id="dddddddd-2.0", assignment_id="dddddddd-2", master=OTHER, plugin_name="p",
                        plugin_version="1", plugin_hash=PLUGIN.hash,
                        unit=encode_plain(WorkUnit(0, {}, 1 << 20, 1.0).to_plain()), memory_bytes=1 << 20, epoch=1)
        assert (await cluster.network.links(OTHER).host(A).start(OTHER, spec, None)).ok
        began = trio.current_time()

        await wait_until(lambda: other.results, timeout=3 * CALL_TIMEOUT * HELD_FOR_UNREACHABLE,
                         what="the other master's held result delivered")
        took = trio.current_time() - began
        # One after the other, behind the unreachable master's five: 50 s (or 10 s at the least, behind one).
        assert took < CALL_TIMEOUT / 2, f"the other master's result came {took:.0f} s after the start"

        reports_before = len(other.reports)
        await trio.sleep(3 * CALL_TIMEOUT)
        reports = len(other.reports) - reports_before
        interval = cluster.settings.report_interval
        # Every report interval (1 s); in turn behind the unreachable master's, one every 11 s.
        assert reports >= 3 * CALL_TIMEOUT / interval - 2, f"{reports} reports in {3 * CALL_TIMEOUT:g} s"
        assert all(any(s.task_id == spec.task_id for s in units) for units in other.reports[reports_before:])
        assert [h.task_id for h in cluster.outboxes[0].held()] == [f"aaaaaaaa-1.{i + 1}"
                                                                   for i in range(HELD_FOR_UNREACHABLE)]
        nursery.cancel_scope.cancel()
    for outbox in cluster.outboxes:
        outbox.close()

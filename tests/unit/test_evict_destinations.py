"""An evicted guest goes where the balancer's plan would send it: one estimate, one ranking."""

from __future__ import annotations

from frost_core.policies.balance import Step, evict_destinations, plan, table_system, unit_estimate
from frost_core.policies.owner import GuestAction
from frost_core.policies.views import NodeView, PolicySettings

SETTINGS = PolicySettings()
ME = NodeView("me", available=1.0, guests=1, cpus=1, idle_extremity=1.0)
# Four peers that differ in what they offer, how many CPUs they have and how they are reached.
PEERS = (
    NodeView("big", available=3.0, guests=2, cpus=4, idle_extremity=4.0),
    NodeView("idle", available=1.0, guests=0, cpus=1, idle_extremity=1.0),
    NodeView("fast", available=2.0, guests=1, cpus=2, idle_extremity=2.5),
    NodeView("busy", available=0.5, guests=3, cpus=2, idle_extremity=2.0),
)
BANDWIDTHS = {"big": 1e5, "idle": 5e7, "fast": 1e7, "busy": 1e7}


def estimate(progress: float, cpu_seconds: float, state_bytes: int):
    return unit_estimate(task_id="t1", assignment_id="a-1", plugin="p", memory=1 << 20, state_bytes=state_bytes,
                         since_checkpoint=0.0, progress=progress, cpu_seconds=cpu_seconds, speed=1.5,
                         arrived_at=0.0)


def test_an_eviction_ranks_peers_exactly_as_the_balancers_plan_does():
    for progress, cpu_seconds, state_bytes in [(0.5, 40.0, 4 << 20), (0.1, 5.0, 1 << 10), (0.9, 300.0, 64 << 20),
                                               (0.0, 2.0, 0)]:
        unit = estimate(progress, cpu_seconds, state_bytes)
        table = (ME,) + PEERS
        planned = plan(ME, table, [unit], None, table_system(ME, table), BANDWIDTHS, now=1000.0, settings=SETTINGS,
                       owner=GuestAction.EVICT)
        assert planned.step is Step.SEND
        evicted = evict_destinations(ME, table, unit, BANDWIDTHS, SETTINGS)
        assert [d.node_id for d in evicted] == [d.node_id for d in planned.destinations]
        assert [d.finish for d in evicted] == [d.finish for d in planned.destinations]


def test_the_estimate_continues_the_pace_so_far():
    # 40 s of CPU at speed 1.5 for half the unit: as much again is left (60 speed-units x s).
    assert estimate(0.5, 40.0, 0).remaining_work == 60.0
    # No progress reported yet: expected to run as long again as it has run.
    assert estimate(0.0, 2.0, 0).remaining_work == 3.0

"""What the owner policy decided, as the node tells peers and the owner: its times are on the policy's clock.

The policy runs on its readings' clock (monotonic); the node's views run on the wall clock. Judged on the
wall clock, the hold after an eviction was always over and every countdown read "0 s".
"""

from __future__ import annotations

import re

from frost_core.config import Paths, load_config
from frost_core.measure.machine import MachineState
from frost_core.measure.sampler import ResourceReading
from frost_core.node.wiring import Node


def reading(at: float, **owner: float) -> ResourceReading:
    """One second's reading on the owner policy's clock: a quiet owner, unless `owner` says otherwise."""
    figures = dict(cpu_share=0.0, memory_pressure=0.0) | owner
    return ResourceReading(at=at, wall_seconds=1.0, available=4.0, instant_available=4.0, owner_cpu_percent=0.0,
                           guest_cpu_percent=0.0, probe_share=None, input_idle=None, cpu_pressure=None, **figures)


def node_after(tmp_path, seconds_ago: int, **owner: float) -> Node:
    """A node on the default owner settings (not started: only its view of the owner is looked at) whose policy
    read `owner`'s figures `seconds_ago` on its clock, and a quiet owner every second since."""
    paths = Paths.resolve(config_file=tmp_path / "node.toml", data_dir=tmp_path / "node")
    node = Node(load_config(paths, {"node.port": 0, "node.listen_host": "127.0.0.1", "node.broadcast_address": ""}))
    began = node.machine.clock() - seconds_ago
    for second in range(seconds_ago + 1):
        taken = reading(began + second, **({} if second else owner))
        node._machine_state = MachineState(taken, node.machine.owner.decide(taken.owner_view(), taken.at))
    return node


async def test_while_the_owner_is_quiet_for_less_than_resume_after_the_node_says_when_the_guests_continue(tmp_path):
    node = node_after(tmp_path, 10, cpu_share=90.0)   # a second of contention: suspended
    capacity = node._capacity()
    assert not capacity.accepts_guests
    left = re.search(r"guests suspended by the owner policy: owner quiet for \d+ s of 30 s; they continue in (\d+) s",
                     capacity.reason)
    assert left and 18 <= int(left[1]) <= 21, capacity.reason


async def test_after_the_owner_policy_evicts_new_guests_stay_away_for_evict_hold_and_the_node_says_how_long(tmp_path):
    evicting = node_after(tmp_path / "a", 10, memory_pressure=50.0)
    reason = evicting._capacity().reason
    assert "guests evicted by the owner policy: owner quiet for" in reason and "continue" not in reason, reason
    node = node_after(tmp_path / "b", 60, memory_pressure=50.0)   # quiet past `owner.resume_after` (30 s)
    capacity = node._capacity()
    assert not capacity.accepts_guests, capacity.reason
    assert re.search(r"holding new guests for (4 m 0|3 m 59) s after an eviction", capacity.reason), capacity.reason
    assert node._figures().available == 0.0, "peers are told it takes no guests"

"""Two desks on the defaults (no [owner] section: the `share` policy): the owner's evict on one sends its
guest to the other, and the result is the one a single process computes."""

from __future__ import annotations

import pytest

from tests.multinode.cluster import (
    RAYTRACE,
    assignment,
    reference_sha256,
    result_sha256,
    running_units,
    wait_for_members,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

ONE_UNIT = {**RAYTRACE, "height": 64, "rows_per_unit": 64}   # ~10 s of one CPU: evicted while it runs

# Two desks on one machine are each other's owner: a node counts every process but its own guests
# as its owner's work, so a guest at full speed on both cores would be "the owner busy" (70 % of all
# cores) for the other desk. One guest CPU each keeps a guest at half the machine, under that line, as
# a desk with its own machine would be. Everything else, the owner policy included, is the default.
ONE_GUEST_CPU = "\n[guests]\ncpus = 1\n"


def test_on_the_defaults_an_evicted_guest_finishes_on_the_other_desk_with_the_reference_result(nodes, tmp_path):
    desk_a = nodes("desk-a", extra_config=ONE_GUEST_CPU)
    desk_b = nodes("desk-b", seeds=(desk_a.address,), extra_config=ONE_GUEST_CPU)
    wait_for_members([desk_a, desk_b])
    # Both owners quiet first: a desk that started while this machine was busy (CI's test before, the other
    # desk's start) waits out its quiet period, 30 s on the defaults, which would outlast the unit on desk a.
    wait_for(lambda: takes_guests(desk_a, desk_b) and takes_guests(desk_b, desk_a), timeout=150,
             what="each desk to see the other take guests")
    desk_b.call("pause")  # the unit must start on desk a, whose owner then evicts it
    # Everything on the defaults but the check by a second host (`cluster.verify` draws 2 % of units): its copy
    # would have to run on desk a, which keeps the evicted unit off for `owner.evict_hold` (5 minutes).
    assignment_id = desk_a.call("submit", plugin="raytrace", params=ONE_UNIT, verify=0.0)["id"]
    task_id = f"{assignment_id}.0"
    wait_for(lambda: progress(desk_a, task_id) > 0.1, timeout=120, what=f"{task_id} under way on desk a")
    desk_b.call("resume")  # it may first wait out its quiet period: desk a's guest was its "owner"
    wait_for(lambda: takes_guests(desk_a, desk_b), timeout=150, what="desk a to see desk b take guests again")

    done_here = progress(desk_a, task_id)
    said = desk_a.cli("evict").stdout  # the owner's one command: every guest leaves this desk
    assert said == "evicted 1 guest; other guests may still come here (pause takes none)\n"   # no pause: it says so
    # Running, not starting: a guest reports its progress once its state is loaded (0 until then).
    wait_for(lambda: any(g["task_id"] == task_id and g["state"] == "running" for g in desk_b.call("status")["guests"]),
             timeout=60, what=f"{task_id} running on desk b")
    assert progress(desk_b, task_id) >= done_here  # it goes on from its capture, not from the start
    assert task_id not in {g["task_id"] for g in desk_a.call("status")["guests"]}
    wait_for(lambda: assignment(desk_a, assignment_id)["state"] == "done", timeout=120, what="the assignment")
    (unit,) = assignment(desk_a, assignment_id)["units"]
    assert unit["host"] == desk_b.node_id and unit["moves"] >= 1, unit
    # Desk a's events name where the unit went as its owner reads the Peers tab, not by the id alone.
    assert any(f"desk-b ({desk_b.node_id[:8]})" in e["message"] for e in desk_a.call("events")
               if e["kind"] not in ("join", "leave", "suspect", "dead", "alive")), desk_a.call("events")
    assert not running_units(desk_a, assignment_id)
    assert result_sha256(desk_a, assignment_id, tmp_path) == reference_sha256("raytrace", ONE_UNIT)


def progress(node, task_id: str) -> float:
    """The guest's progress as `node` reports it; 0 while it does not run there."""
    return next((g["progress"] for g in node.call("status")["guests"] if g["task_id"] == task_id), 0.0)


def takes_guests(viewer, desk) -> bool:
    """Whether `viewer`'s peer table shows `desk` offering CPU to guests."""
    return any(p["node_id"] == desk.node_id and p["available"] > 0 for p in viewer.call("peers"))

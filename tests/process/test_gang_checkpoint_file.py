"""A restarted master whose kept gang checkpoint is damaged says so and starts the gang from its first superstep,
with the check cadence its submitter gave it (not the node's [gang] default), forced checks included."""

from __future__ import annotations

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.process


def test_a_corrupt_gang_checkpoint_is_an_event_naming_the_gang_and_the_file_and_the_gang_starts_afresh(single_node):
    node = single_node()
    # 4 members: it waits on one node; the default cadence is 120 s, selective
    said = node.cli("submit", "heat-diffusion", "--check-every", "5s,forced").stdout
    gang_id = said.split()[1].rstrip(":")
    assert said == f"Submitted {gang_id}: a gang of 4 members of heat-diffusion.\n"   # members, not units
    node.kill()
    damaged = node.data_dir / "gang-checkpoints" / gang_id / f"{3:016d}.ckpt"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"FROSTCK\x01" + b"\x00\x00\x00\x10" + b"cut short")     # a header that ends early

    node = single_node()
    events = wait_for(lambda: (found := [e for e in node.call("events") if gang_id in e["message"]])
                      and any("starts again" in e["message"] for e in found) and found,
                      timeout=30, what="the node to take up its gang again")
    unreadable = [e for e in events if str(damaged) in e["message"]]
    assert unreadable and unreadable[0]["severity"] == "error" and "truncated" in unreadable[0]["message"], events
    assert any("starts again from its first superstep, checking every 5 s (forced) (" in e["message"] for e in events), events
    gang = node.call("assignment", assignment=gang_id)
    assert gang["state"] == "running" and gang["gang"]["superstep"] == 0 and gang["gang"]["checkpoint_superstep"] is None
    # Cancelled, its coordinator forgets it: the listing still says it was a gang of 4, not "0/0" units.
    node.cli("cancel", gang_id)
    (line,) = [line for line in node.cli("assignments").stdout.splitlines() if line.startswith(gang_id)]
    assert line.split()[2:6] == ["cancelled", "0%", "gang", "of"] and line.split()[6] == "4", line

"""A stopping node (SIGTERM: `systemctl stop`, a reboot) hands its guests to a peer before it exits."""

from __future__ import annotations

import signal

import pytest

from tests.multinode.cluster import CLUSTER_CONFIG, wait_for_members
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def test_sigterm_moves_the_guests_to_a_peer_before_the_node_exits(nodes):
    # The owner policy out of the way: on a busy test machine it would suspend the guest under test.
    config = CLUSTER_CONFIG + '\n[owner]\npolicy = "always"\n'
    master = nodes("master", extra_config=config)
    desk = nodes("desk", seeds=(master.address,), extra_config=config)
    wait_for_members([master, desk])
    master.call("pause")  # the unit must start on the desk that is about to stop
    reply = desk.call("submit", plugin="montecarlo-pi", params={"samples": 4_000_000_000, "units": 1})
    task_id = f"{reply['id']}.0"
    wait_for(lambda: task_id in {g["task_id"] for g in desk.call("status")["guests"]}, timeout=60,
             what=f"{task_id} running on the desk")
    master.call("resume")
    wait_for(lambda: any(p["node_id"] == master.node_id and p["available"] > 0 for p in desk.call("peers")),
             timeout=30, what="the desk to see the peer take guests again")

    desk.process.send_signal(signal.SIGTERM)
    assert desk.process.wait(timeout=60) == 0  # within node.stop_handoff (20 s) and its own checkpoint
    guests = wait_for(lambda: {g["task_id"] for g in master.call("status")["guests"]}, timeout=5,
                      what="the guest at the peer")
    assert task_id in guests
    log = (desk.data_dir / "logs" / "frost-tui.log").read_text()
    assert "handed 1 guest to peers before stopping" in log

    # Now the peer stops with the desk's unit, and neither another peer nor the unit's master (the desk)
    # is there to take it: it keeps its checkpoint and stops without waiting out node.stop_handoff (20 s)
    # for a master that cannot answer (a `systemctl stop` on the last desk must not hang).
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(timeout=15) == 0
    log = (master.data_dir / "logs" / "frost-tui.log").read_text()
    assert "its master is out of reach" in log and "keeping its checkpoint" in log

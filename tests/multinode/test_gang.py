"""A gang assignment on four real nodes: three sandboxed members step together and match the one-process run."""

from __future__ import annotations

import hashlib

import pytest

from frost_core.plugin.gang import run_gang_locally
from frost_core.plugin.loader import load_plugin_file

from tests.multinode.cluster import CLUSTER_CONFIG, PLUGINS, assignment, result_sha256, wait_for_members
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(240)

# Not about the owner: these nodes share one machine with other work (and with each other), which
# the default `share` policy would rightly take for a busy owner and keep the guests from.
OWNER_AWAY = '\n[owner]\npolicy = "always"\nmemory_pressure = 100\n'
HEAT = {"height": "24", "width": "8", "members": "3", "iterations": "60"}


def reference_sha256() -> str:
    output = run_gang_locally(load_plugin_file(PLUGINS / "heat_diffusion.py"), HEAT)
    return hashlib.sha256(output.data).hexdigest()


def test_a_gang_runs_on_three_hosts_and_restarts_from_its_checkpoint_when_a_member_is_evicted(nodes, tmp_path):
    master = nodes("master", extra_config=CLUSTER_CONFIG + OWNER_AWAY)
    hosts = [nodes(name, seeds=(master.address,), extra_config=CLUSTER_CONFIG + OWNER_AWAY)
             for name in ("alpha", "beta", "gamma")]
    every = {node.node_id: node for node in (master, *hosts)}
    wait_for_members([master, *hosts])
    reference = reference_sha256()

    # Undisturbed: three members on three distinct nodes, the result bit for bit the one-process run's.
    first = master.call("submit", plugin="heat-diffusion", params=HEAT)["id"]
    wait_for(lambda: assignment(master, first)["state"] == "done", timeout=90, what="the first gang")
    gang = assignment(master, first)["gang"]
    assert gang["phase"] == "finished" and len({m["host"] for m in gang["members"]}) == 3
    assert result_sha256(master, first, tmp_path) == reference

    # The owner of one member's host evicts mid-run: the gang starts again on the three others.
    second = master.call("submit", plugin="heat-diffusion", params=HEAT)["id"]
    running = wait_for(lambda: (g := assignment(master, second)["gang"]) and g["phase"] == "running"
                       and g["superstep"] >= 3 and g, timeout=60, what="the second gang at superstep 3")
    evicted = next(m["host"] for m in running["members"] if m["host"] != master.node_id)
    every[evicted].cli("evict")
    wait_for(lambda: assignment(master, second)["state"] == "done", timeout=90, what="the second gang")
    gang = assignment(master, second)["gang"]
    assert gang["restarts"] == 1
    assert evicted not in {m["host"] for m in gang["members"]}
    assert result_sha256(master, second, tmp_path) == reference

"""Separate hosts on one machine, four network namespaces on one bridge: broadcast discovery, a gang across
them, and the namespaced nodes' guests held in cgroups like any node's."""

import subprocess
from pathlib import Path

import pytest

from frost_core.guest.cgroups import current_mounts
from frost_core.guest.views import GuestSettings
from frost_core.plugin.limits import MEMBER_MEMORY
from tests.multinode.cluster import CLUSTER_CONFIG, assignment, place_gang, result_sha256
from tests.multinode.test_gang import HEAT, OWNER_AWAY, member_pid, reference_sha256, slow_heat, straggling
from tests.netns import BROADCAST, Topology, require_netns
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.timeout(240)]

PORT = 47631


def guest_cgroup(pid: int, controller: str) -> Path:
    """The cgroup folder of process `pid` in the machine's `controller` hierarchy, as this (outside) process sees it."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return current_mounts().v1_roots[controller] / path.lstrip("/")
    raise AssertionError(f"process {pid} is in no {controller} cgroup")


def test_nodes_in_separate_namespaces_find_each_other_run_a_gang_and_contain_its_guests(nodes, tmp_path):
    require_netns()
    # Not about the owner: these nodes share one machine with other work (and with each other), which
    # the default `share` policy would rightly take for a busy owner and keep the guests from.
    with Topology(4) as topology:
        started = [
            nodes(f"host{i}", netns=host.namespace, listen_host="0.0.0.0", port=PORT, broadcast=BROADCAST,
                  extra_config=f'\n[node]\nadvertise_host = "{host.address}"\n' + CLUSTER_CONFIG + OWNER_AWAY)
            for i, host in enumerate(topology.hosts)
        ]
        every = {n.node_id: n for n in started}

        def everyone_sees_everyone():
            return all({p for p, v in n.peers().items() if v["state"] == "alive"} == set(every) for n in started)

        wait_for(everyone_sees_everyone, timeout=30, what="broadcast discovery across namespaces")
        master = started[0]
        addresses = {p["address"] for p in master.call("peers")}
        assert addresses == {f"{h.address}:{PORT}" for h in topology.hosts}

        # A 3-member heat-diffusion gang over the namespaces, its superstep messages host to host over the bridge.
        gang_id, running = place_gang(master, slow_heat(tmp_path), "slow-heat", HEAT, nodes=4)
        gang = lambda: assignment(master, gang_id)["gang"]   # noqa: E731
        hosts_of = {m["rank"]: every[m["host"]] for m in running["members"]}
        pid = wait_for(lambda: member_pid(hosts_of[2], f"{gang_id}.2", from_checkpoint=False), timeout=30,
                       what="member 2's guest")

        # A namespaced node sees a fresh /sys without the cgroup mounts; its guest is in a cgroup of its own all
        # the same, limited to the member's declared memory (heat-diffusion keeps the default) and the slack.
        memory = guest_cgroup(pid, "memory")
        assert memory.name == f"guest-{pid}" and memory.parent.name.startswith("frost-guests-"), memory
        limit = MEMBER_MEMORY + GuestSettings().memory_slack_bytes
        assert int((memory / "memory.limit_in_bytes").read_text()) == limit
        assert guest_cgroup(pid, "cpu").name == f"guest-{pid}"

        # Member 0's host evicts while member 2 straggles: the gang restarts on the three others.
        evicted = hosts_of[0]
        with straggling(pid):
            evicted.cli("evict")
            wait_for(lambda: gang()["restarts"] == 1, timeout=30, what="the gang restarted")
        wait_for(lambda: assignment(master, gang_id)["state"] == "done", timeout=90, what="the gang's result")
        done = gang()
        assert done["restarts"] == 1 and evicted.node_id not in {m["host"] for m in done["members"]}, done
        assert len({m["host"] for m in done["members"]}) == 3
        assert result_sha256(master, gang_id, tmp_path) == reference_sha256()
        for node in started:
            node.stop()
    leftovers = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "frost-h" not in leftovers and "frost-hub" not in leftovers

"""Broadcast discovery between separate hosts: three network namespaces on one bridge."""

import subprocess

import pytest

from tests.netns import BROADCAST, Topology, require_netns
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.netns]

PORT = 47631


def test_nodes_on_separate_hosts_find_each_other_by_broadcast(nodes):
    require_netns()
    with Topology(3) as topology:
        started = [
            nodes(f"host{i}", netns=host.namespace, listen_host="0.0.0.0", port=PORT, broadcast=BROADCAST,
                  extra_config=f'\n[node]\nadvertise_host = "{host.address}"\n')
            for i, host in enumerate(topology.hosts)
        ]
        ids = {n.node_id for n in started}

        def everyone_sees_everyone():
            return all({p for p, v in n.peers().items() if v["state"] == "alive"} == ids for n in started)

        wait_for(everyone_sees_everyone, timeout=30, what="broadcast discovery across namespaces")
        addresses = {p["address"] for p in started[0].call("peers")}
        assert addresses == {f"{h.address}:{PORT}" for h in topology.hosts}
        for node in started:
            node.stop()
    leftovers = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "frost-h" not in leftovers and "frost-hub" not in leftovers

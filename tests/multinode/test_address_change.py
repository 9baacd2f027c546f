"""A desk machine's address changes under a running node: its peers are told, and keep reaching it.

A laptop starts frost-tui at login before its Wi-Fi is up, then moves between networks; DHCP hands out
another lease. Before, a node said the address it started with for good: one started without a network
said 127.0.0.1 and was never found; one whose address changed was called at the old one until its
peers counted it dead.
"""

import subprocess
import time

import pytest

from tests.netns import BROADCAST, SUBNET, Topology, require_netns
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.timeout(180)]

PORT = 47641


def ip(namespace: str, *args: str) -> None:
    subprocess.run(["ip", "-n", namespace, *args], check=True, capture_output=True, text=True)


def seen(by, node) -> dict | None:
    """`node` as `by`'s peer table holds it."""
    return next((p for p in by.call("peers") if p["node_id"] == node.node_id), None)


def test_a_node_started_before_its_network_is_found_once_it_is_up_and_followed_to_its_next_address(nodes):
    require_netns()
    with Topology(2) as topology:
        laptop_host, desk_host = topology.hosts
        topology.cut(laptop_host)   # the laptop's Wi-Fi is not up yet at login
        laptop, desk = (nodes(name, netns=host.namespace, listen_host="0.0.0.0", port=PORT, broadcast=BROADCAST)
                        for name, host in (("laptop", laptop_host), ("desk", desk_host)))
        assert laptop.call("status")["address"] == f"127.0.0.1:{PORT}"

        topology.heal(laptop_host)   # the Wi-Fi comes up: its announcements reach the desk, from its real address
        wait_for(lambda: (seen(desk, laptop) or {}).get("address") == f"{laptop_host.address}:{PORT}", timeout=30,
                 what="the desk to find the laptop at its network address")
        wait_for(lambda: (seen(laptop, desk) or {}).get("state") == "alive", timeout=30,
                 what="the laptop to see the desk alive")

        moved = f"{SUBNET}.77"   # another lease
        ip(laptop_host.namespace, "addr", "del", f"{laptop_host.address}/24", "dev", laptop_host.veth)
        ip(laptop_host.namespace, "addr", "add", f"{moved}/24", "broadcast", BROADCAST, "dev", laptop_host.veth)
        wait_for(lambda: (seen(desk, laptop) or {}).get("address") == f"{moved}:{PORT}", timeout=30,
                 what="the desk to learn the laptop's new address")
        assert laptop.call("status")["address"] == f"{moved}:{PORT}"
        assert any("address changed" in e["message"] for e in laptop.call("events"))
        # Probed at the new address, the laptop stays alive in the desk's table past a suspicion's length (3 s).
        for _ in range(5):
            assert seen(desk, laptop)["state"] == "alive"
            time.sleep(1)

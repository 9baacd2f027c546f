"""Which address this node tells its peers: the configured one, or the one its packets leave from.

A desk machine's address is not for life: a laptop moves between networks, DHCP hands out another
lease, and a node started at login may start before the Wi-Fi is up (with no route out, it can only
say 127.0.0.1). The node looks again every `LOOK_AGAIN` seconds and tells its peers a new one.
"""

from __future__ import annotations

import ipaddress
import socket

from frost_core.config import Config

LOOK_AGAIN = 5.0
"""Seconds between two looks at the address this machine's packets leave from (a route lookup: no packet)."""


def advertised_host(config: Config) -> str:
    """The host part peers should use to reach us.

    A configured `node.advertise_host` wins; a node listening on one specific address uses it;
    otherwise ask the routing table which local address faces the broadcast address (a UDP
    `connect` sends nothing), falling back to loopback for a node with no network.
    """
    if config.get("node.advertise_host"):
        return config.get("node.advertise_host")
    listen = config.get("node.listen_host")
    if listen not in ("0.0.0.0", "::", ""):
        return listen
    broadcast = config.get("node.broadcast_address") or "255.255.255.255"
    if _is_loopback(broadcast):
        return "127.0.0.1"
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        probe.connect((broadcast, 9))
        host = probe.getsockname()[0]
    except OSError:
        host = "127.0.0.1"
    finally:
        probe.close()
    return "127.0.0.1" if host == "0.0.0.0" else host


def moved_to(current: str, found: str) -> str | None:
    """The host to tell peers now that `found` is where packets leave from, or None to keep `current`: never
    to loopback from a real address (a machine whose network went away keeps its address for when it is back;
    telling peers 127.0.0.1 would send them to themselves)."""
    if found == current or _is_loopback(found) and not _is_loopback(current):
        return None
    return found


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

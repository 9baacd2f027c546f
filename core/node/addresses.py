"""Which address this node tells its peers: the configured one, or the one its packets leave from."""

from __future__ import annotations

import ipaddress
import socket

from frost_core.config import Config


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
    try:
        if ipaddress.ip_address(broadcast).is_loopback:
            return "127.0.0.1"
    except ValueError:
        pass
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

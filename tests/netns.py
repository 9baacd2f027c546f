"""Separate test hosts on one machine: network namespaces joined by a bridge, created and removed by the test.

The bridge lives in a hub namespace of its own, so nothing is added to the machine's own
network; addresses come from 198.18.0.0/15, the range set aside for network benchmarks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass

import pytest

SUBNET = "198.18.0"
BROADCAST = f"{SUBNET}.255"


@dataclass(frozen=True)
class TestHost:
    namespace: str
    address: str
    veth: str


def netns_unavailable_reason() -> str | None:
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "building network namespaces needs root"
    probe = f"frost-probe-{uuid.uuid4().hex[:6]}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        return f"`ip netns add` failed: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def require_netns() -> None:
    """Skip with the reason, or fail when CI says namespaces must work (FROST_REQUIRE_NETNS=1)."""
    reason = netns_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("FROST_REQUIRE_NETNS") == "1":
        pytest.fail(f"network namespace tests are required here, but {reason}")
    pytest.skip(reason)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _tc(namespace: str, device: str, *args: str) -> None:
    """`tc ARGS... dev DEVICE` (the device after the object and command) inside `namespace`."""
    subprocess.run(["tc", "-n", namespace, *args[:2], "dev", device, *args[2:]], check=True, capture_output=True,
                   text=True)


class Topology:
    """A hub namespace with a bridge, and one namespace per test host linked to it by a veth pair."""

    def __init__(self, count: int) -> None:
        tag = uuid.uuid4().hex[:6]
        self.hub = f"frost-hub-{tag}"
        self.hosts = [TestHost(f"frost-h{i}-{tag}", f"{SUBNET}.{i + 1}", f"fv{i}{tag}") for i in range(count)]
        self._namespaces = [self.hub] + [h.namespace for h in self.hosts]

    def __enter__(self) -> Topology:
        try:
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            for host in self.hosts:
                _ip("netns", "add", host.namespace)
                _ip("link", "add", host.veth, "netns", host.namespace, "type", "veth", "peer", "name", f"{host.veth}p",
                    "netns", self.hub)
                _ip("-n", self.hub, "link", "set", f"{host.veth}p", "master", "br0", "up")
                _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "broadcast", BROADCAST, "dev", host.veth)
                _ip("-n", host.namespace, "link", "set", host.veth, "up")
                _ip("-n", host.namespace, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def route_everything_out(self, host: TestHost) -> None:
        """Give `host` a default route through its link, as a desk on a network has: a node on the default
        configuration then finds its address there and its broadcasts to 255.255.255.255 stay in the hub."""
        _ip("-n", host.namespace, "route", "add", "default", "dev", host.veth)

    def cut(self, host: TestHost) -> None:
        _ip("-n", host.namespace, "link", "set", host.veth, "down")

    def heal(self, host: TestHost) -> None:
        _ip("-n", host.namespace, "link", "set", host.veth, "up")

    def cut_one_way(self, host: TestHost, *, to_it: bool) -> None:
        """Drop every packet sent to `host` (`to_it`) or by it, the other way left open: a firewall rule or a
        wireless link that fails one way. A blackhole qdisc on the end of the link the packets leave by."""
        _tc(*self._leaving_end(host, to_it), "qdisc", "add", "root", "blackhole")

    def heal_one_way(self, host: TestHost, *, to_it: bool) -> None:
        _tc(*self._leaving_end(host, to_it), "qdisc", "del", "root")

    def _leaving_end(self, host: TestHost, to_it: bool) -> tuple[str, str]:
        return (self.hub, f"{host.veth}p") if to_it else (host.namespace, host.veth)

    def __exit__(self, *exc_info: object) -> None:
        for namespace in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)

import pytest

from frost_core.wire.security import ClusterKey
from tests.nodes import start_node
from tests.process.dbus import PrivateBus


@pytest.fixture
def single_node(tmp_path):
    """A lone headless node (no peers, no broadcast) with its own data dir; stopped after the test."""
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    started = []

    def start(extra_config: str = ""):
        node = start_node(tmp_path / "node", key_file=key, extra_config=extra_config)
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()


@pytest.fixture
def buses(tmp_path, monkeypatch):
    """A session bus and a system bus of our own, in the environment where the node would find them."""
    session, system = PrivateBus(tmp_path / "buses", "session"), PrivateBus(tmp_path / "buses", "system")
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", session.address)
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", system.address)
    yield session, system
    session.close()
    system.close()


@pytest.fixture
def started():
    """Stand-in D-Bus services the test starts with `started(service)`; each is stopped after it."""
    services = []
    yield services.append
    for service in services:
        service.stop()

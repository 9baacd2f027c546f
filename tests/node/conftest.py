import pytest

from frost_core.wire.security import ClusterKey
from tests.nodes import start_node


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

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
        from tests.nodes import FAST_CONFIG

        base = FAST_CONFIG.split("[owner]")[0] if "[owner]" in extra_config else FAST_CONFIG
        node = start_node(tmp_path / "node", key_file=key, extra_config=extra_config, base_config=base)
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()

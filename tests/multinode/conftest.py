import pytest

from frost_core.wire.security import ClusterKey
from tests.multinode import cluster
from tests.nodes import start_node


@pytest.fixture
def cluster_key(tmp_path):
    path = tmp_path / "cluster.key"
    ClusterKey.generate().save(path)
    return path


@pytest.fixture
def nodes(tmp_path, cluster_key):
    """Start nodes with `nodes(folder, **kw)` (the folder is also the name unless `name=` says otherwise);
    all of them are stopped at the end of the test."""
    started = []

    def start(folder, **kwargs):
        kwargs.setdefault("key_file", cluster_key)
        node = start_node(tmp_path / folder, **kwargs)
        started.append(node)
        return node

    yield start
    for node in started:
        ended_alone = node.process.poll() is not None and not node.ended_by_test   # whatever its exit code
        node.stop()
        if ended_alone:  # shown with the failing test's report: the node's log goes with tmp_path
            print(f"node {node.name} ended by itself (exit {node.process.returncode}); the end of its output:")
            print("".join((node.data_dir / "stdout.log").read_text(errors="replace").splitlines(True)[-60:]))


@pytest.fixture
def reference_ahead():
    """`reference_ahead(plugin, params)` starts computing the reference result beside the test's nodes
    (cluster.reference_ahead: only under the owner policy `always`); one not asked for by the end is stopped."""
    yield cluster.reference_ahead
    cluster.stop_references_ahead()

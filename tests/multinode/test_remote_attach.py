"""A UI on a second machine (network namespace) commands this node only with its owner token:
the cluster key alone, or a wrong token, is refused at the handshake and the refusal logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from frost_core import ClusterKey
from tests.netns import Topology, require_netns
from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.netns]

PORT = 47631
CONTROL_PORT = 47632
ROOT = Path(__file__).resolve().parents[2]


def _remote_ui(namespace: str, address: str, token_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-m", "tests.multinode.remote_ui", address,
         str(CONTROL_PORT), str(token_file)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )


def test_a_second_machine_pauses_this_node_with_the_owner_token_and_nothing_else(nodes, cluster_key, tmp_path):
    require_netns()
    with Topology(2) as topology:
        desk, other = topology.hosts
        # Remote attach is off by default: this node's owner opens it on the test bridge.
        node = nodes("desk", netns=desk.namespace, listen_host="0.0.0.0", port=PORT,
                     extra_config=f'\n[control]\nlisten = "{desk.address}:{CONTROL_PORT}"\n')
        wrong = tmp_path / "wrong.token"
        ClusterKey.generate().save(wrong)
        for name, token_file in (("the cluster key", cluster_key), ("a wrong token", wrong)):
            refused = _remote_ui(other.namespace, desk.address, token_file)
            assert (refused.returncode, refused.stdout.strip()) == (1, "not attached"), (name, refused.stderr)
        assert node.call("status")["state"] != "paused"
        # The refusal is in Events and in the log (once: the node mutes a source's refusals for 5 s, and each UI,
        # refused, waits 30 s before it asks again).
        refusals = wait_for(lambda: [e for e in node.call("events") if e["kind"] == "refused"], timeout=10,
                            what="the refusal in Events")
        assert all(e["message"] == f"a UI at {other.address} was refused: it does not hold this node's owner token"
                   for e in refusals)
        log = (node.data_dir / "logs" / "frost-tui.log").read_text()
        assert log.count(f"refused {other.address}: it does not hold this node's owner token") == 1

        owner_token = node.cli("key", "owner-token").stdout.strip()
        token_file = tmp_path / "owner.token"
        ClusterKey.from_join_code(owner_token).save(token_file)
        attached = _remote_ui(other.namespace, desk.address, token_file)
        assert (attached.returncode, attached.stdout.strip()) == (0, "paused"), attached.stderr
        assert node.call("status")["state"] == "paused"

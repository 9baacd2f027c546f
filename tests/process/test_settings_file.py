"""Settings → save edits config.toml in place: the owner's comments stay, flags are not persisted, any name survives."""

import subprocess

from frost_core import ClusterKey, NodeUnavailableError, SaveSettings, call_node
from tests.nodes import NodeProcess, start_node
from tests.waiting import wait_for

NAME = 'desk "one"\nsecond line \x1b[31m red'


def test_a_saved_name_survives_a_restart_and_the_file_keeps_its_comments(tmp_path):
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    node = start_node(tmp_path / "node", key_file=key, seeds=("127.0.0.1:9",),
                      extra_config="\n# the owner's note: keep this\n")
    try:
        assert call_node(node.paths, SaveSettings(values={"node.name": NAME})) == "saved"
    finally:
        node.stop()
    text = (node.data_dir / "config.toml").read_text()
    assert "# the owner's note: keep this" in text and "[gossip]\ninterval = 0.3" in text
    assert "port" not in text and "seeds" not in text and "127.0.0.1:9" not in text, "this run's flags stay flags"
    name_flag = node.command.index("--name")
    command = node.command[:name_flag] + node.command[name_flag + 2:]  # the name comes from the file now
    output = open(node.data_dir / "stdout.log", "a")  # noqa: SIM115 - closed by stop()
    again = NodeProcess(data_dir=node.data_dir, output=output, command=command,
                        process=subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT))
    try:
        status = wait_for(lambda: _status(again), timeout=30, what="the restarted node")
        assert status["name"] == NAME
    finally:
        again.stop()


def _status(node):
    try:
        return node.call("status")
    except NodeUnavailableError:
        return None

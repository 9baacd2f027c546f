"""Settings → save edits config.toml in place: the owner's comments stay, flags are not persisted, any name survives."""

import resource
import subprocess
import sys

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
        assert call_node(node.paths, SaveSettings(values={"node.name": NAME})) == \
            "saved; node.name takes effect when the node starts again"
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


REFUSED_SAVE = """
import signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the file-size limit then fails with EFBIG
from frost_core.api.errors import StorageError
from frost_core.config import Paths, load_config, save_config
paths = Paths.resolve(config_file=Path(sys.argv[1]) / "config.toml", data_dir=Path(sys.argv[1]))
try:
    save_config(load_config(paths).replace(guests__cpus=3, node__name="x" * 500), names=["guests.cpus", "node.name"])
except StorageError as error:
    print(error.message)
"""


def test_settings_the_disk_refuses_leave_the_file_as_it_was_and_no_half_written_copy(tmp_path):
    """The kernel refuses the write (a file-size limit stands in for a full disk, and binds root as well)."""
    folder = tmp_path / "node"
    folder.mkdir()
    (folder / "config.toml").write_text("# mine\n[guests]\ncpus = 1\n")
    refused = subprocess.run([sys.executable, "-c", REFUSED_SAVE, str(folder)], capture_output=True, text=True,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)), check=True)
    assert "the settings were not saved" in refused.stdout and "File too large" in refused.stdout, refused
    assert (folder / "config.toml").read_text() == "# mine\n[guests]\ncpus = 1\n"
    assert sorted(p.name for p in folder.iterdir()) == ["config.toml"]

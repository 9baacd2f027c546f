"""A first start on a disk that refuses writes: a message naming the file it could not write, no traceback,
no half-written file. Before, writing `node_id` raised a plain OSError traceback and left `node_id.tmp`.

The kernel refuses the writes: a file-size limit stands in for a full disk (it binds root too, and the
SIGXFSZ it would send is ignored, which an exec keeps, so the write fails with EFBIG instead)."""

import os
import resource
import signal
import subprocess
import sys

from frost_core import ClusterKey
from frost_core.node.identity import load_node_key
from tests.nodes import FROST_TUI


def _refusing(limit: int):
    def limit_writes() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_writes


def _first_start(data_dir, *, limit: int) -> subprocess.CompletedProcess:
    """`frost-tui --headless` as a first start runs it: no config file (its folder is one of the test's own)."""
    return subprocess.run([FROST_TUI, "--headless", "--data-dir", str(data_dir), "--port", "0",
                           "--cluster-key-file", str(data_dir / "cluster.key"),
                           "--broadcast-address", "", "--listen-host", "127.0.0.1"],
                          capture_output=True, text=True, timeout=60, preexec_fn=_refusing(limit),
                          env={**os.environ, "XDG_CONFIG_HOME": str(data_dir.parent / "config")})


def _left_in(data_dir) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name != "logs")


def test_a_first_start_whose_node_id_the_disk_refuses_names_the_file_and_leaves_nothing_half_written(tmp_path):
    data_dir = tmp_path / "desk"
    refused = _first_start(data_dir, limit=0)
    assert refused.returncode != 0
    assert f"frost-tui: Disk refused a write: could not write {data_dir / 'node_id'}: File too large" in refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    assert _left_in(data_dir) == []


def test_a_first_start_whose_cluster_key_the_disk_refuses_names_the_key_file(tmp_path):
    """node_id (32 bytes) fits under the limit, the key's join code does not."""
    data_dir = tmp_path / "desk"
    refused = _first_start(data_dir, limit=40)
    assert f"Disk refused a write: could not write {data_dir / 'cluster.key'}: File too large" in refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    assert _left_in(data_dir) == ["node_id"]


def test_a_start_whose_database_the_disk_refuses_names_it_with_its_folder(tmp_path):
    """The identity is there (an earlier start); the master's database is the first write (before, the message
    named `node.sqlite` alone: which disk was full, the owner had to guess)."""
    data_dir = tmp_path / "desk"
    data_dir.mkdir()
    (data_dir / "node_id").write_text("ab" * 16)
    ClusterKey.generate().save(data_dir / "cluster.key")
    refused = _first_start(data_dir, limit=100)
    assert f"Disk refused a write: could not write {data_dir / 'node.sqlite'}: " in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr


MAKE_KEYS = """
import signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from frost_core.api.errors import StorageError
from frost_core.node.identity import load_node_key
from frost_core.wire.security import ClusterKey
folder = Path(sys.argv[1])
for make in (lambda: load_node_key(folder), lambda: ClusterKey.generate().save(folder / "cluster.key")):
    try:
        make()
    except StorageError as error:
        print(error.message)
"""


def test_the_node_key_and_a_replaced_cluster_key_the_disk_refuses_leave_the_old_files_whole(tmp_path):
    """16 bytes fit: the first write of either key is short, the next refused (before, the node key's torn half
    was published, and every later start refused it as corrupt)."""
    old_key = ClusterKey.generate()
    old_key.save(tmp_path / "cluster.key")
    refused = subprocess.run([sys.executable, "-c", MAKE_KEYS, str(tmp_path)], capture_output=True, text=True,
                             check=True, preexec_fn=_refusing(16))
    assert refused.stdout.splitlines() == [f"could not write {tmp_path / 'node.key'}: File too large",
                                           f"could not write {tmp_path / 'cluster.key'}: File too large"]
    assert ClusterKey.load(tmp_path / "cluster.key") == old_key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.key"]
    assert load_node_key(tmp_path).public  # with room again, the node key is made

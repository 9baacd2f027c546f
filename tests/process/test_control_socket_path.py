"""The control socket lives in $XDG_RUNTIME_DIR/frost-tui/, and a path too long for a socket is a clear error."""

import os
import subprocess

from frost_core import ClusterKey
from tests.nodes import FROST_TUI, start_node


def test_the_socket_is_in_the_runtime_dir_where_the_cli_finds_it(tmp_path, monkeypatch):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))  # for this process's client and the node alike
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # a socket in here would be far over 107 bytes
    node = start_node(deep, key_file=key)
    try:
        (socket_file,) = (runtime / "frost-tui").iterdir()
        assert socket_file.suffix == ".sock" and not (deep / "control.sock").exists()
        assert (runtime / "frost-tui").stat().st_mode & 0o777 == 0o700
        assert node.cli("status").returncode == 0
    finally:
        node.stop()
    assert not list((runtime / "frost-tui").iterdir()), "a clean stop removes the socket"


def test_a_data_dir_too_deep_for_a_socket_is_a_configuration_error(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    for args in (["--headless", "--port", "0", "--broadcast-address", ""], ["status"]):
        done = subprocess.run([FROST_TUI, *args, "--data-dir", str(deep)], capture_output=True, text=True,
                              timeout=120, env=env)
        assert done.returncode == 2, done.stderr
        assert "over the 107 a Unix socket allows" in done.stderr and "XDG_RUNTIME_DIR" in done.stderr
        assert "Traceback" not in done.stderr

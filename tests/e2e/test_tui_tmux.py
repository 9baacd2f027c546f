"""The real `frost-tui` in a real terminal (tmux): embedded, it finds a headless peer, runs a submitted
assignment, and `e` sends the guest on to that peer; over a headless node it attaches, detaches
with `q` leaving everything running, and rides out the node's restart.

Slow (real processes, real sockets on loopback); skipped where tmux is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from frost_core.wire.security import ClusterKey
from tests.nodes import FAST_CONFIG, FROST_TUI, free_port, start_node
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (Debian package tmux)"),
]


class Terminal:
    """One tmux server of our own, with the UI in its only pane."""

    def __init__(self, socket_name: str, command: list[str], env: dict[str, str], *,
                 size: tuple[int, int] = (150, 45)) -> None:
        self.socket_name = socket_name
        env_args = [f"{k}={v}" for k, v in env.items()]
        self.tmux("new-session", "-d", "-s", "ui", "-x", str(size[0]), "-y", str(size[1]), "env", *env_args, *command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket_name, *args], capture_output=True, text=True,
                              check=True, timeout=10).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "ui", *keys)

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", "ui")
        except subprocess.CalledProcessError:
            return ""  # the UI has exited and the pane is gone

    def wait_for(self, predicate, *, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; the screen showed:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket_name, "kill-server"], capture_output=True, timeout=10)


def test_ui_sees_a_peer_runs_an_assignment_and_e_evicts_the_guest(tmp_path):
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    # The owner policy out of the way: on a busy test machine it would suspend the guest under test.
    always = '\n[owner]\npolicy = "always"\n'
    try:
        peer = start_node(tmp_path / "peer-b", key_file=key, name="peer-b", port=free_port(), extra_config=always)
    except RuntimeError as error:  # a core problem, covered by the core's own tests
        pytest.skip(f"the headless peer does not start yet: {str(error).splitlines()[-1]}")
    ui_dir = tmp_path / "desk-a"
    ui_dir.mkdir()
    (ui_dir / "config.toml").write_text(FAST_CONFIG + always)
    peer_port = peer.address.rsplit(":", 1)[1]
    command = [
        FROST_TUI, "--data-dir", str(ui_dir), "--config", str(ui_dir / "config.toml"), "--port", str(free_port()),
        "--listen-host", "127.0.0.1", "--seed", f"127.0.0.1:{peer_port}", "--broadcast-address", "",
        "--cluster-key-file", str(key), "--name", "desk-a",
    ]
    terminal = Terminal(f"frost-e2e-{os.getpid()}", command, {"TERM": "xterm-256color", "COLUMNS": "150"})
    try:
        terminal.wait_for(lambda s: "desk-a" in s, timeout=30, what="the UI to start")
        terminal.keys("3")
        terminal.wait_for(lambda s: "peer-b" in s and "alive" in s, timeout=30, what="peer-b listed alive")

        peer.call("pause")  # the unit must start here, on the machine whose UI we drive
        submitted = subprocess.run(
            [FROST_TUI, "submit", "montecarlo-pi", "--param", "samples=4000000000", "--param", "units=1",
             "--data-dir", str(ui_dir), "--config", str(ui_dir / "config.toml")],
            capture_output=True, text=True, timeout=60,
        )
        assert submitted.returncode == 0, submitted.stderr
        terminal.keys("2")
        screen = terminal.wait_for(lambda s: re.search(r"\S+-\d+\.0 ", s) is not None, timeout=60,
                                   what="the guest to start here")
        task_id = re.search(r"(\S+-\d+\.0) ", screen).group(1)
        peer.call("resume")

        terminal.keys("e")  # one key, no confirmation
        terminal.wait_for(lambda s: task_id not in s, timeout=60, what=f"guest {task_id} to leave")
        # Evict means migrate: the work goes on at the peer (directly, or through the master's queue).
        wait_for(lambda: task_id in {g["task_id"] for g in peer.call("status")["guests"]}, timeout=60,
                 what=f"{task_id} to run on peer-b")

        terminal.keys("q")  # this machine is the master of the running assignment: quitting says so and asks
        terminal.wait_for(lambda s: "results wait for frost-tui" in s, timeout=30, what="the quit dialog")
        terminal.keys("k")
        terminal.wait_for(lambda s: "desk-a" not in s, timeout=30, what="the UI to quit")
    finally:
        terminal.close()
        peer.stop()


def test_the_ui_attaches_to_a_headless_node_detaches_and_rides_out_a_restart(tmp_path):
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    # The owner policy out of the way: on a busy test machine it would suspend the guest under test.
    always = '\n[owner]\npolicy = "always"\n'
    peer = start_node(tmp_path / "peer-b", key_file=key, name="peer-b", port=free_port(), extra_config=always)
    peer_port = peer.address.rsplit(":", 1)[1]
    desk_port = free_port()
    start_desk = lambda: start_node(tmp_path / "desk-a", key_file=key, name="desk-a", port=desk_port,  # noqa: E731
                                    seeds=(f"127.0.0.1:{peer_port}",), extra_config=always)
    desk = start_desk()
    terminals: list[Terminal] = []

    def attach() -> Terminal:
        command = [FROST_TUI, "--data-dir", str(desk.data_dir), "--config", str(desk.data_dir / "config.toml")]
        terminal = Terminal(f"frost-e2e-{os.getpid()}-{len(terminals)}", command,
                            {"TERM": "xterm-256color", "COLUMNS": "150"})
        terminals.append(terminal)
        terminal.wait_for(lambda s: "attached to local node" in s, timeout=30, what="the UI to attach")
        return terminal

    try:
        wait_for(lambda: any(p["name"] == "peer-b" and p["state"] == "alive" for p in desk.call("peers")),
                 timeout=30, what="desk-a to see peer-b")
        peer.call("pause")  # the unit must start on the headless node the UI attaches to
        submitted = desk.cli("submit", "montecarlo-pi", "--param", "samples=4000000000", "--param", "units=1")
        task_id = f"{submitted.stdout.split()[1].rstrip(':')}.0"
        wait_for(lambda: desk.call("status")["guests"], timeout=60, what="the guest to start on desk-a")

        terminal = attach()
        terminal.keys("2")
        terminal.wait_for(lambda s: task_id in s, timeout=30, what=f"{task_id} on the Guests tab")
        peer.call("resume")
        terminal.keys("e")
        terminal.wait_for(lambda s: task_id not in s, timeout=60, what=f"guest {task_id} to leave")
        wait_for(lambda: task_id in {g["task_id"] for g in peer.call("status")["guests"]}, timeout=60,
                 what=f"{task_id} to run on peer-b")

        terminal.keys("q")  # detach: nothing asked, nothing stopped
        terminal.wait_for(lambda s: "desk-a" not in s, timeout=30, what="the UI to detach")
        assert desk.process.poll() is None
        assert task_id in {g["task_id"] for g in peer.call("status")["guests"]}

        terminal = attach()  # the same state as before the detach
        terminal.wait_for(lambda s: "0 guests" in s and "1 assignment running" in s, timeout=30,
                          what="the same state again")
        desk.kill()
        terminal.wait_for(lambda s: "reconnecting to local node…" in s, timeout=30, what="the reconnecting state")
        desk = start_desk()
        terminal.wait_for(lambda s: "attached to local node" in s and "1 assignment running" in s, timeout=30,
                          what="the UI back on the restarted node")
    finally:
        for terminal in terminals:
            terminal.close()
        desk.stop()
        peer.stop()


def test_closing_the_terminal_of_an_embedded_ui_hands_its_guest_to_the_peer_and_leaves_the_cluster(tmp_path):
    # Before, the window closing (SIGHUP) killed the process at once: its guests died with their work since their
    # last checkpoints, and the peers learned of it only from the failure detector.
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    # The owner policy out of the way: on a busy test machine it would suspend the guest under test.
    always = '\n[owner]\npolicy = "always"\n'
    peer = start_node(tmp_path / "peer-b", key_file=key, name="peer-b", port=free_port(), extra_config=always)
    ui_dir = tmp_path / "desk-a"
    ui_dir.mkdir()
    (ui_dir / "config.toml").write_text(FAST_CONFIG + always)
    command = [
        FROST_TUI, "--data-dir", str(ui_dir), "--config", str(ui_dir / "config.toml"), "--port", str(free_port()),
        "--listen-host", "127.0.0.1", "--seed", f"127.0.0.1:{peer.address.rsplit(':', 1)[1]}",
        "--broadcast-address", "", "--cluster-key-file", str(key), "--name", "desk-a",
    ]
    terminal = Terminal(f"frost-e2e-{os.getpid()}-hangup", command, {"TERM": "xterm-256color", "COLUMNS": "150"})
    try:
        terminal.wait_for(lambda s: "desk-a" in s, timeout=30, what="the UI to start")
        wait_for(lambda: any(p["name"] == "desk-a" and p["state"] == "alive" for p in peer.call("peers")),
                 timeout=30, what="peer-b to see desk-a")
        peer.call("pause")  # the unit must start on the desk whose terminal closes
        submitted = peer.cli("submit", "montecarlo-pi", "--param", "samples=4000000000", "--param", "units=1")
        task_id = f"{submitted.stdout.split()[1].rstrip(':')}.0"
        terminal.keys("2")
        terminal.wait_for(lambda s: task_id in s, timeout=60, what=f"{task_id} running on desk-a")
        peer.call("resume")
        ui_pid = int(terminal.tmux("display-message", "-p", "-t", "ui", "#{pane_pid}"))

        terminal.close()   # the window closes: the UI's terminal hangs up

        wait_for(lambda: task_id in {g["task_id"] for g in peer.call("status")["guests"]}, timeout=30,
                 what=f"{task_id} to run on peer-b")
        wait_for(lambda: any(p["name"] == "desk-a" and p["state"] == "left" for p in peer.call("peers")),
                 timeout=15, what="desk-a to leave the cluster (not to be found dead)")
        wait_for(lambda: not os.path.exists(f"/proc/{ui_pid}"), timeout=15, what="the UI's process to end")
        log = (ui_dir / "logs" / "frost-tui.log").read_text()
        assert "handed 1 guest to peers" in log, log[-2000:]
        assert f"{task_id} moved to peer-b" in log, log[-2000:]
    finally:
        terminal.close()
        peer.stop()

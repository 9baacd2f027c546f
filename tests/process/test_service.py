"""The node as a systemd service: the unit systemd-analyze accepts, and the notify and journal protocols
spoken by a real `frost-tui --headless` to a real datagram socket and stderr stream."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from frost_core.config import Paths, load_config
from frost_core.wire.security import ClusterKey
from frost_tui import service
from tests.nodes import FAST_CONFIG, FROST_TUI


def _config(tmp_path: Path):
    return load_config(Paths.resolve(config_file=tmp_path / "config.toml", data_dir=tmp_path / "data"))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian package systemd)")
@pytest.mark.parametrize("system", [True, False], ids=["system", "user"])
def test_systemd_analyze_verify_accepts_the_generated_unit_without_a_warning(tmp_path, system):
    unit = tmp_path / service.UNIT_NAME
    unit.write_text(service.unit_text(_config(tmp_path), executable=FROST_TUI, scope=service.Scope(system=system)))
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    result = subprocess.run(
        ["systemd-analyze", *([] if system else ["--user"]), "verify", str(unit)], capture_output=True, text=True,
        timeout=60, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)},
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
    text = unit.read_text()
    for line in ("Type=notify", "Delegate=yes", "Restart=on-failure", "KillMode=mixed", "WatchdogSec=60",
                 "TimeoutStopSec=35"):  # node.stop_handoff (20 s) and a margin to checkpoint
        assert line in text.splitlines()


def test_install_writes_enables_and_explains_linger_and_uninstall_removes(tmp_path, monkeypatch):
    # systemd does not run in this container: systemctl is recorded instead of run.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    calls: list[list[str]] = []
    lines = service.install(_config(tmp_path), service.Scope(system=False), executable=FROST_TUI, run=calls.append)
    unit = tmp_path / "xdg" / "systemd" / "user" / service.UNIT_NAME
    assert f"ExecStart={FROST_TUI} --headless --data-dir {tmp_path / 'data'}" in unit.read_text()
    assert calls == [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", service.UNIT_NAME]]
    assert any("loginctl enable-linger" in line for line in lines)
    calls.clear()
    service.uninstall(service.Scope(system=False), run=calls.append)
    assert not unit.exists()
    assert calls[0] == ["systemctl", "--user", "disable", "--now", service.UNIT_NAME]


@pytest.mark.skipif(Path("/run/systemd/system").is_dir(), reason="systemd runs here")
def test_service_install_without_systemd_says_what_to_do_instead(tmp_path):
    (tmp_path / "config.toml").touch()  # --config must name a file that exists
    result = subprocess.run([FROST_TUI, "service", "install", "--data-dir", str(tmp_path), "--config",
                             str(tmp_path / "config.toml")], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert result.returncode == 1
    assert "Cannot install a service" in result.stderr
    # cron and service managers start it with a PATH of their own: the command names this frost-tui in full.
    assert f"@reboot {Path(FROST_TUI).resolve()} --headless --data-dir {tmp_path} --config {tmp_path / 'config.toml'}`" \
        in result.stderr
    assert not (tmp_path / "xdg").exists()


def test_headless_node_speaks_sd_notify_and_logs_for_the_journal(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text(FAST_CONFIG)
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(60)
    stderr = open(tmp_path / "stderr", "w+")  # noqa: SIM115 - closed below
    status = os.fstat(stderr.fileno())
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "1000000",
           "JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino}"}
    process = subprocess.Popen(
        [FROST_TUI, "--headless", "--data-dir", str(data), "--config", str(data / "config.toml"), "--port", "0",
         "--listen-host", "127.0.0.1", "--broadcast-address", "", "--cluster-key-file", str(key)],
        stdout=subprocess.DEVNULL, stderr=stderr, env=env,
    )
    try:
        received = [notify.recv(4096).decode()]
        assert received[0].startswith("READY=1\nSTATUS=listening on ")
        received.append(notify.recv(4096).decode())
        assert received[1] == "WATCHDOG=1"  # every half second with WatchdogSec=1
        process.send_signal(signal.SIGTERM)
        while not received[-1].startswith("STOPPING=1"):
            received.append(notify.recv(4096).decode())
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        notify.close()
    stderr.seek(0)
    lines = stderr.read().splitlines()
    stderr.close()
    assert lines, "the node logged nothing to the journal stream"
    assert all(re.match(r"<[0-7]>frost\.", line) for line in lines), lines
    assert any(line.startswith("<6>frost.headless: stopping on SIGTERM") for line in lines)
    assert not (data / "logs").exists()  # the journal keeps the log, not files of our own

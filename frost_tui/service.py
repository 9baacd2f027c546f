"""`frost-tui service install|uninstall`: run the node as a systemd service that outlives every terminal.

A user unit runs while the owner is logged in, or always after `loginctl enable-linger`; a
system unit runs from boot as the account that installed it. The node is `Type=notify` (it says
when it listens and feeds the watchdog) and owns the cgroups of its guests (`Delegate=yes`).
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from frost_core import Config, FrostError

UNIT_NAME = "frost-tui.service"
WATCHDOG_SECONDS = 60
STOP_MARGIN = 15
"""Seconds beyond `node.stop_handoff` before systemd kills what is left (checkpointing a guest takes a moment)."""


@dataclass(frozen=True)
class Scope:
    """Where a unit goes and how systemctl is told about it."""

    system: bool

    @property
    def systemctl(self) -> list[str]:
        return ["systemctl"] if self.system else ["systemctl", "--user"]

    def unit_dir(self) -> Path:
        if self.system:
            return Path("/etc/systemd/system")
        config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(config_home) / "systemd" / "user"


def node_command(config: Config, executable: str) -> list[str]:
    """The headless node of this data dir and config, by the full path of this frost-tui: a service manager or
    cron starts it with a PATH of its own, which seldom holds a virtual environment's bin folder."""
    return [executable, "--headless", "--data-dir", str(config.paths.data_dir), "--config", str(config.paths.config_file)]


def unit_text(config: Config, *, executable: str, scope: Scope, user: str | None = None) -> str:
    """The unit file: this frost-tui with this data dir and config, restarted if it fails."""
    command = node_command(config, executable)
    account = f"User={user}\n" if scope.system and user else ""
    return f"""\
[Unit]
Description=frost-tui peer node (shares this machine's idle CPU with its cluster)
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
NotifyAccess=main
{account}ExecStart={shlex.join(command)}
WatchdogSec={WATCHDOG_SECONDS}
Restart=on-failure
RestartSec=5
# Guests live in cgroups the node creates under its own.
Delegate=yes
# SIGTERM to the node alone: it hands its guests to peers, then stops them itself.
KillMode=mixed
TimeoutStopSec={int(config.get("node.stop_handoff")) + STOP_MARGIN}

[Install]
WantedBy={"multi-user.target" if scope.system else "default.target"}
"""


def systemd_missing_reason() -> str | None:
    """Why systemd cannot run the node here, or None when it can."""
    if shutil.which("systemctl") is None:
        return "this system has no systemctl"
    if not Path("/run/systemd/system").is_dir():
        return "systemd is not this system's service manager"
    return None


def without_systemd(reason: str, config: Config, *, executable: str) -> str:
    """What to do instead, for an owner whose system does not run systemd."""
    command = shlex.join(node_command(config, executable))
    return (
        f"Cannot install a service: {reason}.\n"
        f"Run the node with your system's own service manager or at login instead, for example:\n"
        f"  {command}\n"
        "(a crontab line `@reboot " + command + "`, an OpenRC or runit service, or a launchd agent on macOS);\n"
        "it stops cleanly on SIGTERM, and `frost-tui` attaches to it."
    )


Run = Callable[[list[str]], None]


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise FrostError(f"`{shlex.join(command)}` failed: {result.stderr.strip() or result.returncode}",
                         title="Service not changed")


def install(config: Config, scope: Scope, *, executable: str, run: Run = _run) -> list[str]:
    """Write the unit, enable and start it; returns what the owner should read."""
    directory = scope.unit_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / UNIT_NAME
    user = pwd.getpwuid(os.getuid()).pw_name if scope.system and os.getuid() != 0 else None
    temporary = path.with_name(f".{UNIT_NAME}.{os.getpid()}.tmp")
    temporary.write_text(unit_text(config, executable=executable, scope=scope, user=user))
    os.replace(temporary, path)
    run([*scope.systemctl, "daemon-reload"])
    run([*scope.systemctl, "enable", "--now", UNIT_NAME])
    lines = [f"Installed and started {path}.",
             f"Status: {shlex.join([*scope.systemctl, 'status', UNIT_NAME])}; "
             f"log: journalctl {'' if scope.system else '--user '}-u {UNIT_NAME}"]
    if not scope.system:
        lines.append(
            "A user service stops when you log out. To keep sharing while nobody is logged in, run once:\n"
            f"  loginctl enable-linger {pwd.getpwuid(os.getuid()).pw_name}"
        )
    return lines


def uninstall(scope: Scope, *, run: Run = _run) -> list[str]:
    """Stop and disable the unit and remove its file; the node's data dir stays."""
    path = scope.unit_dir() / UNIT_NAME
    if not path.exists():
        return [f"No service to remove: {path} does not exist."]
    run([*scope.systemctl, "disable", "--now", UNIT_NAME])
    path.unlink()
    run([*scope.systemctl, "daemon-reload"])
    return [f"Stopped and removed {path}; the node's data dir is kept."]

"""A transient scope from the user manager: where a node in a user session may make its guests' cgroups.

In a systemd user session the node sits in a scope systemd owns; cgroup v2 lets it write only in
a subtree delegated to it. So it asks the user manager (org.freedesktop.systemd1 on the session
bus) for a transient scope of its own with `Delegate=yes` and the guests' CPU weight, holding a
placeholder process (a scope cannot start empty), and makes its guest parent inside. The scope
is a sibling of the owner's applications, so the weight decides against them as the cgroup
module's docstring explains; it is `cpu.weight = 1`, not `CPUWeight=idle`, for the reason given
there (an idle cgroup went without any CPU for seconds at load 16). The user manager removes the
scope once its last process is gone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from jeepney import AuthenticationError, DBusAddress, DBusErrorResponse, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import unwrap_msg

SYSTEMD = DBusAddress("/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1",
                      interface="org.freedesktop.systemd1.Manager")
CALL_TIMEOUT = 5.0
SCOPE_SETTLE_TIMEOUT = 5.0
SCOPE_FAILURES = (OSError, EOFError, DBusErrorResponse, AuthenticationError, ValueError)
"""What asking for a scope raises when there is no bus, no user manager, or it refuses."""


@dataclass
class TransientScope:
    """A scope the user manager made for this node's guests, and the placeholder process that keeps it."""

    unit: str
    folder: Path
    holder: subprocess.Popen

    def close(self) -> None:
        """End the placeholder; the user manager then removes the empty scope."""
        if self.holder.stdin is not None:
            self.holder.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            self.holder.kill()
        self.holder.wait()


def user_session_bus() -> str | None:
    """The session bus of a node run by a user (not root) in a desktop session; None otherwise."""
    if os.geteuid() == 0:
        return None  # a system service gets its subtree from its unit's Delegate=yes
    return os.environ.get("DBUS_SESSION_BUS_ADDRESS") or None


def start_scope(bus: str, unit: str, v2_root: Path, cpu_weight: int) -> TransientScope:
    """Ask the user manager on `bus` for scope `unit` (Delegate=yes, `cpu_weight`); the folder it made.

    Raises one of `SCOPE_FAILURES` when there is no bus or no user manager, or it refuses, and
    OSError when the scope never appears in the v2 hierarchy at `v2_root`.
    """
    # `cat` on a pipe only the node holds: it ends when the node does, even killed with -9, and
    # the user manager then removes the scope instead of keeping it for a placeholder forever.
    holder = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        properties = [
            ("PIDs", ("au", [holder.pid])),
            ("Delegate", ("b", True)),
            ("CPUWeight", ("t", cpu_weight)),
            ("Description", ("s", "frost-tui guests (work of other people's assignments)")),
        ]
        call = new_method_call(SYSTEMD, "StartTransientUnit", "ssa(sv)a(sa(sv))", (unit, "fail", properties, []))
        with open_dbus_connection(bus, auth_timeout=CALL_TIMEOUT) as connection:
            unwrap_msg(connection.send_and_get_reply(call, timeout=CALL_TIMEOUT))
        folder = _wait_for_scope(holder.pid, unit, v2_root)
    except BaseException:
        TransientScope(unit, Path(), holder).close()
        raise
    return TransientScope(unit, folder, holder)


def scope_failure(error: BaseException) -> str:
    """Why no scope was had, in a clause for the isolation report."""
    if isinstance(error, DBusErrorResponse):
        return f"the user manager refused: {error.name}: {' '.join(map(str, error.data))}"
    if isinstance(error, FileNotFoundError):
        return f"no session bus at {error.filename}" if error.filename else "no session bus"
    if isinstance(error, (ConnectionRefusedError, EOFError, AuthenticationError)):
        return "the session bus refused this node"
    if isinstance(error, TimeoutError):
        return "the session bus did not answer in time"
    return f"{type(error).__name__}: {error}"


def _wait_for_scope(pid: int, unit: str, v2_root: Path) -> Path:
    """The v2 folder `pid` was moved to, once it is the scope's (the job may finish a moment after the reply)."""
    deadline = time.monotonic() + SCOPE_SETTLE_TIMEOUT
    while True:
        try:
            line = next(line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))
        except (OSError, StopIteration):
            line = ""
        folder = v2_root / line.removeprefix("0::").lstrip("/")
        if folder.name == unit:
            return folder
        if time.monotonic() > deadline:
            raise OSError(f"the user manager made no scope {unit} for the guests (the placeholder is in {folder})")
        time.sleep(0.02)

"""A node in a user session asks the user manager for a transient scope over D-Bus and makes its guests' cgroups there.

The user manager is a stand-in on a private dbus-daemon: it records StartTransientUnit and does
what systemd does with it, making the scope's folder in the real unified hierarchy and moving the
placeholder process in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from frost_core.guest.cgroups import Mounts, current_mounts, open_guest_cgroups, remove_folder
from frost_core.guest.isolation import describe_cgroups
from tests.process.dbus import FakeService, PrivateBus
from tests.waiting import wait_for

SLICE = f"frost-test-user-{os.getpid()}.slice"


def _unified_top() -> Path:
    top = current_mounts().v2_root
    if top is None:
        pytest.skip("this kernel has no cgroup v2 hierarchy mounted")
    if os.geteuid() != 0:
        pytest.skip("needs root: the stand-in user manager makes the scope's cgroup as systemd would")
    return top


def _user_manager(address: str, top: Path, calls: list[tuple]) -> FakeService:
    def start_transient_unit(body: tuple) -> tuple:
        calls.append(body)
        unit, _, properties, _ = body
        folder = top / SLICE / unit
        folder.mkdir(parents=True)
        for pid in dict(properties)["PIDs"][1]:
            (folder / "cgroup.procs").write_text(str(pid))
        return "o", ("/org/freedesktop/systemd1/job/7",)

    return FakeService(address, "org.freedesktop.systemd1", {
        ("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "StartTransientUnit"): start_transient_unit,
    }).start()


def _remove_slice(top: Path) -> None:
    """Remove what the stand-in user manager made, deepest first, as systemd would once the scopes are empty."""
    if (top / SLICE).exists():
        (top / SLICE / "cgroup.kill").write_text("1")  # whatever a failed test left inside: only its own processes
        for folder in sorted((top / SLICE).rglob("*"), reverse=True):
            if folder.is_dir():
                remove_folder(folder)
        remove_folder(top / SLICE)


def _ended(pid: int) -> bool:
    """Gone, or a zombie waiting for whoever inherited it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def _v2_folder(pid: int) -> str:
    return next(line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


def test_the_guests_cgroups_live_in_a_transient_scope_the_user_manager_made_and_the_report_says_so(tmp_path):
    top = _unified_top()
    bus = PrivateBus(tmp_path / "bus", "session")
    calls: list[tuple] = []
    manager = _user_manager(bus.address, top, calls)
    guest = subprocess.Popen(["sleep", "60"])
    try:
        cgroups = open_guest_cgroups(Mounts(v1={}, v2=top, v2_root=top), session_bus=bus.address)
        try:
            [(unit, mode, properties, aux)] = calls
            asked = dict(properties)
            assert unit.endswith(".scope") and mode == "fail" and aux == []
            assert asked["Delegate"] == ("b", True) and asked["CPUWeight"] == ("t", 1)
            holder = cgroups.scope.holder
            assert asked["PIDs"] == ("au", [holder.pid])
            scope = top / SLICE / unit
            assert all(parent.parent == scope for parent in cgroups.parents.values())
            assert describe_cgroups(cgroups.layout).endswith(f"in the transient scope {unit} from the user manager "
                                                             "(Delegate=yes, cpu.weight 1)")
            assert not [line for line in cgroups.layout.missing
                        if line.startswith("no transient scope") or "inside the node's cgroup" in line]
            cgroup = cgroups.guest("guest-1", memory_bytes=64 << 20, pids_max=8)
            cgroup.add(guest.pid)
            assert _v2_folder(guest.pid) == f"0::/{cgroup.folder.relative_to(top)}"  # the guest is in the scope
            cgroup.freeze()
            wait_for(lambda: "frozen 1" in (cgroup.folder / "cgroup.events").read_text(), timeout=30,
                     what="the guest frozen in the scope")
        finally:
            cgroups.close()
        assert guest.wait(timeout=30) == -9  # closing killed the guest left in the scope
        assert holder.returncode is not None  # and ended the placeholder: the user manager removes the scope
    finally:
        guest.kill()
        guest.wait()
        manager.stop()
        bus.close()
        _remove_slice(top)


def test_without_a_session_bus_the_guests_cgroups_are_made_anyway_and_the_report_says_why_there_is_no_scope(tmp_path):
    top = _unified_top()
    cgroups = open_guest_cgroups(Mounts(v1={}, v2=top, v2_root=top), session_bus=f"unix:path={tmp_path / 'no-bus'}")
    try:
        assert cgroups.scope is None and cgroups.active
        assert cgroups.layout.missing[0] == ("no transient scope from the user manager (no session bus); "
                                             "the guests' cgroups are made without one")
    finally:
        cgroups.close()


NODE = """
import sys, time
from pathlib import Path
from frost_core.guest.cgroups import Mounts, open_guest_cgroups
top = Path(sys.argv[1])
cgroups = open_guest_cgroups(Mounts(v1={}, v2=top, v2_root=top), session_bus=sys.argv[2])
print(cgroups.scope.holder.pid, flush=True)
time.sleep(120)
"""


def test_the_scopes_placeholder_ends_with_a_node_killed_with_minus_9_so_the_user_manager_can_remove_the_scope(
        tmp_path):
    top = _unified_top()
    bus = PrivateBus(tmp_path / "bus", "session")
    manager = _user_manager(bus.address, top, [])
    node = subprocess.Popen([sys.executable, "-c", NODE, str(top), bus.address], stdout=subprocess.PIPE, text=True)
    try:
        holder = int(node.stdout.readline())
        assert not _ended(holder)
        node.kill()
        node.wait()
        wait_for(lambda: _ended(holder), timeout=30, what="the placeholder to end with its node")
    finally:
        node.kill()
        node.wait()
        node.stdout.close()
        manager.stop()
        bus.close()
        _remove_slice(top)

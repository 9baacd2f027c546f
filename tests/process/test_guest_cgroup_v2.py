"""The cgroup v2 backend against a real v2 hierarchy: a guest's whole process tree placed, frozen, thawed and killed.

This machine's controllers are v1's, but the unified hierarchy mounts anywhere, and its core
files (cgroup.procs, cgroup.freeze, cgroup.kill, cgroup.events) need no controller. The mount is
made in a mount namespace of a child process's own, so no other program on the machine sees it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os, subprocess, sys, time
    from pathlib import Path
    from frost_core.guest.cgroups import Mounts, open_guest_cgroups
    from tests.waiting import wait_for

    CLONE_NEWNS, MS_REC, MS_PRIVATE, MNT_DETACH = 0x00020000, 0x4000, 0x40000, 2
    libc = ctypes.CDLL(None, use_errno=True)
    top = Path(sys.argv[1])
    for call, what in ((lambda: libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)"),
                       (lambda: libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /"),
                       (lambda: libc.mount(b"none", bytes(top), b"cgroup2", 0, None), "mount -t cgroup2")):
        if call() != 0:
            print(json.dumps({"skip": f"{what}: {os.strerror(ctypes.get_errno())}"}))
            sys.exit(0)

    def cpu_ticks(pid):
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])

    def frozen(folder):
        return "frozen 1" in (folder / "cgroup.events").read_text().splitlines()

    seen = {}
    cgroups = open_guest_cgroups(Mounts(v1={}, v2=top, v2_root=top))
    seen["layout"] = [cgroups.layout.kind, list(cgroups.layout.controllers), list(cgroups.layout.missing)]
    try:
        guest = subprocess.Popen([sys.executable, "-c", "import os, sys\\nsys.stdin.readline()\\nos.fork()\\nwhile True: pass"],
                                 stdin=subprocess.PIPE)
        cgroup = cgroups.guest("guest-1", memory_bytes=64 << 20, pids_max=16)
        cgroup.add(guest.pid)  # before it forks, as the supervisor does before the unit: the fork is born inside
        guest.stdin.write(b"fork now\\n")
        guest.stdin.close()
        pids = wait_for(lambda: len(cgroup.pids()) == 2 and cgroup.pids(), timeout=30, what="the guest and its fork")
        seen["placed"] = [next(line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                               if line.startswith("0::")) for pid in pids]
        seen["folder"] = str(cgroup.folder.relative_to(top))
        cgroup.freeze()
        wait_for(lambda: frozen(cgroup.folder), timeout=30, what="the kernel to report the cgroup frozen")
        before = [cpu_ticks(pid) for pid in pids]
        time.sleep(1.0)
        seen["ticks_while_frozen"] = [cpu_ticks(pid) - b for pid, b in zip(pids, before)]
        cgroup.thaw()
        seen["thawed"] = wait_for(lambda: not frozen(cgroup.folder), timeout=30, what="the kernel to report it thawed")
        wait_for(lambda: all(cpu_ticks(pid) > b for pid, b in zip(pids, before)), timeout=60,
                 what="both processes to run again")
        cgroup.kill()
        guest.wait(timeout=30)
        wait_for(lambda: cgroup.pids() == [], timeout=30, what="the killed processes to leave the cgroup")
        seen["left_after_kill"] = cgroup.pids()
        seen["returncode"] = guest.returncode
    finally:
        cgroups.close()  # kills whatever is left, should a step above fail
    seen["parent_removed"] = not any(top.glob("frost-guests-*"))
    libc.umount2(bytes(top), MNT_DETACH)
    print(json.dumps(seen))
    """
)


def test_a_guest_tree_is_placed_frozen_thawed_and_killed_in_a_real_v2_hierarchy(tmp_path):
    top = tmp_path / "cgroup2"
    top.mkdir()
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(top)], capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    if "skip" in seen:
        pytest.skip(f"the kernel refused: {seen['skip']}")
    kind, controllers, missing = seen["layout"]
    assert kind == "v2" and "freezer" in controllers
    for controller in ("cpu", "memory", "pids"):  # each one this kernel lacks in v2 is named, with its cost
        assert (controller in controllers) != any(f"the v2 {controller} controller" in line for line in missing)
    assert seen["placed"] == [f"0::/{seen['folder']}"] * 2  # the guest and the child it forked, both inside
    assert seen["ticks_while_frozen"] == [0, 0]  # frozen at once, fork included
    assert seen["thawed"]
    assert seen["left_after_kill"] == [] and seen["returncode"] == -9
    assert seen["parent_removed"]

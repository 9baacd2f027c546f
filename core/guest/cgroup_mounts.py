"""Mount the cgroup hierarchies a node's namespace hides: `ip netns exec` gives its command a fresh /sys without them.

A node started so found no cgroup and ran its guests without memory, process or CPU cgroups. The
kernel still keeps the hierarchies (/proc/self/cgroup names them), and the node's process sits
in them; a root node mounts each at its usual place under /sys/fs/cgroup, as systemd lays them
out. `ip netns exec` made that mount namespace the command's own, so the mounts go with its last
process; elsewhere they are the standard layout, left for any other process of the namespace.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_TOP = Path("/sys/fs/cgroup")
V2_BESIDE_V1 = "unified"
"""The folder of the v2 hierarchy beside v1's (a hybrid machine); alone, v2 takes the top itself."""
MOUNT_FLAGS = 0x2 | 0x4 | 0x8  # MS_NOSUID | MS_NODEV | MS_NOEXEC


@dataclass(frozen=True)
class Hierarchy:
    """One cgroup file system to mount: its type, its mount options and its folder under the top."""

    fstype: str
    options: str
    folder: str


def hierarchies(proc_cgroup: str) -> tuple[Hierarchy, ...]:
    """The hierarchies /proc/self/cgroup lists, v1's by their controllers (named ones, such as systemd's, left out)."""
    v1: list[Hierarchy] = []
    v2 = False
    for line in proc_cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers = rest.partition(":")[0]
        if number == "0" and controllers == "":
            v2 = True
        elif controllers and not controllers.startswith("name="):
            v1.append(Hierarchy("cgroup", controllers, controllers))
    if v2:
        v1.append(Hierarchy("cgroup2", "", V2_BESIDE_V1 if v1 else ""))
    return tuple(v1)


def cgroups_mounted(mountinfo: str) -> bool:
    """Whether /proc/self/mountinfo lists any cgroup file system, even one mounted from a sub-cgroup (a container's)."""
    return any(line.partition(" - ")[2].split()[:1] in (["cgroup"], ["cgroup2"]) for line in mountinfo.splitlines())


def mount_hierarchies(proc_cgroup: str, mountinfo: str, top: Path = CGROUP_TOP) -> str:
    """Mount every hierarchy of `proc_cgroup` under `top`; "" when done, else why not (one sentence).

    Nothing is mounted over cgroup file systems already there (a container's sub-cgroups, say).
    """
    if cgroups_mounted(mountinfo):
        return "the cgroup file systems here are mounted from sub-cgroups (a container's view), and nothing is mounted over them"
    wanted = hierarchies(proc_cgroup)
    if not wanted:
        return "the kernel lists no cgroup hierarchy for this process"
    if not top.is_dir():
        return f"there is no {top} to mount them at"
    try:
        if any(h.folder for h in wanted):
            _mount("tmpfs", top, "tmpfs", "mode=755")
        for hierarchy in wanted:
            target = top / hierarchy.folder
            target.mkdir(exist_ok=True)
            _mount(hierarchy.fstype, target, hierarchy.fstype, hierarchy.options)
    except OSError as error:
        return f"mounting them at {top} failed ({error.strerror}; mounting needs root)"
    return ""


def _mount(source: str, target: Path, fstype: str, options: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source.encode(), str(target).encode(), fstype.encode(), MOUNT_FLAGS, options.encode()) != 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), str(target))

"""The pure parts of guest cgroups: where the hierarchies are, CFS quotas, kernel counters, and the v2 files written."""

from __future__ import annotations

from pathlib import Path

import pytest

from frost_core.guest.cgroups import Layout, Mounts, open_guest_cgroups, parse_counter, parse_mounts, quota_us
from frost_core.guest.isolation import describe_cgroups

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
40 31 0:36 /docker/abc /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = """\
9:pids:/
4:memory:/user.slice/session-2.scope
3:cpu,cpuacct:/user.slice
6:freezer:/
0::/user.slice/session-2.scope
"""


def test_each_controller_maps_to_this_process_folder_in_its_hierarchy():
    mounts = parse_mounts(HYBRID_MOUNTINFO, HYBRID_CGROUP)
    assert mounts.v1 == {
        "cpu": Path("/sys/fs/cgroup/cpu,cpuacct/user.slice"),
        "cpuacct": Path("/sys/fs/cgroup/cpu,cpuacct/user.slice"),
        "memory": Path("/sys/fs/cgroup/memory/user.slice/session-2.scope"),
        "freezer": Path("/sys/fs/cgroup/freezer"),
    }  # pids is mounted from a sub-cgroup (a container's view): not the hierarchy's root, not used
    assert mounts.v2 == Path("/sys/fs/cgroup/unified/user.slice/session-2.scope")


def test_a_pure_v2_machine():
    mounts = parse_mounts("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
                          "0::/system.slice/frost-tui.service\n")
    assert mounts.v1 == {}
    assert mounts.v2 == Path("/sys/fs/cgroup/system.slice/frost-tui.service")


@pytest.mark.parametrize(
    ("percent", "quota"),
    [
        (None, None),
        (0, None),       # 0 means no cap
        (50, 50_000),    # half a core: 50 ms of every 100 ms period
        (250, 250_000),  # two and a half cores
        (0.1, 1000),     # the kernel's least quota is 1 ms
    ],
)
def test_cpu_cap_as_a_cfs_quota(percent, quota):
    assert quota_us(percent) == quota


def test_counters_from_kernel_files():
    oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
    assert parse_counter(oom_control, "oom_kill") == 2
    assert parse_counter("low 0\nhigh 4\nmax 9\noom 1\noom_kill 1\n", "max") == 9
    assert parse_counter("", "max") == 0


def _fake_v2(tmp_path: Path, controllers: str) -> Mounts:
    """A folder standing in for a v2 hierarchy whose top offers `controllers`: the backend's writes land as files."""
    top = tmp_path / "cgroup2"
    top.mkdir()
    (top / "cgroup.controllers").write_text(controllers + "\n")
    return Mounts(v1={}, v2=top, v2_root=top)


def test_a_full_v2_hierarchy_gets_the_guests_weight_and_cap_and_each_guest_its_memory_and_process_limits(tmp_path):
    mounts = _fake_v2(tmp_path, "cpuset cpu io memory pids")
    cgroups = open_guest_cgroups(mounts, cpu_cap_percent=50)
    parent = cgroups.parents["cpu"]
    assert (mounts.v2 / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (parent / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (parent / "cpu.weight").read_text() == "1"  # a nice-19 weight: see the module's docstring for why not cpu.idle
    assert (parent / "cpu.max").read_text() == "50000 100000"  # half a core for all guests together
    guest = cgroups.guest("guest-1", memory_bytes=100 << 20, pids_max=64)
    assert guest is not None
    assert (guest.folder / "memory.max").read_text() == str(100 << 20)
    assert (guest.folder / "memory.high").read_text() == str((100 << 20) * 9 // 10)  # reclaim before the kill
    assert (guest.folder / "pids.max").read_text() == "64"
    assert cgroups.layout == Layout("v2", ("cpu", "memory", "pids", "freezer"), ())
    cgroups.set_cpu_cap(None)
    assert (parent / "cpu.max").read_text() == "max 100000"


def test_a_v2_hierarchy_without_controllers_still_holds_guests_and_says_which_layers_are_missing_and_why(tmp_path):
    mounts = _fake_v2(tmp_path, "hugetlb")  # what `mount -t cgroup2` offers on a machine whose controllers are v1's
    cgroups = open_guest_cgroups(mounts, cpu_cap_percent=50)
    guest = cgroups.guest("guest-1", memory_bytes=100 << 20, pids_max=64)
    assert guest is not None and guest.can_freeze  # placement, freeze and kill need no controller
    written = sorted(p.name for p in [*cgroups.parents["freezer"].iterdir(), *guest.folder.iterdir()] if p.is_file())
    assert written == []  # no cpu.weight, cpu.max, memory.max, memory.high or pids.max where the kernel has none
    assert not (mounts.v2 / "cgroup.subtree_control").exists()
    assert cgroups.layout.controllers == ("freezer",)
    missing = dict(zip(("cpu", "memory", "pids"), cgroups.layout.missing, strict=True))
    where = f"is not available at {mounts.v2} (its cgroup.controllers lists hugetlb)"
    assert missing["cpu"].startswith(f"the v2 cpu controller {where}: guests compete with programs in other cgroups")
    assert "cpu_cap_percent has no cpu.max" in missing["cpu"]
    assert missing["memory"].startswith(f"the v2 memory controller {where}: no memory.max or memory.high")
    assert missing["pids"].startswith(f"the v2 pids controller {where}: no pids.max")
    assert describe_cgroups(cgroups.layout) == "v2 (freezer)"  # no claim of a low CPU weight

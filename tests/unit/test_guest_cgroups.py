"""The pure parts of guest cgroups: where the hierarchies are, CFS quotas, kernel counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from frost_core.guest.cgroups import parse_counter, parse_mounts, quota_us

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

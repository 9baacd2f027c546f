"""Which cgroup hierarchies a node mounts where its namespace shows none (`ip netns exec`), and what it says when it cannot."""

from __future__ import annotations

from frost_core.guest.cgroup_mounts import Hierarchy, hierarchies, mount_hierarchies
from frost_core.guest.cgroups import Mounts, open_guest_cgroups


def test_a_hybrid_machine_mounts_each_v1_hierarchy_by_its_controllers_and_v2_beside_them():
    proc_cgroup = "10:name=systemd:/\n9:pids:/\n4:memory:/user.slice\n3:cpu,cpuacct:/\n0::/user.slice\n"
    assert hierarchies(proc_cgroup) == (
        Hierarchy("cgroup", "pids", "pids"),
        Hierarchy("cgroup", "memory", "memory"),
        Hierarchy("cgroup", "cpu,cpuacct", "cpu,cpuacct"),   # as the kernel joined them, or the mount is refused
        Hierarchy("cgroup2", "", "unified"),
    )   # systemd's named hierarchy holds no controller: not mounted


def test_a_pure_v2_machine_mounts_v2_at_the_top():
    assert hierarchies("0::/system.slice/frost-tui.service\n") == (Hierarchy("cgroup2", "", ""),)


NETNS_EXEC_MOUNTINFO = "48 45 0:39 / /sys rw,relatime - sysfs frost-h0 rw\n"   # `ip netns exec`'s fresh /sys


def test_what_stops_the_mounts_is_said_in_one_sentence(tmp_path):
    assert mount_hierarchies("", NETNS_EXEC_MOUNTINFO, tmp_path) == "the kernel lists no cgroup hierarchy for this process"
    assert (mount_hierarchies("4:memory:/\n", NETNS_EXEC_MOUNTINFO, tmp_path / "absent")
            == f"there is no {tmp_path / 'absent'} to mount them at")


def test_nothing_is_mounted_over_a_containers_cgroups(tmp_path):
    container = "40 31 0:36 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    # A missing `top`: should the check ever fail, this test still mounts nothing on the machine.
    assert "nothing is mounted over them" in mount_hierarchies("4:memory:/docker/abc\n", container, tmp_path / "absent")


def test_a_node_without_cgroups_says_why_in_its_cgroup_line():
    why = "no cgroup hierarchy is mounted here: mounting them at /sys/fs/cgroup failed (Operation not permitted; ...)"
    cgroups = open_guest_cgroups(Mounts(v1={}, v2=None, absent=why))
    assert cgroups.layout.kind == "none" and cgroups.layout.missing[0] == why

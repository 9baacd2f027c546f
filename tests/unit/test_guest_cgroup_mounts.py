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


def test_what_stops_the_mounts_is_said_in_one_sentence(tmp_path):
    assert mount_hierarchies("", tmp_path) == "the kernel lists no cgroup hierarchy for this process"
    assert mount_hierarchies("4:memory:/\n", tmp_path / "absent") == f"there is no {tmp_path / 'absent'} to mount them at"


def test_a_node_without_cgroups_says_why_in_its_cgroup_line():
    why = "no cgroup hierarchy is mounted here and mounting them at /sys/fs/cgroup failed (Operation not permitted; ...)"
    cgroups = open_guest_cgroups(Mounts(v1={}, v2=None, absent=why))
    assert cgroups.layout.kind == "none" and cgroups.layout.missing[0] == why

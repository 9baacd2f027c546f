"""What the containment tests need of the kernel, and test cgroups they make and always remove."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from frost_core.guest.cgroups import current_mounts, remove_folder
from frost_core.guest.confine import landlock_absence

TEST_PREFIX = "frost-test-"


def require_containment() -> None:
    """Skip, naming what is missing, only where the kernel lacks a layer; CI here has them all."""
    mounts = current_mounts()
    missing = [c for c in ("cpu", "cpuacct", "memory", "pids", "freezer") if c not in mounts.v1]
    if missing:
        pytest.skip(f"needs the cgroup v1 {', '.join(missing)} hierarchies (these tests drive v1)")
    if landlock_absence():
        pytest.skip(landlock_absence())
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups and network namespaces")


@contextlib.contextmanager
def own_cgroup(controller: str, name: str) -> Iterator[Path]:
    """A cgroup at the top of a v1 hierarchy for the test's own processes; its processes go back to the top after."""
    top = current_mounts().v1_roots[controller]
    folder = top / f"{TEST_PREFIX}{name}-{os.getpid()}"
    folder.mkdir()
    try:
        yield folder
    finally:
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                (top / "cgroup.procs").write_text(pid)
        remove_folder(folder)  # once the kernel has let its killed processes go


def move(pid: int, folder: Path) -> None:
    (folder / "cgroup.procs").write_text(str(pid))


def cpuacct_seconds(folders: list[Path]) -> float:
    return sum(int((folder / "cpuacct.usage").read_text()) for folder in folders) / 1e9

"""How this node holds its guests: its guest cgroups, the child's confinement flags and read list, the report.

Made on first use (the first guest, or the first look at the report), so a node that hosts
nothing creates no cgroups, and closed with the supervisor; a node killed with -9 leaves its
cgroups to the next node (`cgroups.remove_stale`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import stat
from pathlib import Path

from frost_core.guest.cgroups import GuestCgroup, GuestCgroups, open_guest_cgroups
from frost_core.guest.confine import readable_paths
from frost_core.guest.isolation import STRICT, IsolationReport, probe_isolation
from frost_core.guest.scope import user_session_bus
from frost_core.guest.views import GuestSettings, GuestTask

INPUTS_FOLDER = "inputs"
"""Where a guest running as another user finds its input files, in its scratch folder (see `hand_over`)."""


class Containment:
    """The isolation layers of one supervisor's guests (see cgroups.py, confine.py, isolation.py)."""

    def __init__(self, *, data_dir: Path, input_roots: tuple[Path, ...], settings: GuestSettings) -> None:
        self.data_dir = data_dir
        self.input_roots = input_roots
        """Folders holding input files guests may read (the node's file store and cache)."""
        self.settings = settings
        self.cpu_cap_percent = 0.0
        """All guests together, in percent of one core; 0 for no cap. The node's desk watch picks it (`set_cpu_cap`)."""
        self._cgroups: GuestCgroups | None = None
        self._report: IsolationReport | None = None
        self._readable: dict[str, tuple[str, ...]] = {}   # by plugin path: the same for every unit of a plugin

    def report(self) -> IsolationReport:
        """The layers a guest started now gets, and why any is missing."""
        if self._report is None:
            self._report = probe_isolation(self._open().layout, self.settings.isolation)
        return self._report

    def child_options(self) -> tuple[str, ...]:
        """The guest child's command-line flags for the steps it takes while it still has privileges."""
        report = self.report()
        options: list[str] = []
        if report.network:
            options.append("--no-network")
        if report.user.switch:
            options += ["--user", f"{report.user.uid}:{report.user.gid}"]
        if report.mode == STRICT:
            options.append("--strict")
        return tuple(options)

    def prepare_scratch(self, scratch: Path) -> None:
        """Give the scratch folder to the guest's user, where guests run as another one."""
        user = self.report().user
        if user.switch:
            os.chown(scratch, user.uid, user.gid)

    def hand_over(self, path: Path, scratch: Path) -> str:
        """Where the guest in `scratch` opens input file `path`: the node's path, or for a guest running as another user
        (who may not pass the node's folders), a link to it or else a copy of it in its scratch folder, relative to it.

        A hard link shares the file's owner and mode (the owner's files keep theirs), so it serves
        only a file others may read on the same file system; anything else is copied and given
        to the guest's user.
        """
        user = self.report().user
        if not user.switch:
            return str(path)
        folder = scratch / INPUTS_FOLDER
        folder.mkdir(exist_ok=True)
        os.chown(folder, user.uid, user.gid)
        target = folder / hashlib.sha256(str(path).encode()).hexdigest()[:32]
        if not target.exists():
            try:
                if not path.stat().st_mode & stat.S_IROTH:
                    raise PermissionError(f"{path} is not readable by others")
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)
                os.chown(target, user.uid, user.gid)
        return str(target.relative_to(scratch))

    def readable(self, task: GuestTask) -> tuple[str, ...]:
        """What `task`'s guest may read besides its scratch folder; () where Landlock is missing."""
        return self.readable_for(task.plugin_path)

    def readable_for(self, plugin_path: str) -> tuple[str, ...]:
        """What a guest running `plugin_path`'s code may read besides its scratch folder; () without Landlock."""
        if not self.report().landlock_abi:
            return ()
        if plugin_path not in self._readable:   # resolving every import path costs more than a no-op unit
            for root in self.input_roots:
                root.mkdir(parents=True, exist_ok=True)  # Landlock grants existing folders only
            secrets = (str(self.data_dir), str(Path.home()))
            self._readable[plugin_path] = readable_paths((plugin_path, *map(str, self.input_roots)), secrets=secrets)
        return self._readable[plugin_path]

    def cgroup_for(self, pid: int, task: GuestTask) -> GuestCgroup | None:
        """Put process `pid` into a new cgroup sized for `task`; None where there are no cgroups.

        Call before the guest is given its unit: whatever it forks later is born inside.
        Raises OSError when the kernel refuses (the caller decides, by `guests.isolation`).
        """
        return self.cgroup_sized(pid, task.unit.memory_bytes)

    def cgroup_sized(self, pid: int, memory_bytes: int) -> GuestCgroup | None:
        """`cgroup_for` a guest that declared it needs `memory_bytes` (a gang member, which has no unit)."""
        return self._contained(pid, memory_bytes + self.settings.memory_slack_bytes)

    def _contained(self, pid: int, memory_bytes: int | None) -> GuestCgroup | None:
        cgroup = self._open().guest(f"guest-{pid}", memory_bytes=memory_bytes, pids_max=self.settings.max_processes)
        if cgroup is not None:
            try:
                cgroup.add(pid)
            except OSError:
                cgroup.remove()
                raise
        return cgroup

    def spare_cgroup(self, pid: int) -> GuestCgroup | None:
        """Put a warm spare `pid` into a new cgroup of its own, without a memory limit until `size_for` sets its
        unit's: making the folders took 0.5-16 ms on the node's event loop (v1, five hierarchies), sizing
        them 0.1 ms, so a moved-in unit's start no longer waits for the mkdirs.

        It runs no plugin code before its unit's GuestStart, which comes after `size_for`."""
        return self._contained(pid, None)

    def size_for(self, cgroup: GuestCgroup, task: GuestTask) -> None:
        """Give a spare's cgroup `task`'s memory limit (raises OSError as `cgroup_for` does)."""
        cgroup.limit_memory(task.unit.memory_bytes + self.settings.memory_slack_bytes)

    def set_cpu_cap(self, percent: float) -> None:
        """Cap all guests together at `percent` of one core (0: none), at once for those running: the owner came
        to the desk or left it, or changed the setting."""
        if percent != self.cpu_cap_percent and self._cgroups is not None:
            self._cgroups.set_cpu_cap(percent)
        self.cpu_cap_percent = percent

    def update_settings(self, settings: GuestSettings) -> None:
        if self._report is not None:
            self._report = dataclasses.replace(self._report, mode=settings.isolation)
        self.settings = settings

    def close(self) -> None:
        """Remove this node's guest cgroups, killing any guest still in them."""
        if self._cgroups is not None:
            self._cgroups.close()
            self._cgroups = None
            self._report = None

    def _open(self) -> GuestCgroups:
        if self._cgroups is None:
            self._cgroups = open_guest_cgroups(cpu_cap_percent=self.cpu_cap_percent,
                                               session_bus=user_session_bus())
        return self._cgroups

"""A cgroup per guest under a low-weight parent: across cgroups only weights count, so a guest's class alone loses.

Autogroups and SCHED_IDLE rank tasks inside one cgroup; a node in `system.slice` and the owner's
apps in their own scopes compete by cgroup weight, and a SCHED_IDLE guest took 69 % of a core.
Weights do not climb either: an idle cgroup *inside* the node's cgroup still took 44 % of a
core from hogs in a sibling of the node's cgroup, and one at the top of the hierarchy took 0 %.
So the guests' CPU parent sits at the top of the cpu hierarchy where the node may write there,
and inside the node's own cgroup otherwise (reported as a missing layer). It weighs what a
nice-19 autogroup weighs (`cpu.shares = 15`; `cpu.weight = 1` in v2), the weight the priority
recipe gives a guest among sessions, now also across cgroups: against a hog in another cgroup
that is 1.4 % of the contested core. Not `cpu.idle = 1`: at load 16 on this 2-core machine an
idle parent got no CPU at all for seconds on end (0 ticks in 5 s, the recipe 4-5), and a guest
that never runs cannot even answer a checkpoint request or an eviction. Memory, pids and
freezer parents sit inside the node's cgroup, so whatever limits the node has also bound its
guests. These cgroups cap each guest's memory (children and page cache included) and process
count, and freeze its whole process tree at once for a pause.

Three backends: cgroup v2 (root's hierarchy or a delegated subtree), cgroup v1 (one parent per
writable hierarchy) and none (the priority recipe alone; `missing` says why). A v2 hierarchy that
lacks the cpu, memory or pids controller (a hybrid machine's, whose controllers are v1's) is used
only where v1 has no cpu hierarchy: it still places, freezes and kills a guest's whole tree, and
`missing` names each absent controller and the layer it takes away (`v2_missing`). Parents are named
after the node's pid, so a node killed with -9 leaves parents the next node finds and removes
(`remove_stale`). Where the node's namespace shows no hierarchy at all (`ip netns exec` mounts a fresh
/sys), cgroup_mounts.py mounts them first.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import errno
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from frost_core.guest.cgroup_mounts import mount_hierarchies
from frost_core.guest.kernel_files import read_kernel_file
from frost_core.guest.scope import SCOPE_FAILURES, TransientScope, scope_failure, start_scope

PARENT_PREFIX = "frost-guests-"
CFS_PERIOD_US = 100_000
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids", "freezer")
V2_CONTROLLERS = ("cpu", "memory", "pids")
REMOVE_TRIES = 50
REMOVE_DELAY = 0.02
GUEST_SHARES = 15  # a nice-19 task's (and autogroup's) CFS weight; a nice-0 one has 1024
GUEST_WEIGHT = 1  # v2's least cpu.weight (100 is the default): 15 / 1024 maps below 2
_numbers = itertools.count(1)  # several supervisors in one process (tests) each get their own parents


@dataclass(frozen=True)
class Mounts:
    """Where each cgroup hierarchy is mounted and where this process sits in it (from /proc)."""

    v1: dict[str, Path]
    """Controller -> the directory of this process's cgroup in that v1 hierarchy."""
    v2: Path | None
    """This process's cgroup directory in the unified hierarchy, if one is mounted."""
    v1_roots: dict[str, Path] = dataclasses.field(default_factory=dict)
    """Controller -> where its v1 hierarchy is mounted (its top)."""
    v2_root: Path | None = None
    absent: str = "no cgroup hierarchy is mounted"
    """Why no hierarchy is mounted, where none is."""


def parse_mounts(mountinfo: str, proc_cgroup: str) -> Mounts:
    """Join /proc/self/mountinfo and /proc/self/cgroup: the cgroup directory of this process per controller."""
    v1_roots: dict[str, Path] = {}
    v2_root: Path | None = None
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if len(fields) < 5 or len(tail_fields) < 3 or fields[3] != "/":
            continue  # a bind mount of a sub-cgroup (containers) is not the hierarchy's root
        kind, mount_point, options = tail_fields[0], Path(fields[4]), tail_fields[2].split(",")
        if kind == "cgroup2":
            v2_root = mount_point
        elif kind == "cgroup":
            for controller in options:
                if controller in V1_CONTROLLERS:
                    v1_roots[controller] = mount_point
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in proc_cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        relative = path.lstrip("/")
        if number == "0" and controllers == "" and v2_root is not None:
            v2 = v2_root / relative
        for controller in controllers.split(","):
            if controller in v1_roots:
                v1[controller] = v1_roots[controller] / relative
    return Mounts(v1=v1, v2=v2, v1_roots=v1_roots, v2_root=v2_root)


def current_mounts() -> Mounts:
    try:
        return parse_mounts(Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text())
    except OSError:
        return Mounts(v1={}, v2=None)


def visible_mounts() -> Mounts:
    """`current_mounts`, the hierarchies mounted first where this process's namespace shows none (`ip netns exec`)."""
    mounts = current_mounts()
    if mounts.v1 or mounts.v2 is not None:
        return mounts
    failure = mount_hierarchies(_read(Path("/proc/self/cgroup")), _read(Path("/proc/self/mountinfo")))
    if failure:
        return dataclasses.replace(mounts, absent=f"no cgroup hierarchy is mounted here: {failure}")
    return current_mounts()


def quota_us(cap_percent: float | None, period_us: int = CFS_PERIOD_US) -> int | None:
    """The CFS quota per period for a cap in percent of one core; None for no cap (0 or None)."""
    if not cap_percent or cap_percent <= 0:
        return None
    return max(int(period_us * cap_percent / 100), 1000)  # the kernel's least quota is 1 ms


def parse_counter(text: str, name: str) -> int:
    """The value of `name` in a flat keyed file (memory.events, pids.events, memory.oom_control)."""
    match = re.search(rf"^{re.escape(name)} (\d+)$", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read(path: Path) -> str:
    try:
        return read_kernel_file(path)
    except OSError:
        return ""


def _pids(folder: Path) -> list[int]:
    return [int(word) for word in _read(folder / "cgroup.procs").split()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_folder(folder: Path) -> None:
    """rmdir a cgroup once its killed processes are reaped (they leave it only then)."""
    for _ in range(REMOVE_TRIES):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
            time.sleep(REMOVE_DELAY)
    folder.rmdir()


class GuestCgroup:
    """One guest's cgroup: a folder per hierarchy (one in v2). Every call is a few small file writes."""

    def __init__(self, folders: dict[str, Path], version: int) -> None:
        self.folders = folders
        self.version = version

    def add(self, pid: int) -> None:
        """Move `pid` in; do it before the guest runs plugin code, so everything it forks follows."""
        for folder in dict.fromkeys(self.folders.values()):
            _write(folder / "cgroup.procs", str(pid))

    def limit_memory(self, memory_bytes: int) -> None:
        """Cap the memory of everything in it at `memory_bytes`, swap included."""
        folder = self.folders.get("memory")
        if folder is None:
            return
        if self.version == 2:
            _write(folder / "memory.high", str(memory_bytes * 9 // 10))
            _write(folder / "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap, no file
                _write(folder / "memory.swap.max", "0")
        else:
            _write(folder / "memory.limit_in_bytes", str(memory_bytes))
            with contextlib.suppress(OSError):  # without swap accounting there is no memsw file
                _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes))

    @property
    def folder(self) -> Path:
        """The one folder of a v2 cgroup (the first of v1's)."""
        return next(iter(self.folders.values()))

    def pids(self) -> list[int]:
        folder = self.folders.get("freezer") or self.folders.get("pids") or next(iter(self.folders.values()))
        return _pids(folder)

    @property
    def can_freeze(self) -> bool:
        return "freezer" in self.folders

    def freeze(self) -> None:
        """Stop every process of the guest at once, forks included (the caller checks `can_freeze`)."""
        if self.version == 2:
            _write(self.folders["freezer"] / "cgroup.freeze", "1")
        else:
            _write(self.folders["freezer"] / "freezer.state", "FROZEN")

    def thaw(self) -> None:
        if not self.can_freeze:
            return
        if self.version == 2:
            _write(self.folders["freezer"] / "cgroup.freeze", "0")
        else:
            _write(self.folders["freezer"] / "freezer.state", "THAWED")

    def kill(self) -> None:
        """SIGKILL every process in the guest, including those that left its process group."""
        if self.version == 2 and (self.folder / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.folder / "cgroup.kill", "1")
                return
        # Frozen, nothing can fork between reading the list and the signals; a v1 freezer holds
        # even SIGKILL back until the thaw, which is why the thaw comes last.
        with contextlib.suppress(OSError):
            if self.can_freeze:
                self.freeze()
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.thaw()

    def memory_kills(self) -> int:
        """How often the kernel's OOM killer killed a process of this guest for its memory limit."""
        folder = self.folders.get("memory")
        if folder is None:
            return 0
        if self.version == 2:
            return parse_counter(_read(folder / "memory.events"), "oom_kill")
        return parse_counter(_read(folder / "memory.oom_control"), "oom_kill")

    def fork_refusals(self) -> int:
        """How often a fork of this guest was refused for its process limit."""
        folder = self.folders.get("pids")
        return parse_counter(_read(folder / "pids.events"), "max") if folder else 0

    def cpu_seconds(self) -> float | None:
        """CPU used by every process of the guest, exited children included; None without accounting."""
        if self.version == 2:  # cpu.stat counts usage_usec even without the cpu controller
            usec = parse_counter(_read(self.folder / "cpu.stat"), "usage_usec")
            return usec / 1e6
        folder = self.folders.get("cpuacct")
        if folder is None:
            return None
        text = _read(folder / "cpuacct.usage").strip()
        return int(text) / 1e9 if text else None

    def remove(self) -> None:
        """Kill what is left and delete the folders."""
        self.kill()
        for folder in dict.fromkeys(self.folders.values()):
            with contextlib.suppress(OSError):
                remove_folder(folder)


@dataclass(frozen=True)
class Layout:
    """Which cgroup backend is in force and why the rest is missing: the isolation report's cgroup line."""

    kind: str
    """"v2", "v1" or "none"."""
    controllers: tuple[str, ...]
    missing: tuple[str, ...]
    """Why a controller (or every cgroup) is not in force, one sentence each."""
    where: str = ""
    """Where the parents sit when that is news for the owner (a transient scope)."""


class GuestCgroups:
    """The parent cgroup of this node's guests; `open_guest_cgroups` makes one (or the "none" stand-in)."""

    def __init__(self, parents: dict[str, Path], version: int, layout: Layout,
                 scope: TransientScope | None = None) -> None:
        self.parents = parents
        self.version = version
        self.layout = layout
        self.scope = scope
        """The user manager's scope the parents sit in (a node in a user session), ended with them."""

    @property
    def active(self) -> bool:
        return bool(self.parents)

    def guest(self, name: str, *, memory_bytes: int | None, pids_max: int) -> GuestCgroup | None:
        """A new cgroup for one guest with its memory and process limits; None when there are no cgroups.

        `memory_bytes` None: no memory limit yet (a warm spare's, set with `limit_memory` before its unit)."""
        if not self.parents:
            return None
        folders: dict[str, Path] = {}
        for controller, parent in self.parents.items():
            folder = parent / name
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            folders[controller] = folder
        cgroup = GuestCgroup(folders, self.version)
        if memory_bytes is not None:
            cgroup.limit_memory(memory_bytes)
        if "pids" in folders:
            _write(folders["pids"] / "pids.max", str(pids_max))
        return cgroup

    def set_cpu_cap(self, cap_percent: float | None) -> None:
        """Cap all guests together at `cap_percent` of one core (None or 0: no cap)."""
        quota = quota_us(cap_percent)
        if self.version == 2 and "cpu" in self.parents:
            _write(self.parents["cpu"] / "cpu.max", f"{quota if quota else 'max'} {CFS_PERIOD_US}")
        elif "cpu" in self.parents:
            _write(self.parents["cpu"] / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(self.parents["cpu"] / "cpu.cfs_quota_us", str(quota if quota else -1))

    def close(self) -> None:
        """Kill any guest still inside and remove every folder this node made."""
        for parent in dict.fromkeys(self.parents.values()):
            _remove_tree(parent)
        if self.scope is not None:
            self.scope.close()
            self.scope = None


def _remove_tree(parent: Path) -> None:
    if not parent.is_dir():
        return
    for child in parent.iterdir():
        if child.is_dir():
            _remove_tree(child)
    for pid in _pids(parent):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for thaw, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):  # v1 and v2 hold SIGKILL while frozen
        if (parent / thaw).exists():
            with contextlib.suppress(OSError):
                _write(parent / thaw, value)
    with contextlib.suppress(OSError):
        remove_folder(parent)


def remove_stale(folders: list[Path]) -> list[Path]:
    """Remove guest parents in `folders` whose node is gone (killed with -9); returns those removed."""
    removed = []
    for folder in folders:
        for entry in _entries(folder):
            pid = entry.name.removeprefix(PARENT_PREFIX).partition(".")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                _remove_tree(entry)
                removed.append(entry)
    return removed


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(entry for entry in folder.iterdir() if entry.name.startswith(PARENT_PREFIX) and entry.is_dir())
    except OSError:
        return []


def open_guest_cgroups(mounts: Mounts | None = None, *, cpu_cap_percent: float | None = None,
                       session_bus: str | None = None) -> GuestCgroups:
    """Make this node's guest parent cgroups with the best backend the machine grants; never raises.

    A node in a user session (`session_bus`, see `scope.user_session_bus`) first asks the user
    manager for a transient scope and makes its parent there.
    """
    mounts = mounts or visible_mounts()
    name = f"{PARENT_PREFIX}{os.getpid()}.{next(_numbers)}"
    if session_bus is None or mounts.v2_root is None:
        return _open_here(mounts, name, cpu_cap_percent)
    try:
        return _closed_at_exit(_open_in_scope(session_bus, name, mounts.v2_root, cpu_cap_percent))
    except SCOPE_FAILURES as error:
        cgroups = _open_here(mounts, name, cpu_cap_percent)
        why = f"no transient scope from the user manager ({scope_failure(error)}); the guests' cgroups are made without one"
        cgroups.layout = dataclasses.replace(cgroups.layout, missing=(why, *cgroups.layout.missing))
        return cgroups


def _open_here(mounts: Mounts, name: str, cpu_cap_percent: float | None) -> GuestCgroups:
    """The guest parents wherever this node may write: the top of a hierarchy, or its own cgroup."""
    reasons: list[str] = []
    v2_controllers = set(_read(mounts.v2 / "cgroup.controllers").split()) if mounts.v2 is not None else set()
    # A v2 hierarchy without the cpu, memory or pids controller still freezes, kills and holds a
    # guest's whole process tree; v1's hierarchies, where mounted, hold more.
    if mounts.v2 is not None and (set(V2_CONTROLLERS) <= v2_controllers or "cpu" not in mounts.v1):
        top = mounts.v2_root if mounts.v2_root is not None else mounts.v2
        remove_stale(list(dict.fromkeys((top, mounts.v2))))
        for home in dict.fromkeys((top, mounts.v2)):
            try:
                cgroups = _open_v2(home, name, nested=home != top)
            except OSError as error:
                reasons.append(f"cgroup v2 at {home} is not delegated to this node: {error.strerror}")
            else:
                cgroups.set_cpu_cap(cpu_cap_percent)
                return _closed_at_exit(cgroups)
    if "cpu" in mounts.v1:
        homes = {c: mounts.v1_roots.get(c, folder) if c == "cpu" else folder for c, folder in mounts.v1.items()}
        remove_stale(list(dict.fromkeys((*homes.values(), *mounts.v1.values()))))
        cgroups = _open_v1(homes, name, cpu_nested=homes["cpu"] == mounts.v1["cpu"] != mounts.v1_roots.get("cpu"))
        if "cpu" not in cgroups.parents and homes["cpu"] != mounts.v1["cpu"]:
            cgroups.close()
            cgroups = _open_v1({**homes, "cpu": mounts.v1["cpu"]}, name, cpu_nested=True)
        if cgroups.active:
            cgroups.set_cpu_cap(cpu_cap_percent)
            return _closed_at_exit(cgroups)
        reasons.extend(cgroups.layout.missing)
    elif not mounts.v1 and mounts.v2 is None:
        reasons.append(mounts.absent)
    else:
        reasons.append("the v1 cpu hierarchy is not mounted")
    return GuestCgroups({}, 0, Layout("none", (), (
        *reasons, "guests run with the priority recipe alone and may compete with programs in other cgroups",
    )))


def _open_in_scope(bus: str, name: str, v2_root: Path, cpu_cap_percent: float | None) -> GuestCgroups:
    """The guest parent inside a transient scope the user manager delegates to this node."""
    scope = start_scope(bus, f"{name}.scope", v2_root, GUEST_WEIGHT)
    where = f"in the transient scope {scope.unit} from the user manager (Delegate=yes, cpu.weight {GUEST_WEIGHT})"
    try:
        cgroups = _open_v2(scope.folder, name, nested=True, where=where)  # its own scope: no one else's weight to share
        cgroups.set_cpu_cap(cpu_cap_percent)
    except BaseException:
        scope.close()
        raise
    cgroups.scope = scope
    return cgroups


def _closed_at_exit(cgroups: GuestCgroups) -> GuestCgroups:
    """Remove the folders when the interpreter exits, should nobody close them first (closing twice is harmless)."""
    atexit.register(cgroups.close)
    return cgroups


def _nested_warning(folder: Path) -> str:
    return (f"the guests' CPU parent is inside the node's cgroup {folder} (the top of the hierarchy is not "
            "writable here), so programs in other cgroups weigh the same as the node and its guests together")


def _open_v2(home: Path, name: str, *, nested: bool, where: str = "") -> GuestCgroups:
    """A guest parent in `home`: the top of the unified hierarchy, or the node's delegated cgroup.

    cgroup v2 forbids processes in a cgroup whose children use controllers, so in its own
    cgroup the node's processes move to `<its cgroup>/node` before the controllers are enabled.
    Placement, cgroup.freeze and cgroup.kill need no controller; each missing one is a sentence
    in the layout's `missing`. `where` names a home of the node's own (a scope), which is no
    nested CPU parent to warn of.
    """
    available = set(_read(home / "cgroup.controllers").split())
    controllers = tuple(c for c in V2_CONTROLLERS if c in available)
    missing = tuple(v2_missing(c, home, available) for c in V2_CONTROLLERS if c not in available)
    if nested and not where and "cpu" in controllers:
        missing += (_nested_warning(home),)
    parent = _v2_parent(home, name, controllers, nested=nested)
    kept = controllers + ("freezer",)
    return GuestCgroups(dict.fromkeys(kept, parent), 2, Layout("v2", kept, missing, where))


def v2_missing(controller: str, home: Path, available: set[str]) -> str:
    """Which layer a missing v2 controller takes away, and why it is missing, in one sentence."""
    lists = ", ".join(sorted(available)) or "no controller"
    why = f"the v2 {controller} controller is not available at {home} (its cgroup.controllers lists {lists})"
    return why + {
        "cpu": ": guests compete with programs in other cgroups by the priority recipe alone, and "
               "guests.cpu_cap_percent has no cpu.max to set",
        "memory": ": no memory.max or memory.high, so a guest's memory is held by RLIMIT_AS and the node's "
                  "RSS poll alone, which its children and page cache escape",
        "pids": ": no pids.max, so a guest's forks are held by no process limit",
    }[controller]


def _v2_parent(home: Path, name: str, controllers: tuple[str, ...], *, nested: bool) -> Path:
    enable = " ".join(f"+{c}" for c in controllers)
    if enable and nested and _pids(home):
        leaf = home / "node"
        leaf.mkdir(exist_ok=True)
        for pid in _pids(home):
            with contextlib.suppress(ProcessLookupError):
                _write(leaf / "cgroup.procs", str(pid))
    if enable:
        _write(home / "cgroup.subtree_control", enable)
    parent = home / name
    parent.mkdir(exist_ok=True)
    try:
        if enable:
            _write(parent / "cgroup.subtree_control", enable)
        if "cpu" in controllers:
            _write(parent / "cpu.weight", str(GUEST_WEIGHT))
    except OSError:
        _remove_tree(parent)
        raise
    return parent


def _open_v1(homes: dict[str, Path], name: str, *, cpu_nested: bool) -> GuestCgroups:
    """One parent per hierarchy in `homes` (controller -> folder); cpu's gets the guests' weight."""
    parents: dict[str, Path] = {}
    reasons: list[str] = []
    for controller in V1_CONTROLLERS:
        if controller not in homes:
            reasons.append(f"the v1 {controller} hierarchy is not mounted")
            continue
        parent = homes[controller] / name
        try:
            parent.mkdir(exist_ok=True)
        except OSError as error:
            reasons.append(f"cannot create a cgroup in the v1 {controller} hierarchy: {error.strerror}")
            continue
        parents[controller] = parent
    if "cpu" in parents:
        try:
            _write(parents["cpu"] / "cpu.shares", str(GUEST_SHARES))
        except OSError as error:
            reasons.append(f"cannot lower the guests' CPU weight: {error.strerror}")
            _remove_tree(parents.pop("cpu"))
    if "cpu" not in parents:
        for parent in dict.fromkeys(parents.values()):
            _remove_tree(parent)
        return GuestCgroups({}, 0, Layout("none", (), tuple(reasons)))
    if cpu_nested:
        reasons.append(_nested_warning(homes["cpu"]))
    return GuestCgroups(parents, 1, Layout("v1", tuple(parents), tuple(reasons)))

"""Whose CPU is whose: the node's own process tree, its control clients, and idle-priority programs are not the owner.

Linux: one read of /proc/<pid>/stat per process gives parent, nice, scheduling policy, CPU time
and the CPU time of children already reaped (cutime/cstime), so a probe, a plugin check or a
guest that exited between two readings still counts as the node's. Elsewhere psutil gives parent,
nice and CPU time but no scheduling policy: SCHED_IDLE programs are then only recognised by nice
19, and `ProcessTable.missing` says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

PROC = Path("/proc")
LINUX_PROC = (PROC / "self" / "stat").exists()
SCHED_IDLE = 5          # Linux's policy number in /proc/<pid>/stat field 41
IDLE_NICE = 19


@dataclass(frozen=True)
class ProcStat:
    """One process as the attribution needs it; CPU in seconds."""

    pid: int
    ppid: int
    nice: int
    policy: int | None      # None where the OS does not tell
    own: float              # user + system of the process itself
    reaped: float           # user + system of its children it has waited for
    start: float            # start time (ticks since boot on Linux): with the pid, a process's identity

    @property
    def idle_priority(self) -> bool:
        return self.nice >= IDLE_NICE or self.policy == SCHED_IDLE


@dataclass(frozen=True)
class ProcessTable:
    processes: Mapping[int, ProcStat]
    uptime: float | None        # seconds since boot, in `start`'s units divided by ticks (Linux), else None
    missing: str | None         # what this OS does not let us see, said once in `status`


def parse_stat(text: str, ticks: float) -> ProcStat:
    """Parse /proc/<pid>/stat; the command name may hold spaces and parentheses, so split at the last ')'."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()
    # fields[0] is field 3 (state): field n is fields[n - 3].
    return ProcStat(
        pid=pid, ppid=int(fields[1]), nice=int(fields[16]), policy=int(fields[38]) if len(fields) > 38 else None,
        own=(int(fields[11]) + int(fields[12])) / ticks, reaped=(int(fields[13]) + int(fields[14])) / ticks,
        start=int(fields[19]) / ticks,
    )


def read_small(path: str) -> str:
    """A small /proc file's text with one open, read and close: a third of Path.read_text's CPU, which the
    sampler paid for every process on the machine every second (an idle node's largest cost)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)


def read_processes(proc: Path = PROC) -> ProcessTable:
    """Every process now, from /proc where there is one, from psutil elsewhere."""
    if (proc / "self" / "stat").exists():
        ticks = float(os.sysconf("SC_CLK_TCK"))
        table = {}
        with os.scandir(proc) as entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    stat = parse_stat(read_small(f"{entry.path}/stat"), ticks)
                except (OSError, ValueError, IndexError):
                    continue        # gone since the listing, or unreadable
                table[stat.pid] = stat
        try:
            uptime = float(read_small(f"{proc}/uptime").split()[0])
        except (OSError, ValueError, IndexError):
            uptime = None
        return ProcessTable(table, uptime, None)
    table = {}
    for process in psutil.process_iter(["ppid", "nice", "cpu_times", "create_time"]):
        info = process.info
        times = info.get("cpu_times")
        if times is None or info.get("nice") is None:
            continue
        table[process.pid] = ProcStat(
            pid=process.pid, ppid=info["ppid"] or 0, nice=int(info["nice"]), policy=None,
            own=times.user + times.system,
            reaped=getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0),
            start=info["create_time"] or 0.0,
        )
    return ProcessTable(table, None, "no /proc here: SCHED_IDLE programs are recognised by nice 19 only, "
                                     "and exited children only where the OS reports children's CPU")


def descendants(processes: Mapping[int, ProcStat], roots: Iterable[int]) -> set[int]:
    """The roots (those alive) and every process below them."""
    children: dict[int, list[int]] = {}
    for stat in processes.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in processes]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_seconds(processes: Mapping[int, ProcStat], members: Iterable[int]) -> float:
    """CPU a tree has used so far: each member's own time plus its reaped children's.

    Summed again at the next reading, the difference is exactly what the tree used in between,
    children that started and exited in between included: a reaped child leaves the sum and
    reappears, whole, in its parent's reaped time.
    """
    return sum(processes[pid].own + processes[pid].reaped for pid in members)


@dataclass(frozen=True)
class NotOwner:
    """CPU seconds of one interval that were not the owner's, by whose they were."""

    node: float             # this node's process tree: itself, probe, plugin checks, spare, guests
    clients: float          # control-socket clients (CLI calls, an attached UI) while connected
    idle_priority: float    # other programs at nice 19 or SCHED_IDLE (unless counted as the owner's)

    @property
    def total(self) -> float:
        return self.node + self.clients + self.idle_priority


FRESH_CLIENT = 5.0
"""A client this young (seconds) was started to talk to the node: its start-up (a CLI's imports,
~0.3 s of a core before it connects) is the node's too, not only what it uses while connected."""


class ControlClients:
    """Processes connected to the control socket now, each counted while connected (and a fresh one from its start)."""

    def __init__(self, seconds: Callable[[int], float | None] | None = None,
                 age: Callable[[int], float | None] | None = None) -> None:
        self._seconds = seconds or _process_seconds
        self._age = age or _process_age
        self._open: dict[int, tuple[int, float]] = {}   # pid -> (connections, CPU seconds already attributed)
        self._left = 0.0                                # seconds of clients gone since the last `take`

    def connected(self, pid: int) -> None:
        count, base = self._open.get(pid, (0, None))
        if base is None:
            base = self._seconds(pid)
            if base is None:
                return
            age = self._age(pid)
            if age is not None and age < FRESH_CLIENT:
                base = 0.0
        self._open[pid] = (count + 1, base)

    def disconnected(self, pid: int) -> None:
        if pid not in self._open:
            return
        count, base = self._open.pop(pid)
        now = self._seconds(pid)
        if now is not None:
            self._left += max(now - base, 0.0)
        if count > 1:
            self._open[pid] = (count - 1, now if now is not None else base)

    def pids(self) -> set[int]:
        return set(self._open)

    def take(self) -> float:
        """CPU seconds the clients used since the last call (their reaped children included)."""
        total, self._left = self._left, 0.0
        for pid, (count, base) in list(self._open.items()):
            now = self._seconds(pid)
            if now is None:
                continue
            total += max(now - base, 0.0)
            self._open[pid] = (count, now)
        return total


def _linux_stat(pid: int) -> ProcStat | None:
    try:
        return parse_stat(read_small(f"{PROC}/{pid}/stat"), float(os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError):
        return None


def _process_age(pid: int) -> float | None:
    if LINUX_PROC:  # every control call connects and leaves: /proc directly, not psutil's three files
        stat = _linux_stat(pid)
        try:
            return None if stat is None else float(read_small(f"{PROC}/uptime").split()[0]) - stat.start
        except (OSError, ValueError, IndexError):
            return None
    try:
        return time.time() - psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _process_seconds(pid: int) -> float | None:
    if LINUX_PROC:
        stat = _linux_stat(pid)
        return None if stat is None else stat.own + stat.reaped
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)


class Attribution:
    """Reading after reading, how much CPU was not the owner's (`NotOwner`)."""

    def __init__(self, clients: ControlClients | None = None, *, count_idle_priority: bool = False,
                 own_pid: int | None = None, read: Callable[[], ProcessTable] = read_processes) -> None:
        self.clients = clients or ControlClients()
        self.count_idle_priority = count_idle_priority
        self.own_pid = own_pid or os.getpid()
        self._read = read
        self.missing: str | None = None
        table = read()
        self._last_tree = self._tree_seconds(table)
        self._last_idle = self._idle_times(table)
        self._last_uptime = table.uptime

    def _tree_seconds(self, table: ProcessTable) -> float:
        return tree_seconds(table.processes, descendants(table.processes, [self.own_pid]))

    def _idle_times(self, table: ProcessTable) -> dict[tuple[int, float], float]:
        ours = descendants(table.processes, [self.own_pid, *self.clients.pids()])
        return {(s.pid, s.start): s.own for s in table.processes.values() if s.idle_priority and s.pid not in ours}

    def read(self) -> ProcessTable:
        """Every process now: ~8 ms for 150 processes on a busy 2-core machine, so the sampler reads in a thread."""
        return self._read()

    def take(self, table: ProcessTable | None = None) -> NotOwner:
        """What was not the owner's since the last call, from `table` (read now if not given)."""
        table = table if table is not None else self._read()
        self.missing = table.missing
        tree = self._tree_seconds(table)
        node = max(tree - self._last_tree, 0.0)
        idle_now = self._idle_times(table)
        idle = 0.0
        for key, seconds in idle_now.items():
            before = self._last_idle.get(key)
            if before is not None:
                idle += max(seconds - before, 0.0)
            elif self._last_uptime is not None and key[1] >= self._last_uptime:
                idle += seconds     # started since the last reading: all of it is in this interval
        self._last_tree, self._last_idle, self._last_uptime = tree, idle_now, table.uptime
        return NotOwner(node=node, clients=self.clients.take(),
                        idle_priority=0.0 if self.count_idle_priority else idle)

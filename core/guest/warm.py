"""Guest processes between two units of one assignment: kept a few seconds, so the next unit skips a start.

A fresh guest costs ~0.1 s and ~0.1 CPU-s before its unit does anything, most of what a small
unit costs. A process whose unit completed has imported the plugin and confined itself for
that plugin, folder and memory cap; it waits here, blocked on its pipe (no CPU), until the next
unit with the same `WarmKey` takes it, the idle timeout passes, or the owner, a cancelled
assignment or the node stops it. Only completed units' processes wait: a failed or evicted one
never runs another unit.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import signal
from collections.abc import Callable
from pathlib import Path

import psutil
import trio

from frost_core.guest.spawn import Child, close_child, remove_folder
from frost_core.guest.views import GuestTask

WARM_IDLE_SECONDS = 5.0
"""How long a process waits for the next unit of its assignment: placing it takes milliseconds."""

OUTPUT_FOLDER = "out"
"""The folder a unit's output files go in (the guest child makes it in its scratch folder for every unit)."""

IDLE_FOLDER = ".idle-"
"""A waiting process's folder under the scratch root is this and its pid (task ids cannot start with a dot)."""

WarmKey = tuple[str, str, str, int]
"""(master, assignment id, plugin hash, memory bytes): units that may share one confined process."""


def warm_key(task: GuestTask) -> WarmKey:
    return (task.origin, task.assignment_id, task.plugin_hash, task.unit.memory_bytes)


class IdleGuests:
    """Processes that completed a unit, by `WarmKey`, each in its own emptied folder under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.serving = False
        """Processes are kept only while `serve` runs: it is what ends them."""
        self._idle: dict[WarmKey, list[tuple[Child, float]]] = {}
        self._doomed: list[Child] = []
        self._changed = trio.Event()

    async def serve(self) -> None:
        """End each process once it has waited `WARM_IDLE_SECONDS`; runs until cancelled, then ends them all."""
        self.serving = True
        try:
            while True:
                now = trio.current_time()
                doomed, self._doomed = self._doomed, []
                for child in doomed:
                    await end(child)
                await self._close_where(lambda key, until: until <= now)
                deadline = min((until for waiting in self._idle.values() for _, until in waiting), default=math.inf)
                self._changed = trio.Event()
                with trio.move_on_at(deadline):
                    await self._changed.wait()
        finally:
            self.serving = False
            with trio.CancelScope(shield=True):
                for child in self._doomed:
                    await end(child)
                self._doomed = []
                await self._close_where(lambda key, until: True)

    async def park(self, key: WarmKey, child: Child) -> bool:
        """Keep `child` for the next unit of `key` once its folder is empty (but for its empty out/ folder);
        False if it cannot be (the caller ends it)."""
        scratch, folder = child.scratch, self.root / f"{IDLE_FOLDER}{child.process.pid}"
        assert scratch is not None
        if not self.serving or child.process.returncode is not None or not alone(child):
            return False
        if not _left_nothing(scratch) and not await trio.to_thread.run_sync(_empty, scratch):
            return False
        if not await _rename(scratch, folder):
            return False
        child.scratch = folder
        self._idle.setdefault(key, []).append((child, trio.current_time() + WARM_IDLE_SECONDS))
        self._changed.set()
        return True

    async def take(self, key: WarmKey, scratch: Path) -> Child | None:
        """A live process waiting for a unit of `key`, its folder renamed to `scratch`; None if none waits."""
        waiting = self._idle.get(key, [])
        while waiting:
            child, _ = waiting.pop()
            if not waiting:
                del self._idle[key]
            if child.process.returncode is not None:  # killed from outside meanwhile
                await end(child)
                continue
            assert child.scratch is not None
            if not await _rename(child.scratch, scratch):
                await end(child)
                continue
            child.scratch = scratch
            return child
        return None

    async def close(self, which: Callable[[WarmKey], bool] = lambda key: True) -> int:
        """End the waiting processes whose key `which` picks (all by default); how many there were."""
        return await self._close_where(lambda key, until: which(key))

    def end_soon(self) -> None:
        """Kill every waiting process now (from code that cannot wait); `serve` reaps them."""
        for waiting in self._idle.values():
            for child, _ in waiting:
                if child.cgroup is not None:
                    child.cgroup.kill()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                self._doomed.append(child)
        self._idle.clear()
        self._changed.set()

    async def _close_where(self, which: Callable[[WarmKey, float], bool]) -> int:
        doomed = []
        for key, waiting in list(self._idle.items()):
            doomed += [child for child, until in waiting if which(key, until)]
            kept = [(child, until) for child, until in waiting if not which(key, until)]
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        for child in doomed:
            await end(child)
        return len(doomed)


async def end(child: Child) -> None:
    """Kill a process that has run a unit, remove its cgroup and its folder."""
    with trio.CancelScope(shield=True):
        if child.cgroup is not None:
            child.cgroup.kill()
        await close_child(child)
        if child.cgroup is not None:
            await trio.to_thread.run_sync(child.cgroup.remove)
        if child.scratch is not None:
            await trio.to_thread.run_sync(remove_folder, child.scratch)


def alone(child: Child) -> bool:
    """Only the guest's own thread is left: nothing its unit started (a thread, a fork) would run on,
    holding CPU and seeing the next unit's files, while it waits."""
    pid = child.process.pid
    try:
        if _threads(pid) != 1:
            return False
        if child.cgroup is not None:
            return child.cgroup.pids() == [pid]   # whatever it forked was born inside, grandchildren too
        return not _has_children(pid)
    except (psutil.Error, OSError):
        return False


def _threads(pid: int) -> int:
    """How many threads `pid` has: one stat of its task folder where Linux has one (it counts two links
    plus one per thread), not a parse of its whole status file, once per unit."""
    try:
        return os.stat(f"/proc/{pid}/task").st_nlink - 2
    except FileNotFoundError:   # not Linux (or the process is gone: psutil says so)
        return psutil.Process(pid).num_threads()


def _has_children(pid: int) -> bool:
    """Whether `pid` (one thread) has a child: from its own /proc entry where Linux has one, since
    psutil's `children()` reads every process on the machine, once per unit."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as listed:
            return bool(listed.read().strip())
    except FileNotFoundError:   # not Linux, or a kernel without CONFIG_PROC_CHILDREN
        return bool(psutil.Process(pid).children())


def _left_nothing(scratch: Path) -> bool:
    """Whether `scratch` holds nothing but the empty out/ folder each unit is given: a look, on the loop,
    that writes nothing. Removing even that folder would wait for the disk's journal (an rmdir took 3 ms
    of wall time, 80 ms at worst, beside other programs' fsyncs), so it stays for the next unit."""
    try:
        with os.scandir(scratch) as listing:
            entries = [entry for entry, _ in zip(listing, range(2))]
        if not entries:
            return True
        if len(entries) > 1 or entries[0].name != OUTPUT_FOLDER or not entries[0].is_dir(follow_symlinks=False):
            return False
        with os.scandir(entries[0].path) as inside:
            return next(inside, None) is None
    except OSError:
        return False


def _empty(scratch: Path) -> bool:
    """Remove everything in `scratch` (the next unit must see none of it); False if anything is left
    (a plugin can make a folder its node cannot empty): that process is not reused."""
    try:
        with os.scandir(scratch) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    remove_folder(Path(entry.path))
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        return not any(os.scandir(scratch))
    except OSError:
        return False


async def _rename(old: Path, new: Path) -> bool:
    """Rename a waiting process's folder, on the loop (one syscall) unless a folder of a unit that ran here
    before is in the way and must be removed first, in a thread; False if it cannot be renamed."""
    try:
        os.rename(old, new)
        return True
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            return False
    try:
        await trio.to_thread.run_sync(_replace_folder, old, new)
    except OSError:
        return False
    return True


def _replace_folder(old: Path, new: Path) -> None:
    if new.is_dir() and not new.is_symlink():
        remove_folder(new)
    else:
        new.unlink(missing_ok=True)
    os.rename(old, new)

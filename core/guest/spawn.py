"""Guest processes: start one at the lowest priority behind its pipes, keep warm spares, close them for good."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import trio

from frost_core.guest.cgroups import GuestCgroup
from frost_core.guest.handoff import open_handoff
from frost_core.guest.priority import PriorityView
from frost_core.wire.channel import Channel

SPARE_FOLDER = ".spare"
"""Where the warm spares wait, under the scratch root (task ids cannot start with a dot)."""
SPARE_CHECK_INTERVAL = 5.0
"""Seconds between checks that the spares are still wanted (the owner may turn them off)."""
PIPE_BUFFER_BYTES = 1 << 20
"""Buffer of the guest pipes where the OS lets us choose it (see `widen_pipe`)."""


@dataclasses.dataclass(eq=False)
class Child:
    """A guest process and the pipe channel to it, before or after it is given its unit.

    Once it has run a unit it keeps what it was confined to, for the next unit it may run
    (see `warm.py`): its scratch folder, its cgroup and its priority floor.
    """

    process: trio.Process
    channel: Channel
    handoff: socket.socket | None = None
    """The node's end of the socket a unit's saved state is handed over on (see handoff.py); None where there is none."""
    scratch: Path | None = None
    cgroup: GuestCgroup | None = None
    floor: PriorityView | None = None
    units: int = 0
    """Units it has run to their result."""
    cpu_seen: float = 0.0
    cgroup_cpu_seen: float = 0.0
    fork_refusals: int = 0
    rss: int = 0
    """Its CPU time, its cgroup's, its forks refused and its memory, as last read for the unit it ran: where its
    next unit's figures start (it waits blocked on its pipe in between), without reading them again."""
    _seen: psutil.Process | None = dataclasses.field(default=None, repr=False)

    def seen(self) -> psutil.Process:
        """The process as psutil sees it, made once for all its units: a new `psutil.Process` reads its
        /proc entry again (raises `psutil.NoSuchProcess` if it is gone)."""
        if self._seen is None:
            self._seen = psutil.Process(self.process.pid)
        return self._seen


class WarmSpare:
    """Guest processes started ahead of need, waiting in the spare folder for a unit: one per guest CPU.

    An assignment's first units start together, one per CPU. With a single spare, every unit after the
    first started a process from nothing, at the lowest priority, beside the warm process already running
    units: a two-CPU node's second slot sat 0.1-0.9 s on such a start, and a run's first ~100 no-op units
    went through one process, their results coming one at a time to the node's event loop.
    """

    def __init__(self, folder: Path, wanted: Callable[[], int], options: Callable[[], tuple[str, ...]],
                 contain: Callable[[int], GuestCgroup | None]) -> None:
        self.folder = folder
        self.wanted = wanted
        """How many spares should wait now: the guest CPUs, or 0 (the owner's `warm_spare` setting, read at each
        check)."""
        self.options = options
        """The child's confinement options of the moment (see `start_child`)."""
        self.contain = contain
        """Puts a new spare's pid into a cgroup of its own, ahead of its unit (raises OSError if refused: its
        unit's start then contains it)."""
        self._spares: list[Child] = []
        self._taken = trio.Event()
        self._starting = False       # between starting a spare and adding it to the ones waiting
        self._added = trio.Event()   # set (and replaced) each time that ends

    async def keep_warm(self) -> None:
        """Keep `wanted()` spares started and waiting; runs until cancelled.

        Starting the interpreter and importing the guest runtime is ~0.1 s, most of what a
        small unit's move or start costs; a spare has done it already. It lowered itself to
        guest priority first and then blocks on its pipe: no CPU, ~15 MiB of memory. It waits
        in a cgroup of its own (`contain`), which gets its unit's memory limit before its unit,
        and learns its unit, scratch folder and memory cap from GuestStart.
        """
        await trio.to_thread.run_sync(fresh_folder, self.folder)
        try:
            while True:
                for dead in [s for s in self._spares if s.process.returncode is not None]:
                    self._spares.remove(dead)  # killed from outside: start another
                    await close_spare(dead)
                wanted = self.wanted()
                while len(self._spares) > wanted:
                    await close_spare(self._spares.pop())
                while len(self._spares) < wanted:
                    self._starting = True
                    try:
                        spare = await start_child(self.folder, self.options())
                        try:
                            with contextlib.suppress(OSError):
                                spare.cgroup = await trio.to_thread.run_sync(self.contain, spare.process.pid)
                        except BaseException:  # cancelled before it was ours to close in `finally` below
                            await close_spare(spare)
                            raise
                        self._spares.append(spare)
                    finally:
                        self._starting = False
                        self._added.set()
                        self._added = trio.Event()
                self._taken = trio.Event()
                with trio.move_on_after(SPARE_CHECK_INTERVAL):
                    await self._taken.wait()
        finally:
            spares, self._spares = self._spares, []
            for spare in spares:
                await close_spare(spare)

    async def take(self) -> Child | None:
        """A spare, if one waits and is still alive; `keep_warm` then starts the next.

        One that is being started is waited for: its process is already there and its cgroup a thread hop
        away, while a process of the unit's own would start its interpreter from nothing (~0.1 s). (Two
        units that start together on two CPUs met that race, and the second started its own.)
        """
        while not self._spares and self._starting:
            await self._added.wait()
        if not self._spares:
            return None
        spare = self._spares.pop(0)
        self._taken.set()
        if spare.process.returncode is not None:  # killed from outside meanwhile
            await close_spare(spare)
            return None
        return spare


async def close_spare(spare: Child) -> None:
    """`close_child`, and remove the cgroup it waited in (even when cancelled)."""
    await close_child(spare)
    if spare.cgroup is not None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(spare.cgroup.remove)


async def start_child(folder: Path, options: tuple[str, ...] = ()) -> Child:
    """Start a guest process in `folder`: it lowers its priority at once, then waits for GuestStart.

    `options` are the child's confinement flags (`--no-network`, `--user UID:GID`, `--strict`):
    steps that need the node's privileges, taken before it drops them.
    """
    to_child_read, to_child_write = os.pipe()
    from_child_read, from_child_write = os.pipe()
    for pipe_end in (to_child_write, from_child_write):
        widen_pipe(pipe_end)
    handoff = open_handoff()
    node_end, guest_end = handoff if handoff else (None, None)
    given = (to_child_read, from_child_write) + ((guest_end,) if guest_end is not None else ())
    command = [
        sys.executable, "-P", "-m", "frost_core.guest.child",
        "--read-fd", str(to_child_read), "--write-fd", str(from_child_write),
        *(("--handoff-fd", str(guest_end)) if guest_end is not None else ()), *options,
    ]
    try:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=given,
            start_new_session=True,  # its own session, so its own autogroup (see priority.py)
            cwd=folder,
            env=guest_environment(folder),
        )
    except BaseException:
        os.close(to_child_write)
        os.close(from_child_read)
        if node_end is not None:
            node_end.close()
        raise
    finally:
        for fd in given:
            os.close(fd)
    channel = Channel(trio.lowlevel.FdStream(to_child_write), trio.lowlevel.FdStream(from_child_read))
    return Child(process, channel, handoff=node_end)


def widen_pipe(fd: int) -> None:
    """Give a pipe 1 MiB of buffer where the OS allows (Linux), from the usual 64 KiB.

    A state crosses the pipe in 64 KiB turns otherwise, and the guest, at the lowest priority,
    may wait for a CPU at each turn: on a busy machine a 10 MiB state took ten times longer.
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return  # macOS and the BSDs size pipes themselves
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size for an unprivileged node
        fcntl.fcntl(fd, set_size, PIPE_BUFFER_BYTES)


async def close_child(child: Child) -> None:
    """Kill the process group (if still there), wait for it, close every pipe; even when cancelled,
    as nothing else holds the process once its caller let go of it."""
    with trio.CancelScope(shield=True):
        if child.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
        await child.process.wait()
        for stream in (child.process.stdout, child.process.stderr):
            if stream is not None:
                await stream.aclose()
        await child.channel.aclose()
        if child.handoff is not None:
            child.handoff.close()


def fresh_folder(folder: Path) -> None:
    """An empty folder only the node can read, whatever was there before; OSError if what was there stays."""
    remove_folder(folder)
    folder.mkdir(parents=True, mode=0o700)


def remove_folder(folder: Path) -> bool:
    """Remove `folder` and everything in it; True once it is gone.

    A guest that runs as the node's own user may leave folders it made read-only (as some tools make their
    caches), whose entries plain removal cannot unlink: those folders are given back to the node (mode 700),
    then removed. Links are never followed: a folder is opened with O_NOFOLLOW before its mode changes.
    """
    if os.path.islink(folder) or os.path.lexists(folder) and not os.path.isdir(folder):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder)
        return not os.path.lexists(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if not os.path.lexists(folder):
        return True
    _give_back(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return not os.path.lexists(folder)


def _give_back(folder: Path | str, dir_fd: int | None = None) -> None:
    """Mode 700 on `folder` and every folder below it, top down, each opened without following a link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(folder, flags, dir_fd=dir_fd)
    except PermissionError:  # not even readable (mode 000): its mode is set through its parent, then opened
        try:
            os.chmod(folder, 0o700, dir_fd=dir_fd)
            fd = os.open(folder, flags, dir_fd=dir_fd)
        except OSError:
            return
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o700)
        try:
            names = [entry.name for entry in os.scandir(fd) if entry.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for name in names:
            _give_back(name, fd)
    finally:
        os.close(fd)


def guest_environment(scratch: Path) -> dict[str, str]:
    """A small environment: no secrets of the node's, temp files in the scratch folder."""
    env = {
        "PATH": os.defpath,
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env

"""Plugin worker processes, and one started ahead of need, so a split or combine skips the interpreter's start.

A worker's start (interpreter, then `frost_core.plugin.worker`'s imports) took ~70 ms of a split's or a
combine's ~75 ms: twice per assignment, one after the other with its units, 0.14 s of a 20-unit raytrace
that two plain processes finish in ~0.5 s. The spare has done it and blocks on its stdin (no CPU,
~15 MiB) until a request comes; it still answers that one request and exits, as any worker does, so no
plugin code ever runs twice in one process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import trio

CHECK_INTERVAL = 5.0
"""Seconds between two looks at a waiting spare (killed from outside? still wanted?) when nobody takes it."""


async def start_worker() -> trio.Process:
    """A fresh worker in its own session (its group is killed at the end), waiting for its request on stdin."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # keep plugin folders as they were hashed
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "frost_core.plugin.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )


def kill_worker(process: trio.Process) -> None:
    """Kill the worker and anything it started; it ran in its own session (pgid = pid)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


async def close_worker(process: trio.Process) -> None:
    """Kill a worker nobody asked anything, wait for it and close its pipes, even when cancelled."""
    kill_worker(process)
    with trio.CancelScope(shield=True):
        await process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                await stream.aclose()


class SpareWorker:
    """One worker process started ahead of need, waiting for a request; `take` hands it over."""

    def __init__(self, wanted: Callable[[], bool]) -> None:
        self.wanted = wanted
        """Whether a spare should wait now (the owner's `guests.warm_spare`, read at each look)."""
        self._spare: trio.Process | None = None
        self._taken = trio.Event()

    async def keep_warm(self) -> None:
        """Keep one spare started and waiting while `wanted()` says so; runs until cancelled, then ends it."""
        try:
            while True:
                if self._spare is not None and (self._spare.returncode is not None or not self.wanted()):
                    gone, self._spare = self._spare, None
                    await close_worker(gone)
                if self._spare is None and self.wanted():
                    with contextlib.suppress(OSError):  # no process to spare now (fork refused): the next look tries
                        self._spare = await start_worker()
                self._taken = trio.Event()
                with trio.move_on_after(CHECK_INTERVAL):
                    await self._taken.wait()
        finally:
            spare, self._spare = self._spare, None
            if spare is not None:
                await close_worker(spare)

    @property
    def pid(self) -> int | None:
        """The waiting spare's process id; None while none waits."""
        return None if self._spare is None else self._spare.pid

    async def take(self) -> trio.Process | None:
        """The waiting spare, if there is one still alive (`keep_warm` then starts the next)."""
        spare, self._spare = self._spare, None
        self._taken.set()
        if spare is not None and spare.returncode is not None:  # killed from outside meanwhile
            await close_worker(spare)
            return None
        return spare

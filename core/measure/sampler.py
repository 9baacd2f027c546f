"""The live information sampler: owner CPU, guest share, available resources, smoothed.

The node calls `await sampler.sample()` from a trio task every interval at normal priority.
Each reading is cheap (CPU counters); every `probe_every` readings with no guest running,
a short probe runs at guest priority in a subprocess to check what a guest would really get.
The owner's CPU is the machine's busy time minus what was not the owner's (`processes.Attribution`:
this node's tree, its control clients, idle-priority programs), averaged over `cpu_window` seconds.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil
import trio

from frost_core.policies.information import smooth
from frost_core.policies.owner import DeskVerdict, OwnerView, windowed_share
from frost_core.measure.owner_activity import read_pressure
from frost_core.measure.probe import probe_share
from frost_core.measure.processes import Attribution, NotOwner

log = logging.getLogger("frost.measure")

PSI_SPAN = 10.0     # seconds PSI's avg10 covers: a guest that ran within them inflates the cpu figure


@dataclass(frozen=True)
class ResourceReading:
    """One interval's figures; `available` is smoothed over the window, in speed units."""

    at: float
    wall_seconds: float
    available: float
    instant_available: float
    owner_cpu_percent: float                # this interval, percent of one core (the chart's figure)
    guest_cpu_percent: float
    probe_share: float | None
    input_idle: float | None
    memory_pressure: float | None           # PSI memory some avg10
    cpu_pressure: float | None              # PSI cpu some avg10, None while guests ran within its span
    cpu_share: float = 0.0                  # owner CPU, percent of all cores, averaged over the window
    not_owner: NotOwner = NotOwner(0.0, 0.0, 0.0)   # this interval's CPU seconds that were not the owner's

    def owner_view(self, desk: tuple[DeskVerdict, ...] = ()) -> OwnerView:
        return OwnerView(self.cpu_share, self.input_idle, self.memory_pressure, self.cpu_pressure,
                         interval=self.wall_seconds, desk=desk)


def _busy_and_idle(times) -> tuple[float, float]:
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = sum(times)
    # guest/guest_nice are already counted in user/nice on Linux.
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return total - idle, idle


class ResourceSampler:
    """Reads the machine every interval; `guest_pids` tells which processes are guests."""

    def __init__(self, speed: float, guest_pids: Callable[[], Iterable[int]], *, cpus: int | None = None,
                 window: int = 5, probe_every: int = 30, probe_seconds: float = 0.1,
                 clock: Callable[[], float] = time.monotonic, attribution: Attribution | None = None,
                 cpu_window: float = 2.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive (calibrate it first)")
        self.speed = speed
        self.cpus = cpus or os.cpu_count() or 1
        self.guest_pids = guest_pids
        self.window: deque[float] = deque(maxlen=window)
        self.probe_every = probe_every
        self.probe_seconds = probe_seconds
        self.clock = clock
        self.attribution = attribution or Attribution()
        self.cpu_window = cpu_window
        self._owner_intervals: deque[tuple[float, float]] = deque(maxlen=600)   # (wall, owner CPU seconds)
        self._guest_cpu: dict[int, float] = {}
        self._guest_ran_at = float("-inf")
        self._last_wall = clock()
        self._last_busy, self._last_idle = _busy_and_idle(psutil.cpu_times())
        self._count = 0

    def _guest_delta(self) -> float:
        """CPU seconds guests used since the last reading (children included, gone ones dropped)."""
        delta, seen = 0.0, {}
        for pid in self.guest_pids():
            try:
                process = psutil.Process(pid)
                times = process.cpu_times()
            except psutil.Error:
                continue
            total = times.user + times.system + times.children_user + times.children_system
            seen[pid] = total
            delta += max(total - self._guest_cpu.get(pid, total), 0.0)
        self._guest_cpu = seen
        return delta

    async def _probe(self) -> float | None:
        """A probe's share, or None if its subprocess could not start or did not answer (no memory for a process
        now, an interpreter upgraded under the node): this reading goes on without one."""
        try:
            return await probe_share(self.probe_seconds)
        except (OSError, subprocess.CalledProcessError, ValueError) as error:
            log.warning("the guest-priority probe failed (%s); this reading has none", error)
            return None

    async def sample(self, input_idle: float | None = None) -> ResourceReading:
        """Take one reading; awaits a probe subprocess now and then, never blocks the loop."""
        self._count += 1
        probe = None
        guests_running = bool(self._guest_cpu) or any(True for _ in self.guest_pids())
        if not guests_running and (self._count == 1 or self._count % self.probe_every == 0):
            probe = await self._probe()
        table = await trio.to_thread.run_sync(self.attribution.read)   # first: the wall time ends with it
        now = self.clock()
        wall = max(now - self._last_wall, 1e-6)
        busy, idle = _busy_and_idle(psutil.cpu_times())
        not_owner = self.attribution.take(table)
        guest = self._guest_delta()
        if guest > 0.01 * wall:
            self._guest_ran_at = now
        busy_delta = max(busy - self._last_busy, 0.0)
        idle_delta = max(idle - self._last_idle, 0.0)
        if probe is not None:
            # What a guest would get: the probe's CPU counts as a guest's for the availability.
            guest += probe * self.probe_seconds
        self._last_wall, self._last_busy, self._last_idle = now, busy, idle
        # Guests, the probe and plugin checks are in the node's tree: all of it leaves here.
        owner_seconds = max(busy_delta - not_owner.total, 0.0)
        self._owner_intervals.append((wall, owner_seconds))
        instant = min((guest + idle_delta) / wall, float(self.cpus)) * self.speed
        if probe is not None:
            # Idle CPU time overstates what a guest gets when the owner's sessions would win
            # the CPU back at once; the guest-priority probe is the ground truth (FROST 5.1).
            instant = min(instant, probe * self.speed * self.cpus)
        self.window.append(instant)
        memory = read_pressure("memory")
        cpu = read_pressure("cpu")
        return ResourceReading(
            at=now, wall_seconds=wall, available=smooth(self.window), instant_available=instant,
            owner_cpu_percent=100.0 * owner_seconds / wall, guest_cpu_percent=100.0 * guest / wall,
            probe_share=probe, input_idle=input_idle,
            memory_pressure=memory.some_avg10 if memory else None,
            # Runnable guests wait for a CPU too: PSI cpu means the owner's waiting only once none ran.
            cpu_pressure=cpu.some_avg10 if cpu and now - self._guest_ran_at >= PSI_SPAN else None,
            cpu_share=windowed_share(tuple(self._owner_intervals), self.cpus, self.cpu_window),
            not_owner=not_owner,
        )

"""This machine as the policies see it: what a guest gets here, and what the owner is doing.

Each interval the node asks for one `MachineState`: the information policy's reading (measured
at normal priority, FROST 5.1) and the owner policy's decision on it, which the node then
carries out. The extremities are measured once per machine and kept in the cache directory.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from frost_core.api.errors import ConfigError
from frost_core.config import Config
from frost_core.measure.calibrate import Extremities, load_or_measure
from frost_core.measure.processes import Attribution, ControlClients
from frost_core.measure.sampler import ResourceReading, ResourceSampler
from frost_core.policies.owner import DeskVerdict, OwnerDecision, OwnerPolicy, OwnerSettings


@dataclass(frozen=True)
class MachineState:
    reading: ResourceReading
    decision: OwnerDecision


def owner_settings(config: Config) -> OwnerSettings:
    return OwnerSettings(
        policy=config.get("owner.policy"), busy_cpu_percent=config.get("owner.busy_cpu_percent"),
        input_idle=config.get("owner.input_idle"), memory_pressure=config.get("owner.memory_pressure"),
        evict_after=config.get("owner.evict_after"), resume_after=config.get("owner.resume_after"),
        evict_hold=config.get("owner.evict_hold"),
    )


class MachineWatch:
    def __init__(self, config: Config, guest_pids) -> None:
        self._guest_pids = guest_pids
        self.clients = ControlClients()     # the control socket reports who is connected: not the owner
        self._count_idle_priority = config.get("owner.count_idle_priority")
        self._cpu_window = config.get("owner.cpu_window")
        self._extremities_file: Path = config.paths.extremities_file
        self.owner = OwnerPolicy(owner_settings(config))
        self.clock = time.monotonic
        """The owner policy's clock, its readings' (`ResourceReading.at`): the times its decisions hold (when a
        suspension ends, when the hold after an eviction does) are on it, never on the wall clock."""
        # Known from the start where a run before measured them: the ledger prices the first runs by this
        # machine's speed, and a report the start sends at once must not count them at 1.0.
        self.extremities: Extremities | None = None
        with contextlib.suppress(ConfigError):
            self.extremities = Extremities.load(self._extremities_file) if self._extremities_file.exists() else None
        self.last: MachineState | None = None
        self._sampler: ResourceSampler | None = None

    async def start(self) -> None:
        """Load the extremities, or measure them (a few seconds, in a thread) on this machine's first run; those read
        as the watch was built stand."""
        if self.extremities is None:
            self.extremities = await trio.to_thread.run_sync(load_or_measure, self._extremities_file)
        attribution = Attribution(self.clients, count_idle_priority=self._count_idle_priority)
        self._sampler = ResourceSampler(self.extremities.speed, self._guest_pids, attribution=attribution,
                                        cpu_window=self._cpu_window, clock=self.clock)

    async def remeasure(self) -> Extremities:
        """Measure the extremities again (new hardware, a changed machine) and use them from the next reading.

        The measurement runs in a thread: it keeps every CPU busy for about a second.
        """
        self.extremities = await trio.to_thread.run_sync(load_or_measure, self._extremities_file, True)
        if self._sampler is not None:
            self._sampler.speed = self.extremities.speed
        return self.extremities

    @property
    def started(self) -> bool:
        return self._sampler is not None

    def update_settings(self, config: Config) -> None:
        self.owner.settings = owner_settings(config)
        self._count_idle_priority = config.get("owner.count_idle_priority")
        self._cpu_window = config.get("owner.cpu_window")
        if self._sampler is not None:
            self._sampler.attribution.count_idle_priority = self._count_idle_priority
            self._sampler.cpu_window = self._cpu_window

    @property
    def accounting_gaps(self) -> str | None:
        """What this OS hides from the owner's CPU accounting (None: nothing)."""
        return self._sampler.attribution.missing if self._sampler is not None else None

    async def sample(self, leave_after: float | None = None, desk: tuple[DeskVerdict, ...] = (),
                     movable: bool = True, input_idle: float | None = None) -> MachineState:
        """One reading and the owner policy's decision on it; `leave_after` is what moving the
        guests away would cost and `movable` whether there are guests and a peer to move them to
        (`OwnerPolicy.decide`); `desk` are the desk rules' verdicts (battery, heat, programs,
        schedules), each one more input; `input_idle` is what the desktop session says (`measure.presence`)."""
        assert self._sampler is not None, "MachineWatch.start() first"
        reading = await self._sampler.sample(input_idle)
        decision = self.owner.decide(reading.owner_view(desk), reading.at, leave_after, movable)
        self.last = MachineState(reading=reading, decision=decision)
        return self.last

    def accounting(self) -> str:
        """What the last reading did not count as the owner's, and what this OS hides ("" before a reading)."""
        if self.last is None:
            return ""
        reading, gaps = self.last.reading, self.accounting_gaps
        spared = reading.not_owner
        text = (f"not the owner's in the last {reading.wall_seconds:.1f} s: this node {spared.node:.2f} s of CPU, "
                f"control clients {spared.clients:.2f} s, idle-priority programs {spared.idle_priority:.2f} s")
        return f"{text}; {gaps}" if gaps else text

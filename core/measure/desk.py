"""The desk as its rules see it: presence from the session, battery, temperatures and the owner's named programs."""

from __future__ import annotations

import os
from datetime import datetime

import psutil
import trio

from frost_core.config import Config
from frost_core.measure.presence import Presence, PresenceReader
from frost_core.policies.desk import (
    Battery, DeskReadings, DeskSettings, cpu_cap_in_force, judge_desk, memory_pool_in_force, parse_schedule,
)
from frost_core.policies.owner import DeskVerdict


def read_battery() -> Battery | None:
    """The battery's charge and whether the charger is in; None on a machine without one (or an OS psutil cannot ask)."""
    try:
        battery = psutil.sensors_battery()
    except (AttributeError, OSError):
        return None
    if battery is None:
        return None
    # psutil says None when it cannot tell if the charger is in: only a discharging battery suspends.
    return Battery(percent=float(battery.percent), plugged=battery.power_plugged is not False)


def read_temperatures() -> tuple[tuple[str, float], ...] | None:
    """Every temperature sensor as ("chip label", °C); None where the OS shows none (VMs, most containers)."""
    try:
        chips = psutil.sensors_temperatures()
    except (AttributeError, OSError):
        return None
    sensors = tuple((f"{chip} {entry.label}".strip(), float(entry.current))
                    for chip, entries in chips.items() for entry in entries if entry.current is not None)
    return sensors or None


def running_programs(names: tuple[str, ...]) -> frozenset[str]:
    """Which of `names` run now, by process name or executable file name (the kernel cuts names at 15 bytes)."""
    if not names:
        return frozenset()
    wanted = frozenset(names)
    found = set()
    for process in psutil.process_iter(["name", "exe"]):
        info = process.info
        candidates = {info.get("name") or "", os.path.basename(info.get("exe") or "")}
        found |= wanted & candidates
    return frozenset(found)


def read_desk(settings: DeskSettings, input_idle: float | None) -> DeskReadings:
    """One reading of what the desk rules in `settings` need (a rule that is off reads nothing); `input_idle`
    from the presence reader."""
    return DeskReadings(
        battery=read_battery() if settings.on_battery else None,
        temperatures=read_temperatures() if settings.max_temperature > 0 else None,
        programs=running_programs(settings.programs), input_idle=input_idle,
    )


def desk_settings(config: Config) -> DeskSettings:
    return DeskSettings(
        on_battery=config.get("desk.on_battery"), max_temperature=config.get("desk.max_temperature"),
        programs=tuple(config.get("desk.programs")), schedule=parse_schedule(config.get("desk.schedule")),
        cpu_cap_percent=config.get("guests.cpu_cap_percent"),
        cpu_cap_in_use_percent=config.get("guests.cpu_cap_in_use_percent"), input_idle=config.get("owner.input_idle"),
        memory_pool_bytes=config.memory_pool_bytes,
        memory_pool_in_use_bytes=config.get("guests.memory_pool_in_use_mb") << 20,
    )


class DeskWatch:
    """Each interval: who is at the desk and what the desk rules say, read off the node's loop."""

    def __init__(self, config: Config, presence: PresenceReader | None = None) -> None:
        self.settings = desk_settings(config)
        self.presence = presence or PresenceReader()
        self.verdicts: tuple[DeskVerdict, ...] = ()
        self._input_idle: float | None = None

    def update_settings(self, config: Config) -> None:
        self.settings = desk_settings(config)

    @property
    def cpu_cap_percent(self) -> float:
        """The guests' CPU cap in force by the last presence reading and the settings now (0: none)."""
        return cpu_cap_in_force(self.settings, self._input_idle)

    @property
    def memory_pool_bytes(self) -> int:
        """The memory guests may hold together by the last presence reading and the settings now."""
        return memory_pool_in_force(self.settings, self._input_idle)

    async def read(self) -> tuple[Presence, tuple[DeskVerdict, ...]]:
        """One reading in a worker thread (D-Bus calls and the process scan block, each briefly), then the rules."""
        settings = self.settings

        def read_blocking() -> tuple[Presence, DeskReadings]:
            presence = self.presence.read_blocking()
            return presence, read_desk(settings, presence.idle_seconds)

        presence, readings = await trio.to_thread.run_sync(read_blocking)
        self._input_idle = presence.idle_seconds
        self.verdicts = judge_desk(readings, settings, datetime.now(), self.verdicts)
        return presence, self.verdicts

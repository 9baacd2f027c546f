"""The desk's own sensors for the desk rules: battery, temperatures and the owner's named programs."""

from __future__ import annotations

import os

import psutil

from frost_core.policies.desk import Battery, DeskReadings, DeskSettings


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


def read_desk(settings: DeskSettings) -> DeskReadings:
    """One reading of what the desk rules in `settings` need (a rule that is off reads nothing)."""
    return DeskReadings(
        battery=read_battery() if settings.on_battery else None,
        temperatures=read_temperatures() if settings.max_temperature > 0 else None,
        programs=running_programs(settings.programs),
    )

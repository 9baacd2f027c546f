"""The owner's footprint: pressure stall figures and input idle time, where the OS tells them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

PRESSURE_DIR = Path("/proc/pressure")


@dataclass(frozen=True)
class Pressure:
    """One /proc/pressure/* file: percent of time some (or all) tasks stalled, over 10 s and 60 s."""

    some_avg10: float
    some_avg60: float
    full_avg10: float | None
    full_avg60: float | None


def parse_pressure(text: str) -> Pressure:
    """Parse the kernel's PSI format; a malformed file raises ValueError naming the line."""
    figures: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        kind, _, rest = line.partition(" ")
        try:
            figures[kind] = {key: float(value) for key, value in (item.split("=") for item in rest.split())}
        except ValueError as error:
            raise ValueError(f"unreadable pressure line {line!r}") from error
    some, full = figures.get("some"), figures.get("full")
    if some is None or not {"avg10", "avg60"} <= some.keys():
        raise ValueError("pressure file without a complete 'some' line")
    if full is not None and not {"avg10", "avg60"} <= full.keys():
        raise ValueError("pressure file with an incomplete 'full' line")
    return Pressure(some["avg10"], some["avg60"], full["avg10"] if full else None, full["avg60"] if full else None)


def read_pressure(resource: str, root: Path = PRESSURE_DIR) -> Pressure | None:
    """PSI for cpu, memory or io; None where the kernel has no PSI (older kernels, macOS, BSD)."""
    try:
        return parse_pressure((root / resource).read_text())
    except (OSError, ValueError):
        return None


def input_idle_seconds(now: float | None = None) -> float | None:
    """Seconds since the last keyboard, mouse or terminal input, or None if the OS does not say.

    Terminals: a tty's access time moves on every keystroke (what `w` shows as IDLE).
    Input devices: /dev/input/event* access times, readable by stat without permission.
    """
    now = time.time() if now is None else now
    latest: float | None = None
    paths = []
    try:
        paths += [Path("/dev") / user.terminal for user in psutil.users() if user.terminal]
    except (OSError, psutil.Error):
        pass    # no utmp here (containers): fall back on input devices alone
    devices = Path("/dev/input")
    if devices.is_dir():
        paths += list(devices.glob("event*"))
    for path in paths:
        try:
            stamp = os.stat(path).st_atime
        except OSError:
            continue
        latest = stamp if latest is None else max(latest, stamp)
    return None if latest is None else max(now - latest, 0.0)

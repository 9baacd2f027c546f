"""The information policy's arithmetic: comparable figures, smoothing, tendency, memory."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class Tendency(IntEnum):
    """Where a reading lies against the thresholds: two equal tendencies in a row allow action."""

    BELOW = -1
    WITHIN = 0
    ABOVE = 1


def available_power(cpus: int, load: float, speed: float) -> float:
    """BSPlib's available power, (cpus − load) × speed, never negative."""
    return max(cpus - load, 0.0) * speed


def guest_available(guest_cpu_seconds: float, wall_seconds: float, speed: float) -> float:
    """What lowest-priority processes obtained (FROST 5.1), in speed units: share of a CPU × speed.

    `guest_cpu_seconds` is CPU time that guests (or the guest-priority probe) actually got
    during `wall_seconds`; several CPUs give a share above one.
    """
    if wall_seconds <= 0:
        raise ValueError("a reading needs a positive duration")
    return max(guest_cpu_seconds, 0.0) / wall_seconds * speed


def smooth(readings: Sequence[float]) -> float:
    """The mean over the window: FROST 9.1.2 averages `resolution` readings against spikes."""
    if not readings:
        raise ValueError("nothing to smooth: no readings yet")
    return sum(readings) / len(readings)


def tendency(reading: float, lower: float, upper: float) -> Tendency:
    """Classify a reading against the lower and upper thresholds (FROST algorithm 2)."""
    if reading < lower:
        return Tendency.BELOW
    if reading > upper:
        return Tendency.ABOVE
    return Tendency.WITHIN


def worth_publishing(published: float | None, current: float, min_change: float = 0.05) -> bool:
    """Algorithm 1: publish only when the figure moved by `min_change` of itself (FROST used 5 %)."""
    if published is None:
        return True
    scale = max(abs(published), abs(current), 1e-9)
    return abs(current - published) / scale >= min_change


def memory_pool(total_memory: int, cap_bytes: int = 0) -> int:
    """Memory guests may use together: the owner's cap, or half the machine when unset (FROST 5.1.1)."""
    if cap_bytes < 0:
        raise ValueError("the memory cap cannot be negative")
    return min(cap_bytes, total_memory) if cap_bytes else total_memory // 2


def fits_memory(free_pool: int, declared: int) -> bool:
    """A host refuses a unit whose declared memory does not fit what is left of its pool."""
    return 0 <= declared <= free_pool

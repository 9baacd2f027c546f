"""Whether a host takes units ahead of its free CPUs, and how many: for short units, one ahead of each CPU;
and how many guest processes it keeps started ahead of its units (`spares_for`).

A slot would otherwise sit idle between two units for the master's round trip: the result goes to
the master, is committed, and only then is the next unit offered and started. A unit placed ahead
waits on its host (placed, epoch and all, but not started) and its warm guest begins it the moment
the slot frees, while the master commits the last result and places the next one. That gap matters
only for short units: a long unit placed ahead would wait on a busy host while another host frees
up, so an assignment's units go ahead only once its results show they take less than
`AHEAD_BELOW_SECONDS` each.
"""

from __future__ import annotations

UNITS_AHEAD_PER_CPU = 1

AHEAD_BELOW_SECONDS = 2.0
"""Placement to result, as the master sees it (with a unit ahead: its wait behind one unit too)."""

SMOOTHING = 0.2
"""The weight of the newest result in an assignment's typical unit time."""


def units_held(cpus: int) -> int:
    """Units a host with `cpus` guest CPUs takes from placement: each CPU's running unit and the ones ahead."""
    return max(cpus, 0) * (1 + UNITS_AHEAD_PER_CPU)


def typical_seconds(before: float | None, seconds: float) -> float:
    """An assignment's typical placement-to-result time after one more result (exponential smoothing)."""
    return seconds if before is None else (1 - SMOOTHING) * before + SMOOTHING * seconds


def worth_placing_ahead(typical: float | None) -> bool:
    """Units go ahead once results show they are short; before any result, not."""
    return typical is not None and typical < AHEAD_BELOW_SECONDS


MAX_SPARES = 4
"""Guest processes kept started ahead at most (~15 MiB each, no CPU while they wait)."""


def spares_for(cpus: int) -> int:
    """Guest processes a host with `cpus` guest CPUs keeps started and waiting: one for each unit an assignment
    starts at once (one per CPU), up to MAX_SPARES. A unit with none starts its interpreter at the lowest
    priority while it holds a CPU's slot (0.1-0.9 s seen beside a warm process running no-op units)."""
    return min(max(cpus, 1), MAX_SPARES)

"""The one division every policy shares: a machine's guest capacity split among its guests."""

from __future__ import annotations


def resources_per_guest(available: float, guests: int, cpus: int = 1, idle_extremity: float | None = None) -> float:
    """What each of `guests` guests gets from `available`, one idle CPU's worth at most.

    With no guest this is what a single guest would get (the probe's figure), never 1/0.
    """
    share = max(available, 0.0) / max(guests, 1)
    if idle_extremity is not None and cpus > 0:
        share = min(share, idle_extremity / cpus)
    return share

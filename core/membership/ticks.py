"""One grid for the timers that only look at the clock: two due in the same turn of the loop cost one wake-up."""

from __future__ import annotations

import math

import trio


def next_tick(now: float, interval: float) -> float:
    """The first multiple of `interval` after `now`."""
    return (math.floor(now / interval) + 1) * interval


async def sleep_to_tick(interval: float) -> float:
    """Sleep until the next multiple of `interval` on trio's clock and return that deadline: the membership's lag
    watcher and the master's stop watcher (0.5 s), the master's round and the resource reading (1 s) then wake
    together, an idle node's loop once for all of them."""
    deadline = next_tick(trio.current_time(), interval)
    await trio.sleep_until(deadline)
    return deadline

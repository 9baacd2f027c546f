"""Whether this master can hear its hosts: silence while it was cut off or stopped is not the hosts' fault.

When every peer falls silent at once, the likely cause is this machine (its Wi-Fi dropped, its
lid closed, its VPN reconnects), not all of them together. And a process that was stopped
(SIGSTOP, a debugger, a hung machine) sees every timer expire at once when it resumes. In both
cases the hosts kept computing; what they did not do is reach this master. `hearing_since` is
the moment this master could hear again: no copy's silence counts from before it. (A suspended
laptop needs no check: the monotonic clock does not advance while the machine sleeps.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from frost_core.api.wording import counted
from frost_core.events import EventLog
from frost_core.membership.ticks import sleep_to_tick

SLEEP_CHECK = 0.5
"""Seconds between two looks at the clock."""
SLEEP_GAP = 5.0
"""A look this much later than asked for means the process was stopped, not merely busy."""


class Reach:
    def __init__(self, events: EventLog, clock: Callable[[], float]) -> None:
        self._events = events
        self._clock = clock
        self.cut_off_since: float | None = None
        """Monotonic time since which no peer is reachable while units run on peers; None when not cut off."""
        self.hearing_since = clock()
        """Since when this master could hear its hosts: its start, the end of a cut-off, or a resume."""
        self._status = ""
        self._woke = False
        self._ticked: float | None = None   # the last look at the clock, once `watch_for_sleep` runs

    @property
    def status(self) -> str:
        """One line for the status view; empty when this master hears its peers."""
        return self._status

    def observe(self, *, peers: bool, remote_units: int) -> bool:
        """Note whether any peer is reachable; True when this master was cut off and hears peers again."""
        now = self._clock()
        if not peers and remote_units and self.cut_off_since is None:
            self.cut_off_since = now
            self._status = (f"out of reach of all peers since {time.strftime('%H:%M:%S')}; "
                            f"{counted(remote_units, 'unit')} left running on them")
            self._events.add("cluster", f"{self._status}: they keep their places while this machine is the one "
                             "cut off", severity="warning")
        elif peers and self.cut_off_since is not None:
            self._events.add("cluster", f"peers reachable again after {now - self.cut_off_since:.0f} s out of reach; "
                             "asking the hosts what they hold before re-placing anything")
            self.cut_off_since = None
            self.hearing_since = now
            self._status = ""
            return True
        return False

    def woke(self) -> bool:
        """True once after the process was found stopped; checks now, so a caller never judges silence
        from the stale side of a stop whose watcher has not run yet."""
        if self._ticked is not None:
            self._check(self._clock())
        woke, self._woke = self._woke, False
        return woke

    async def watch_for_sleep(self) -> None:
        """Notice a stopped process: a look at the clock that comes far later than asked."""
        self._ticked = self._clock()
        while True:
            await sleep_to_tick(SLEEP_CHECK)  # with the membership's lag watcher: one wake-up for both
            self._check(self._clock())

    def _check(self, now: float) -> None:
        assert self._ticked is not None
        gap = now - self._ticked - SLEEP_CHECK
        self._ticked = now
        if gap > SLEEP_GAP:
            self.hearing_since = now
            self._woke = True
            self._events.add("cluster", f"this machine was stopped for {gap:.0f} s; the hosts of its units get "
                             "a full timeout to report again", severity="warning")

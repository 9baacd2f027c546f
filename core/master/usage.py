"""What this master's submitters used of the cluster: accepted guest CPU time, decayed, kept up to date cheaply.

Counted in speed units (a result's CPU-seconds times its host's speed), as the ledger counts them, so
the two figures fair share compares are one quantity (`fair_share.submitter_usage`). The store keeps every
accepted result's CPU time, its host and when (`MasterStore.accepted_cpu`); read once
per half-life in use, then each accepted result adds to the running totals, so the work per
result does not grow with the number of units ever run. Totals are held at a reference time and
decayed on reading (`policies.fair_share.decayed`): exponential decay makes that exact.
"""

from __future__ import annotations

from collections.abc import Callable

from frost_core.master.store import MasterStore
from frost_core.policies.fair_share import decayed, usage_by_submitter

HORIZON = 30
"""Half-lives after which a result no longer counts (2^-30 of it): older records are not even read."""


class UsageBook:
    def __init__(self, store: MasterStore, speed_of: Callable[[str], float] = lambda host: 1.0) -> None:
        """`speed_of` is a host's calibrated speed: its CPU-second in speed units."""
        self._store = store
        self._speed_of = speed_of
        self._totals: dict[float, tuple[float, dict[str, float]]] = {}   # half-life -> (at, submitter -> usage then)

    def usage(self, submitter: str, now: float, half_life: float) -> float:
        """The submitter's decayed speed-unit seconds at `now` (wall time)."""
        at, totals = self._fold(half_life, now)
        return decayed(totals.get(submitter, 0.0), now - at, half_life)

    def add(self, submitter: str, host: str, cpu_seconds: float, at: float) -> None:
        """An accepted result's CPU time on `host` (already in the store): every total in use grows by it."""
        work = cpu_seconds * self._speed_of(host)
        for half_life, (then, totals) in list(self._totals.items()):
            if at > then:   # moved on to the newer reference time first
                totals = {s: decayed(value, at - then, half_life) for s, value in totals.items()}
                then = at
            totals[submitter] = totals.get(submitter, 0.0) + decayed(work, then - at, half_life)
            self._totals[half_life] = (then, totals)

    def _fold(self, half_life: float, now: float) -> tuple[float, dict[str, float]]:
        if half_life not in self._totals:
            records = self._store.accepted_cpu(since=now - HORIZON * half_life)
            work = [(submitter, cpu * self._speed_of(host), at) for submitter, host, cpu, at in records]
            self._totals[half_life] = (now, usage_by_submitter(work, now, half_life))
        return self._totals[half_life]


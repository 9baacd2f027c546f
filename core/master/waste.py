"""Guest-seconds an assignment threw away, and why: the price of each copy the master gave up or overtook.

The master sees a copy only through its reports: when it was placed, the progress it resumed
from, and the progress it last reported at what time. A guest runs on one CPU, so the seconds a
copy took per unit of progress, times the progress that was not kept, are the CPU-seconds lost.
These are pure functions of those figures; the scheduler records what they return, by reason.
"""

from __future__ import annotations

from dataclasses import dataclass

REDONE = "redone since checkpoint"
"""A copy was given up (host dead or silent); its replacement computes again what it had done past
the checkpoint it resumes from."""
REFUSED = "refused result"
"""A copy given up earlier finished after all, but the unit was done by then."""
SUPERSEDED = "superseded copy"
"""A copy stopped because another one's result won, or because it was given up and came back."""
REASONS = (REDONE, REFUSED, SUPERSEDED)


@dataclass(frozen=True)
class CopyRun:
    """What the master knows of one copy of a unit: when it was placed, from where, and how far it got when."""

    placed_at: float
    start: float        # the progress it resumed from (0 for a fresh start)
    heard_at: float     # when it last reported
    progress: float     # the progress it last reported

    def seconds_per_progress(self) -> float | None:
        """Seconds this copy took per unit of progress; None before it reported any."""
        done = self.progress - self.start
        return (self.heard_at - self.placed_at) / done if done > 0 else None

    def reported(self, progress: float, now: float) -> CopyRun:
        return CopyRun(self.placed_at, self.start, now, max(self.progress, progress))


def redone(lost: CopyRun, resumed_from: float) -> float:
    """Seconds the replacement of `lost` spends again: what `lost` did past the progress it resumes from.

    A copy that never reported progress left nothing to resume from: all it ran until last heard is lost.
    """
    rate = lost.seconds_per_progress()
    if rate is None:
        return lost.heard_at - lost.placed_at
    return max(0.0, lost.progress - resumed_from) * rate


def ran_on(lost: CopyRun, progress: float, now: float) -> float:
    """Seconds a given-up copy spent after it was last heard, having reached `progress` (1.0: it finished) by `now`.

    Without a rate (it never reported progress) the time since it was last heard stands for it.
    """
    rate = lost.seconds_per_progress()
    if rate is None:
        return max(0.0, now - lost.heard_at)
    return max(0.0, progress - lost.progress) * rate


def overtaken(copy: CopyRun, now: float) -> float:
    """Seconds a copy ran before another copy's result made it useless: all of them since it was placed."""
    return max(0.0, now - copy.placed_at)


def summary(by_reason: tuple[tuple[str, float], ...]) -> str:
    """'no guest work thrown away', or '14 s of guest work thrown away (12 s redone since checkpoint, ...)'."""
    total = sum(seconds for _, seconds in by_reason)
    if round(total) <= 0:
        return "no guest work thrown away"
    return (f"{total:.0f} s of guest work thrown away ("
            + ", ".join(f"{seconds:.0f} s {reason}" for reason, seconds in by_reason) + ")")

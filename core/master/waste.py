"""Guest-seconds an assignment threw away, and why: the price of each copy the master gave up or overtook.

The master sees a copy only through its reports: when it was placed, the progress it resumed
from, and the progress and guest CPU time it last reported at what time, and the CPU time at the
checkpoint a replacement resumes from. What a copy threw away is its CPU time past the point the
kept work took over from it: differences of its own CPU figures where its host sent them (a late
report, a holdings answer or a late result carries them), else its CPU-seconds per unit of
progress times the progress not kept; only a host that sends no CPU time is counted by the clock.
A copy given up before its first report left nothing to count yet: its late figures settle it.
A copy heard again is counted at each late figure, from the last one counted, until its last one:
its result, or the final figures its host sends once it stopped it.
These are pure functions of those figures; the scheduler records what they return, by reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    cpu_start: float = 0.0   # its guest's CPU-seconds when the master started following it
    cpu: float = 0.0         # its guest's CPU-seconds at its last report
    reported: bool = False   # it has reported at least once (perhaps at the very moment it was placed)

    @property
    def heard(self) -> bool:
        """Whether the master has heard from it since it was placed."""
        return self.reported or self.heard_at > self.placed_at

    def seconds_per_progress(self) -> float | None:
        """CPU-seconds this copy took per unit of progress (wall seconds if its host sent no CPU time);
        None before it reported any progress."""
        done = self.progress - self.start
        if done <= 0:
            return None
        spent = self.cpu - self.cpu_start if self.cpu > self.cpu_start else self.heard_at - self.placed_at
        return spent / done

    def report(self, progress: float, now: float, cpu: float = 0.0) -> CopyRun:
        """This copy after a report of `progress` and `cpu` at `now`."""
        return CopyRun(self.placed_at, self.start, now, max(self.progress, progress), self.cpu_start,
                       max(self.cpu, cpu), reported=True)


def redone(lost: CopyRun, resumed_from: float, cpu_then: float | None = None) -> float:
    """Seconds the replacement of `lost` spends again: what `lost` did past the progress it resumes from.

    `cpu_then`: the CPU-seconds of `lost`'s guest when it took the checkpoint the replacement resumes
    from, if its host said so: then it is exact, its CPU time since. A replacement resuming from before
    `lost` started redoes all it did. A copy that reported no CPU time ran on a host that sends none:
    its wall time stands for it. Before its first report nothing is known yet (`ran_on` settles it).
    """
    if not lost.heard:
        return 0.0
    if lost.cpu > lost.cpu_start:
        if cpu_then is not None and lost.cpu_start <= cpu_then <= lost.cpu:
            return lost.cpu - cpu_then
        if resumed_from <= lost.start:
            return lost.cpu - lost.cpu_start
    rate = lost.seconds_per_progress()
    if rate is None:
        return lost.heard_at - lost.placed_at
    return max(0.0, lost.progress - resumed_from) * rate


def resumed(lost: CopyRun, resumed_from: float, cpu_then: float | None = None, counted: float = 0.0) -> CopyRun:
    """`lost` as counted on once its replacement resumed from its checkpoint at `resumed_from` (taken at
    `cpu_then` CPU-seconds, if its host said) and `counted` seconds of it were charged as `redone`: what it
    did up to there was kept, even past its last report (cut off right after the checkpoint), so what it
    does later counts only from there. With `cpu_then` known, that is from `cpu_then` + `counted`: in all it
    is charged its CPU time past the checkpoint, even when `redone` had to estimate its part by rate or
    clock (its reports' CPU figure had not moved)."""
    if cpu_then is not None:
        return replace(lost, progress=max(lost.progress, resumed_from), cpu=max(lost.cpu, cpu_then + counted))
    if resumed_from <= lost.progress:
        return lost
    rate = lost.seconds_per_progress()
    if rate is None or lost.cpu <= lost.cpu_start:
        return replace(lost, progress=resumed_from)
    return replace(lost, progress=resumed_from, cpu=lost.cpu + (resumed_from - lost.progress) * rate)


def ran_on(lost: CopyRun, progress: float, now: float, cpu: float = 0.0) -> float:
    """Seconds a given-up copy spent after it was last heard, having reached `progress` (1.0: it finished) and
    `cpu` CPU-seconds of its guest by `now`.

    Its own CPU figure, where its host sent one, is exact; else its rate per progress, else (it never
    reported progress) the time since it was last heard stands for it.
    """
    if cpu > lost.cpu:
        return cpu - lost.cpu
    rate = lost.seconds_per_progress()
    if rate is None:
        return max(0.0, now - lost.heard_at)
    return max(0.0, progress - lost.progress) * rate


def counted_to(lost: CopyRun, progress: float, now: float, cpu: float = 0.0) -> CopyRun:
    """`lost` once a late figure of it (`progress` and `cpu` CPU-seconds by `now`) was counted with `ran_on`:
    its next figure counts on from there. Figures may come out of order (a report sent before a cut and
    delivered after a newer one); one behind what was counted adds nothing, so what a copy threw away is
    its newest figure less where counting began, whatever the order."""
    return replace(lost, heard_at=max(lost.heard_at, now), progress=max(lost.progress, progress),
                   cpu=max(lost.cpu, cpu))


def late_reason(lost: CopyRun, reason: str) -> str:
    """Why what a given-up copy did turned out wasted when it is heard again: `reason` (its result refused,
    or it was stopped), unless it was given up before its first report: then all it did is what its
    replacement computed again from the same checkpoint."""
    return reason if lost.heard else REDONE


def overtaken(copy: CopyRun, now: float) -> float:
    """Seconds a copy ran before another copy's result made it useless: all of them since it was placed
    (its CPU-seconds as last reported, or its wall time if its host sent none; nothing yet before its
    first report, which its stop settles: `ran_on`)."""
    if copy.cpu > copy.cpu_start:
        return copy.cpu - copy.cpu_start
    return max(0.0, now - copy.placed_at) if copy.heard else 0.0


def summary(by_reason: tuple[tuple[str, float], ...]) -> str:
    """'no guest work thrown away', or '14 s of guest work thrown away (12 s redone since checkpoint, ...)'."""
    total = sum(seconds for _, seconds in by_reason)
    if round(total) <= 0:
        return "no guest work thrown away"
    return (f"{total:.0f} s of guest work thrown away ("
            + ", ".join(f"{seconds:.0f} s {reason}" for reason, seconds in by_reason) + ")")

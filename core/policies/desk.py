"""Desk rules: battery, heat, named programs, schedule windows and a CPU cap, each one verdict line.

What BOINC's computing preferences and HTCondor's desktop policy let owners say about their
machine beyond "I am using it": pure functions from readings to verdicts, each naming its rule,
its figures and when it ends, which the owner policy takes as inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from frost_core.policies.owner import GuestAction, OwnerDecision

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
POLICIES = ("share", "idle-only", "always")
# Degrees a hot machine must cool below the limit before guests continue: the guests' own heat
# would otherwise flip them every few seconds around the limit.
COOL_MARGIN = 10.0
_WINDOW = re.compile(r"^\s*(?:(?P<days>[A-Za-z]{3}(?:-[A-Za-z]{3})?(?:,[A-Za-z]{3}(?:-[A-Za-z]{3})?)*)\s+)?"
                     r"(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})\s*$")


@dataclass(frozen=True)
class DeskVerdict:
    """One rule's say: suspend the guests or not, why, on which figures, and when that ends."""

    rule: str                                   # battery, temperature, program, schedule, cpu-cap
    suspend: bool
    reason: str
    ends: str
    figures: tuple[tuple[str, float], ...] = ()

    def explain(self) -> str:
        shown = f" [{', '.join(f'{name} {value:.3g}' for name, value in self.figures)}]" if self.figures else ""
        return f"{self.rule}: {self.reason}{shown}; {self.ends}"


@dataclass(frozen=True)
class Battery:
    percent: float
    plugged: bool


@dataclass(frozen=True)
class DeskReadings:
    """What the desk readers saw; None means this machine has no such sensor."""

    battery: Battery | None
    temperatures: tuple[tuple[str, float], ...] | None     # (sensor label, degrees Celsius)
    programs: frozenset[str]                               # the watched programs that run now


@dataclass(frozen=True)
class Window:
    """A recurring span of the week: `days` (0 = Monday) on which it starts, minutes since midnight."""

    text: str
    days: frozenset[int]
    start: int
    end: int


@dataclass(frozen=True)
class DeskSettings:
    """Mirrors the [desk] section of the configuration."""

    on_battery: bool = True                     # suspend while the machine runs on its battery
    max_temperature: float = 90.0               # degrees Celsius; 0 switches the rule off
    programs: tuple[str, ...] = ()              # process names that suspend guests while they run
    schedule: tuple[tuple[Window, str], ...] = ()
    cpu_cap_percent: float = 100.0              # at most this share of each core's time
    cap_period: float = 2.0                     # seconds of one run-then-rest cycle of the cap


def parse_window(text: str) -> Window:
    """ "Mon-Fri 09:00-17:00", "Sat,Sun 10:00-12:00" or "22:00-07:00" (every day; past midnight
    it ends the next morning). ValueError names what is wrong."""
    match = _WINDOW.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a window like \"Mon-Fri 09:00-17:00\" or \"22:00-07:00\"")
    days: set[int] = set()
    for part in (match["days"] or "mon-sun").lower().split(","):
        first, _, last = part.partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise ValueError(f"{text!r}: unknown day in {part!r} (use {', '.join(d.title() for d in DAYS)})")
        begin, finish = DAYS.index(first), DAYS.index(last or first)
        days.update(day % 7 for day in range(begin, finish + 1 if finish >= begin else finish + 8))
    start, end = _minutes(match["start"], text), _minutes(match["end"], text)
    if start == end:
        raise ValueError(f"{text!r}: a window must not start and end at the same minute")
    return Window(text.strip(), frozenset(days), start, end)


def _minutes(clock: str, text: str) -> int:
    hours, minutes = (int(part) for part in clock.split(":"))
    if hours > 24 or minutes > 59 or (hours == 24 and minutes):
        raise ValueError(f"{text!r}: {clock} is not a time of day")
    return hours * 60 + minutes


def window_covers(window: Window, when: datetime) -> bool:
    """Is `when` (local time) inside the window? A window past midnight belongs to the day it started."""
    minute = when.hour * 60 + when.minute
    day = when.weekday()
    if window.start < window.end:
        return day in window.days and window.start <= minute < window.end
    return (day in window.days and minute >= window.start) or ((day - 1) % 7 in window.days and minute < window.end)


def policy_in_force(settings: DeskSettings, default: str, when: datetime) -> tuple[str, DeskVerdict | None]:
    """The owner policy the schedule picks now (the first window that covers `when`), else `default`."""
    for window, policy in settings.schedule:
        if window_covers(window, when):
            return policy, DeskVerdict("schedule", False, f"window {window.text!r} picks the {policy!r} policy",
                                       f"ends at {window.end // 60:02d}:{window.end % 60:02d}")
    return default, None


def battery_verdict(battery: Battery | None, settings: DeskSettings) -> DeskVerdict | None:
    """On battery -> suspend; plugged in, or no battery at all (a desktop), never."""
    if not settings.on_battery or battery is None:
        return None
    figures = (("battery_percent", battery.percent),)
    if battery.plugged:
        return DeskVerdict("battery", False, "on mains power", "suspends when the charger is unplugged", figures)
    return DeskVerdict("battery", True, f"running on battery ({battery.percent:.0f} %)",
                       "ends when the charger is plugged in", figures)


def temperature_verdict(temperatures: tuple[tuple[str, float], ...] | None, settings: DeskSettings,
                        hot: bool = False) -> DeskVerdict | None:
    """Hottest sensor at or above `max_temperature` -> suspend, until it is COOL_MARGIN below it if
    it was `hot` at the last reading; no sensors -> a line that says so."""
    limit = settings.max_temperature
    if limit <= 0:
        return None
    if not temperatures:
        return DeskVerdict("temperature", False, "no temperature sensors on this machine",
                           f"the {limit:.0f} °C limit cannot act")
    label, hottest = max(temperatures, key=lambda sensor: sensor[1])
    figures = (("temperature_c", hottest), ("max_temperature_c", limit))
    cool = limit - COOL_MARGIN
    if hottest >= limit or (hot and hottest >= cool):
        return DeskVerdict("temperature", True, f"{label} at {hottest:.0f} °C (limit {limit:.0f} °C)",
                           f"ends when it cools below {cool:.0f} °C", figures)
    return DeskVerdict("temperature", False, f"hottest sensor {label} at {hottest:.0f} °C", "", figures)


def program_verdict(running: frozenset[str], settings: DeskSettings) -> DeskVerdict | None:
    """One of the owner's named programs (a game, a video call) runs -> suspend."""
    if not settings.programs:
        return None
    found = sorted(running & frozenset(settings.programs))
    if not found:
        return None
    return DeskVerdict("program", True, f"{', '.join(found)} running", "ends when it exits")


def cap_phase(settings: DeskSettings, now: float) -> tuple[bool, float | None]:
    """(may guests run now, when that changes) under the CPU cap, as BOINC's "use at most N % of
    CPU time" does it: run the first `cpu_cap_percent` of every `cap_period`, rest the remainder,
    so no core does more than that share of guest work on average. None: no cap, never changes."""
    if settings.cpu_cap_percent >= 100:
        return True, None
    period = settings.cap_period
    cycle_start = now - now % period
    run_until = cycle_start + period * settings.cpu_cap_percent / 100
    return (True, run_until) if now < run_until else (False, cycle_start + period)


def cap_verdict(settings: DeskSettings) -> DeskVerdict | None:
    """The cap's line; `cap_phase` carries it out between readings (a cycle is shorter than one)."""
    if settings.cpu_cap_percent >= 100:
        return None
    figures = (("cpu_cap_percent", settings.cpu_cap_percent), ("cap_period", settings.cap_period))
    return DeskVerdict("cpu-cap", False, f"guests run {settings.cpu_cap_percent:.0f} % of every "
                       f"{settings.cap_period:g} s, so no core does more guest work than that", "always on", figures)


def judge_desk(readings: DeskReadings, settings: DeskSettings,
               previous: tuple[DeskVerdict, ...] = ()) -> tuple[DeskVerdict, ...]:
    """Every desk rule that has something to say, suspending ones first; `previous` is the last judgement."""
    hot = any(verdict.rule == "temperature" and verdict.suspend for verdict in previous)
    verdicts = [battery_verdict(readings.battery, settings),
                temperature_verdict(readings.temperatures, settings, hot),
                program_verdict(readings.programs, settings), cap_verdict(settings)]
    said = [verdict for verdict in verdicts if verdict is not None]
    return tuple(sorted(said, key=lambda verdict: not verdict.suspend))


def with_desk(decision: OwnerDecision, verdicts: tuple[DeskVerdict, ...], policy: str) -> OwnerDecision:
    """The owner policy's decision with the desk on top.

    A suspending desk rule holds guests the owner policy would run (it is not the owner: no
    eviction, no hold afterwards); the `always` policy a schedule window picks runs them
    whatever the owner does (a dedicated machine overnight).
    """
    suspending = [verdict for verdict in verdicts if verdict.suspend]
    if suspending:
        if decision.action is not GuestAction.RUN:
            return decision
        first = suspending[0]
        reason = "; ".join(f"{verdict.reason}, {verdict.ends}" for verdict in suspending)
        return replace(decision, action=GuestAction.SUSPEND, rule=first.rule, reason=reason, accepting=False,
                       figures=decision.figures + sum((verdict.figures for verdict in suspending), ()))
    if policy == "always" and (decision.action is not GuestAction.RUN or not decision.accepting):
        return replace(decision, action=GuestAction.RUN, rule="schedule", accepting=True,
                       reason=f"the 'always' policy is in force (owner: {decision.reason})")
    return decision

"""Desk rules: battery, heat, named programs and schedule windows, each one verdict the owner policy weighs.

What BOINC's computing preferences and HTCondor's desktop policy let owners say about their
machine beyond "I am using it": pure functions from readings to `DeskVerdict`s, each naming its
rule, its figures and when it ends. A suspending verdict counts like the owner's contention; a
schedule window's verdict picks the owner policy in force.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from frost_core.policies.owner import DeskVerdict, GuestAction, Preset

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
POLICIES = tuple(preset.value for preset in Preset)
# Degrees a hot machine must cool below the limit before guests continue: the guests' own heat
# would otherwise flip them every few seconds around the limit.
COOL_MARGIN = 10.0
_WINDOW = re.compile(r"^\s*(?:(?P<days>[A-Za-z]{3}(?:-[A-Za-z]{3})?(?:,[A-Za-z]{3}(?:-[A-Za-z]{3})?)*)\s+)?"
                     r"(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})\s*$")


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
    input_idle: float | None = None                        # seconds since the owner's last input; None: cannot tell


@dataclass(frozen=True)
class Window:
    """A recurring span of the week: `days` (0 = Monday) on which it starts, minutes since midnight."""

    text: str
    days: frozenset[int]
    start: int
    end: int


@dataclass(frozen=True)
class DeskSettings:
    """Mirrors the [desk] section of the configuration (and the guests' CPU caps and memory pools it explains and
    picks between by the owner's presence)."""

    on_battery: bool = True                     # suspend while the machine runs on its battery
    max_temperature: float = 90.0               # degrees Celsius; 0 switches the rule off
    programs: tuple[str, ...] = ()              # process names that suspend guests while they run
    schedule: tuple[tuple[Window, str], ...] = ()
    cpu_cap_percent: float = 0.0                # guests.cpu_cap_percent: all guests, percent of one core; 0 none
    cpu_cap_in_use_percent: float = 0.0         # guests.cpu_cap_in_use_percent: the same while the owner is there
    memory_pool_bytes: int = 0                  # guests.memory_pool_mb, resolved (0 there: half the machine)
    memory_pool_in_use_bytes: int = 0           # guests.memory_pool_in_use_mb: the pool while the owner is there
    input_idle: float = 60.0                    # owner.input_idle: input more recent than this is the owner there


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


def parse_schedule(table: dict[str, str]) -> tuple[tuple[Window, str], ...]:
    """The `desk.schedule` table as windows in the order written; ValueError names a bad window or policy."""
    schedule = []
    for text, policy in table.items():
        if policy not in POLICIES:
            raise ValueError(f"window {text!r} names the policy {policy!r}; use one of {', '.join(POLICIES)}")
        schedule.append((parse_window(text), policy))
    return tuple(schedule)


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


def window_end(window: Window, when: datetime) -> datetime:
    """When the window that covers `when` ends (local time)."""
    midnight = when.replace(hour=0, minute=0, second=0, microsecond=0)
    end = midnight + timedelta(minutes=window.end)
    return end if end > when else end + timedelta(days=1)


def schedule_verdict(settings: DeskSettings, when: datetime) -> DeskVerdict | None:
    """The owner policy the schedule picks now: the first window that covers `when` (local time)."""
    for window, policy in settings.schedule:
        if window_covers(window, when):
            end = window_end(window, when)
            return DeskVerdict("schedule", GuestAction.RUN, f"window {window.text!r} picks the {policy!r} policy "
                               f"until {end:%H:%M}", ends_at=end.timestamp(), policy=policy)
    return None


def battery_verdict(battery: Battery | None, settings: DeskSettings) -> DeskVerdict | None:
    """On battery -> suspend; plugged in, or no battery at all (a desktop), never."""
    if not settings.on_battery or battery is None:
        return None
    figures = (("battery_percent", battery.percent),)
    if battery.plugged:
        return DeskVerdict("battery", GuestAction.RUN, "on mains power", figures)
    return DeskVerdict("battery", GuestAction.SUSPEND,
                       f"running on battery ({battery.percent:.0f} %) until the charger is plugged in", figures)


def temperature_verdict(temperatures: tuple[tuple[str, float], ...] | None, settings: DeskSettings,
                        hot: bool = False) -> DeskVerdict | None:
    """Hottest sensor at or above `max_temperature` -> suspend, until it is COOL_MARGIN below it if
    it was `hot` at the last reading; no sensors -> a line that says so."""
    limit = settings.max_temperature
    if limit <= 0:
        return None
    if not temperatures:
        return DeskVerdict("temperature", GuestAction.RUN,
                           f"no temperature sensors on this machine: the {limit:.0f} °C limit cannot act")
    label, hottest = max(temperatures, key=lambda sensor: sensor[1])
    figures = (("temperature_c", hottest), ("max_temperature_c", limit))
    cool = limit - COOL_MARGIN
    if hottest >= limit or (hot and hottest >= cool):
        return DeskVerdict("temperature", GuestAction.SUSPEND,
                           f"{label} at {hottest:.0f} °C (limit {limit:.0f} °C) until it cools below {cool:.0f} °C",
                           figures)
    return DeskVerdict("temperature", GuestAction.RUN, f"hottest sensor {label} at {hottest:.0f} °C", figures)


def program_verdict(running: frozenset[str], settings: DeskSettings) -> DeskVerdict | None:
    """One of the owner's named programs (a game, a video call) runs -> suspend."""
    found = sorted(running & frozenset(settings.programs))
    if not found:
        return None
    return DeskVerdict("program", GuestAction.SUSPEND, f"{', '.join(found)} running, until it exits")


def owner_at_desk(input_idle: float | None, settings: DeskSettings) -> bool | None:
    """Did the owner touch keyboard or mouse within `input_idle` seconds? None where the OS does not tell."""
    return None if input_idle is None else input_idle < settings.input_idle


def cpu_cap_in_force(settings: DeskSettings, input_idle: float | None) -> float:
    """The guests' CPU cap now, in percent of one core (0: none): the in-use cap, where it is tighter, while
    the owner is at the desk, and also where the OS cannot tell (the owner asked for quiet while there)."""
    in_use, away = settings.cpu_cap_in_use_percent, settings.cpu_cap_percent
    if in_use <= 0 or owner_at_desk(input_idle, settings) is False:
        return away
    return min(in_use, away) if away > 0 else in_use


def capped_offer(measured: float, cap_percent: float, speed: float) -> float:
    """What guests get here, as peers should place by it: the measured speed units, no more than a cap of
    `cap_percent` of one core lets through (a capped desk that gossips its idle cores draws units it starves)."""
    return min(measured, cap_percent / 100 * speed) if cap_percent > 0 else measured


def memory_pool_in_force(settings: DeskSettings, input_idle: float | None) -> int:
    """The memory guests may hold together now, in bytes: the in-use pool, where it is smaller, while the owner is
    at the desk and where the OS cannot tell (as `cpu_cap_in_force`), else the whole pool."""
    in_use, pool = settings.memory_pool_in_use_bytes, settings.memory_pool_bytes
    if in_use <= 0 or owner_at_desk(input_idle, settings) is False:
        return pool
    return min(in_use, pool)


def beyond_pool(held: Sequence[tuple[str, int]], pool: int) -> tuple[str, ...]:
    """Which of the guests `held` ((task id, bytes) each) to send away so that the others fit in `pool` bytes.

    Each turn the smallest guest that makes the rest fit on its own leaves, else the largest: the fewest
    moves, and no big state sent over the network where a small one frees enough."""
    staying = sorted(held, key=lambda guest: (guest[1], guest[0]))
    leaving = []
    while staying and (excess := sum(size for _, size in staying) - pool) > 0:
        enough = [guest for guest in staying if guest[1] >= excess]
        guest = enough[0] if enough else max(staying, key=lambda held_guest: held_guest[1])
        staying.remove(guest)
        leaving.append(guest[0])
    return tuple(leaving)


def _by_presence(settings: DeskSettings, input_idle: float | None, *, at_desk: str, away: str, back: str,
                 later: str) -> str:
    """One line for a limit the owner's presence switches: `at_desk` holds while they are there and where the OS
    cannot tell, `away` once they have left; `back` and `later` say what comes when they come or go."""
    present = owner_at_desk(input_idle, settings)
    if present is None:
        return f"this machine cannot tell whether you are at the desk: {at_desk}, as while you are"
    if present:
        return f"input {input_idle:.0f} s ago: {at_desk}; {later} after {settings.input_idle:.0f} s without input"
    return f"no input for {input_idle:.0f} s: {away}; {back} once you are back"


def cap_verdict(settings: DeskSettings, input_idle: float | None = None) -> DeskVerdict | None:
    """The guests' CPU cap in force (their cgroup enforces it) as a line of its own: why guests get no more,
    and, with an in-use cap, what they get once the owner comes or goes."""
    in_force = cpu_cap_in_force(settings, input_idle)
    figures = (("cpu_cap_percent", in_force),)
    if settings.cpu_cap_in_use_percent <= 0:
        if in_force <= 0:
            return None
        return DeskVerdict("cpu-cap", GuestAction.RUN, f"guests together use at most {in_force:g} % of one core "
                           "(guests.cpu_cap_percent, their cgroup's CPU quota)", figures)
    in_use, away = cpu_cap_in_force(settings, 0.0), cpu_cap_in_force(settings, float("inf"))
    away_words = f"at most {away:g} % of one core" if away > 0 else "no cap"
    tighter = "guests.cpu_cap_in_use_percent" if away <= 0 or in_use < away else "guests.cpu_cap_percent"
    line = _by_presence(settings, input_idle,
                        at_desk=f"guests together use at most {in_use:g} % of one core ({tighter})",
                        away=f"guests together have {away_words} (guests.cpu_cap_percent)",
                        back=f"at most {in_use:g} %", later=away_words)
    return DeskVerdict("cpu-cap", GuestAction.RUN, line, figures)


def memory_verdict(settings: DeskSettings, input_idle: float | None = None) -> DeskVerdict | None:
    """The memory pool in force as a line of its own, where the owner's presence changes it: what guests may hold
    now, and what once the owner comes or goes."""
    in_use, pool = memory_pool_in_force(settings, 0.0), settings.memory_pool_bytes
    if in_use >= pool:
        return None
    in_use_mib, pool_mib = f"{in_use / 2**20:.0f} MiB", f"{pool / 2**20:.0f} MiB"
    line = _by_presence(settings, input_idle,
                        at_desk=f"guests together hold at most {in_use_mib} (guests.memory_pool_in_use_mb)",
                        away=f"guests together may hold {pool_mib} (guests.memory_pool_mb)",
                        back=f"at most {in_use_mib}", later=pool_mib)
    in_force = memory_pool_in_force(settings, input_idle)
    return DeskVerdict("memory-pool", GuestAction.RUN, line, (("memory_pool_mb", in_force / 2**20),))


def judge_desk(readings: DeskReadings, settings: DeskSettings, when: datetime,
               previous: tuple[DeskVerdict, ...] = ()) -> tuple[DeskVerdict, ...]:
    """Every desk rule that has something to say, suspending ones first; `previous` is the last judgement
    and `when` the local time."""
    hot = any(v.rule == "temperature" and v.action is not GuestAction.RUN for v in previous)
    verdicts = [battery_verdict(readings.battery, settings), temperature_verdict(readings.temperatures, settings, hot),
                program_verdict(readings.programs, settings), schedule_verdict(settings, when),
                cap_verdict(settings, readings.input_idle), memory_verdict(settings, readings.input_idle)]
    said = [verdict for verdict in verdicts if verdict is not None]
    return tuple(sorted(said, key=lambda verdict: verdict.action is GuestAction.RUN))

"""The owner's intents (pause, pause until, finish, units sent away) and what they mean right now.

Intents are stored by the master store so they survive a restart; `hosting_state` is a pure
function of them, the clock and the guests, so the UI can always say *why* the machine is in
the state it shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Protocol

from frost_core.api.wording import counted, said_until
from frost_core.api.errors import ConfigError


class IntentStore(Protocol):
    def intent(self, key: str, default=None): ...
    def set_intents(self, values: dict) -> None: ...


@dataclass(frozen=True)
class Intents:
    paused: bool = False
    paused_until: float | None = None     # wall-clock time the pause ends by itself
    finishing: bool = False               # take nothing new; pause once the guests are done
    sent_away: tuple[tuple[str, float], ...] = ()   # (task id, until): units the owner evicted stay away till then

    @classmethod
    def load(cls, store: IntentStore) -> Intents:
        loaded = {key: store.intent(key, default) for key, default in vars(cls()).items()}
        loaded["sent_away"] = tuple((str(task), float(until)) for task, until in loaded["sent_away"])
        return cls(**loaded)

    def save(self, store: IntentStore) -> None:
        store.set_intents(vars(self))


@dataclass(frozen=True)
class HostingState:
    state: str        # hosting, idle, paused, finishing, evicting, owner-active, held
    reason: str
    accepts_guests: bool


def expire_intents(intents: Intents, now: float) -> Intents:
    """Drop intents whose time has come: a timed pause ends, a unit the owner sent away may come back."""
    if intents.paused and intents.paused_until is not None and now >= intents.paused_until:
        intents = replace(intents, paused=False, paused_until=None)
    kept = tuple((task, until) for task, until in intents.sent_away if now < until)
    if kept != intents.sent_away:
        intents = replace(intents, sent_away=kept)
    return intents


def send_away(intents: Intents, task_ids: tuple[str, ...], until: float) -> Intents:
    """The owner evicted these units: they stay away until `until`; everything else is still welcome."""
    others = tuple((task, end) for task, end in intents.sent_away if task not in task_ids)
    return replace(intents, sent_away=others + tuple((task, until) for task in task_ids))


def hosting_state(
    intents: Intents, *, now: float, guests: int, evicting: bool, owner_active_reason: str | None = None,
    held_reason: str | None = None,
) -> HostingState:
    """Decide what the machine does for guests, in the order the owner's wishes rank.

    `owner_active_reason`: the owner policy suspends or evicts the guests; `held_reason`: guests
    may run but no new one is taken (the hold after the policy's eviction), a state of its own so
    the screen never says "owner active" beside "owner not active".
    """
    if evicting:
        return HostingState("evicting", "guests are checkpointing and leaving", False)
    if intents.paused:
        if intents.paused_until is not None:
            return HostingState("paused", f"paused by the owner until {said_until(intents.paused_until, now)}", False)
        return HostingState("paused", "paused by the owner", False)
    if owner_active_reason:
        return HostingState("owner-active", owner_active_reason, False)
    if intents.finishing:
        return HostingState("finishing", f"finishing {counted(guests, 'guest')}, then pausing", False)
    if held_reason:
        return HostingState("held", held_reason, False)
    if guests:
        return HostingState("hosting", f"hosting {counted(guests, 'guest')} at the lowest priority", True)
    return HostingState("idle", "ready for guests", True)


def parse_until(text: str, *, now: float) -> float:
    """Turn "HH:MM" into the next such wall-clock moment (today, or tomorrow if it has passed)."""
    hours, sep, minutes = text.partition(":")
    if not (sep and hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise ConfigError(f"--until wants HH:MM on a 24-hour clock, not {text!r}")
    local = time.localtime(now)
    target = time.mktime((local.tm_year, local.tm_mon, local.tm_mday, int(hours), int(minutes), 0, 0, 0, -1))
    return target if target > now else target + 86400


"""The owner's intents (pause, pause until, finish, evict hold-off) and what they mean right now.

Intents are stored by the master store so they survive a restart; `hosting_state` is a pure
function of them, the clock and the guests, so the UI can always say *why* the machine is in
the state it shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Protocol

from frost_core.api.errors import ConfigError


class IntentStore(Protocol):
    def intent(self, key: str, default=None): ...
    def set_intent(self, key: str, value) -> None: ...


@dataclass(frozen=True)
class Intents:
    paused: bool = False
    paused_until: float | None = None     # wall-clock time the pause ends by itself
    finishing: bool = False               # take nothing new; pause once the guests are done
    evict_hold_until: float | None = None  # no new guests before this time, after an eviction

    @classmethod
    def load(cls, store: IntentStore) -> Intents:
        return cls(**{key: store.intent(key, default) for key, default in vars(cls()).items()})

    def save(self, store: IntentStore) -> None:
        for key, value in vars(self).items():
            store.set_intent(key, value)


@dataclass(frozen=True)
class HostingState:
    state: str        # hosting, idle, paused, finishing, evicting, owner-active
    reason: str
    accepts_guests: bool


def expire_intents(intents: Intents, now: float) -> Intents:
    """Drop intents whose time has come: a timed pause ends, an eviction hold-off runs out."""
    if intents.paused and intents.paused_until is not None and now >= intents.paused_until:
        intents = replace(intents, paused=False, paused_until=None)
    if intents.evict_hold_until is not None and now >= intents.evict_hold_until:
        intents = replace(intents, evict_hold_until=None)
    return intents


def hosting_state(
    intents: Intents, *, now: float, guests: int, evicting: bool, owner_active_reason: str | None = None
) -> HostingState:
    """Decide what the machine does for guests, in the order the owner's wishes rank."""
    if evicting:
        return HostingState("evicting", "guests are checkpointing and leaving", False)
    if intents.paused:
        if intents.paused_until is not None:
            return HostingState("paused", f"paused by the owner until {_clock(intents.paused_until)}", False)
        return HostingState("paused", "paused by the owner", False)
    if owner_active_reason:
        return HostingState("owner-active", owner_active_reason, False)
    if intents.finishing:
        return HostingState("finishing", f"finishing {guests} guest(s), then pausing", False)
    if intents.evict_hold_until is not None and now < intents.evict_hold_until:
        return HostingState("idle", f"guests were evicted; taking new ones from {_clock(intents.evict_hold_until)}", False)
    if guests:
        return HostingState("hosting", f"hosting {guests} guest(s) at the lowest priority", True)
    return HostingState("idle", "ready for guests", True)


def parse_until(text: str, *, now: float) -> float:
    """Turn "HH:MM" into the next such wall-clock moment (today, or tomorrow if it has passed)."""
    hours, sep, minutes = text.partition(":")
    if not (sep and hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise ConfigError(f"--until wants HH:MM on a 24-hour clock, not {text!r}")
    local = time.localtime(now)
    target = time.mktime((local.tm_year, local.tm_mon, local.tm_mday, int(hours), int(minutes), 0, 0, 0, -1))
    return target if target > now else target + 86400


def _clock(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))

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
    paused_at: float | None = None        # wall-clock time the pause began: its guests leave a while after it
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
        intents = replace(intents, paused=False, paused_until=None, paused_at=None)
    kept = tuple((task, until) for task, until in intents.sent_away if now < until)
    if kept != intents.sent_away:
        intents = replace(intents, sent_away=kept)
    return intents


def send_away(intents: Intents, task_ids: tuple[str, ...], until: float) -> Intents:
    """The owner evicted these units: they stay away until `until`; everything else is still welcome."""
    others = tuple((task, end) for task, end in intents.sent_away if task not in task_ids)
    return replace(intents, sent_away=others + tuple((task, until) for task in task_ids))


def dated_pause(intents: Intents, now: float) -> Intents:
    """A pause kept by a version that did not note when it began counts from `now` (the node's start), so that its
    guests too leave once it has lasted (`paused_guests_leave_at`)."""
    if intents.paused and intents.paused_at is None:
        return replace(intents, paused_at=now)
    return intents


def paused_guests_leave_at(intents: Intents, leave_after: float) -> float | None:
    """When the owner's pause has held its guests long enough that they leave for other peers, or None.

    A pause is the owner's wish for the CPU now, not a hold on other people's units: a desk paused over a
    weekend would keep them from their submitters, whose assignments wait for them. So, like HTCondor's
    MaxSuspendTime after a suspension, stopped guests go on from their checkpoints elsewhere once the pause
    has lasted `leave_after` seconds (0 keeps them till the resume), unless a timed pause ends first.
    """
    if not intents.paused or intents.paused_at is None or leave_after <= 0:
        return None
    leave_at = intents.paused_at + leave_after
    if intents.paused_until is not None and intents.paused_until <= leave_at:
        return None
    return leave_at


def hosting_state(
    intents: Intents, *, now: float, guests: int, evicting: bool, owner_active_reason: str | None = None,
    held_reason: str | None = None, guests_leave_at: float | None = None,
) -> HostingState:
    """Decide what the machine does for guests, in the order the owner's wishes rank.

    `owner_active_reason`: the owner policy suspends or evicts the guests; `held_reason`: guests
    may run but no new one is taken (the hold after the policy's eviction), a state of its own so
    the screen never says "owner active" beside "owner not active"; `guests_leave_at`: when a pause's
    stopped guests leave for other peers (`paused_guests_leave_at`, where there are peers to go to).
    """
    if evicting:
        return HostingState("evicting", "guests are checkpointing and leaving", False)
    if intents.paused:
        reason = "paused by the owner"
        if intents.paused_until is not None:
            reason += f" until {said_until(intents.paused_until, now)}"
        if guests and guests_leave_at is not None and guests_leave_at > now:
            stopped = "its guest leaves" if guests == 1 else f"its {guests} guests leave"
            reason += f"; {stopped} for other peers at {said_until(guests_leave_at, now)}"
        return HostingState("paused", reason, False)
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


"""Owner intents: what state they put the machine in, and when timed ones end."""

import time

import pytest

from frost_core.api.errors import ConfigError
from frost_core.policies.intents import (
    Intents, dated_pause, expire_intents, hosting_state, parse_until, paused_guests_leave_at, send_away,
)

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("intents", "guests", "evicting", "state", "accepts"),
    [
        (Intents(), 0, False, "idle", True),
        (Intents(), 2, False, "hosting", True),
        (Intents(paused=True), 2, False, "paused", False),
        (Intents(paused=True), 2, True, "evicting", False),        # evicting shows over everything
        (Intents(finishing=True), 1, False, "finishing", False),
        # units the owner sent away keep only themselves out: the machine still takes others
        (Intents(sent_away=(("a1/0", NOW + 60),)), 0, False, "idle", True),
    ],
)
def test_hosting_state_follows_the_owner(intents, guests, evicting, state, accepts):
    result = hosting_state(intents, now=NOW, guests=guests, evicting=evicting)
    assert (result.state, result.accepts_guests) == (state, accepts)


def test_owner_activity_outranks_finishing_but_not_a_pause():
    active = "owner CPU 80 % of a core"
    assert hosting_state(Intents(finishing=True), now=NOW, guests=1, evicting=False,
                         owner_active_reason=active).state == "owner-active"
    assert hosting_state(Intents(paused=True), now=NOW, guests=1, evicting=False,
                         owner_active_reason=active).state == "paused"


def test_a_hold_is_its_own_state_not_owner_activity():
    # The hold after the policy's eviction: guests may run, none is taken, and the screen says so
    # without "owner active" (which once showed beside "owner not active").
    held = hosting_state(Intents(), now=NOW, guests=0, evicting=False,
                         held_reason="holding new guests for 4 m 12 s after an eviction")
    assert (held.state, held.accepts_guests) == ("held", False)
    assert "4 m 12 s" in held.reason


def test_timed_pause_and_sent_away_units_expire():
    intents = send_away(Intents(paused=True, paused_until=NOW + 10), ("a1/0",), NOW + 5)
    assert expire_intents(intents, NOW) == intents
    assert expire_intents(intents, NOW + 5) == Intents(paused=True, paused_until=NOW + 10)
    assert expire_intents(intents, NOW + 10) == Intents()


def test_a_pause_sends_its_guests_on_once_it_has_lasted_unless_it_ends_first_or_the_owner_turned_that_off():
    paused = Intents(paused=True, paused_at=NOW)
    assert paused_guests_leave_at(paused, 600) == NOW + 600
    assert paused_guests_leave_at(paused, 0) is None                                    # 0: they wait for the resume
    assert paused_guests_leave_at(Intents(), 600) is None                               # not paused
    assert paused_guests_leave_at(Intents(paused=True, paused_at=NOW, paused_until=NOW + 300), 600) is None
    assert paused_guests_leave_at(Intents(paused=True, paused_at=NOW, paused_until=NOW + 3600), 600) == NOW + 600
    # A timed pause forgets when it began as it ends: the next pause counts from its own start.
    assert expire_intents(Intents(paused=True, paused_at=NOW, paused_until=NOW + 10), NOW + 10) == Intents()


def test_a_pause_kept_without_its_start_counts_from_the_nodes_start():
    assert dated_pause(Intents(paused=True), NOW) == Intents(paused=True, paused_at=NOW)
    assert dated_pause(Intents(paused=True, paused_at=NOW - 60), NOW).paused_at == NOW - 60
    assert dated_pause(Intents(), NOW) == Intents()


def test_a_paused_desk_says_when_its_stopped_guests_leave():
    now = time.mktime((2026, 11, 30, 8, 40, 0, 0, 0, -1))
    paused = Intents(paused=True, paused_at=now)
    said = hosting_state(paused, now=now, guests=2, evicting=False, guests_leave_at=now + 600)
    assert said.reason == "paused by the owner; its 2 guests leave for other peers at 08:50"
    one = hosting_state(paused, now=now, guests=1, evicting=False, guests_leave_at=now + 600).reason
    assert one == "paused by the owner; its guest leaves for other peers at 08:50"
    assert hosting_state(paused, now=now, guests=0, evicting=False, guests_leave_at=now + 600).reason == \
        "paused by the owner"   # nobody to send on: nothing to announce


def test_an_untimed_pause_never_expires():
    assert expire_intents(Intents(paused=True), NOW + 1e9).paused


def test_pause_until_is_the_next_such_time():
    now = time.mktime((2026, 11, 22, 16, 30, 0, 0, 0, -1))
    assert time.localtime(parse_until("17:00", now=now))[3:5] == (17, 0)
    assert parse_until("17:00", now=now) - now == 30 * 60
    assert parse_until("16:00", now=now) - now == 23.5 * 3600


def test_a_timed_pause_says_when_it_ends_and_which_day_when_that_is_not_today():
    # At 08:40, `pause --until 08:00` lasts until the next morning: "until 08:00" alone reads as a time past.
    now = time.mktime((2026, 11, 30, 8, 40, 0, 0, 0, -1))
    said = {text: hosting_state(Intents(paused=True, paused_until=parse_until(text, now=now)), now=now, guests=0,
                                evicting=False).reason for text in ("17:00", "08:00")}
    assert said == {"17:00": "paused by the owner until 17:00", "08:00": "paused by the owner until 08:00 tomorrow"}
    later = hosting_state(Intents(paused=True, paused_until=now + 3 * 86400), now=now, guests=0, evicting=False)
    assert later.reason == "paused by the owner until Thu 3 Dec 08:40"


@pytest.mark.parametrize("text", ["25:00", "7", "ab:cd", "12:60", ""])
def test_pause_until_refuses_nonsense(text):
    with pytest.raises(ConfigError, match="HH:MM"):
        parse_until(text, now=NOW)

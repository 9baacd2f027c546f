"""Desk rules as pure functions: battery, temperature, named programs, schedule windows, the CPU cap and memory pool
lines."""

from datetime import datetime

import pytest

from frost_core.policies.desk import (
    Battery, DeskReadings, DeskSettings, battery_verdict, beyond_pool, cap_verdict, capped_offer, cpu_cap_in_force,
    judge_desk, memory_pool_in_force, memory_verdict, parse_schedule, parse_window, program_verdict, schedule_verdict,
    temperature_verdict, window_covers, window_end,
)
from frost_core.policies.owner import GuestAction, OwnerPolicy, OwnerSettings, OwnerView

pytestmark = pytest.mark.unit

DEFAULT = DeskSettings()
RUN, SUSPEND = GuestAction.RUN, GuestAction.SUSPEND
MONDAY_NOON = datetime(2026, 11, 23, 12, 0)     # 2026-11-23 is a Monday, 2026-11-28 a Saturday


def action(verdict):
    return verdict.action if verdict else None


@pytest.mark.parametrize("battery, expected", [
    (None, None),                               # a desktop: no battery, never suspends for it
    (Battery(80, plugged=True), RUN),           # on mains: a line, no suspension
    (Battery(80, plugged=False), SUSPEND),      # on battery: suspend
    (Battery(100, plugged=False), SUSPEND),     # even full: the owner wants the battery for themselves
])
def test_battery(battery, expected):
    assert action(battery_verdict(battery, DEFAULT)) is expected


def test_battery_rule_switched_off_never_suspends():
    assert battery_verdict(Battery(5, plugged=False), DeskSettings(on_battery=False)) is None


def test_on_battery_says_when_it_ends():
    verdict = battery_verdict(Battery(41.6, plugged=False), DEFAULT)
    assert verdict.explain() == "battery: running on battery (42 %) until the charger is plugged in " \
                                "[battery_percent 41.6]"


@pytest.mark.parametrize("sensors, limit, expected", [
    ((("Package id 0", 60.0), ("Core 1", 89.9)), 90.0, RUN),     # hottest 89.9 < 90
    ((("Package id 0", 60.0), ("Core 1", 90.0)), 90.0, SUSPEND),  # hottest reaches the limit
    ((("acpitz", 95.0),), 0.0, None),                             # limit 0: rule off
    ((("acpitz", 95.0),), 100.0, RUN),
])
def test_temperature(sensors, limit, expected):
    assert action(temperature_verdict(sensors, DeskSettings(max_temperature=limit))) is expected


@pytest.mark.parametrize("hottest, hot, expected", [
    (85.0, False, RUN),         # warming up: below the limit
    (85.0, True, SUSPEND),      # cooling down after a suspension: not yet 10 °C below the limit
    (79.9, True, RUN),          # cool enough: guests continue
])
def test_temperature_hysteresis(hottest, hot, expected):
    assert temperature_verdict((("cpu", hottest),), DEFAULT, hot).action is expected


def test_judge_desk_remembers_a_hot_machine():
    hot = judge_desk(DeskReadings(None, (("cpu", 95.0),), frozenset()), DEFAULT, MONDAY_NOON)
    cooling = DeskReadings(None, (("cpu", 85.0),), frozenset())
    assert judge_desk(cooling, DEFAULT, MONDAY_NOON, hot)[0].action is SUSPEND
    assert judge_desk(cooling, DEFAULT, MONDAY_NOON)[0].action is RUN


@pytest.mark.parametrize("sensors", [None, ()])
def test_no_temperature_sensors_says_so_and_never_suspends(sensors):
    verdict = temperature_verdict(sensors, DEFAULT)
    assert verdict.action is RUN and "no temperature sensors" in verdict.reason


def test_hot_sensor_is_named_with_its_figures():
    verdict = temperature_verdict((("Core 0", 70.0), ("Core 3", 97.2)), DEFAULT)
    assert verdict.reason == "Core 3 at 97 °C (limit 90 °C) until it cools below 80 °C"
    assert dict(verdict.figures) == {"temperature_c": 97.2, "max_temperature_c": 90.0}


@pytest.mark.parametrize("running, watched, expected", [
    (frozenset(), ("steam", "zoom"), None),
    (frozenset({"zoom"}), ("steam", "zoom"), SUSPEND),
    (frozenset({"zoom", "steam"}), (), None),       # nothing watched: the rule is off
])
def test_named_programs(running, watched, expected):
    assert action(program_verdict(running, DeskSettings(programs=watched))) is expected


@pytest.mark.parametrize("text, days, start, end", [
    ("Mon-Fri 09:00-17:00", {0, 1, 2, 3, 4}, 540, 1020),
    ("22:00-07:00", set(range(7)), 1320, 420),
    ("Sat,Sun 10:00-12:30", {5, 6}, 600, 750),
    ("Fri-Mon 00:00-24:00", {4, 5, 6, 0}, 0, 1440),   # wraps over the weekend
])
def test_parse_window(text, days, start, end):
    window = parse_window(text)
    assert (set(window.days), window.start, window.end) == (days, start, end)


@pytest.mark.parametrize("text", ["Mon-Fri", "9-17", "Mon-Fry 09:00-17:00", "25:00-07:00", "10:00-10:00"])
def test_parse_window_rejects(text):
    with pytest.raises(ValueError):
        parse_window(text)


def test_parse_schedule_rejects_an_unknown_policy():
    with pytest.raises(ValueError, match="use one of share, idle-only, always"):
        parse_schedule({"09:00-17:00": "sometimes"})


@pytest.mark.parametrize("text, when, covered", [
    ("Mon-Fri 09:00-17:00", datetime(2026, 11, 23, 9, 0), True),
    ("Mon-Fri 09:00-17:00", datetime(2026, 11, 23, 17, 0), False),     # the end is not inside
    ("Mon-Fri 09:00-17:00", datetime(2026, 11, 28, 12, 0), False),     # Saturday
    ("Fri 22:00-07:00", datetime(2026, 11, 28, 3, 0), True),           # Saturday morning belongs to Friday night
    ("Fri 22:00-07:00", datetime(2026, 11, 27, 3, 0), False),          # Friday morning belongs to Thursday night
    ("22:00-07:00", datetime(2026, 11, 23, 23, 59), True),
    ("22:00-07:00", datetime(2026, 11, 23, 12, 0), False),
])
def test_window_covers(text, when, covered):
    assert window_covers(parse_window(text), when) is covered


@pytest.mark.parametrize("text, when, end", [
    ("22:00-07:00", datetime(2026, 11, 23, 23, 0), datetime(2026, 11, 24, 7, 0)),   # tomorrow morning
    ("22:00-07:00", datetime(2026, 11, 24, 3, 0), datetime(2026, 11, 24, 7, 0)),    # this morning
    ("00:00-24:00", datetime(2026, 11, 24, 3, 0), datetime(2026, 11, 25, 0, 0)),
])
def test_window_end(text, when, end):
    assert window_end(parse_window(text), when) == end


def test_first_matching_schedule_window_picks_the_policy_until_its_end():
    settings = DeskSettings(schedule=parse_schedule({"Mon-Fri 09:00-17:00": "idle-only", "22:00-07:00": "always"}))
    assert schedule_verdict(settings, datetime(2026, 11, 23, 10, 0)).policy == "idle-only"
    verdict = schedule_verdict(settings, datetime(2026, 11, 28, 23, 0))
    assert (verdict.action, verdict.policy) == (RUN, "always")
    assert verdict.explain() == "schedule: window '22:00-07:00' picks the 'always' policy until 07:00"
    assert verdict.ends_at == datetime(2026, 11, 29, 7, 0).timestamp()
    assert schedule_verdict(settings, datetime(2026, 11, 28, 12, 0)) is None


def test_judge_desk_lists_suspending_rules_first_and_a_desktop_says_little():
    settings = DeskSettings(programs=("zoom",), cpu_cap_percent=50)
    desktop = judge_desk(DeskReadings(None, None, frozenset()), settings, MONDAY_NOON)
    assert [(v.rule, v.action) for v in desktop] == [("temperature", RUN), ("cpu-cap", RUN)]
    assert desktop[1].explain() == "cpu-cap: guests together use at most 50 % of one core " \
                                   "(guests.cpu_cap_percent, their cgroup's CPU quota) [cpu_cap_percent 50]"
    laptop = judge_desk(DeskReadings(Battery(50, False), (("cpu", 40.0),), frozenset({"zoom"})), settings, MONDAY_NOON)
    assert [(v.rule, v.action) for v in laptop] == [("battery", SUSPEND), ("program", SUSPEND),
                                                    ("temperature", RUN), ("cpu-cap", RUN)]


@pytest.mark.parametrize("away, in_use, input_idle, expected", [
    (0, 0, 1.0, 0),             # no caps at all
    (400, 0, 1.0, 400),         # one cap, at the desk or not
    (0, 50, 1.0, 50),           # typed a second ago: the in-use cap
    (0, 50, 59.9, 50),          # still within owner.input_idle (60 s)
    (0, 50, 60.0, 0),           # a minute without input: no cap
    (0, 50, None, 50),          # the OS cannot tell: as if the owner were there
    (400, 50, 1.0, 50),         # the tighter of the two at the desk
    (400, 50, 300.0, 400),      # and the away cap once gone
    (30, 50, 1.0, 30),          # an in-use cap looser than the away cap does not loosen it
])
def test_the_cap_in_force_follows_the_owner_to_and_from_the_desk(away, in_use, input_idle, expected):
    settings = DeskSettings(cpu_cap_percent=away, cpu_cap_in_use_percent=in_use)
    assert cpu_cap_in_force(settings, input_idle) == expected
    if away or in_use:
        assert cap_verdict(settings, input_idle).figures == (("cpu_cap_percent", expected),)


def test_a_capped_desk_offers_its_peers_no_more_than_the_cap_lets_through():
    assert capped_offer(3.6, 0, speed=1.8) == 3.6           # two idle cores at speed 1.8, no cap
    assert capped_offer(3.6, 25, speed=1.8) == 0.45         # a quarter of one core
    assert capped_offer(0.2, 25, speed=1.8) == 0.2          # the owner's load leaves less than the cap


def test_the_in_use_cap_line_says_what_holds_now_and_what_comes_next():
    settings = DeskSettings(cpu_cap_in_use_percent=50)
    assert cap_verdict(settings, 3.0).explain() == (
        "cpu-cap: input 3 s ago: guests together use at most 50 % of one core (guests.cpu_cap_in_use_percent); "
        "no cap after 60 s without input [cpu_cap_percent 50]")
    assert cap_verdict(settings, 75.0).explain() == (
        "cpu-cap: no input for 75 s: guests together have no cap (guests.cpu_cap_percent); at most 50 % once you "
        "are back [cpu_cap_percent 0]")
    assert cap_verdict(settings, None).explain() == (
        "cpu-cap: this machine cannot tell whether you are at the desk: guests together use at most 50 % of one "
        "core (guests.cpu_cap_in_use_percent), as while you are [cpu_cap_percent 50]")
    both = DeskSettings(cpu_cap_percent=200, cpu_cap_in_use_percent=50)
    assert "at most 200 % of one core (guests.cpu_cap_percent); at most 50 % once you are back" in \
        cap_verdict(both, 75.0).explain()
    looser = DeskSettings(cpu_cap_percent=30, cpu_cap_in_use_percent=50)
    assert "at most 30 % of one core (guests.cpu_cap_percent)" in cap_verdict(looser, 3.0).explain()
    desk = judge_desk(DeskReadings(None, None, frozenset(), input_idle=3.0), settings, MONDAY_NOON)
    assert [v.rule for v in desk] == ["temperature", "cpu-cap"]


MIB = 2**20


@pytest.mark.parametrize("in_use_mib, input_idle, expected_mib", [
    (0, 1.0, 4096),             # one pool, at the desk or not
    (1024, 1.0, 1024),          # typed a second ago: the in-use pool
    (1024, 60.0, 4096),         # a minute without input: the whole pool
    (1024, None, 1024),         # the OS cannot tell: as if the owner were there
    (8192, 1.0, 4096),          # an in-use pool larger than the pool does not grow it
])
def test_the_memory_pool_in_force_follows_the_owner_to_and_from_the_desk(in_use_mib, input_idle, expected_mib):
    settings = DeskSettings(memory_pool_bytes=4096 * MIB, memory_pool_in_use_bytes=in_use_mib * MIB)
    assert memory_pool_in_force(settings, input_idle) == expected_mib * MIB


@pytest.mark.parametrize("held_mib, pool_mib, leaving", [
    ({"a": 16, "b": 16}, 100, ()),                       # everything fits: nobody leaves
    ({"a": 16, "b": 16}, 32, ()),                        # exactly full still fits
    ({"a": 16, "b": 16}, 20, ("a",)),                    # one of two equals (the first by name)
    ({"big": 900, "small": 100}, 950, ("small",)),       # the small one frees enough: the big state stays put
    ({"big": 900, "small": 100}, 500, ("big",)),         # only the big one frees enough
    ({"a": 300, "b": 300, "c": 300, "d": 10}, 250, ("a", "b", "c")),   # the largest first, then what makes it fit
    ({"a": 300, "b": 300}, 0, ("a", "b")),               # a pool of nothing: everybody
    ({}, 0, ()),
])
def test_the_guests_beyond_the_pool_are_the_fewest_and_the_smallest_that_free_enough(held_mib, pool_mib, leaving):
    held = tuple((task, size * MIB) for task, size in held_mib.items())
    assert beyond_pool(held, pool_mib * MIB) == leaving
    staying = sum(size for task, size in held if task not in leaving)
    assert staying <= pool_mib * MIB


def test_the_memory_pool_line_says_what_holds_now_and_what_comes_next():
    settings = DeskSettings(memory_pool_bytes=4096 * MIB, memory_pool_in_use_bytes=1024 * MIB)
    assert memory_verdict(settings, 3.0).explain() == (
        "memory-pool: input 3 s ago: guests together hold at most 1024 MiB (guests.memory_pool_in_use_mb); 4096 MiB "
        "after 60 s without input [memory_pool_mb 1.02e+03]")
    assert memory_verdict(settings, 75.0).explain() == (
        "memory-pool: no input for 75 s: guests together may hold 4096 MiB (guests.memory_pool_mb); at most "
        "1024 MiB once you are back [memory_pool_mb 4.1e+03]")
    assert memory_verdict(settings, None).explain().startswith(
        "memory-pool: this machine cannot tell whether you are at the desk: guests together hold at most 1024 MiB")
    assert memory_verdict(DeskSettings(memory_pool_bytes=4096 * MIB), 3.0) is None   # one pool: nothing to say
    larger = DeskSettings(memory_pool_bytes=4096 * MIB, memory_pool_in_use_bytes=8192 * MIB)
    assert memory_verdict(larger, 3.0) is None
    desk = judge_desk(DeskReadings(None, None, frozenset(), input_idle=3.0), settings, MONDAY_NOON)
    assert [v.rule for v in desk] == ["temperature", "memory-pool"]


def test_the_owner_policy_suspends_on_a_desk_verdict_and_names_it():
    policy = OwnerPolicy(OwnerSettings(policy="always"))
    desk = judge_desk(DeskReadings(Battery(50, False), None, frozenset()), DEFAULT, MONDAY_NOON)
    decision = policy.decide(OwnerView(cpu_share=0.0, desk=desk), 100.0)
    assert (decision.action, decision.rule) == (SUSPEND, "battery")
    assert "until the charger is plugged in" in decision.describe(100.0)


def test_a_schedule_window_switches_the_preset_the_owner_policy_applies():
    policy = OwnerPolicy(OwnerSettings(policy="idle-only"))
    typing = OwnerView(cpu_share=0.0, input_idle=1.0)
    assert policy.decide(typing, 100.0).action is SUSPEND       # idle-only: the owner types
    always = DeskSettings(schedule=parse_schedule({"00:00-24:00": "always"}))
    desk = judge_desk(DeskReadings(None, None, frozenset()), always, MONDAY_NOON)
    policy = OwnerPolicy(OwnerSettings(policy="idle-only"))
    assert policy.decide(OwnerView(cpu_share=0.0, input_idle=1.0, desk=desk), 100.0).action is RUN

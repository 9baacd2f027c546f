"""Desk rules as pure functions: battery, temperature, named programs, schedule windows, CPU cap."""

from datetime import datetime

import pytest

from frost_core.policies.desk import (
    Battery, DeskReadings, DeskSettings, battery_verdict, cap_phase, judge_desk, parse_window, policy_in_force,
    program_verdict, temperature_verdict, window_covers, with_desk,
)
from frost_core.policies.owner import GuestAction, OwnerDecision

pytestmark = pytest.mark.unit

DEFAULT = DeskSettings()


@pytest.mark.parametrize("battery, suspend", [
    (None, None),                               # a desktop: no battery, never suspends for it
    (Battery(80, plugged=True), False),         # on mains: a line, no suspension
    (Battery(80, plugged=False), True),         # on battery: suspend
    (Battery(100, plugged=False), True),        # even full: the owner wants the battery for themselves
])
def test_battery(battery, suspend):
    verdict = battery_verdict(battery, DEFAULT)
    assert (verdict.suspend if verdict else None) is suspend


def test_battery_rule_switched_off_never_suspends():
    assert battery_verdict(Battery(5, plugged=False), DeskSettings(on_battery=False)) is None


def test_on_battery_says_when_it_ends():
    verdict = battery_verdict(Battery(41.6, plugged=False), DEFAULT)
    assert verdict.explain() == "battery: running on battery (42 %) [battery_percent 41.6]; ends when the charger " \
                                "is plugged in"


@pytest.mark.parametrize("sensors, limit, suspend", [
    ((("Package id 0", 60.0), ("Core 1", 89.9)), 90.0, False),    # hottest 89.9 < 90
    ((("Package id 0", 60.0), ("Core 1", 90.0)), 90.0, True),     # hottest reaches the limit
    ((("acpitz", 95.0),), 0.0, None),                             # limit 0: rule off
    ((("acpitz", 95.0),), 100.0, False),
])
def test_temperature(sensors, limit, suspend):
    verdict = temperature_verdict(sensors, DeskSettings(max_temperature=limit))
    assert (verdict.suspend if verdict else None) is suspend


@pytest.mark.parametrize("hottest, hot, suspend", [
    (85.0, False, False),   # warming up: below the limit
    (85.0, True, True),     # cooling down after a suspension: not yet 10 °C below the limit
    (79.9, True, False),    # cool enough: guests continue
])
def test_temperature_hysteresis(hottest, hot, suspend):
    assert temperature_verdict((("cpu", hottest),), DEFAULT, hot).suspend is suspend


def test_judge_desk_remembers_a_hot_machine():
    hot = judge_desk(DeskReadings(None, (("cpu", 95.0),), frozenset()), DEFAULT)
    cooling = DeskReadings(None, (("cpu", 85.0),), frozenset())
    assert judge_desk(cooling, DEFAULT, hot)[0].suspend
    assert not judge_desk(cooling, DEFAULT)[0].suspend


@pytest.mark.parametrize("sensors", [None, ()])
def test_no_temperature_sensors_says_so_and_never_suspends(sensors):
    verdict = temperature_verdict(sensors, DEFAULT)
    assert not verdict.suspend and "no temperature sensors" in verdict.reason


def test_hot_sensor_is_named_with_its_figures():
    verdict = temperature_verdict((("Core 0", 70.0), ("Core 3", 97.2)), DEFAULT)
    assert verdict.reason == "Core 3 at 97 °C (limit 90 °C)" and verdict.ends == "ends when it cools below 80 °C"
    assert dict(verdict.figures) == {"temperature_c": 97.2, "max_temperature_c": 90.0}


@pytest.mark.parametrize("running, watched, suspend", [
    (frozenset(), ("steam", "zoom"), None),
    (frozenset({"zoom"}), ("steam", "zoom"), True),
    (frozenset({"zoom", "steam"}), (), None),       # nothing watched: the rule is off
])
def test_named_programs(running, watched, suspend):
    verdict = program_verdict(running, DeskSettings(programs=watched))
    assert (verdict.suspend if verdict else None) is suspend


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


# 2026-11-23 is a Monday, 2026-11-28 a Saturday.
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


def test_first_matching_schedule_window_picks_the_policy():
    settings = DeskSettings(schedule=((parse_window("Mon-Fri 09:00-17:00"), "idle-only"),
                                      (parse_window("22:00-07:00"), "always")))
    assert policy_in_force(settings, "share", datetime(2026, 11, 23, 10, 0))[0] == "idle-only"
    policy, verdict = policy_in_force(settings, "share", datetime(2026, 11, 28, 23, 0))
    assert policy == "always" and verdict.explain() == "schedule: window '22:00-07:00' picks the 'always' policy; " \
                                                       "ends at 07:00"
    assert policy_in_force(settings, "share", datetime(2026, 11, 28, 12, 0)) == ("share", None)


@pytest.mark.parametrize("cap, now, runs, changes_at", [
    (100, 7.3, True, None),     # no cap
    (25, 8.0, True, 8.5),       # cycle 8-10 s: run 0.5 s (25 % of 2 s) ...
    (25, 8.49, True, 8.5),
    (25, 8.5, False, 10.0),     # ... then rest until the next cycle
    (60, 9.9, False, 10.0),
])
def test_cpu_cap_duty_cycle(cap, now, runs, changes_at):
    assert cap_phase(DeskSettings(cpu_cap_percent=cap), now) == pytest.approx((runs, changes_at))


def test_judge_desk_lists_suspending_rules_first_and_a_desktop_says_little():
    settings = DeskSettings(programs=("zoom",), cpu_cap_percent=50)
    desktop = judge_desk(DeskReadings(None, None, frozenset()), settings)
    assert [v.rule for v in desktop] == ["temperature", "cpu-cap"] and not any(v.suspend for v in desktop)
    laptop = judge_desk(DeskReadings(Battery(50, False), (("cpu", 40.0),), frozenset({"zoom"})), settings)
    assert [(v.rule, v.suspend) for v in laptop] == [("battery", True), ("program", True), ("temperature", False),
                                                     ("cpu-cap", False)]


RUN = OwnerDecision(GuestAction.RUN, "start", "owner not active", True, None, (("owner_cpu_percent", 3.0),))
SUSPENDED = OwnerDecision(GuestAction.SUSPEND, "suspend", "owner CPU 90%", False, 130.0, (("owner_cpu_percent", 90.0),))


def test_a_suspending_desk_rule_holds_guests_the_owner_would_run():
    verdicts = judge_desk(DeskReadings(Battery(50, False), None, frozenset()), DEFAULT)
    decision = with_desk(RUN, verdicts, "share")
    assert (decision.action, decision.rule, decision.accepting) == (GuestAction.SUSPEND, "battery", False)
    assert "ends when the charger is plugged in" in decision.explain()
    assert with_desk(SUSPENDED, verdicts, "share") is SUSPENDED     # the owner's own rule keeps its timers


def test_always_runs_whatever_the_owner_does_but_not_on_battery():
    decision = with_desk(SUSPENDED, (), "always")
    assert (decision.action, decision.rule, decision.accepting) == (GuestAction.RUN, "schedule", True)
    verdicts = judge_desk(DeskReadings(Battery(50, False), None, frozenset()), DEFAULT)
    assert with_desk(RUN, verdicts, "always").action is GuestAction.SUSPEND
    assert with_desk(RUN, (), "share") is RUN

"""The owner policy: suspend on contention, evict if it lasts, resume after quiet, never flap; presets and desk rules."""

import pytest

from frost_core.policies import DeskVerdict, GuestAction, OwnerPolicy, OwnerSettings, OwnerView
from frost_core.policies.owner import format_span, windowed_share

SETTINGS = OwnerSettings(busy_cpu_percent=25, quiet_ratio=0.5, input_idle=60, evict_after=120, resume_after=30,
                         evict_hold=300)


def owner(cpu, **kw):
    return OwnerView(cpu_share=cpu, **kw)


def test_suspends_at_once_evicts_after_a_while_and_resumes_after_quiet():
    policy = OwnerPolicy(SETTINGS)
    assert policy.decide(owner(3), 0).action is GuestAction.RUN
    d = policy.decide(owner(90), 1)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.SUSPEND, "cpu-contention", 121)
    assert not d.accepting
    assert policy.decide(owner(90), 60).action is GuestAction.SUSPEND
    d = policy.decide(owner(90), 121)
    assert (d.action, d.rule) == (GuestAction.EVICT, "evict")
    assert "owner CPU 90% of all cores >= 25%" in policy.explain()
    # quiet, but not for long enough yet: guests stay away (evicting)
    d = policy.decide(owner(2), 130)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.EVICT, "wait-quiet", 160)
    d = policy.decide(owner(2), 160)
    assert d.action is GuestAction.RUN     # the guests that stayed continue ...
    # ... but no new guests during the hold: 300 s from the policy's eviction at 121, with its end said
    assert not d.accepting
    assert (d.rule, d.ends_at) == ("hold-after-evict", 421)
    assert "holding new guests for 4 m 21 s after an eviction" in d.describe(160)
    assert not policy.decide(owner(2), 420).accepting
    assert policy.decide(owner(2), 421).accepting


def test_an_owner_who_keeps_coming_back_counts_like_one_who_stays():
    settings = OwnerSettings(busy_cpu_percent=25, evict_after=15, resume_after=3, evict_window=600)
    policy = OwnerPolicy(settings)
    decisions = []
    for minute in range(5):          # a 5 s spike every minute, quiet in between
        t = 60.0 * minute
        decisions.append(policy.decide(owner(100), t))
        policy.decide(owner(0), t + 5)
        policy.decide(owner(0), t + 8)
    # spikes 1-3 add up to 5 + 5 + 5 = 15 s of activity in the window: the fourth evicts at once
    assert [d.action for d in decisions[:4]] == [GuestAction.SUSPEND] * 3 + [GuestAction.EVICT]
    assert "active 15 s of the last 600 s" in decisions[3].explain()
    # a single spike ten minutes later starts from a clean slate
    assert policy.decide(owner(100), 1300).action is GuestAction.SUSPEND


def test_between_the_thresholds_nothing_changes():
    policy = OwnerPolicy(SETTINGS)
    # 20 % is below busy (25 %) but above quiet (12.5 %): a running node keeps running ...
    assert policy.decide(owner(20), 0).action is GuestAction.RUN
    policy.decide(owner(80), 1)
    # ... and a suspended one stays suspended, with its quiet clock reset
    d = policy.decide(owner(20), 10)
    assert (d.action, d.rule) == (GuestAction.SUSPEND, "between")
    assert policy.decide(owner(5), 11).rule == "wait-quiet"
    assert policy.decide(owner(20), 30).rule == "between"
    assert policy.decide(owner(5), 31).action is GuestAction.SUSPEND
    assert policy.decide(owner(5), 61).action is GuestAction.RUN


def test_memory_pressure_evicts_at_once_and_input_counts_only_for_idle_only():
    # Typing is not contention: under `share` guests keep running at the lowest priority.
    assert OwnerPolicy(SETTINGS).decide(owner(0, input_idle=5), 0).action is GuestAction.RUN
    idle_only = OwnerPolicy(OwnerSettings(policy="idle-only", busy_cpu_percent=25, input_idle=60))
    d = idle_only.decide(owner(0, input_idle=5), 0)
    assert (d.action, d.rule) == (GuestAction.SUSPEND, "input") and "input 5 s ago" in d.reason
    # A stopped guest keeps its memory: pressure sends the guests away at once, then holds.
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(0, memory_pressure=40.0, cpu_pressure=3.0), 0)
    assert (d.action, d.rule) == (GuestAction.EVICT, "memory-pressure") and "memory pressure 40.0%" in d.reason
    assert ("cpu_pressure", 3.0) in d.figures
    policy.decide(owner(0), 1)
    assert policy.decide(owner(0), 31).action is GuestAction.RUN
    assert not policy.accepting(299) and policy.accepting(300)


def test_quiet_period_doubles_when_the_owner_returns_soon_after_a_resume():
    policy = OwnerPolicy(SETTINGS)
    t = 0.0
    resumes = []
    # an owner who is busy 5 s out of every 35 s: exactly long enough to resume each time
    for _ in range(6):
        policy.decide(owner(90), t)
        policy.decide(owner(0), t + 5)
        for step in range(1, 400):
            if policy.decide(owner(0), t + 5 + step).action is GuestAction.RUN:
                resumes.append(step)
                t = t + 5 + step + 1
                break
    # 30 s, then 60, 120, 240 (capped at 8 × 30): never flapping at the base rate
    assert resumes[:4] == [30, 60, 120, 240]
    assert max(resumes) == 240


def test_backoff_relaxes_after_a_calm_spell():
    policy = OwnerPolicy(SETTINGS)
    policy.decide(owner(90), 0)
    policy.decide(owner(0), 1)
    policy.decide(owner(0), 31)            # resumed
    policy.decide(owner(90), 40)           # back within 2 × 30 s: quiet period doubles
    policy.decide(owner(0), 41)
    assert policy.decide(owner(0), 101).action is GuestAction.RUN    # needed 60 s
    policy.decide(owner(0), 1000)          # long calm: back to the base period
    policy.decide(owner(90), 1001)
    policy.decide(owner(0), 1002)
    assert policy.decide(owner(0), 1032).action is GuestAction.RUN


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="evict_after"):
        OwnerSettings(evict_after=-1)
    with pytest.raises(ValueError, match="quiet_ratio"):
        OwnerSettings(quiet_ratio=0)


def test_the_quiet_period_counts_from_the_start_of_the_quiet_reading():
    # A reading covers `interval` seconds: a quiet one at t=40 over 1 s says the owner was quiet
    # since 39, so 30 s of quiet are over at 69 (not 70, which would add a sampling interval).
    policy = OwnerPolicy(SETTINGS)
    policy.decide(owner(90), 10)                                    # suspended at 10
    d = policy.decide(owner(2, interval=1.0), 40)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.SUSPEND, "wait-quiet", 69)
    assert policy.decide(owner(2), 69).rule == "continue"
    # without an interval the clock starts at the reading, as before
    plain = OwnerPolicy(SETTINGS)
    plain.decide(owner(90), 10)
    assert plain.decide(owner(2), 40).recheck_at == 70
    # never earlier than the activity it ends: a 5 s reading 2 s after suspending starts the quiet at 10
    short = OwnerPolicy(SETTINGS)
    short.decide(owner(90), 10)
    assert short.decide(owner(2, interval=5.0), 12).recheck_at == 40


def test_only_an_eviction_holds_new_guests():
    # A 5 s spike suspends (no eviction: 5 s < evict_after 120); once it resumes the node takes
    # new guests at once: evict_hold follows an eviction, as documented, not every spell.
    policy = OwnerPolicy(SETTINGS)
    assert policy.decide(owner(0), 0).accepting           # starting imposes no hold
    policy.decide(owner(90), 100)
    d = policy.decide(owner(2), 105)                       # quiet since 105 (wait-quiet until 135)
    assert (d.rule, d.ends_at) == ("wait-quiet", 135)
    assert "they continue in 30 s" in d.describe(105)
    d = policy.decide(owner(2), 135)
    assert (d.rule, d.accepting) == ("continue", True)


def test_suspended_guests_leave_once_waiting_has_cost_what_moving_would():
    # Ski rental: moving costs the guests 4 s (leave_after), so after 4 s of owner activity they
    # are evicted, long before evict_after = 120 s; without leave_after nothing changes.
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(90), 10, leave_after=4.0)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.SUSPEND, "cpu-contention", 14)
    assert policy.decide(owner(90), 13.9, leave_after=4.0).action is GuestAction.SUSPEND
    d = policy.decide(owner(90), 14, leave_after=4.0)
    assert (d.action, d.rule) == (GuestAction.EVICT, "evict")
    plain = OwnerPolicy(SETTINGS)
    assert plain.decide(owner(90), 10).recheck_at == 130
    assert plain.decide(owner(90), 14).action is GuestAction.SUSPEND
    # evict_after stays the upper bound for guests that are costly to move
    costly = OwnerPolicy(SETTINGS)
    assert costly.decide(owner(90), 10, leave_after=500.0).recheck_at == 130


SPIKY = OwnerSettings(busy_cpu_percent=25, evict_after=15, resume_after=3, evict_window=600, evict_hold=60)


@pytest.mark.parametrize("spells, start, expected", [
    # No spell within the window: nothing predicts the spell, plain ski rental, leave after
    # leave_after = 1 s of activity: 100 + 1.
    ((), 100, (GuestAction.SUSPEND, 101)),
    # One 4 s spell (40-44): this one is predicted to end like it, so the guests wait until it has
    # outlived it by the move's cost, 4 + 1 = 5 s: 100 + 5 = 105. The plain rule would evict at
    # once (4 s of activity within the window >= 1).
    (((40, 44),), 100, (GuestAction.SUSPEND, 105)),
    # Spells of 2 s and 4 s: the longest counts: 100 + 4 + 1.
    (((20, 22), (40, 44)), 100, (GuestAction.SUSPEND, 105)),
    # Three 4 s spells are 12 s within the window: evict_after = 15 still caps the activity,
    # 12 + (4 + 1) = 17 > 15, so leave after 15 - 12 = 3 s: 200 + 3.
    (((40, 44), (100, 104), (160, 164)), 200, (GuestAction.SUSPEND, 203)),
    # A spell of 410 s (>= evict_after) that ended 590 s ago: a long spell predicts a long one;
    # its last 10 s (400-410) are within the window (1000 - 600 = 400), 10 >= 1: evict at once.
    (((0, 410),), 1000, (GuestAction.EVICT, None)),
    # Spells that ended more than evict_window ago predict nothing: 700 + 1.
    (((40, 44),), 700, (GuestAction.SUSPEND, 701)),
])
def test_a_spiky_owner_is_waited_out_as_long_as_the_recent_spells_lasted(spells, start, expected):
    policy = OwnerPolicy(SPIKY)
    for begin, end in spells:
        policy.decide(owner(90), begin, leave_after=1.0)
        policy.decide(owner(0), end, leave_after=1.0)          # quiet since end (interval 0)
        policy.decide(owner(0), end + 3, leave_after=1.0)      # resumes after 3 s: a spell (begin, end)
    d = policy.decide(owner(90), start, leave_after=1.0)
    assert (d.action, d.recheck_at) == expected
    if d.recheck_at is not None:
        assert policy.decide(owner(90), d.recheck_at - 0.1, leave_after=1.0).action is GuestAction.SUSPEND
        assert policy.decide(owner(90), d.recheck_at, leave_after=1.0).action is GuestAction.EVICT


def test_a_spike_like_the_recent_ones_ends_without_a_move():
    # A 4 s spike (40-44) before the guests came (no leave_after), then one (100-104) with them:
    # it ends before 100 + 4 + 1 = 105, so they are only suspended and run again 3 s later, where
    # the plain ski rule (leave after 1 s of activity, the earlier 4 s already count) would have
    # evicted them at 100.
    policy = OwnerPolicy(SPIKY)
    for begin, end, cost in ((40, 44, None), (100, 104, 1.0)):
        assert policy.decide(owner(90), begin, leave_after=cost).action is GuestAction.SUSPEND
        assert policy.decide(owner(90), end - 0.5, leave_after=cost).action is GuestAction.SUSPEND
        assert policy.decide(owner(0), end, leave_after=cost).rule == "wait-quiet"
        assert policy.decide(owner(0), end + 3, leave_after=cost).rule == "continue"
    # a third spell that outlives the 4 s ones by the move's cost is a long one: it leaves at 165
    assert policy.decide(owner(90), 160, leave_after=1.0).recheck_at == 165
    assert policy.decide(owner(90), 165, leave_after=1.0).action is GuestAction.EVICT


# -- contention, presets and desk rules (table tests) -------------------------------------------

@pytest.mark.parametrize("intervals, cpus, window, expected", [
    ((), 2, 2.0, 0.0),                                   # no reading yet
    (((1.0, 2.0),), 2, 2.0, 100.0),                      # 2 CPU s in 1 s on 2 cores: all of them
    (((1.0, 0.0), (1.0, 2.0)), 2, 2.0, 50.0),            # a spike in the last second: (0 + 2) / (2 × 2)
    (((1.0, 2.0), (1.0, 0.0), (1.05, 0.6)), 2, 2.0, 14.6),   # the oldest is outside: 0.6 / (2.05 × 2)
    (((1.0, 0.6),), 2, 2.0, 30.0),                       # 60 % of one core on two: 30 % of all cores
    (((0.5, 0.1),), 0, 2.0, 20.0),                       # no core count: judged as one
])
def test_the_owner_cpu_is_a_share_of_all_cores_over_the_window(intervals, cpus, window, expected):
    assert windowed_share(intervals, cpus, window) == pytest.approx(expected, abs=0.05)


DEFAULTS = OwnerSettings()   # share, busy 70 % of all cores, quiet below 35 %, PSI cpu 40 %, memory 10 %


@pytest.mark.parametrize("preset, view, action, rule", [
    # share: a third of the cores and the owner typing is no contention (the 30 % of a core).
    ("share", OwnerView(cpu_share=15, input_idle=1), GuestAction.RUN, "quiet"),
    ("share", OwnerView(cpu_share=69), GuestAction.RUN, "quiet"),
    ("share", OwnerView(cpu_share=70), GuestAction.SUSPEND, "cpu-contention"),
    # the owner's tasks wait for a CPU 50 % of the time while using 40 % of the cores: contention;
    # the same waiting at 20 % of the cores is noise from elsewhere.
    ("share", OwnerView(cpu_share=40, cpu_pressure=50), GuestAction.SUSPEND, "cpu-pressure"),
    ("share", OwnerView(cpu_share=20, cpu_pressure=50), GuestAction.RUN, "quiet"),
    ("share", OwnerView(cpu_share=0, memory_pressure=12), GuestAction.EVICT, "memory-pressure"),
    # idle-only: any recent input, or more than the quiet line of CPU, keeps guests stopped.
    ("idle-only", OwnerView(cpu_share=0, input_idle=5), GuestAction.SUSPEND, "input"),
    ("idle-only", OwnerView(cpu_share=40, input_idle=600), GuestAction.SUSPEND, "cpu-busy"),
    ("idle-only", OwnerView(cpu_share=10, input_idle=600), GuestAction.RUN, "quiet"),
    ("idle-only", OwnerView(cpu_share=10), GuestAction.RUN, "quiet"),   # no input source: CPU alone
    # always: a dedicated server ignores CPU and input, not memory pressure.
    ("always", OwnerView(cpu_share=100, input_idle=0), GuestAction.RUN, "quiet"),
    ("always", OwnerView(cpu_share=0, memory_pressure=50), GuestAction.EVICT, "memory-pressure"),
])
def test_each_preset_decides_on_its_own_signals(preset, view, action, rule):
    d = OwnerPolicy(OwnerSettings(policy=preset)).decide(view, 0)
    assert (d.action, d.rule) == (action, rule)


def test_a_desk_verdict_is_one_more_input_with_its_own_line():
    battery = DeskVerdict("battery", GuestAction.SUSPEND, "on battery, 43 % left", (("battery_percent", 43),))
    cap = DeskVerdict("cpu-cap", GuestAction.RUN, "guests capped at 50 % of each core", (("cap_percent", 50),))
    policy = OwnerPolicy(DEFAULTS)
    d = policy.decide(OwnerView(cpu_share=0, desk=(battery, cap)), 0)
    assert (d.action, d.rule, d.reason) == (GuestAction.SUSPEND, "battery", "on battery, 43 % left")
    assert d.lines()[1:] == ("battery: on battery, 43 % left [battery_percent 43]",
                             "cpu-cap: guests capped at 50 % of each core [cap_percent 50]")
    assert "suspended by rule 'battery'" in d.describe(0) and "leave in 2 m 0 s" in d.describe(0)
    # a desk rule that lasts evicts like contention; its end brings the quiet period
    assert policy.decide(OwnerView(cpu_share=0, desk=(battery,)), 120).action is GuestAction.EVICT
    assert policy.decide(OwnerView(cpu_share=0), 121).rule == "wait-quiet"
    # EVICT verdicts send the guests away at once
    game = DeskVerdict("program", GuestAction.EVICT, "steam is running")
    assert OwnerPolicy(DEFAULTS).decide(OwnerView(cpu_share=0, desk=(game,)), 0).rule == "program"


def test_a_schedule_window_picks_the_preset_for_now():
    night = DeskVerdict("schedule", GuestAction.RUN, "22:00-07:00 = always", policy="always")
    office = DeskVerdict("schedule", GuestAction.RUN, "Mon-Fri 09:00-17:00 = idle-only", policy="idle-only")
    busy = OwnerView(cpu_share=95, input_idle=1)
    assert OwnerPolicy(DEFAULTS).decide(busy, 0).action is GuestAction.SUSPEND
    assert OwnerPolicy(DEFAULTS).decide(OwnerView(cpu_share=95, input_idle=1, desk=(night,)), 0).action \
        is GuestAction.RUN
    d = OwnerPolicy(DEFAULTS).decide(OwnerView(cpu_share=0, input_idle=1, desk=(office,)), 0)
    assert (d.action, d.rule) == (GuestAction.SUSPEND, "input")


def test_a_suspension_says_its_rule_its_figures_and_its_end():
    policy = OwnerPolicy(DEFAULTS)
    d = policy.decide(OwnerView(cpu_share=96, interval=1.0), 10)
    assert d.describe(10) == ("guests suspended by rule 'cpu-contention': owner CPU 96% of all cores >= 70%; "
                              "they leave in 2 m 0 s if it lasts")
    assert ("cpu_share", 96) in d.figures and d.ends_at == 130


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (45.4, "45 s"), (252, "4 m 12 s"), (3900, "1 h 5 m"),
                                           (-3, "0 s")])
def test_spans_read_at_a_glance(seconds, text):
    assert format_span(seconds) == text


def test_a_bad_preset_is_refused():
    with pytest.raises(ValueError, match="share, idle-only, always"):
        OwnerSettings(policy="sometimes")


def test_with_nowhere_to_go_lasting_contention_only_suspends():
    # No guests, or no peer to take them: an eviction would throw work away and hold the machine
    # for nothing, so the guests stay suspended until the owner is quiet, and nothing is held.
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(90), 0, movable=False)
    assert (d.action, d.ends_at) == (GuestAction.SUSPEND, None)
    assert policy.decide(owner(90), 500, movable=False).action is GuestAction.SUSPEND
    policy.decide(owner(0), 501, movable=False)
    d = policy.decide(owner(0), 531, movable=False)
    assert (d.rule, d.accepting) == ("continue", True)
    # memory pressure still sends guests away (stopped, they keep their memory)
    assert OwnerPolicy(SETTINGS).decide(owner(0, memory_pressure=30), 0, movable=False).action is GuestAction.EVICT

"""The owner policy: suspend at once, evict after a while, resume after quiet, never flap."""

import pytest

from frost_core.policies import GuestAction, OwnerPolicy, OwnerSettings, OwnerView

SETTINGS = OwnerSettings(busy_cpu_percent=25, quiet_ratio=0.5, input_idle=60, evict_after=120, resume_after=30,
                         evict_hold=300)


def owner(cpu, **kw):
    return OwnerView(owner_cpu_percent=cpu, **kw)


def test_suspends_at_once_evicts_after_a_while_and_resumes_after_quiet():
    policy = OwnerPolicy(SETTINGS)
    assert policy.decide(owner(3), 0).action is GuestAction.RUN
    d = policy.decide(owner(90), 1)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.SUSPEND, "suspend", 121)
    assert not d.accepting
    assert policy.decide(owner(90), 60).action is GuestAction.SUSPEND
    d = policy.decide(owner(90), 121)
    assert (d.action, d.rule) == (GuestAction.EVICT, "evict")
    assert "owner CPU 90% >= 25%" in policy.explain()
    # quiet, but not for long enough yet: guests stay away (evicting)
    d = policy.decide(owner(2), 130)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.EVICT, "wait-quiet", 160)
    d = policy.decide(owner(2), 160)
    assert (d.action, d.rule) == (GuestAction.RUN, "continue")
    # no new guests during the hold: 300 s from the owner's last activity (quiet since 130; the
    # eviction at 121 alone would have ended it at 421)
    assert not d.accepting
    assert not policy.decide(owner(2), 429).accepting
    assert policy.decide(owner(2), 430).accepting


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
    assert (d.action, d.rule) == (GuestAction.SUSPEND, "hold")
    assert policy.decide(owner(5), 11).rule == "wait-quiet"
    assert policy.decide(owner(20), 30).rule == "hold"
    assert policy.decide(owner(5), 31).action is GuestAction.SUSPEND
    assert policy.decide(owner(5), 61).action is GuestAction.RUN


def test_input_and_memory_pressure_count_as_activity():
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(0, input_idle=5), 0)
    assert d.action is GuestAction.SUSPEND and "input 5 s ago" in d.reason
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(0, memory_pressure=40.0, cpu_pressure=3.0), 0)
    assert d.action is GuestAction.SUSPEND and "memory pressure" in d.reason
    assert ("cpu_pressure", 3.0) in d.figures


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


def test_the_hold_follows_every_return_of_the_owner_not_only_an_eviction():
    # A 5 s spike suspends (no eviction: 5 s < evict_after 120) but the node still takes no
    # new guests for evict_hold = 300 s after the owner went quiet (HTCondor's START on idle time).
    policy = OwnerPolicy(SETTINGS)
    policy.decide(owner(90), 100)
    d = policy.decide(owner(2), 105)                       # quiet since 105 (wait-quiet until 135)
    assert d.rule == "wait-quiet"
    assert policy.decide(owner(2), 135).rule == "continue"
    assert not policy.accepting(404)                       # 404 - 105 = 299 < 300
    assert policy.accepting(405)


def test_suspended_guests_leave_once_waiting_has_cost_what_moving_would():
    # Ski rental: moving costs the guests 4 s (leave_after), so after 4 s of owner activity they
    # are evicted, long before evict_after = 120 s; without leave_after nothing changes.
    policy = OwnerPolicy(SETTINGS)
    d = policy.decide(owner(90), 10, leave_after=4.0)
    assert (d.action, d.rule, d.recheck_at) == (GuestAction.SUSPEND, "suspend", 14)
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

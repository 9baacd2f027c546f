"""Gang jobs in the simulator: supersteps at the slowest member's pace, checkpoints, and selective migration."""

import pytest

from frost_core.policies.gang_migration import CheckCadence
from frost_core.sim.gang import GangHost, GangJob, OwnerTrace, compare_gang, no_move_checks, run_gang


def host(node_id, speed, owner=((0.0, 0.0),), others=0):
    return GangHost(node_id, speed, others, OwnerTrace(iter(owner)))


def test_a_member_progresses_at_what_the_owner_and_other_guests_leave():
    # speed 2, owner at 0.5 from t=10: 2 per s for 10 s (20), then 2 x 0.5 / 2 guests = 0.5 per s
    h = host("a", 2.0, owner=((0.0, 0.0), (10.0, 0.5)), others=1)
    assert h.compute_seconds(0.0, 5.0) == pytest.approx(5.0)       # 1 per s with the other guest
    assert h.compute_seconds(0.0, 12.5) == pytest.approx(15.0)     # 10 in 10 s, 2.5 at 0.5 per s
    assert h.mean_available(0.0, 20.0) == pytest.approx((10 * 2.0 + 10 * 1.0) / 20)
    assert host("b", 1.0, owner=((0.0, 1.0),)).compute_seconds(0.0, 1.0) == float("inf")


def test_a_superstep_lasts_as_long_as_the_slowest_member_and_the_fast_one_waits():
    job = GangJob(p=2, supersteps=10, work=1.0, exchange=0.5)
    out = run_gang([host("fast", 2.0), host("slow", 1.0)], job, "best")
    assert out.seconds == pytest.approx(10 * (1.0 + 0.5))
    assert out.barrier_wait == pytest.approx([5.0, 0.0])            # fast: 0.5 s a superstep
    assert (out.migrations, out.checkpoints) == (0, 0)


def test_forced_checkpoints_every_interval_and_costs_p_images_each_time():
    # 200 supersteps of 1 s on idle hosts, a check every 60 s: at 60, 120 and 180 s
    job = GangJob(p=2, supersteps=200, work=1.0, exchange=0.0, cadence=CheckCadence(every_seconds=60.0))
    assert job.checkpoint_seconds == pytest.approx(2 * (7e6 / 0.4e6 + 1.5))     # 38 s: BSPlib's 19 s x p
    hosts = [host("a", 1.0), host("b", 1.0), host("c", 0.5)]
    forced = run_gang(hosts, job, "forced")
    selective = run_gang([host("a", 1.0), host("b", 1.0), host("c", 0.5)], job, "selective")
    assert forced.checkpoints == forced.checks == 3 and forced.migrations == 0
    assert forced.seconds == pytest.approx(200 + 3 * job.checkpoint_seconds)
    # the same checks cost selective migration nothing: no better set, no checkpoint
    assert selective.checks == 3 and selective.checkpoints == 0 and selective.seconds == pytest.approx(200.0)


def world():
    """Two equal idle hosts; b's owner sits down at t=100 and takes 80 % of it for good; c and d are spare."""
    return [host("a", 1.0), host("b", 1.0, owner=((0.0, 0.0), (100.0, 0.8))), host("c", 0.9), host("d", 0.6)]


def test_selective_migration_moves_once_when_an_owner_sits_down_and_finishes_sooner_than_staying():
    job = GangJob(p=2, supersteps=400, work=1.0, exchange=0.1)
    stay = run_gang(world(), job, "best")
    move = run_gang(world(), job, "selective")
    assert stay.hosts == [("a", "b")] and stay.migrations == 0
    assert move.migrations == 1 and move.checkpoints == 1
    assert move.hosts == [("a", "b"), ("a", "c")]                  # a's member stays, b's goes to c
    assert move.seconds < stay.seconds - 500                        # b at 0.2: ~300 supersteps 5x slower
    assert no_move_checks({"selective": move}) == move.checks - 1


def test_same_seed_same_world_for_every_strategy():
    job = GangJob(p=2, supersteps=200, work=1.5)
    a, b = compare_gang(3, job, 6), compare_gang(3, job, 6)
    assert {k: v.seconds for k, v in a.items()} == {k: v.seconds for k, v in b.items()}
    assert a["best"].hosts[0] == a["selective"].hosts[0] == a["forced"].hosts[0]
    with pytest.raises(ValueError):
        run_gang(world(), GangJob(p=5, supersteps=1), "best")
    with pytest.raises(ValueError):
        compare_gang(3, job, 6, owner="weekly")

"""Equal share (fair share off): a free slot goes to the waiting submitter running least, then round-robin."""

from frost_core.policies.equal_share import explain, favoured_over
from frost_core.policies.fair_share import Demand, ShareSettings, note_demand

OFF = ShareSettings(enabled=False)


def test_a_free_slot_goes_to_the_waiting_submitter_with_fewer_units_running():
    # Alice has just used the cluster; Bob's master offered here a second ago with nothing running yet.
    demand = note_demand({}, "bob", Demand(usage=0.0, queued=9, seen_at=10.0, running=0), now=10.0, settings=OFF)
    # Alice's unit ended here; her master offers her next with 2 others still running: the slot is Bob's.
    assert favoured_over("alice", 2, demand, {}, now=11.0, settings=OFF) == "bob"
    # Whatever either used before: equal share has no memory (Bob's usage could be a week of CPU).
    heavy = note_demand({}, "bob", Demand(usage=1e9, queued=9, seen_at=10.0, running=0), now=10.0, settings=OFF)
    assert favoured_over("alice", 2, heavy, {}, now=11.0, settings=OFF) == "bob"
    # Bob running more than Alice, nothing more waiting, or his master silent too long: Alice takes it.
    ahead = note_demand({}, "bob", Demand(0.0, 9, 10.0, running=3), now=10.0, settings=OFF)
    assert favoured_over("alice", 2, ahead, {}, now=11.0, settings=OFF) is None
    done = note_demand({}, "bob", Demand(0.0, 0, 10.0, running=0), now=10.0, settings=OFF)
    assert favoured_over("alice", 2, done, {}, now=11.0, settings=OFF) is None
    assert favoured_over("alice", 2, demand, {}, now=10.0 + OFF.demand_memory + 1, settings=OFF) is None


def test_equal_running_alternates_at_each_host():
    # Three slots, two submitters: 2 + 1 cannot be equal. Each holding one elsewhere, the slot here goes to
    # whoever this host served longer ago: it alternates, so over many units each gets half.
    demand = note_demand({}, "bob", Demand(0.0, 5, 10.0, running=1), now=10.0, settings=OFF)
    assert favoured_over("alice", 1, demand, {"alice": 8.0, "bob": 5.0}, now=11.0, settings=OFF) == "bob"
    assert favoured_over("alice", 1, demand, {"alice": 5.0, "bob": 8.0}, now=11.0, settings=OFF) is None
    assert favoured_over("alice", 1, demand, {"alice": 5.0}, now=11.0, settings=OFF) == "bob"   # never served: first


def test_a_hosts_refusal_says_who_runs_how_many():
    text = explain("alice@" + "a" * 32, 2, "bob@" + "b" * 32, 0)
    assert text == "equal share: kept for bob@bbbbbbbb (0 running) over alice@aaaaaaaa (2 running)"

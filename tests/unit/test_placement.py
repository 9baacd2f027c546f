"""Where queued units go: the pure placement plan, with the arithmetic in the comments."""

from hypothesis import given
from hypothesis import strategies as st

from frost_core.master.placement import Need, plan, rank_hosts, with_free_cpu
from frost_core.policies.views import NodeView

MIB = 1 << 20


def host(node_id, available=1.0, guests=0, cpus=2, free_memory=1024 * MIB, accepting=True):
    # idle_extremity = cpus: each core is worth 1.0 speed unit when the machine is idle.
    return NodeView(node_id=node_id, available=available, guests=guests, cpus=cpus, idle_extremity=float(cpus),
                    free_memory=free_memory, accepting=accepting)


def test_the_host_whose_next_guest_gets_most_comes_first():
    # offer = available / (guests + 1), at most one core (1.0):
    #   a: 1.0 / 1 = 1.0;  b: 1.0 / 2 = 0.5 (it runs a guest);  c: 0.5 / 1 = 0.5 (a slower machine).
    # b and c tie at 0.5; the one with fewer guests (c) comes first.
    hosts = [host("b", guests=1), host("c", available=0.5), host("a")]
    assert rank_hosts(Need("t.0", "t", MIB), hosts) == ("a", "c", "b")


def test_hosts_without_a_free_core_memory_or_will_are_skipped():
    hosts = [host("full", guests=2, cpus=2), host("small", free_memory=10 * MIB), host("paused", accepting=False),
             host("ok")]
    assert rank_hosts(Need("t.0", "t", 64 * MIB), hosts) == ("ok",)


def test_one_unit_per_free_core_spreads_a_round_over_every_core():
    # Four units, two hosts of two cores each: two units each, never three on one.
    needs = [Need(f"t.{i}", "t", MIB) for i in range(4)]
    chosen = [candidates[0] for _, candidates in plan(needs, [host("a"), host("b")], {})]
    assert sorted(chosen) == ["a", "a", "b", "b"]


def test_units_placed_ahead_wait_behind_each_core_once_every_free_core_has_one():
    # Two hosts of two cores, a running one guest: the free cores fill first (a, b, b), then one unit ahead
    # of each core (a, a, b, b: units_held(2) = 4 per host); the eighth unit stays queued.
    needs = [Need(f"t.{i}", "t", MIB, ahead=True) for i in range(8)]
    chosen = [candidates[0] for _, candidates in plan(needs, [host("a", guests=1), host("b")], {})]
    assert sorted(chosen[:3]) == ["a", "b", "b"] and sorted(chosen[3:]) == ["a", "a", "b", "b"]
    # Units not known to be short (no result yet), and units moving between hosts, need a free core now.
    assert rank_hosts(Need("t.9", "t", MIB), [host("a", guests=2), host("b", guests=3)]) == ()


def test_units_beyond_the_free_cores_stay_queued():
    needs = [Need(f"t.{i}", "t", MIB) for i in range(5)]
    assert len(plan(needs, [host("a"), host("b")], {})) == 4


def test_a_unit_refused_lately_steps_aside_for_the_next_of_its_assignment_within_its_share_of_the_round():
    # a has two free cores. t.0 was refused there lately: t.1 takes its place; t's share of this round is one unit,
    # so t.2 waits and u.0 takes the other core.
    needs = [Need("t.0", "t", MIB, refused=frozenset({"a"})), Need("t.1", "t", MIB), Need("t.2", "t", MIB),
             Need("u.0", "u", MIB)]
    planned = plan(needs, [host("a")], {}, limits={"t": 1, "u": 1})
    assert [(need.task_id, candidates) for need, candidates in planned] == [("t.1", ("a",)), ("u.0", ("a",))]
    # Refused by a only: b takes it.
    assert rank_hosts(Need("t.0", "t", MIB, refused=frozenset({"a"})), [host("a"), host("b")]) == ("b",)


def test_frost_rule_one_unit_of_an_assignment_per_host():
    needs = [Need(f"t.{i}", "t", MIB, one_per_host=True) for i in range(3)]
    planned = plan(needs, [host("a", cpus=8), host("b", cpus=8)], {"t": frozenset({"b"})})
    # b already holds a unit of t, so only a qualifies, and only once.
    assert [candidates for _, candidates in planned] == [("a",)]


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 4), st.integers(0, 8)), min_size=1, max_size=6),
       st.integers(1, 12))
def test_a_plan_never_overfills_a_host(rows, count):
    hosts = [host(f"h{i}", guests=min(g, c), cpus=c, free_memory=m * 64 * MIB) for i, (g, c, m) in enumerate(rows)]
    needs = [Need(f"t.{i}", "t", 64 * MIB) for i in range(count)]
    placed: dict[str, int] = {}
    for _, candidates in plan(needs, hosts, {}):
        placed[candidates[0]] = placed.get(candidates[0], 0) + 1
    for view in hosts:
        extra = placed.get(view.node_id, 0)
        assert view.guests + extra <= max(view.cpus, view.guests)
        assert extra * 64 * MIB <= view.free_memory


def test_a_host_that_says_it_keeps_a_cpu_for_us_is_planned_with_one_free_whatever_the_gossip_says():
    # Gossip: 2 guests on 2 CPUs (full). The host just said a CPU is kept for this master: 1 guest, one free.
    need = Need("t-1.0", "t-1", MIB)
    assert plan([need], [host("a", guests=2)], {}) == []
    assert plan([need], [with_free_cpu(host("a", guests=2))], {}) == [(need, ("a",))]
    assert with_free_cpu(host("a", guests=0)) == host("a", guests=0)   # already free: as it is

"""The gang migration predicate: ranking with x added outside the gang, ties, the OR-reduction, no thrashing."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.policies.gang_migration import (
    CheckCadence,
    cadence_of,
    check_due,
    choose_hosts,
    describe_cadence,
    explain,
    member_share,
    member_should_move,
    or_reduce,
    rank_hosts,
)
from frost_core.policies.views import NodeView


def host(node_id, available, guests=0, **more):
    return NodeView(node_id, available, guests, **more)


def test_x_is_added_outside_the_gang_only():
    # a gang host with its member: 0.9 / 1 = 0.9; an empty outsider: 0.9 / max(0 + 1, 1) = 0.9;
    # an outsider with one guest: 0.9 / (1 + 1) = 0.45 with x = 1, 0.9 / max(1 + 0.5, 1) = 0.6 with x = 0.5
    assert member_share(host("a", 0.9, 1), True, 1.0) == pytest.approx(0.9)
    assert member_share(host("b", 0.9, 0), False, 1.0) == pytest.approx(0.9)
    assert member_share(host("c", 0.9, 1), False, 1.0) == pytest.approx(0.45)
    assert member_share(host("c", 0.9, 1), False, 0.5) == pytest.approx(0.6)


def test_share_is_capped_at_one_idle_cpu_and_zero_where_the_owner_holds_guests():
    # 4 CPUs with 3.6 available and no guests: 3.6 / 1, capped at idle 4.0 / 4 CPUs = 1.0
    assert member_share(host("a", 3.6, 0, cpus=4, idle_extremity=4.0), False, 1.0) == 1.0
    assert member_share(host("a", 1.0, 1, owner_active=True), True, 1.0) == 0.0
    assert member_share(host("a", 1.0, 0, accepting=False), False, 1.0) == 0.0


def test_a_member_whose_owner_returns_asks_to_move_and_the_gang_takes_the_best_p():
    table = (host("a", 0.1, 1), host("b", 1.0, 1), host("c", 0.8, 0), host("d", 0.7, 1))
    gang = frozenset({"a", "b"})
    assert member_should_move(table, gang, 2, 1.0, "a")
    assert not member_should_move(table, gang, 2, 1.0, "b")
    assert or_reduce([False, True]) and not or_reduce([False, False])
    assert choose_hosts(table, gang, 2, 1.0) == ("b", "c")     # d: 0.7 / 2 = 0.35, below c's 0.8


def test_without_x_a_busy_outsider_looks_better_than_it_is():
    # c has another guest: a member would get 1.0 / 2 there, less than a's 0.6; x = 0 hides that
    table = (host("a", 0.6, 1), host("b", 1.0, 1), host("c", 1.0, 1))
    gang = frozenset({"a", "b"})
    assert not member_should_move(table, gang, 2, 1.0, "a")
    assert member_should_move(table, gang, 2, 0.0, "a")


def test_ties_keep_the_gang_where_it_is_then_order_by_node_id():
    table = (host("z", 1.0, 0), host("a", 1.0, 1), host("m", 1.0, 0), host("b", 1.0, 0))
    assert not member_should_move(table, frozenset({"a"}), 1, 1.0, "a")
    # placing afresh, a's other guest counts: 1.0 / (1 + 1) = 0.5, below three empty hosts
    assert choose_hosts(table, frozenset(), 3, 1.0) == ("b", "m", "z")
    assert choose_hosts(table, frozenset({"z"}), 2, 1.0) == ("z", "b")


def test_a_table_with_fewer_hosts_than_p_offers_no_better_set():
    table = (host("a", 0.0, 1), host("b", 1.0, 1))
    assert choose_hosts(table, frozenset({"a", "b"}), 3, 1.0) == ("b", "a")
    assert not member_should_move(table, frozenset({"a", "b"}), 3, 1.0, "a")


def test_a_margin_keeps_the_gang_for_a_small_gain_not_for_a_large_one():
    # a offers its member 0.8; c offers 0.9, 12.5 % more
    table = (host("a", 0.8, 1), host("b", 1.0, 1), host("c", 0.9, 0))
    gang = frozenset({"a", "b"})
    assert member_should_move(table, gang, 2, 1.0, "a")                 # BSPlib: any better host
    assert not member_should_move(table, gang, 2, 1.0, "a", margin=0.2)  # 0.9 / 1.2 = 0.75 < 0.8
    assert member_should_move(table, gang, 2, 1.0, "a", margin=0.1)      # 0.9 / 1.1 = 0.82 > 0.8
    assert choose_hosts(table, gang, 2, 1.0, margin=0.2) == ("b", "a")


def test_bad_inputs_are_refused():
    table = (host("a", 1.0, 1),)
    with pytest.raises(ValueError):
        rank_hosts(table, frozenset(), 1.5)
    with pytest.raises(ValueError):
        member_should_move(table, frozenset({"a"}), 1, 1.0, "b")
    with pytest.raises(ValueError):
        choose_hosts(table, frozenset(), 0, 1.0)
    with pytest.raises(ValueError):
        rank_hosts(table, frozenset(), 1.0, margin=-0.1)
    with pytest.raises(ValueError):
        CheckCadence(every_supersteps=0)


def test_check_cadence_every_n_supersteps_or_t_seconds():
    both = CheckCadence(every_supersteps=10, every_seconds=120.0)
    assert not check_due(both, 9, 119.0)
    assert check_due(both, 10, 1.0) and check_due(both, 1, 120.0)
    assert not check_due(CheckCadence(every_supersteps=None, every_seconds=None), 10**6, 1e9)
    assert check_due(CheckCadence(every_supersteps=5, every_seconds=None), 5, 0.0)


def test_explain_names_the_hosts_that_fell_out():
    table = (host("a", 0.1, 1), host("b", 1.0, 1), host("c", 0.8, 0))
    ranking = rank_hosts(table, frozenset({"a", "b"}), 1.0)
    assert explain(ranking, 2) == "move: a 0.10 fell out of the best 2 (b 1.00, c 0.80)"
    assert explain(rank_hosts(table, frozenset({"b", "c"}), 1.0), 2).startswith("stay:")


views = st.builds(
    lambda available, guests, cpus, owner, accepting: (available, guests, cpus, owner, accepting),
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0]), st.integers(0, 3), st.integers(1, 2),
    st.booleans(), st.booleans())


@st.composite
def worlds(draw):
    """A table of 2-8 hosts, a gang of p on distinct hosts whose rows count its member among the guests."""
    rows = draw(st.lists(views, min_size=2, max_size=8))
    p = draw(st.integers(1, len(rows)))
    members = draw(st.permutations(range(len(rows))))[:p]
    table = []
    for index, (available, guests, cpus, owner, accepting) in enumerate(rows):
        guests += 1 if index in members else 0
        table.append(NodeView(f"n{index}", available, guests, cpus=cpus, idle_extremity=float(cpus),
                              owner_active=owner, accepting=accepting))
    return tuple(table), frozenset(f"n{i}" for i in members), p


def moved(table, gang, chosen):
    """The table after the gang moved: each host it left carries one guest fewer, each new one one more."""
    change = {h: -1 for h in gang - chosen} | {h: 1 for h in chosen - gang}
    return tuple(dataclasses.replace(v, guests=v.guests + change.get(v.node_id, 0)) for v in table)


@settings(max_examples=150, deadline=None)
@given(worlds(), st.sampled_from([0.0, 0.25]))
def test_with_x_added_moving_never_leads_straight_back(world, margin):
    table, gang, p = world
    chosen = frozenset(choose_hosts(table, gang, p, 1.0, margin))
    after = moved(table, gang, chosen)
    assert not or_reduce(member_should_move(after, chosen, p, 1.0, h, margin) for h in chosen)
    assert frozenset(choose_hosts(after, chosen, p, 1.0, margin)) == chosen


@settings(max_examples=150, deadline=None)
@given(worlds(), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.25]))
def test_the_members_answers_reduce_to_the_whole_table_predicate(world, x, margin):
    table, gang, p = world
    answers = [member_should_move(table, gang, p, x, h, margin) for h in gang]
    assert or_reduce(answers) == (frozenset(choose_hosts(table, gang, p, x, margin)) != gang)
    assert len(set(choose_hosts(table, gang, p, x, margin))) == p


def test_without_x_the_gang_would_move_straight_back():
    # a carries the member (1.0 / 1); b, a faster machine, has one other guest: with x = 0 it looks like 1.2 / 1
    table = (host("a", 1.0, 1), host("b", 1.2, 1, idle_extremity=2.0))
    assert not member_should_move(table, frozenset({"a"}), 1, 1.0, "a")   # b: 1.2 / 2 = 0.6 < 1.0
    assert member_should_move(table, frozenset({"a"}), 1, 0.0, "a")
    # once on b (1.2 / 2 = 0.6), a looks like 1.0 / max(0 + 0, 1) = 1.0: straight back
    after = moved(table, frozenset({"a"}), frozenset({"b"}))
    assert member_should_move(after, frozenset({"b"}), 1, 0.0, "b")


def test_a_cadence_from_the_options_turns_a_trigger_off_with_0():
    assert cadence_of(120.0, 0) == CheckCadence(every_supersteps=None, every_seconds=120.0)
    assert cadence_of(10.0, 50) == CheckCadence(every_supersteps=50, every_seconds=10.0)
    assert cadence_of(0.0, 0) == CheckCadence(every_supersteps=None, every_seconds=None)
    with pytest.raises(ValueError, match="not a cadence"):
        cadence_of(-1.0, 0)
    with pytest.raises(ValueError, match="not a cadence"):
        cadence_of(5.0, -2)
    assert cadence_of(2.0, 0, forced=True) == CheckCadence(every_supersteps=None, every_seconds=2.0, forced=True)
    with pytest.raises(ValueError, match="not a cadence"):
        cadence_of(0.0, 0, forced=True)


def test_a_cadence_reads_as_the_log_line_says_it():
    assert describe_cadence(cadence_of(5.0, 0)) == "every 5 s"
    assert describe_cadence(cadence_of(2.5, 50)) == "every 2.5 s or 50 supersteps"
    assert describe_cadence(cadence_of(0.0, 0)) == "never"

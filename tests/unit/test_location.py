"""Location: ranked destinations with prediction, the fresh re-check, constraints and receivers."""

import pytest

from frost_core.policies import (
    NodeView,
    PolicySettings,
    UnitView,
    admits,
    added_capacity,
    choose_destination,
    choose_source,
    confirm_destination,
    rank_destinations,
)

SETTINGS = PolicySettings(band=0.25, default_bandwidth=10e6)
UNIT = UnitView("t1", assignment_id="a", plugin="pi", memory=100, state_bytes=1_000_000,
                remaining_work=1000, restore_seconds=1)


def test_sender_picks_the_target_where_the_unit_finishes_first():
    source = NodeView("src", available=0.6, guests=3)          # each guest gets 0.2; offer 0.15 -> 0.2
    table = [
        source,
        NodeView("half", available=1.0, guests=1),             # offer 0.5 -> 0.333
        NodeView("empty", available=1.0, guests=0),            # offer 1.0 -> 0.5
        NodeView("fast-busy", available=2.0, guests=3),        # offer 0.5 -> 0.4
    ]
    # average offer (0.15 + 0.5 + 1.0 + 0.5) / 4 = 0.5375, lower 0.403; before-distances: src 0.3875
    # half: 0.3875 + 0.0375 = 0.425 -> 0.3375 + 0.2042 = 0.542, worse
    # empty: 0.3875 + 0.4625 = 0.85 -> 0.3375 + 0.0375 = 0.375, better
    # fast-busy: 0.425 -> 0.3375 + 0.1375 = 0.475, worse
    ranked = rank_destinations(source, UNIT, table, average=0.5375, lower=0.403, bandwidths={}, settings=SETTINGS)
    assert [d.node_id for d in ranked] == ["empty"]
    best = choose_destination(source, UNIT, table, 0.5375, 0.403, {}, SETTINGS)
    # there: 1 MB / 10 MB/s + 1 s restore + 1000 work at 1.0 = 1001.1 s (staying: 1000 / 0.2 = 5000 s)
    assert best is not None and best.finish == pytest.approx(1001.1)
    assert best.gain == pytest.approx(5000 - 1001.1)
    assert "to empty" in best.explain()


def test_constraints_exclude_targets():
    assert admits(NodeView("n", 1.0, 0, free_memory=50), UNIT) == "needs 100 bytes, 50 free"
    assert admits(NodeView("n", 1.0, 0, plugins=frozenset({"ray"})), UNIT) == "plugin pi not allowed"
    assert admits(NodeView("n", 1.0, 0, owner_active=True), UNIT) == "its owner is active"
    assert admits(NodeView("n", 1.0, 0, accepting=False), UNIT) == "not accepting guests"
    assert admits(NodeView("n", 1.0, 0, plugins=frozenset({"pi"})), UNIT) is None


def test_fresh_query_rejects_a_target_that_got_busier():
    source = NodeView("src", available=0.6, guests=3)
    stale = NodeView("empty", available=1.0, guests=0)
    chosen = choose_destination(source, UNIT, [source, stale], 0.6, 0.45, {}, SETTINGS)
    assert chosen is not None
    # still empty: confirmed
    assert confirm_destination(source, stale, UNIT, 0.6, 0.45, 10e6, SETTINGS, expected=chosen) is not None
    # two others sent it work meanwhile: its offer is 1/3 < 1.0 × (1 − 0.25)
    crowded = NodeView("empty", available=1.0, guests=2)
    assert confirm_destination(source, crowded, UNIT, 0.6, 0.45, 10e6, SETTINGS, expected=chosen) is None
    # its owner came back
    owner = NodeView("empty", available=1.0, guests=0, owner_active=True)
    assert confirm_destination(source, owner, UNIT, 0.6, 0.45, 10e6, SETTINGS) is None


def test_owner_forced_move_goes_anywhere_that_gives_something():
    source = NodeView("src", available=0.0, guests=1)          # owner took everything
    table = [source, NodeView("slow", available=0.15, guests=0)]  # offer 0.15 -> 0.075
    # a balance move would be refused: distances 0.5 + 0.35 = 0.85 -> 0.5 + 0.425 = 0.925
    assert choose_destination(source, UNIT, table, 0.5, 0.4, {}, SETTINGS) is None
    forced = choose_destination(source, UNIT, table, 0.5, 0.4, {}, SETTINGS, owner_forced=True)
    assert forced is not None and forced.node_id == "slow"


def test_receiver_asks_the_most_loaded_node():
    me = NodeView("me", available=1.0, guests=0)
    table = [me, NodeView("a", 0.6, 2), NodeView("b", 0.6, 3), NodeView("idle", 1.0, 0)]
    # offers: me 1.0, a 0.2, b 0.15, idle 1.0; average 0.5875; b is the most loaded
    source = choose_source(me, table, 0.5875)
    assert source is not None and source.node_id == "b"
    assert choose_source(me, [me, NodeView("idle", 1.0, 0)], 1.0) is None


def test_an_evicted_guest_goes_only_where_it_adds_capacity():
    # Owner-forced: the unit gets nothing where it is, so 5.6 is skipped; but on one CPU with a
    # guest already there it would get 1.0 / 2 = 0.5 while the guest there drops from 1.0 to 0.5:
    # together they get 1.0 either way, so that node is no place for it (it waits for a free one).
    source = NodeView("src", available=0.0, guests=1)
    table = [
        NodeView("shared", available=1.0, guests=1),            # adds 2 * 0.5 - 1 * 1.0 = 0
        NodeView("spiky", available=0.7, guests=0),             # adds 0.7 - 0 = 0.7
        NodeView("two-cpus", available=2.0, guests=1, cpus=2, idle_extremity=2.0),  # 2 * 1.0 - 1.0 = 1.0
    ]
    assert [added_capacity(n) for n in table] == pytest.approx([0.0, 0.7, 1.0])
    ranked = rank_destinations(source, UNIT, table, average=0.5, lower=0.375, bandwidths={}, settings=SETTINGS,
                               owner_forced=True)
    # finish: two-cpus 0.1 + 1 + 1000 / 1.0 = 1001.1 s; spiky 1.1 + 1000 / 0.7 = 1429.7 s
    assert [d.node_id for d in ranked] == ["two-cpus", "spiky"]
    only_shared = rank_destinations(source, UNIT, table[:1], 0.5, 0.375, {}, SETTINGS, owner_forced=True)
    assert only_shared == ()
    # the fresh re-check before sending applies the same rule
    assert confirm_destination(source, table[0], UNIT, 0.5, 0.375, 10e6, SETTINGS, owner_forced=True) is None

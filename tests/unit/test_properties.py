"""Properties over random tables: moves never predict a worse balance, and never come back."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.policies import (
    Action,
    NodeView,
    PolicySettings,
    UnitView,
    decide_transfer,
    predict_move,
    rank_destinations,
    resources_per_guest,
    summarize,
    thresholds,
)

available = st.floats(min_value=0.0, max_value=8.0, allow_nan=False)
guests = st.integers(min_value=0, max_value=12)
nodes = st.builds(lambda i, a, g, c: NodeView(f"n{i}", a, g, c, idle_extremity=2.0 * c),
                  st.integers(0, 10**6), available, guests, st.integers(1, 4))
units = st.builds(UnitView, st.just("u"), remaining_work=st.floats(0, 1e5), state_bytes=st.integers(0, 10**9),
                  restore_seconds=st.floats(0, 60))
SETTINGS = PolicySettings(band=0.2)


@settings(max_examples=200, deadline=None)
@given(st.lists(nodes, min_size=2, max_size=12, unique_by=lambda n: n.node_id), units, st.data())
def test_an_accepted_move_never_predicts_a_worse_total_distance(table, unit, data):
    source = data.draw(st.sampled_from(table).filter(lambda n: n.guests > 0), label="source") \
        if any(n.guests for n in table) else None
    if source is None:
        return
    system = summarize(table)
    lower, _ = thresholds(system.average, SETTINGS.band)
    for destination in rank_destinations(source, unit, table, system.average, lower, {}, SETTINGS):
        p = destination.prediction
        assert p.distance_after < p.distance_before
        # ... and the reverse move, judged on the predicted figures, is refused (no ping-pong)
        moved_source = replace(source, guests=source.guests - 1)
        target = next(n for n in table if n.node_id == destination.node_id)
        moved_target = replace(target, guests=target.guests + 1)
        assert not predict_move(moved_target, moved_source, system.average).improves


@settings(max_examples=200, deadline=None)
@given(available.filter(lambda a: a > 0), st.integers(1, 12), units, st.floats(0, 1e6))
def test_two_equally_loaded_nodes_never_move_a_unit(capacity, count, unit, now):
    a = NodeView("a", capacity, count, idle_extremity=8.0)
    b = NodeView("b", capacity, count, idle_extremity=8.0)
    table = [a, b]
    system = summarize(table)
    lower, _ = thresholds(system.average, SETTINGS.band)
    for me, other in ((a, b), (b, a)):
        reading = me.offer
        assert decide_transfer(reading, reading, me.guests, system, SETTINGS).action is Action.STAY
        assert rank_destinations(me, replace(unit, arrived_at=now - 1e9), table, system.average, lower, {},
                                 SETTINGS) == ()


@settings(max_examples=200, deadline=None)
@given(st.lists(nodes, min_size=2, max_size=12, unique_by=lambda n: n.node_id), units)
def test_an_evicted_guest_never_just_takes_a_share_from_other_guests(table, unit):
    # Owner-forced: wherever the unit goes, the guests there together with it get more than they
    # got without it (a full single-CPU node would only split the same speed one more way).
    source = replace(table[0], available=0.0)
    average = summarize(table).average
    for d in rank_destinations(source, unit, table[1:], average, thresholds(average, 0.2)[0], {}, SETTINGS,
                               owner_forced=True):
        node = next(n for n in table if n.node_id == d.node_id)
        together = resources_per_guest(node.available, node.guests + 1, node.cpus, node.idle_extremity) * (node.guests + 1)
        before = resources_per_guest(node.available, node.guests, node.cpus, node.idle_extremity) * node.guests
        assert together > before

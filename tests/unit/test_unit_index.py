"""The master's index of queued units: a run as submitted, the rest beside it, the same as a plain set."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.master.unit_index import AssignmentHead, QueuedUnits, UnitIndex

HEAD = AssignmentHead(id="m-1", seq=1, plugin="p", plugin_version="1", plugin_hash="h" * 64, one_per_host=False,
                      submitter="s@m")

operations = st.lists(st.tuples(st.sampled_from(["add", "discard", "first"]), st.integers(0, 40)), max_size=120)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), operations)
def test_queued_units_say_what_a_set_of_them_says_after_any_queueing_placing_and_finishing(start, length, steps):
    """Units leave the run out of order (placed on a host that fits, finished, cancelled) and come back (evicted,
    failed, found queued when the store opens): the count, membership and the lowest first stay a set's."""
    queued, model = QueuedUnits(start, start + length), set(range(start, start + length))
    for operation, index in steps:
        if operation == "add":
            queued.add(index)
            model.add(index)
        elif operation == "discard":
            queued.discard(index)
            model.discard(index)
        else:
            assert queued.first(index % 7) == sorted(model)[:index % 7]
        assert len(queued) == len(model)
        assert queued.first(len(model) + 1) == sorted(model)
    assert queued.first(100) == sorted(model)


def test_a_big_submit_is_queued_at_once_and_placed_lowest_first():
    """A 100,000-unit submit put each unit into a set and a heap under the index's lock (67 ms the event loop
    could wait for, on a quiet machine; `bench/submit_loop_hold.py`): the submit's units are one run now."""
    index = UnitIndex()
    index.add_assignment(HEAD, range(100_000))
    assert index.queued_count(HEAD.id) == 100_000
    for unit in (0, 1, 3):
        index.run(HEAD.id, unit, host="h", epoch=1)
    assert index.first_queued(HEAD.id, 3) == [2, 4, 5]
    index.queue(HEAD.id, 1)   # evicted: waits in its place again
    assert index.first_queued(HEAD.id, 3) == [1, 2, 4]
    assert index.queued_count(HEAD.id) == 99_998

"""The queue's order: oldest assignment first, as many of its units as can be placed, never more than the slots."""

import pytest

from frost_core.policies.fair_share import ShareSettings
from frost_core.policies.queue_order import QueuedAssignment, queue_order


def waiting(assignment_id: str, seq: int, queued: int, placeable: int | None = None) -> QueuedAssignment:
    return QueuedAssignment(assignment_id, seq, "alice@n1", queued, queued if placeable is None else placeable)


@pytest.mark.parametrize("assignments, slots, order", [
    # No slots: nothing is looked at, however long the queue.
    ([waiting("a", 1, 10_000)], 0, []),
    # The oldest assignment fills the slots before a younger one gets any (seq 1 before seq 2, listed either way).
    ([waiting("b", 2, 5), waiting("a", 1, 3)], 6, [("a", 3), ("b", 3)]),
    ([waiting("a", 1, 10_000), waiting("b", 2, 5)], 8, [("a", 8)]),
    # One per host: 3 free hosts, one already runs a unit of "a" -> 2 of "a", the other 4 slots to "b".
    ([waiting("a", 1, 50, placeable=2), waiting("b", 2, 50)], 6, [("a", 2), ("b", 4)]),
    # An assignment that can place nothing leaves every slot to the next.
    ([waiting("a", 1, 50, placeable=0), waiting("b", 2, 1)], 4, [("b", 1)]),
])
def test_the_oldest_assignment_goes_first_up_to_the_free_slots(assignments, slots, order):
    assert queue_order(assignments, slots) == order


def test_the_least_used_submitter_goes_first_and_first_come_within_it():
    shares = ShareSettings(enabled=True)
    usage = {"alice@n1": 3600.0, "bob@n2": 0.0}.__getitem__
    assignments = [QueuedAssignment("a1", 1, "alice@n1", 5, 5), QueuedAssignment("b1", 2, "bob@n2", 2, 2),
                   QueuedAssignment("b2", 3, "bob@n2", 9, 9)]
    assert queue_order(assignments, 6, usage, shares) == [("b1", 2), ("b2", 4)]
    # Fair share off: no memory, the two take turns (Alice's assignment is the oldest: she goes first on a tie).
    assert queue_order(assignments, 6, usage, ShareSettings(enabled=False)) == [("a1", 3), ("b1", 2), ("b2", 1)]


def test_with_fair_share_off_submitters_take_turns_fewest_running_first():
    off = ShareSettings(enabled=False)
    assignments = [QueuedAssignment("a1", 1, "alice@n1", 9, 9), QueuedAssignment("b1", 2, "bob@n1", 9, 9)]
    # Alice runs 2 units already, Bob none: of 3 slots Bob takes 2 (then they are even), then Alice's turn.
    assert queue_order(assignments, 3, shares=off, running={"alice@n1": 2}) == [("b1", 2), ("a1", 1)]
    # Whatever either used before (usage is not looked at), and an assignment that cannot place more gives
    # its submitter's turns to the other (one per host: Bob's can use one slot only).
    heavy = {"alice@n1": 1e9, "bob@n1": 0.0}.__getitem__
    capped = [assignments[0], QueuedAssignment("b1", 2, "bob@n1", 9, 1)]
    assert queue_order(capped, 4, heavy, off) == [("a1", 3), ("b1", 1)]

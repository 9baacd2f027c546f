"""The queue's order: how many of each assignment's queued units a placement round offers, and in what order.

A round fills at most the free slots of the cluster, so the master never looks at more queued units
than it can place; this function decides whose they are. Within an assignment units go in index
order (the store keeps them so). Assignments go least-used submitter first (`fair_share.queue_order`),
then oldest first: all the units of the oldest that can be placed, then the next. With fair share off
the submitters take turns, one slot at a time, whoever runs fewest units first (`equal_share`'s rule
on the master's side): a submitter's oldest assignment fills its turns first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from frost_core.policies import fair_share
from frost_core.policies.fair_share import ShareSettings


@dataclass(frozen=True)
class QueuedAssignment:
    """An assignment with units waiting, as the queue order judges it."""

    assignment_id: str
    seq: int            # submission order on this master: lower is older
    submitter: str
    queued: int         # its units waiting for a host
    placeable: int      # of those, how many this round could place at most (one per host: hosts without one)


def queue_order(assignments: Sequence[QueuedAssignment], slots: int, usage: Callable[[str], float] = lambda s: 0.0,
                shares: ShareSettings = ShareSettings(enabled=False),
                running: Mapping[str, int] | None = None) -> list[tuple[str, int]]:
    """(assignment id, how many of its queued units) to offer this round, in order, `slots` units at most.

    Least-used submitter first (its decayed `usage` over its share weight), then the oldest assignment,
    then unit index: an assignment that cannot use a slot (one per host, every free host already runs
    one) leaves it to the next, as a unit-by-unit walk of the queue would. With fair share off, turns
    (`equal_turns`) by the units each submitter has `running`.
    """
    by_age = sorted(assignments, key=lambda a: (a.seq, a.assignment_id))
    if not shares.enabled:
        return equal_turns(by_age, slots, running or {})
    chosen = []
    left = max(slots, 0)
    for waiting in fair_share.queue_order(by_age, lambda a: a.submitter, usage, shares):
        if left == 0:
            break
        take = min(waiting.queued, waiting.placeable, left)
        if take > 0:
            chosen.append((waiting.assignment_id, take))
            left -= take
    return chosen


def equal_turns(by_age: Sequence[QueuedAssignment], slots: int, running: Mapping[str, int]) -> list[tuple[str, int]]:
    """Fair share off: each of the `slots` goes to the submitter with the fewest units running plus taken so
    far this round (ties: the one whose oldest waiting assignment is older), to its oldest assignment that
    can still use one; (assignment id, count) in the order each was first chosen.

    Alice running 2, Bob 0, 3 slots: Bob, Bob (now 2 each), Alice -> Bob's 2 first, then Alice's 1.
    """
    load = dict(running)
    taken: dict[str, int] = {}
    room = {a.assignment_id: min(a.queued, a.placeable) for a in by_age}
    for _ in range(max(slots, 0)):
        open_ = [a for a in by_age if taken.get(a.assignment_id, 0) < room[a.assignment_id]]
        if not open_:
            break
        turn = min(open_, key=lambda a: load.get(a.submitter, 0))   # (min keeps the first: the oldest)
        taken[turn.assignment_id] = taken.get(turn.assignment_id, 0) + 1
        load[turn.submitter] = load.get(turn.submitter, 0) + 1
    return list(taken.items())

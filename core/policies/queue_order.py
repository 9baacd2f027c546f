"""The queue's order: how many of each assignment's queued units a placement round offers, and in what order.

A round fills at most the free slots of the cluster, so the master never looks at more queued units
than it can place; this function decides whose they are. Within an assignment units go in index
order (the store keeps them so). Assignments go least-used submitter first (`fair_share.queue_order`),
then oldest first; with fair share off, oldest first: all the units of the oldest that can be placed,
then the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
                shares: ShareSettings = ShareSettings(enabled=False)) -> list[tuple[str, int]]:
    """(assignment id, how many of its queued units) to offer this round, in order, `slots` units at most.

    Least-used submitter first (its decayed `usage` over its share weight), then the oldest assignment,
    then unit index: an assignment that cannot use a slot (one per host, every free host already runs
    one) leaves it to the next, as a unit-by-unit walk of the queue would.
    """
    chosen = []
    left = max(slots, 0)
    by_age = sorted(assignments, key=lambda a: (a.seq, a.assignment_id))
    for waiting in fair_share.queue_order(by_age, lambda a: a.submitter, usage, shares):
        if left == 0:
            break
        take = min(waiting.queued, waiting.placeable, left)
        if take > 0:
            chosen.append((waiting.assignment_id, take))
            left -= take
    return chosen

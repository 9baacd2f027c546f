"""A hosted unit's stay as a table of allowed changes: every pair, allowed or refused."""

from __future__ import annotations

import pytest

from frost_core.cluster.host import STAY_CHANGES, Hosted, Stay

R, E, M, L, S = Stay.RUNNING, Stay.EVICTED, Stay.MOVING, Stay.RELOCATING, Stay.STRANDED

ALLOWED = {
    (R, E),  # the owner evicts it
    (R, M),  # a move captures it
    (R, L),  # its guest was evicted without the host's evict(): it relocates
    (E, M),  # a move takes the eviction's capture on
    (E, L),  # the eviction's capture is in hand: it relocates
    (M, R),  # the move failed (or the guest ended first): it runs here again
    (L, S),  # no peer took it and its master is out of reach: it waits here for the master
}


def hosted_in(stay: Stay) -> Hosted:
    unit = Hosted(task=None, spec=None, arrived_at=0.0)  # type: ignore[arg-type]  (the stay needs neither)
    unit.stay = stay
    return unit


@pytest.mark.parametrize("start", list(Stay))
@pytest.mark.parametrize("goal", list(Stay))
def test_only_the_listed_changes_happen(start, goal):
    unit = hosted_in(start)
    allowed = (start, goal) in ALLOWED
    assert unit.change(goal) is allowed
    assert unit.stay is (goal if allowed else start)


def test_the_table_is_the_one_the_host_uses():
    assert {(a, b) for a, targets in STAY_CHANGES.items() for b in targets} == ALLOWED


@pytest.mark.parametrize(("stay", "leaving"), [(R, False), (E, False), (M, True), (L, True), (S, True)])
def test_a_unit_leaving_no_longer_counts_as_running_here(stay, leaving):
    # An evicted unit still holds its CPU and memory until its guest has stopped and it relocates.
    assert hosted_in(stay).leaving is leaving

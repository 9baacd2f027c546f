"""A running guest's phase as a table of allowed changes, and the awake event that follows it."""

from __future__ import annotations

import pytest

from frost_core.guest.running import PHASE_CHANGES, GuestPhase, RunningGuest

R, P, E, D = GuestPhase.RUNNING, GuestPhase.PAUSED, GuestPhase.EVICTING, GuestPhase.ENDED

ALLOWED = {
    (R, P), (P, R),  # the owner pauses and resumes it
    (R, E), (P, E),  # evicted, paused or not (a paused one is let run to answer)
    (R, D), (P, D), (E, D),  # its outcome is decided
}


def guest_in(phase: GuestPhase) -> RunningGuest:
    guest = RunningGuest(host=None, task=None, resume_from=None, next_seq=1)  # type: ignore[arg-type]
    guest.phase = phase  # (the table needs neither a process nor a task)
    return guest


@pytest.mark.parametrize("start", list(GuestPhase))
@pytest.mark.parametrize("goal", list(GuestPhase))
async def test_only_the_listed_changes_happen(start, goal):
    guest = guest_in(start)
    allowed = (start, goal) in ALLOWED
    assert guest.change(goal) is allowed
    assert guest.phase is (goal if allowed else start)


def test_the_table_is_the_one_the_guest_uses():
    assert {(a, b) for a, targets in PHASE_CHANGES.items() for b in targets} == ALLOWED


async def test_the_watcher_and_timer_sleep_only_while_paused():
    guest = guest_in(R)
    assert guest.awake.is_set()
    guest.change(P)
    assert not guest.awake.is_set() and guest.paused
    guest.change(E)  # an evicted guest must run to answer
    assert guest.awake.is_set() and guest.evicting and not guest.paused

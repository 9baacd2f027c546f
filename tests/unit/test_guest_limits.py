"""What a guest may put in its checkpoint memfd: half of what its memory cap leaves over what it uses."""

from __future__ import annotations

from frost_core.guest.limits import MIB, OUTBOX_MARGIN, outbox_room

SLACK = 64 * MIB


def test_a_state_that_fits_the_cap_once_but_not_twice_gets_no_room():
    # 48 MiB of state in a guest that declared 40 MiB: it runs (73 MiB of a 104 MiB cap), and a second
    # copy in the memfd would not fit.
    assert outbox_room(73 * MIB, 0, 40 * MIB, SLACK) < 48 * MIB


def test_half_of_what_the_cap_leaves_less_the_margin_and_what_the_memfd_already_holds():
    assert outbox_room(100 * MIB, 0, 400 * MIB, SLACK) == (464 * MIB - OUTBOX_MARGIN - 100 * MIB) // 2
    assert outbox_room(100 * MIB, 16 * MIB, 400 * MIB, SLACK) == (448 * MIB - OUTBOX_MARGIN - 100 * MIB) // 2


def test_no_room_before_the_guest_was_measured_or_past_its_cap():
    assert outbox_room(0, 0, 400 * MIB, SLACK) == 0
    assert outbox_room(500 * MIB, 0, 400 * MIB, SLACK) == 0

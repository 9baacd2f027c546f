"""The guest's refusal notes: each one up to a limit, then a count, each sent once."""

from __future__ import annotations

import errno

from frost_core.guest.refusals import MAX_NOTED, RefusalLog


def test_a_fork_loop_is_noted_up_to_the_limit_then_counted_and_nothing_is_sent_twice():
    log = RefusalLog()
    refused = BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    for _ in range(MAX_NOTED + 10):
        log.note("fork", refused)
    taken = log.take()
    assert taken[:MAX_NOTED] == [("fork", "BlockingIOError: Resource temporarily unavailable")] * MAX_NOTED
    assert taken[MAX_NOTED:] == [("more attempts", "10 refusals not listed one by one")]
    assert log.take() == []
    log.note("fork", refused)
    assert log.take() == [("more attempts", "1 refusals not listed one by one")]

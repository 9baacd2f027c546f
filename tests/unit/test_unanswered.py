"""Peers whose calls ran out rest, longer after each, and any answer takes them back (master/unanswered.py)."""

from __future__ import annotations

from frost_core.master.unanswered import REST_FIRST, REST_LONGEST, Unanswered, rest_after

PEER, OTHER = "a" * 32, "b" * 32


def test_each_call_that_runs_out_again_after_a_rest_doubles_the_rest_up_to_a_minute():
    peers, now, rests = Unanswered(), 0.0, []
    for _ in range(7):
        rests.append(peers.missed(PEER, now))
        now += rests[-1]
        assert PEER not in peers.resting(now)   # its rest is over: the next round asks it
    assert rests == [REST_FIRST, 2 * REST_FIRST, 4 * REST_FIRST, 8 * REST_FIRST, REST_LONGEST, REST_LONGEST,
                     REST_LONGEST]
    assert [rest_after(misses) for misses in (1, 2, 5, 50)] == [5.0, 10.0, 60.0, 60.0]


def test_calls_that_ran_out_together_count_once():
    peers = Unanswered()
    assert peers.missed(PEER, 10.0) == REST_FIRST
    assert [peers.missed(PEER, 10.0 + t) for t in (0.0, 0.1, REST_FIRST - 0.1)] == [None, None, None]
    assert peers.resting(11.0) == {PEER: 10.0 + REST_FIRST}
    assert peers.rests(PEER, 11.0) and not peers.rests(OTHER, 11.0) and not peers.rests(PEER, 10.0 + REST_FIRST)
    assert peers.missed(PEER, 10.0 + REST_FIRST + 3.0) == 2 * REST_FIRST


def test_an_answer_takes_a_peer_back_at_once_and_its_next_miss_starts_from_the_first_rest():
    peers = Unanswered()
    peers.missed(PEER, 0.0)
    peers.missed(PEER, 6.0)
    peers.missed(OTHER, 6.0)
    peers.answered(PEER)
    assert peers.resting(7.0) == {OTHER: 6.0 + REST_FIRST}
    assert peers.missed(PEER, 8.0) == REST_FIRST


def test_clear_takes_every_peer_back():
    peers = Unanswered()
    peers.missed(PEER, 0.0)
    peers.missed(OTHER, 0.0)
    peers.clear()
    assert peers.resting(1.0) == {}
    assert peers.missed(PEER, 1.0) == REST_FIRST

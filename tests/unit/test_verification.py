"""Which units a master checks, and what the copies of a checked unit decide."""

import random

from frost_core.master.verification import MAX_COPIES, choose_checked, decide, summary


def test_the_fraction_of_units_checked_is_chosen_at_random():
    assert choose_checked(50, 0.0, random.Random(1)) == frozenset()
    assert choose_checked(50, 1.0, random.Random(1)) == frozenset(range(50))
    picked = [len(choose_checked(1000, 0.02, random.Random(seed))) for seed in range(20)]
    assert 10 <= sum(picked) / len(picked) <= 30            # about 2 % of 1000
    assert choose_checked(1000, 0.5, random.Random(1)) != choose_checked(1000, 0.5, random.Random(2))


def test_two_agreeing_copies_decide_and_a_third_settles_a_mismatch():
    assert decide((("a", "x"),)).agreed is None                                 # one copy: run another
    assert decide((("a", "x"), ("b", "x"))).agreed == "x"
    mismatch = decide((("a", "x"), ("c", "y")))
    assert (mismatch.agreed, mismatch.wrong, mismatch.exhausted) == (None, (), False)   # a third host runs it
    settled = decide((("a", "x"), ("c", "y"), ("b", "x")))
    assert (settled.agreed, settled.wrong) == ("x", ("c",))
    nobody = decide(tuple((f"h{i}", f"r{i}") for i in range(MAX_COPIES)))
    assert nobody.agreed is None and nobody.exhausted


def test_the_summary_says_how_many_units_were_verified():
    assert summary(0.0, 10, 0) == "not verified"
    assert summary(0.02, 100, 3) == "3 of 100 units verified by a second host (2 % asked)"
    assert summary(1.0, 10, 10) == "10 of 10 units verified by a second host"

"""The fair-share simulator: Jain's index, max-min shares, and first-come against fair share on small worlds."""

import random

import pytest

from frost_core.policies.fair_share import ShareSettings
from frost_core.sim.fairness import (
    FairnessWorld, Submission, fair_allocation, jain_index, measure, run, workload,
)


def test_jains_index_is_one_for_equal_and_one_over_n_for_one_taking_all():
    assert jain_index([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # (1 + 3)^2 / (2 * (1 + 9)) = 0.8
    assert jain_index([1.0, 3.0]) == pytest.approx(0.8)


def test_max_min_shares_give_the_small_what_they_want_and_split_the_rest_by_weight():
    # 10 slots: a wants 2, b and c want plenty: a 2, b and c 4 each
    assert fair_allocation({"a": 2, "b": 50, "c": 50}, {}, 10) == pytest.approx({"a": 2, "b": 4, "c": 4})
    # c weighs 3: of 8 left, b 2 and c 6
    assert fair_allocation({"a": 2, "b": 50, "c": 50}, {"c": 3.0}, 10) == pytest.approx({"a": 2, "b": 2, "c": 6})
    assert fair_allocation({"a": 0}, {}, 4) == {"a": 0.0}


def test_a_small_late_submitter_waits_behind_a_big_one_first_come_but_not_with_fair_share():
    # Two slots; big brings 20 units of 10 s at 0, small 2 units at 5 s.
    world = FairnessWorld(slots=2, submissions=(Submission("big", 0.0, (10.0,) * 20),
                                                 Submission("small", 5.0, (10.0,) * 2)))
    first_come = run(world, ShareSettings(enabled=False))
    fair = run(world, ShareSettings())
    assert first_come.finish["small"] == 110.0    # after all of big's units
    assert fair.finish["small"] == 20.0           # the next slot that frees, twice (both free at 10, usage 0)
    assert first_come.makespan == fair.makespan == 110.0


def test_on_the_bench_world_fair_share_is_fairer_at_the_same_throughput():
    world = workload(random.Random(5))
    first_come = measure(world, run(world, ShareSettings(enabled=False)))
    fair = measure(world, run(world, ShareSettings()))
    assert fair.jain >= 0.9 > first_come.jain
    assert fair.small_slowdown < first_come.small_slowdown
    assert fair.throughput == pytest.approx(first_come.throughput, rel=0.03)

"""Young's checkpoint interval: the formula, its clamps and its guards."""

import math

import pytest

from frost_core.policies.checkpoint_interval import expected_overhead, young_interval


@pytest.mark.parametrize(
    ("cost", "per_hour", "lower", "upper", "expected"),
    [
        # C = 0.5 s, λ = 2/3600 s⁻¹: T = sqrt(2 * 0.5 * 1800) = sqrt(1800) ≈ 42.43 s
        (0.5, 2.0, 1.0, 900.0, math.sqrt(1800.0)),
        # C = 2 s, λ = 1/3600: T = sqrt(2 * 2 * 3600) = 120 s
        (2.0, 1.0, 1.0, 900.0, 120.0),
        # Cheap checkpoint: sqrt(2 * 0.001 * 1800) ≈ 1.9 s, clamped up to the 30 s floor
        (0.001, 2.0, 30.0, 900.0, 30.0),
        # Expensive checkpoint with a calm owner: sqrt(2 * 100 * 36000) ≈ 2683 s, clamped to 900 s
        (100.0, 0.1, 30.0, 900.0, 900.0),
        # Zero cost would mean checkpointing continuously: the floor
        (0.0, 2.0, 5.0, 60.0, 5.0),
        # An owner who never interrupts: λ = 0, the ceiling
        (1.0, 0.0, 5.0, 60.0, 60.0),
    ],
)
def test_young_interval(cost, per_hour, lower, upper, expected):
    assert young_interval(cost, per_hour, lower=lower, upper=upper) == pytest.approx(expected)


def test_interval_grows_with_cost_and_shrinks_with_interruptions():
    base = young_interval(1.0, 2.0, lower=0.001, upper=1e9)
    assert young_interval(4.0, 2.0, lower=0.001, upper=1e9) == pytest.approx(2 * base)
    assert young_interval(1.0, 8.0, lower=0.001, upper=1e9) == pytest.approx(base / 2)


@pytest.mark.parametrize(
    ("cost", "per_hour", "lower", "upper"),
    [(1.0, 2.0, 0.0, 10.0), (1.0, 2.0, 10.0, 5.0), (math.nan, 2.0, 1.0, 10.0), (1.0, math.inf, 1.0, 10.0)],
)
def test_bad_arguments_are_refused(cost, per_hour, lower, upper):
    with pytest.raises(ValueError):
        young_interval(cost, per_hour, lower=lower, upper=upper)


def test_overhead_at_the_default_interval_stays_small():
    # A 50 ms checkpoint, two interruptions an hour: T ≈ 13.4 s, clamped to the 30 s default floor.
    interval = young_interval(0.05, 2.0, lower=30.0, upper=900.0)
    assert expected_overhead(0.05, interval) == pytest.approx(0.05 / 30.0)
    assert expected_overhead(0.05, interval) < 0.005

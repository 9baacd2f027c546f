"""Information-policy arithmetic: comparable figures, smoothing, publishing, memory."""

import pytest

from frost_core.policies import (
    Tendency,
    available_power,
    fits_memory,
    guest_available,
    memory_pool,
    smooth,
    tendency,
    worth_publishing,
)


def test_figures_are_comparable_across_machines():
    # BSPlib: (4 cpus − 1.5 load) × speed 2 = 5.0
    assert available_power(4, 1.5, 2.0) == 5.0
    assert available_power(1, 3.0, 2.0) == 0.0
    # FROST: guests got 0.5 CPU-s in 2 s on a speed-1.6 machine: 0.25 × 1.6 = 0.4
    assert guest_available(0.5, 2.0, 1.6) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="positive duration"):
        guest_available(1.0, 0.0, 1.0)


def test_smoothing_and_tendency():
    assert smooth([1.0, 0.0, 0.5]) == 0.5
    with pytest.raises(ValueError, match="no readings"):
        smooth([])
    assert tendency(0.1, 0.4, 0.6) is Tendency.BELOW
    assert tendency(0.5, 0.4, 0.6) is Tendency.WITHIN
    assert tendency(0.7, 0.4, 0.6) is Tendency.ABOVE


def test_publish_only_on_a_five_percent_change():
    assert worth_publishing(None, 1.0)
    assert not worth_publishing(1.00, 1.04)     # 4 % change
    assert worth_publishing(1.00, 1.06)         # 6 % change (of the larger figure: 0.06/1.06 = 5.7 %)
    assert not worth_publishing(0.0, 0.0)


def test_memory_pool_and_fit():
    assert memory_pool(16 << 30) == 8 << 30
    assert memory_pool(16 << 30, 2 << 30) == 2 << 30
    assert memory_pool(1 << 30, 4 << 30) == 1 << 30
    with pytest.raises(ValueError, match="negative"):
        memory_pool(1, -1)
    assert fits_memory(100, 100) and not fits_memory(100, 101)

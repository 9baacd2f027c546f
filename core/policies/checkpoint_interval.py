"""When to take the next periodic checkpoint: Young's interval, clamped to the owner's bounds."""

from __future__ import annotations

import math

SECONDS_PER_HOUR = 3600.0


def young_interval(
    cost_seconds: float, interruptions_per_hour: float, *, lower: float, upper: float
) -> float:
    """Young's optimal checkpoint interval T = sqrt(2C/λ) (DESIGN.md §4), clamped to [lower, upper].

    C is the measured cost of one checkpoint of this unit; λ is the rate at which the owner is
    expected to interrupt (an interruption costs, on average, half an interval of work). A
    checkpoint that costs nothing would be taken continuously, so it is clamped up to `lower`;
    an owner who never interrupts makes λ zero, which clamps to `upper`.
    """
    if lower <= 0 or upper < lower:
        raise ValueError(f"checkpoint interval bounds must satisfy 0 < lower <= upper, got {lower}, {upper}")
    if not (math.isfinite(cost_seconds) and math.isfinite(interruptions_per_hour)):
        raise ValueError("checkpoint cost and interruption rate must be finite numbers")
    rate = max(interruptions_per_hour, 0.0) / SECONDS_PER_HOUR
    if rate == 0.0:
        return upper
    interval = math.sqrt(2.0 * max(cost_seconds, 0.0) / rate)
    return min(max(interval, lower), upper)


def expected_overhead(cost_seconds: float, interval_seconds: float) -> float:
    """Fraction of task time spent checkpointing at this interval: C / T (zero for no interval)."""
    if interval_seconds <= 0:
        return 0.0
    return max(cost_seconds, 0.0) / interval_seconds

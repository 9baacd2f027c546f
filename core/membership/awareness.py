"""Lifeguard's local health: when this node is slow, it stretches its own timeouts instead of blaming peers."""

from __future__ import annotations


class Awareness:
    """A small score that rises on evidence of our own slowness and decays on every clean probe.

    Our node shares a thread with the UI: a long redraw or a busy owner starves it, and a starved
    prober sees every peer as silent. Evidence: probes nobody answered, not even with a nack;
    having to refute a suspicion of ourselves; sleeps that overshoot. Timeouts scale with
    (score + 1).
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.score = 0

    def apply(self, delta: int) -> None:
        self.score = min(self.maximum, max(0, self.score + delta))

    def scale(self, timeout: float) -> float:
        return timeout * (self.score + 1)

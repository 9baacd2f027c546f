"""Per-peer bandwidth, learnt from real transfers: the `n` of migration cost S_c/n (FROST eq. 5.2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from statistics import median


def estimate_bandwidth(previous: float | None, nbytes: int, seconds: float, weight: float = 0.3) -> float:
    """Bytes per second towards a peer, an exponential average over real transfers.

    A tiny transfer says more about latency than bandwidth, so it moves the estimate less.
    """
    if seconds <= 0 or nbytes <= 0:
        return previous if previous is not None else 0.0
    observed = nbytes / seconds
    if previous is None:
        return observed
    trust = weight * min(1.0, nbytes / 1_000_000)
    return previous + trust * (observed - previous)


def assumed_bandwidth(known: Mapping[str, float], default: float) -> float:
    """What to assume towards a peer never transferred to yet.

    Peers of one cluster mostly share a network, so the median of the peers already measured
    says more than a constant; with none measured, the configured default.
    """
    return median(known.values()) if known else default


class Bandwidths:
    """This node's estimates towards each peer; the node calls `observe` after every transfer.

    Migrations and checkpoint replicas both move bulk bytes, so both feed it. `view()` is a
    read-only copy for one policy round.
    """

    def __init__(self, default: float) -> None:
        if default <= 0:
            raise ValueError("the default bandwidth must be positive")
        self.default = default
        self._known: dict[str, float] = {}

    def observe(self, peer: str, nbytes: int, seconds: float) -> float:
        """Fold one transfer of `nbytes` in `seconds` into the estimate towards `peer`; return it."""
        updated = estimate_bandwidth(self._known.get(peer), nbytes, seconds)
        if updated > 0:
            self._known[peer] = updated
        return self.get(peer)

    def get(self, peer: str) -> float:
        return self._known.get(peer) or assumed_bandwidth(self._known, self.default)

    def typical(self) -> float:
        """Towards a peer not chosen yet: the median of the measured peers, else the default."""
        return assumed_bandwidth(self._known, self.default)

    def view(self, peers: Iterable[str]) -> dict[str, float]:
        """The estimate towards each of `peers`, measured or assumed."""
        return {peer: self.get(peer) for peer in peers}

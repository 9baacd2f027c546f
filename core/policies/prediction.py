"""FROST's prediction (equations 5.1-5.6): would a move leave the system closer to its average?"""

from __future__ import annotations

from dataclasses import dataclass

from frost_core.policies.share import resources_per_guest
from frost_core.policies.views import NodeView


def predict_source(source: NodeView) -> float:
    """Equation 5.3, R_A* = R_A·N_A/(N_A−1), for R = the offer (what one more guest would get).

    Written on capacity: after one guest leaves, a newcomer would share with N_A − 1 others.
    """
    return resources_per_guest(source.available, source.guests, source.cpus, source.idle_extremity)


def predict_destination(destination: NodeView) -> float:
    """Equation 5.4, R_B* = R_B·N_B/(N_B+1): B's offer once the unit has arrived.

    Adding the unit's own load before comparing is also BSPlib's anti-thrash rule.
    """
    return resources_per_guest(destination.available, destination.guests + 2, destination.cpus,
                               destination.idle_extremity)


def distance(resources: float, average: float) -> float:
    """Equation 5.5, D = |R − S_avg|."""
    return abs(resources - average)


@dataclass(frozen=True)
class Prediction:
    """The figures of one predicted move, kept so the decision can be explained."""

    source: str
    destination: str
    average: float
    r_source: float
    r_destination: float
    r_source_after: float
    r_destination_after: float

    @property
    def distance_before(self) -> float:
        return distance(self.r_source, self.average) + distance(self.r_destination, self.average)

    @property
    def distance_after(self) -> float:
        return distance(self.r_source_after, self.average) + distance(self.r_destination_after, self.average)

    @property
    def improves(self) -> bool:
        """Equation 5.6, D_A* + D_B* < D_A + D_B (strict, so a move and its reverse never both pass)."""
        return self.distance_after < self.distance_before - 1e-12

    def explain(self) -> str:
        return (f"{self.source}->{self.destination}: R {self.r_source:.3g}/{self.r_destination:.3g} -> "
                f"{self.r_source_after:.3g}/{self.r_destination_after:.3g} around average {self.average:.3g}; "
                f"distance {self.distance_before:.3g} -> {self.distance_after:.3g}")


def predict_move(source: NodeView, destination: NodeView, average: float) -> Prediction:
    """Apply equations 5.3-5.5 to moving one guest from `source` to `destination`."""
    return Prediction(
        source=source.node_id,
        destination=destination.node_id,
        average=average,
        r_source=source.offer,
        r_destination=destination.offer,
        r_source_after=predict_source(source),
        r_destination_after=predict_destination(destination),
    )

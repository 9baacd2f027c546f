"""Frozen inputs of the load-balancing policies: a node as the resource table shows it, a unit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frost_core.policies.share import resources_per_guest


@dataclass(frozen=True)
class NodeView:
    """One row of the resource table (own node included), in calibrated speed units.

    `available` is what guests together could get here (FROST 5.1: measured at guest
    priority); `guests` counts guests running or on their way in; `idle_extremity` is
    `available` of this machine when idle, which also caps what one guest can get per CPU.
    `offer` (what one more guest would get) is the figure the policies compare.
    """

    node_id: str
    available: float
    guests: int
    cpus: int = 1
    idle_extremity: float = 1.0
    heavy_extremity: float = 0.0
    free_memory: int = 1 << 62
    plugins: frozenset[str] | None = None   # None: runs any plugin its cluster trusts
    owner_active: bool = False
    accepting: bool = True                  # False during an owner's eviction hold

    @property
    def per_guest(self) -> float:
        """What each guest here gets now (a unit's current speed)."""
        return resources_per_guest(self.available, self.guests, self.cpus, self.idle_extremity)

    @property
    def offer(self) -> float:
        """What one more guest would get here: the R of FROST's equations 5.3-5.6.

        FROST's R is measured by a probe competing with the guests, i.e. as a newcomer; so an
        empty idle machine offers all of it, one with a guest half (BSPlib's anticipated load).
        """
        return resources_per_guest(self.available, self.guests + 1, self.cpus, self.idle_extremity)


@dataclass(frozen=True)
class UnitView:
    """A guest as the selection and location policies judge it."""

    task_id: str
    assignment_id: str = ""
    plugin: str = ""
    memory: int = 0                 # declared bytes
    state_bytes: int = 0            # checkpoint or migration-point state size
    since_checkpoint: float = 0.0   # seconds of work lost by moving now; 0 at a migration point
    remaining_work: float = 0.0     # expected remaining work, speed units x seconds
    restore_seconds: float = 1.0    # T_r: time to start again from the state elsewhere
    arrived_at: float = float("-inf")  # when it arrived on this node (for the minimum stay)


@dataclass(frozen=True)
class PolicySettings:
    """The knobs of the transfer, selection and location policies, with their defaults."""

    band: float = 0.25              # thresholds at average x (1 -/+ band) (FROST 5.2.1)
    min_stay: float = 300.0         # seconds a moved unit stays unless its host's owner returns
    min_gain: float = 0.0           # seconds a move must save, over and above its cost
    default_bandwidth: float = 10e6  # bytes/s assumed towards a peer before any transfer
    broadcast_change: float = 0.05  # publish a new figure only on this relative change (FROST 9.1)
    candidates: int = 8             # destinations ranked; the rest are not worth a fresh query

    @classmethod
    def from_config(cls, config: Any) -> PolicySettings:
        """The knobs as the node's configuration sets them (the `[cluster]` options)."""
        return cls(
            band=config.get("cluster.balance_band"), min_stay=config.get("cluster.min_stay"),
            min_gain=config.get("cluster.min_gain"), default_bandwidth=config.get("cluster.default_bandwidth"),
            broadcast_change=config.get("cluster.broadcast_change"),
            candidates=config.get("cluster.destination_candidates"),
        )

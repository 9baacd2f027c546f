"""The ledger as the UI and `frost-tui stats` see it: given vs received, per peer and per day, in speed units."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LedgerPeerView:
    """This node and one peer: CPU this host gave the peer's units, and CPU this node's units got from it."""

    node_id: str
    name: str
    given: float        # normalised CPU-seconds (speed units x seconds)
    received: float
    is_self: bool = False   # this node: its own units run on its own machine (given and received alike)


@dataclass(frozen=True)
class LedgerDayView:
    day: str            # YYYY-MM-DD, UTC
    given: float
    received: float


@dataclass(frozen=True)
class ContributorView:
    """One node's own signed totals (this node's from its ledger), all time."""

    node_id: str
    name: str
    given: float
    received: float
    verified: bool      # from a summary whose signature checked out (this node: its own records)
    is_self: bool = False


@dataclass(frozen=True)
class LedgerView:
    since: float = 0.0                                  # wall time the per-peer and per-day figures start
    given: float = 0.0
    received: float = 0.0
    peers: tuple[LedgerPeerView, ...] = ()              # most exchanged first
    days: tuple[LedgerDayView, ...] = ()                # oldest first
    contributors: tuple[ContributorView, ...] = ()      # who gave most, cluster-wide
    history: tuple[float, ...] = ()                     # this machine's given per hour, the last HISTORY_HOURS
    refused: int = 0                                    # peers' summaries refused as forged or altered

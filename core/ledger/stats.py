"""Figures for people from the ledger's rows and the peers' summaries: pure, time passed in."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence

from frost_core.api.ledger import ContributorView, LedgerDayView, LedgerPeerView, LedgerView
from frost_core.ledger.book import RunsInHour
from frost_core.ledger.summary import Summary

HISTORY_HOURS = 48
TOP_CONTRIBUTORS = 10


def day_of(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(at))


def ledger_view(runs: Iterable[RunsInHour], summaries: Sequence[Summary], own: Summary, *, now: float, since: float,
                name_of: Callable[[str], str], refused: int = 0) -> LedgerView:
    """Given vs received since `since` per peer and per UTC day, this machine's giving per hour for the
    last HISTORY_HOURS, and the top contributors by their own all-time totals (`own` for this node)."""
    peers: dict[str, list[float]] = {}
    days: dict[str, list[float]] = {}
    history = [0.0] * HISTORY_HOURS
    first_hour = math.floor(now / 3600.0) - HISTORY_HOURS + 1
    given = received = 0.0
    for run in runs:
        if run.at < since:
            continue
        column = 0 if run.direction == "given" else 1
        peers.setdefault(run.peer, [0.0, 0.0])[column] += run.normalised
        days.setdefault(day_of(run.at), [0.0, 0.0])[column] += run.normalised
        if column == 0:
            given += run.normalised
            hour = math.floor(run.at / 3600.0) - first_hour
            if 0 <= hour < HISTORY_HOURS:
                history[hour] += run.normalised
        else:
            received += run.normalised
    contributors = [ContributorView(own.node_id, name_of(own.node_id), own.given, own.received, True, is_self=True)]
    contributors += [ContributorView(s.node_id, name_of(s.node_id), s.given, s.received, True)
                     for s in summaries if s.node_id != own.node_id]
    contributors.sort(key=lambda c: (-c.given, c.node_id))
    return LedgerView(
        since=since, given=given, received=received,
        peers=tuple(LedgerPeerView(p, name_of(p), g, r, is_self=p == own.node_id)
                    for p, (g, r) in sorted(peers.items(), key=lambda item: (-sum(item[1]), item[0]))),
        days=tuple(LedgerDayView(d, g, r) for d, (g, r) in sorted(days.items())),
        contributors=tuple(contributors[:TOP_CONTRIBUTORS]), history=tuple(history), refused=refused,
    )


def balances(summaries: Sequence[Summary], own: Summary) -> dict[str, float]:
    """Each node's given minus received, all time, from its own signed totals (this node: its ledger)."""
    out = {s.node_id: s.given - s.received for s in summaries}
    out[own.node_id] = own.given - own.received
    return out


"""Sharing now, without memory (`cluster.fair_share = false`): a free slot goes to the waiting submitter running least.

BOINC's resource share with equal shares: whoever used the cluster before, submitters that both
have units waiting get it in equal parts from now on, so two equal assignments submitted together
finish together. First come, first served would not: the master whose unit just ended hears of
the free slot first and keeps it. At each unit boundary a host gives its free slot to the
submitter with the fewest units running (cluster-wide, as its master counted them when it last
offered here), then to the one this host served least recently (round-robin: three slots cannot
split evenly between two, so each host alternates). Like fair share, it acts only at unit
boundaries and a free slot waits at most `fair_share.HOLD_SECONDS` for the submitter it is kept for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from frost_core.policies.fair_share import Demand, ShareSettings, first_in_line, short_submitter


def turn(running: int, served_at: float | None) -> tuple[int, float]:
    """A submitter's place in line for a slot: fewest units running first, then the longest since this host
    served it (never served: first)."""
    return running, -math.inf if served_at is None else served_at


def favoured_over(submitter: str, running: int, demand: Mapping[str, Demand], served: Mapping[str, float],
                  now: float, settings: ShareSettings) -> str | None:
    """Another submitter a free slot should go to instead of `submitter`'s unit, or None to take it.

    `running` is the offering submitter's units running besides the offered one; `served` when this
    host last gave a slot to each submitter. Among those whose masters offered lately with more units
    waiting, the first in line (`turn`) if it is ahead of `submitter`.
    """
    place = turn(running, served.get(submitter))
    return first_in_line(submitter, place, demand, lambda s, d: turn(d.running, served.get(s)), now, settings)


def explain(submitter: str, running: int, rival: str, rival_running: int) -> str:
    """Why a host kept a slot from `submitter` with fair share off, as the master's Why-not column shows it."""
    return (f"equal share: kept for {short_submitter(rival)} ({rival_running} running) "
            f"over {short_submitter(submitter)} ({running} running)")


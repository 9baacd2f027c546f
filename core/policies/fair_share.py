"""Fair share across submitters: whose unit goes next when several wait (HTCondor's effective user priority).

Each submitter's usage is the guest CPU time its units took, decayed with a half-life, so last
week's heavy user competes almost as a newcomer and this morning's does not. Divided by the
submitter's weight (`cluster.share_weights`, default 1) it is the effective usage: lower goes first.
A master orders its queue by it; a host with a free slot keeps it, for a few seconds, for the
least-used submitter that has lately offered it work, rather than giving it to whoever asks first.
Shares act only at unit boundaries: no running guest is stopped for them. With fair share off
the slots are still shared among those waiting now, without memory (`equal_share`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from frost_core.policies.reciprocity import credited_usage

T = TypeVar("T")
K = TypeVar("K", float, tuple[int, float])

DEMAND_REFRESH = 1.0
"""A master with units waiting offers one to each full host this often too, so the host knows who waits."""
DEMAND_MEMORY = 2.5 * DEMAND_REFRESH
"""Seconds a submitter whose master offered this host a unit counts as still wanting more: a master with
units waiting offers to every host at least every `DEMAND_REFRESH` seconds, free or full."""
HOLD_SECONDS = 3.0
"""At most this long a free slot waits for the favoured submitter's master to offer (one placement round
and one gossip hop); after that it goes to whoever asks, and the host forgets that submitter's demand
until its master offers again, so a submitter that stopped wanting costs one hold per host."""
CALL_INTERVAL = 0.2
"""A host keeping a free CPU for a submitter tells that submitter's master so (`SlotKept`) at most this often: the
master then offers at once, not at its next timed round (a second apart when none of its units finishes)."""


@dataclass(frozen=True)
class ShareSettings:
    enabled: bool = True
    half_life: float = 86400.0
    weights: Mapping[str, float] = field(default_factory=dict)
    demand_memory: float = DEMAND_MEMORY
    hold: float = HOLD_SECONDS

    @classmethod
    def from_config(cls, config) -> ShareSettings:
        return cls(enabled=config.get("cluster.fair_share"), half_life=config.get("cluster.usage_half_life"),
                   weights=dict(config.get("cluster.share_weights")))


@dataclass(frozen=True)
class Demand:
    """What a host last heard of a submitter's wish for a slot: from one of its master's offers."""

    usage: float        # its decayed CPU-seconds, as counted when offered
    queued: int         # its units still waiting at that master besides the offered one
    seen_at: float
    running: int = 0    # its units running then, cluster-wide as its master counts them (equal share)
    master: str = ""    # the node that offered: told when a free CPU here is kept for this submitter


def decayed(value: float, elapsed: float, half_life: float) -> float:
    """`value` after `elapsed` seconds of exponential decay: v · 2^(−elapsed / half_life)."""
    if half_life <= 0:
        return 0.0
    return value * math.pow(2.0, -max(elapsed, 0.0) / half_life)


def decayed_usage(records: Iterable[tuple[float, float]], now: float, half_life: float) -> float:
    """Σ cpu_i · 2^(−(now − t_i) / half_life) over (CPU-seconds, when) records: HTCondor's accumulated usage."""
    return sum(decayed(cpu, now - at, half_life) for cpu, at in records)


def usage_by_submitter(records: Iterable[tuple[str, float, float]], now: float,
                       half_life: float) -> dict[str, float]:
    """Each submitter's decayed usage from (submitter, CPU-seconds, when) records."""
    totals: dict[str, float] = {}
    for submitter, cpu, at in records:
        totals[submitter] = totals.get(submitter, 0.0) + decayed(cpu, now - at, half_life)
    return totals


def submitter_usage(counted: float, signed: float, *, reciprocity: bool = False, balance: float = 0.0) -> float:
    """What fair share takes a submitter to have used lately (speed-unit seconds, decayed), given what a master
    `counted` of it (its own, or what an offering master claims) and the ledger's `signed` figure: the sum of
    what every host's signed summary says it gave that submitter, cluster-wide. The signed figure is the
    floor: a master cannot make its own submitter look less used than the hosts that served it say.
    With reciprocity, what the submitter's node gave beyond what it took (`balance`) is credited.
    """
    usage = max(counted, signed)
    return credited_usage(usage, balance) if reciprocity else usage


def effective_usage(submitter: str, usage: float, weights: Mapping[str, float]) -> float:
    """Usage over the submitter's share weight (HTCondor's priority factor, inverted): lower goes first."""
    weight = weights.get(submitter, 1.0)
    return usage / weight if weight > 0 else math.inf


def queue_order(queue: Sequence[T], submitter_of: Callable[[T], str], usage: Callable[[str], float],
                settings: ShareSettings) -> list[T]:
    """The queue with the least-used submitters' units first, each submitter's own in their first-come order.

    Usage grows as results are accepted, so the order changes at unit boundaries; ties (and fair
    share off) keep first-come order, which `queue` is in.
    """
    if not settings.enabled:
        return list(queue)
    rank = {s: effective_usage(s, usage(s), settings.weights) for s in {submitter_of(item) for item in queue}}
    return sorted(queue, key=lambda item: rank[submitter_of(item)])   # stable: first-come within equal ranks


def note_demand(demand: Mapping[str, Demand], submitter: str, seen: Demand, now: float,
                settings: ShareSettings) -> dict[str, Demand]:
    """The host's memory of who wants slots after an offer: fresh entries only, this submitter's replaced."""
    kept = {s: d for s, d in demand.items() if now - d.seen_at <= settings.demand_memory and s != submitter}
    kept[submitter] = seen
    return kept


def favoured_over(submitter: str, usage: float, demand: Mapping[str, Demand], now: float,
                  settings: ShareSettings) -> str | None:
    """Another submitter a free slot should go to instead of `submitter`'s unit, or None to take it.

    The one with the lowest effective usage among those whose masters offered lately with more
    units waiting, if it is strictly lower than `submitter`'s (ties go to whoever asks first).
    """
    if not settings.enabled:
        return None
    mine = effective_usage(submitter, usage, settings.weights)
    return first_in_line(submitter, mine, demand, lambda s, d: effective_usage(s, d.usage, settings.weights),
                         now, settings)


def first_in_line(submitter: str, mine: K, demand: Mapping[str, Demand], place: Callable[[str, Demand], K],
                  now: float, settings: ShareSettings) -> str | None:
    """The submitter whose `place` in line (lower first) is ahead of `submitter`'s (`mine`), among those whose
    masters offered lately with more units waiting; None if none is."""
    rivals = [(place(s, d), s) for s, d in demand.items()
              if s != submitter and d.queued > 0 and now - d.seen_at <= settings.demand_memory]
    best = min(rivals, default=None)
    return best[1] if best is not None and best[0] < mine else None


def master_to_call(kept_for: Demand, called: Mapping[str, float], now: float) -> str | None:
    """The master to tell that a free CPU is kept for its submitter (`kept_for`: what its last offer said), or None:
    not known, or told less than `CALL_INTERVAL` ago (`called`: master -> when it was last told)."""
    if not kept_for.master or now - called.get(kept_for.master, -math.inf) < CALL_INTERVAL:
        return None
    return kept_for.master


def explain(submitter: str, usage: float, rival: str, rival_usage: float) -> str:
    """Why a host kept a slot from `submitter`, as a refusal the master's Why-not column shows."""
    return (f"fair share: kept for {short_submitter(rival)} ({_cpu(rival_usage)} of recent use) "
            f"over {short_submitter(submitter)} ({_cpu(usage)})")


def _cpu(seconds: float) -> str:
    return f"{seconds / 3600:.1f} CPU-h" if seconds >= 3600 else f"{seconds:.0f} CPU-s"


def short_submitter(submitter: str) -> str:
    """`user@node` with the node id cut to 8 characters, as the UI names submitters."""
    user, _, node = submitter.rpartition("@")
    return f"{user}@{node[:8]}" if user else submitter[:8]

"""BSPlib's gang migration predicate: may a gang of p members find p better hosts than its own?

A gang member runs at the speed of the slowest member, so the gang wants the p hosts where a
member gets the most. Every member holds a merged resource table (`NodeView` rows: the gossiped
figures of every peer, its own row fresh). The figure a member gets on a host is that host's
guest capacity shared among the guest processes competing for it: on a gang host the member is
already one of them; on any other host it is not yet, so the member's anticipated load `x` is
added there before ranking (BSPlib §3). Without `x` a host the gang just left looks better by
exactly the member it no longer carries, and the gang would move straight back.

Each member asks only "is my host still among the best p?"; the answers are OR-reduced at the
barrier, and on "yes" the gang takes `choose_hosts`. With the same table, some member answers yes
exactly when the best p differ from the gang's hosts. Pure: the caller passes the table and time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frost_core.policies.views import NodeView


@dataclass(frozen=True)
class HostRank:
    """One host as the gang ranks it: what a member would get there, and whether a member is there."""

    node_id: str
    share: float
    in_gang: bool


@dataclass(frozen=True)
class CheckCadence:
    """When members evaluate the predicate: every N supersteps or T seconds, whichever comes first.

    None switches that trigger off; both None means never (a gang that only moves on eviction).
    `forced`: every check takes a global checkpoint and restarts the gang on the best p whatever
    the members answer (BSPlib's table 1 "forced checkpoint every interval", the baseline that
    `bench/gang_table1.py` sets selective checks against).
    """

    every_supersteps: int | None = None
    every_seconds: float | None = 120.0
    forced: bool = False

    def __post_init__(self) -> None:
        if self.every_supersteps is not None and self.every_supersteps < 1:
            raise ValueError(f"a check every {self.every_supersteps} supersteps is not a cadence")
        if self.every_seconds is not None and not self.every_seconds > 0:
            raise ValueError(f"a check every {self.every_seconds} seconds is not a cadence")


def cadence_of(seconds: float, supersteps: int, forced: bool = False) -> CheckCadence:
    """The cadence `[gang] check_interval` and `check_supersteps` (or a submit's override) name: 0 switches that
    trigger off; `forced` (a submit's) restarts the gang at every check. ValueError for a negative figure, or
    forced checks that never come."""
    if seconds < 0 or supersteps < 0:
        raise ValueError(f"a check every {seconds:g} s or {supersteps} supersteps is not a cadence (0 turns one off)")
    if forced and not (seconds or supersteps):
        raise ValueError("forced checks with neither a time nor a count between them are not a cadence")
    return CheckCadence(every_supersteps=supersteps or None, every_seconds=seconds or None, forced=forced)


def describe_cadence(cadence: CheckCadence) -> str:
    """When a gang checks, for a log line: "every 5 s", "every 5 s or 50 supersteps", "never"."""
    parts = ([f"{cadence.every_seconds:g} s"] if cadence.every_seconds is not None else []) \
        + ([f"{cadence.every_supersteps} supersteps"] if cadence.every_supersteps is not None else [])
    return ("every " + " or ".join(parts) if parts else "never") + (" (forced)" if cadence.forced else "")


def member_share(view: NodeView, in_gang: bool, x: float) -> float:
    """What one gang member would get on `view`'s host, with `x` added to hosts outside the gang.

    The competing load is the host's guests (a gang host's count already holds its member) plus
    `x` outside the gang; the share is capped at one idle CPU, as for any guest. A host whose owner
    holds its guests, or that refuses newcomers, offers a member nothing.
    """
    if view.owner_active or not view.accepting:
        return 0.0
    load = view.guests + (0.0 if in_gang else x)
    share = max(view.available, 0.0) / max(load, 1.0)
    if view.cpus > 0:
        share = min(share, view.idle_extremity / view.cpus)
    return share


def rank_hosts(table: Iterable[NodeView], gang: frozenset[str], x: float, margin: float = 0.0) -> tuple[HostRank, ...]:
    """Every host of the table, best first; on a tie a gang host ranks first (staying costs nothing),
    then by node id, so every member holding the same table ranks it the same way.

    An outsider must offer `margin` (a fraction) more than a gang host to rank above it: BSPlib's
    predicate has none (0); a move costs a global checkpoint, which a small gain does not pay back.
    """
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"a member's anticipated load is between 0 and 1, not {x}")
    if margin < 0:
        raise ValueError(f"a margin is a fraction of at least 0, not {margin}")

    def key(rank: HostRank) -> tuple[float, bool, str]:
        return (-(rank.share if rank.in_gang else rank.share / (1.0 + margin)), not rank.in_gang, rank.node_id)

    ranks = [HostRank(v.node_id, member_share(v, v.node_id in gang, x), v.node_id in gang) for v in table]
    return tuple(sorted(ranks, key=key))


def choose_hosts(table: Iterable[NodeView], gang: frozenset[str], p: int, x: float,
                 margin: float = 0.0) -> tuple[str, ...]:
    """The best p distinct hosts for the gang (fewer when the table has fewer), best first.

    With an empty `gang` this is the placement at start: every host carries `x` alike.
    """
    if p < 1:
        raise ValueError(f"a gang has at least one member, not {p}")
    return tuple(r.node_id for r in rank_hosts(table, gang, x, margin)[:p])


def member_should_move(table: Iterable[NodeView], gang: frozenset[str], p: int, x: float, host: str,
                       margin: float = 0.0) -> bool:
    """One member's answer at a check: True when its `host` is no longer among the best p."""
    if host not in gang:
        raise ValueError(f"host {host!r} is not one of the gang's hosts")
    if len(gang) > p:
        raise ValueError(f"a gang of {p} members cannot be on {len(gang)} hosts")
    return host not in choose_hosts(table, gang, p, x, margin)


def or_reduce(answers: Iterable[bool]) -> bool:
    """The barrier's reduction: the gang moves when any member says so, so all agree on the superstep."""
    return any(answers)


def check_due(cadence: CheckCadence, supersteps: int, seconds: float) -> bool:
    """Is a check due, `supersteps` supersteps and `seconds` seconds after the last check (or the start)?"""
    if cadence.every_supersteps is not None and supersteps >= cadence.every_supersteps:
        return True
    return cadence.every_seconds is not None and seconds >= cadence.every_seconds


def explain(ranking: Sequence[HostRank], p: int) -> str:
    """One line for the UI: the best p, and the gang hosts that fell out of them."""
    best = ranking[:p]
    left = [r for r in ranking[p:] if r.in_gang]
    chosen = ", ".join(f"{r.node_id} {r.share:.2f}" for r in best)
    if not left:
        return f"stay: the gang's hosts are the best {p} ({chosen})"
    dropped = ", ".join(f"{r.node_id} {r.share:.2f}" for r in left)
    return f"move: {dropped} fell out of the best {p} ({chosen})"

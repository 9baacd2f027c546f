"""The resource vector: one frozen record per known node, and the pure rules that merge news about it."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

Address = tuple[str, int]
"""(host, port); UDP and TCP share the port number."""

MAX_COUNTER = 2**32 - 1
"""Incarnations and figure versions are 32-bit counters on the wire."""
MAX_SUSPECTORS = 8
"""Independent suspicions kept per record: enough to count Lifeguard confirmations, small on the wire."""


class MemberState(enum.IntEnum):
    """Liveness of a member; at equal incarnation a higher value is the stronger news."""

    ALIVE = 0
    SUSPECT = 1
    DEAD = 2
    LEFT = 3


@dataclass(frozen=True)
class ResourceFigures:
    """What a node offers its guests. Gossip carries these and never interprets them."""

    available: float = 0.0
    idle_extremity: float = 0.0
    heavy_extremity: float = 0.0
    cpus: int = 0
    free_memory: int = 0
    guests: int = 0
    mode: str = "neutral"


@dataclass(frozen=True)
class NodeRecord:
    """One row of the resource vector.

    `incarnation` is owned by the node itself (it bumps it to refute a suspicion); the state is
    the cluster's opinion of it. `figures_version` orders the node's own figure updates within an
    incarnation. The last four fields are local to the table holding the record: they never go
    on the wire as absolute times (clocks differ); `state_since` travels as an age. `heard_at`
    is direct evidence (it answered or wrote to us); `news_at` is when news the node itself
    made (new figures, a new incarnation) last reached us, first or second hand.
    """

    node_id: str
    name: str
    address: Address
    protocol_version: int
    incarnation: int = 0
    state: MemberState = MemberState.ALIVE
    figures: ResourceFigures = ResourceFigures()
    figures_version: int = 0
    suspectors: tuple[str, ...] = ()
    state_since: float = 0.0
    updated_at: float = 0.0
    heard_at: float = 0.0
    news_at: float = 0.0

    @property
    def is_active(self) -> bool:
        """Alive or suspect: still a member we probe and gossip with."""
        return self.state <= MemberState.SUSPECT


def merge_records(local: NodeRecord | None, remote: NodeRecord, now: float) -> NodeRecord | None:
    """The record a table should hold after hearing `remote`, or None when it teaches nothing.

    memberlist's rules: a higher incarnation wins whole; at equal incarnation the stronger state
    wins (suspect over alive, dead over suspect, left over dead), independent suspicions of the
    same incarnation add up, and the figures with the higher version win. The suspicion start is
    the earlier of the two, so every node's suspicion timer runs from the first suspicion.

    A death we have first-hand evidence against (the node answered or wrote to us after it was declared dead)
    is taken as a suspicion, which the node refutes: when a partition heals, the side that lost everyone
    brings back its verdicts, and the other side, which heard its members all along, would otherwise count
    them dead until they refute (and place their units again). memberlist's push-pull takes every remote
    death as a suspicion; here only a contradicted one, so a crash spreads as fast as before.
    """
    if local is None:
        return dataclasses.replace(remote, updated_at=now, heard_at=0.0, news_at=now)
    if remote.incarnation < local.incarnation:
        return None
    if remote.state == MemberState.DEAD and local.is_active and local.heard_at > remote.state_since:
        remote = dataclasses.replace(remote, state=MemberState.SUSPECT, state_since=now)
    if remote.incarnation > local.incarnation:
        return dataclasses.replace(remote, updated_at=now, heard_at=local.heard_at, news_at=now)
    merged = local
    if remote.figures_version > local.figures_version:
        merged = dataclasses.replace(
            merged,
            name=remote.name,
            address=remote.address,
            protocol_version=remote.protocol_version,
            figures=remote.figures,
            figures_version=remote.figures_version,
            news_at=now,
        )
    if remote.state > local.state:
        merged = dataclasses.replace(
            merged, state=remote.state, state_since=remote.state_since, suspectors=remote.suspectors
        )
    elif remote.state == local.state == MemberState.SUSPECT:
        suspectors = _union(local.suspectors, remote.suspectors)
        since = min(local.state_since, remote.state_since)
        if suspectors != local.suspectors or since != local.state_since:
            merged = dataclasses.replace(merged, suspectors=suspectors, state_since=since)
    if merged is local:
        return None
    return dataclasses.replace(merged, updated_at=now)


def add_suspicion(record: NodeRecord, suspector: str, now: float) -> NodeRecord:
    """`suspector` found `record`'s node unresponsive: start a suspicion or confirm the running one."""
    if record.state == MemberState.ALIVE:
        return dataclasses.replace(
            record, state=MemberState.SUSPECT, suspectors=(suspector,), state_since=now, updated_at=now
        )
    if record.state == MemberState.SUSPECT and suspector not in record.suspectors:
        return dataclasses.replace(record, suspectors=_union(record.suspectors, (suspector,)), updated_at=now)
    return record


def declare(record: NodeRecord, state: MemberState, now: float) -> NodeRecord:
    """The same incarnation in a stronger state (dead after suspicion, left after a goodbye)."""
    return dataclasses.replace(record, state=state, suspectors=(), state_since=now, updated_at=now)


def refute(own: NodeRecord, heard: NodeRecord, now: float) -> NodeRecord | None:
    """Our own record after hearing `heard` about ourselves, or None if the news is harmless.

    Any rumour that we are suspect, dead or gone, or that carries our incarnation or figure
    version from a previous life (we restarted), is answered by outbidding it: the bumped
    incarnation makes our alive record win everywhere.
    """
    stale_life = heard.incarnation > own.incarnation or heard.figures_version > own.figures_version
    bad_news = heard.incarnation == own.incarnation and heard.state != MemberState.ALIVE
    if not (stale_life or bad_news):
        return None
    return dataclasses.replace(
        own,
        incarnation=max(own.incarnation, heard.incarnation) + 1,
        figures_version=max(own.figures_version, heard.figures_version),
        state=MemberState.ALIVE,
        suspectors=(),
        state_since=now,
        updated_at=now,
    )


def figures_moved(old: ResourceFigures, new: ResourceFigures, threshold: float) -> bool:
    """True when `available` moved by at least `threshold` (a fraction) of the old figure.

    FROST pushes at once only on a change of 5 % or more; smaller drift rides the periodic
    push-pull. From zero, any rise counts.
    """
    if old.available == 0.0:
        return new.available != 0.0
    return abs(new.available - old.available) >= threshold * abs(old.available)


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(set(a) | set(b)))[:MAX_SUSPECTORS]

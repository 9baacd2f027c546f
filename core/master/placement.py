"""Where queued units go: a pure ranking of hosts from the resource table (FROST 5.4 at placement time).

A host qualifies when it takes guests, has a CPU free for one more (one unit per free core), has
the unit's declared memory free in its pool, and (with the assignment's one-per-host option,
FROST's own rule) holds no other unit of the same assignment. Among those, the one whose next
guest would get the most (`NodeView.offer`, the R of eq. 5.4) comes first. A round plans all
queued units against a copy of the table that it updates as it goes, so ten units queued at
once spread over the hosts instead of all picking the one that looked best.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from frost_core.policies.views import NodeView


@dataclass(frozen=True)
class Need:
    """What placing one unit takes."""

    task_id: str
    assignment_id: str
    memory: int
    one_per_host: bool = False


def qualifies(host: NodeView, need: Need, holding: frozenset[str]) -> bool:
    return (
        host.accepting
        and host.guests < host.cpus
        and host.free_memory >= need.memory
        and not (need.one_per_host and host.node_id in holding)
    )


def rank_hosts(need: Need, hosts: Sequence[NodeView], holding: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Qualifying hosts, best first: most offered per next guest, then fewest guests, then id (deterministic)."""
    eligible = [h for h in hosts if qualifies(h, need, holding)]
    eligible.sort(key=lambda h: (-h.offer, h.guests, h.node_id))
    return tuple(h.node_id for h in eligible)


def plan(needs: Sequence[Need], hosts: Sequence[NodeView],
         holding: Mapping[str, frozenset[str]]) -> list[tuple[Need, tuple[str, ...]]]:
    """Candidates for each unit in queue order, each planned as if the ones before it were placed.

    `holding` maps an assignment to the hosts already running one of its units. Units with no
    candidate are left out: they stay queued until a host frees up.
    """
    table = {h.node_id: h for h in hosts}
    held = {aid: set(nodes) for aid, nodes in holding.items()}
    planned = []
    for need in needs:
        holders = frozenset(held.get(need.assignment_id, ()))
        ranked = rank_hosts(need, list(table.values()), holders)
        if not ranked:
            continue
        planned.append((need, ranked))
        chosen = table[ranked[0]]
        table[chosen.node_id] = dataclasses.replace(
            chosen, guests=chosen.guests + 1, free_memory=chosen.free_memory - need.memory
        )
        held.setdefault(need.assignment_id, set()).add(chosen.node_id)
    return planned

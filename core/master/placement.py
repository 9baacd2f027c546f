"""Where queued units go: a pure ranking of hosts from the resource table (FROST 5.4 at placement time).

A host qualifies when it takes guests, has a CPU free for one more (one unit per free core), has
the unit's declared memory free in its pool, and (with the assignment's one-per-host option,
FROST's own rule) holds no other unit of the same assignment. Among those, the one whose next
guest would get the most (`NodeView.offer`, the R of eq. 5.4) comes first. A round plans all
queued units against a copy of the table that it updates as it goes, so ten units queued at
once spread over the hosts instead of all picking the one that looked best. A unit that stays
queued carries the reason (`why_not_placed`), like HTCondor's `condor_q -better-analyze`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from frost_core.policies.prefetch import units_held
from frost_core.policies.views import NodeView


@dataclass(frozen=True)
class Need:
    """What placing one unit takes."""

    task_id: str
    assignment_id: str
    memory: int
    one_per_host: bool = False
    avoid: frozenset[str] = frozenset()   # hosts that already returned a copy of it (a checked unit's next copy)
    ahead: bool = False   # it may wait on a host whose CPUs are all busy, placed ahead (`policies.prefetch`)
    refused: frozenset[str] = frozenset()   # hosts that refused it lately (`scheduler.REFUSAL_REMEMBERED`)


def qualifies(host: NodeView, need: Need, holding: frozenset[str]) -> bool:
    return (
        host.accepting
        and host.guests < (units_held(host.cpus) if need.ahead else host.cpus)
        and host.free_memory >= need.memory
        and not (need.one_per_host and host.node_id in holding)
        and host.node_id not in need.avoid
        and host.node_id not in need.refused
    )


def rank_hosts(need: Need, hosts: Sequence[NodeView], holding: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Qualifying hosts, best first: a free CPU before a place ahead, then most offered per next guest, then
    fewest guests, then id (deterministic)."""
    eligible = [h for h in hosts if qualifies(h, need, holding)]
    eligible.sort(key=lambda h: (h.guests >= h.cpus, -h.offer, h.guests, h.node_id))
    return tuple(h.node_id for h in eligible)


def with_free_cpu(host: NodeView) -> NodeView:
    """`host` with a CPU free, as it just said it has (it keeps one for this master's submitter), whatever older
    gossiped figures show."""
    return host if host.guests < host.cpus else dataclasses.replace(host, guests=max(host.cpus - 1, 0))


def plan(needs: Sequence[Need], hosts: Sequence[NodeView], holding: Mapping[str, frozenset[str]],
         limits: Mapping[str, int] | None = None) -> list[tuple[Need, tuple[str, ...]]]:
    """Candidates for each unit in queue order, each planned as if the ones before it were placed.

    `holding` maps an assignment to the hosts already running one of its units. Units with no
    candidate are left out: they stay queued until a host frees up (or one that refused them takes them), and the
    units after them take the room. A unit that may go `ahead` takes a free CPU if any host has one, else waits on a
    busy host for its next free CPU. `limits`: at most so many units of each assignment (the queue order's share).
    """
    table = {h.node_id: h for h in hosts}
    held = {aid: set(nodes) for aid, nodes in holding.items()}
    planned = []
    counted: dict[str, int] = {}
    for need in needs:
        if limits is not None and counted.get(need.assignment_id, 0) >= limits.get(need.assignment_id, 0):
            continue
        holders = frozenset(held.get(need.assignment_id, ()))
        ranked = rank_hosts(need, list(table.values()), holders)
        if not ranked:
            continue
        planned.append((need, ranked))
        counted[need.assignment_id] = counted.get(need.assignment_id, 0) + 1
        chosen = table[ranked[0]]
        table[chosen.node_id] = dataclasses.replace(
            chosen, guests=chosen.guests + 1, free_memory=chosen.free_memory - need.memory
        )
        held.setdefault(need.assignment_id, set()).add(chosen.node_id)
    return planned


def why_not_placed(need: Need, hosts: Sequence[NodeView], holding: frozenset[str] = frozenset(),
                   refusals: Mapping[str, str] | None = None,
                   named: Callable[[str], str] = lambda node: node[:8]) -> str:
    """Why no host takes this unit now, naming the first requirement that no host meets.

    Checked in the order `qualifies` checks them, each among the hosts that passed the ones
    before, so the reason is the one to fix: no host at all, none taking guests (paused, held
    after an eviction, owner busy), none with a free CPU, none with the memory ("needs 2 GiB,
    largest free 1 GiB"), every free one already runs this assignment (one per host). If some
    host qualifies, the unit waits for the next round, or that host refused it when offered
    (`refusals`: host -> its reason; `named`: how the reason names that host).
    """
    if not hosts:
        return "no peer known yet"
    taking = [h for h in hosts if h.accepting]
    if not taking:
        if len(hosts) > 1:
            return "no peer takes guests now (paused, their owners busy, a desk rule or an eviction's hold)"
        return "this machine takes no guests now (paused, its owner busy, a desk rule or an eviction's hold: " \
               "its Machine tab says which)"
    free = [h for h in taking if h.guests < h.cpus]
    if not free:
        return "no peer with free CPU"
    roomy = [h for h in free if h.free_memory >= need.memory]
    if not roomy:
        return f"needs {_size(need.memory)}, largest free {_size(max(h.free_memory for h in free))}"
    if need.one_per_host and all(h.node_id in holding for h in roomy):
        return "every free peer already runs a unit of this assignment (one per host)"
    if roomy and all(h.node_id in need.avoid for h in roomy):
        return "waiting for a free peer that has not run it yet (its result is being verified)"
    refused = [(node, reason) for node, reason in sorted((refusals or {}).items())
               if node in {h.node_id for h in roomy}]
    if refused and len(refused) == len(roomy):
        node, reason = refused[0]
        return f"refused by {named(node)}: {reason}"
    return "waiting for the next placement round"


def _size(nbytes: int) -> str:
    """Memory as the owner reads it: 2 GiB, 512 MiB."""
    if nbytes >= 1 << 30 and nbytes % (1 << 30) == 0:
        return f"{nbytes >> 30} GiB"
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.1f} GiB"
    return f"{nbytes >> 20} MiB"


class WaitingReasons(Mapping[str, str]):
    """Why each queued unit waits: those a round looked at by task id, the others by their assignment's reason
    (a round looks at no more units than it could place, so a long queue costs nothing to explain). The
    assignments' reasons may come as a function, called once somebody asks: a round per unit finished, and
    most rounds' reasons are never read (a headless node that nobody asks)."""

    def __init__(self, by_task: Mapping[str, str] | None = None,
                 by_assignment: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None):
        self._by_task = dict(by_task or {})
        self._by_assignment = by_assignment or {}

    def _assignments(self) -> Mapping[str, str]:
        if callable(self._by_assignment):
            self._by_assignment = dict(self._by_assignment())
        return self._by_assignment

    def __getitem__(self, task_id: str) -> str:
        if task_id in self._by_task:
            return self._by_task[task_id]
        return self._assignments()[task_id.rpartition(".")[0]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_task)

    def __len__(self) -> int:
        return len(self._by_task)

    def __bool__(self) -> bool:
        return bool(self._by_task or self._assignments())

    def worked_out(self) -> WaitingReasons:
        """These reasons, the assignments' worked out now: what a worker thread may read (working them out reads
        the store on the event loop's connection)."""
        return WaitingReasons(self._by_task, dict(self._assignments()))

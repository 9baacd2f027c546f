"""One balancing round as one pure function: send a guest, ask for work, or nothing, and why.

`plan()` strings the policies together the way FROST's algorithms 2-5 do: the symmetric
transfer policy decides whether to act, the selection policy which guest, the location
policy where to (ranked, for the fresh re-check before sending). The live node's balancer
and the simulator both call it, so the simulator's figures speak for the live loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from frost_core.policies.location import Destination, choose_source, confirm_destination, rank_destinations
from frost_core.policies.owner import GuestAction
from frost_core.policies.selection import select_guest
from frost_core.policies.transfer import Action, SystemView, decide_transfer, summarize, thresholds
from frost_core.policies.views import NodeView, PolicySettings, UnitView

MIN_PROGRESS = 0.01        # below this a progress figure says too little to extrapolate from
MAX_BACKOFF = 8            # ticks to wait, at most, after an attempt found no partner


class Step(str, Enum):
    SEND = "send"            # move one guest from here to a peer
    REQUEST = "request"      # ask a loaded peer to send one of its guests here
    NOTHING = "nothing"


@dataclass(frozen=True)
class Plan:
    """What the policies want this round, with everything the fresh re-check needs."""

    step: Step
    why: str
    wanted: Action                               # what the transfer policy asked for, before partners
    average: float
    lower: float
    unit: UnitView | None = None                 # SEND: the selected guest
    destinations: tuple[Destination, ...] = ()   # SEND: ranked targets, each confirmed afresh before sending
    source: NodeView | None = None               # REQUEST: the most loaded node, as the table showed it
    owner_forced: bool = False

    def confirm(self, me: NodeView, fresh: NodeView, bandwidth: float,
                settings: PolicySettings = PolicySettings()) -> Destination | None:
        """SEND: re-judge the ranked target `fresh` describes on its answer to a fresh query (FROST 5.4.1)."""
        if self.unit is None:
            raise ValueError("only a plan that sends a guest has destinations to confirm")
        expected = next((d for d in self.destinations if d.node_id == fresh.node_id), None)
        source = replace(me, available=0.0) if self.owner_forced else me
        return confirm_destination(source, fresh, self.unit, self.average, self.lower, bandwidth, settings,
                                   self.owner_forced, expected=expected)

    def still_loaded(self, me: NodeView, fresh: NodeView) -> bool:
        """REQUEST: does the source's fresh row still justify asking it (algorithm 4)?"""
        return choose_source(me, [fresh], self.average) is not None


def remaining_work(progress: float, cpu_seconds: float, speed: float) -> float:
    """Expected work left (speed units × s): the pace so far, continued (FROST 5.3's remaining run time).

    Before a plugin reports enough progress, a unit is expected to run as long again as it
    has already run, the median remaining life of heavy-tailed unit sizes.
    """
    done = max(cpu_seconds, 0.0) * speed
    if progress >= 1.0:
        return 0.0
    if progress < MIN_PROGRESS:
        return done
    return done * (1.0 - progress) / progress


def unit_estimate(*, task_id: str, assignment_id: str, plugin: str, memory: int, state_bytes: int,
                  since_checkpoint: float, progress: float, cpu_seconds: float, speed: float,
                  arrived_at: float) -> UnitView:
    """A guest as the selection and location policies judge it: the one estimate the balancer
    and an eviction both use, its remaining work from `remaining_work`.

    Moving now loses the CPU time since the last checkpoint (eq. 5.2's lost work) and ships
    `state_bytes`.
    """
    return UnitView(
        task_id=task_id, assignment_id=assignment_id, plugin=plugin, memory=memory, state_bytes=state_bytes,
        since_checkpoint=since_checkpoint, remaining_work=remaining_work(progress, cpu_seconds, speed),
        arrived_at=arrived_at,
    )


def evict_destinations(me: NodeView, table: Sequence[NodeView], unit: UnitView, bandwidths: Mapping[str, float],
                       settings: PolicySettings = PolicySettings()) -> tuple[Destination, ...]:
    """Where an evicted guest should go, best first: the ranking `plan` makes when the owner evicts.

    The owner wants the CPU, so this node counts as offering nothing (`available` 0) and the
    minimum stay does not hold the guest.
    """
    system = table_system(me, table)
    lower, _ = thresholds(system.average, settings.band)
    others = [row for row in table if row.node_id != me.node_id]
    return rank_destinations(_owner_evicting(me), unit, others, system.average, lower, bandwidths, settings,
                             owner_forced=True)


def plan(me: NodeView, peers: Sequence[NodeView], units: Sequence[UnitView], previous: float | None,
         system: SystemView, bandwidths: Mapping[str, float], now: float,
         settings: PolicySettings = PolicySettings(), owner: GuestAction = GuestAction.RUN) -> Plan:
    """This round's decision for the node `me` with `units` as its movable guests.

    `peers` are the candidate partners from the (gossip-stale) table, `system` that table
    boiled down (`summarize`, own row included), `previous` the offer this node read last
    round: the transfer policy acts only on two readings in a row beyond one threshold.
    While the owner policy suspends guests, it alone decides; once it evicts, a guest may
    leave regardless of thresholds and minimum stay, since it gets nothing here.
    """
    lower, _ = thresholds(system.average, settings.band)
    others = [row for row in peers if row.node_id != me.node_id]
    if owner is GuestAction.SUSPEND:
        return Plan(Step.NOTHING, "the owner policy holds the guests", Action.STAY, system.average, lower)
    if owner is GuestAction.EVICT:
        if not units:
            return Plan(Step.NOTHING, "owner active; no guest left to move", Action.SEND, system.average, lower)
        return _send(_owner_evicting(me), others, units, system.average, lower, bandwidths, now, settings,
                     Action.SEND, "owner active: every guest leaves", owner_forced=True)
    transfer = decide_transfer(me.offer, previous, len(units), system, settings)
    if transfer.action is Action.SEND:
        return _send(me, others, units, system.average, lower, bandwidths, now, settings, transfer.action,
                     transfer.explain(), owner_forced=False)
    if transfer.action is Action.REQUEST:
        source = choose_source(me, others, system.average)
        if source is None:
            return Plan(Step.NOTHING, f"{transfer.explain()}; no loaded node would gain from giving a guest",
                        transfer.action, system.average, lower)
        return Plan(Step.REQUEST, f"{transfer.explain()}; ask {source.node_id} (offer {source.offer:.3g})",
                    transfer.action, system.average, lower, source=source)
    return Plan(Step.NOTHING, transfer.explain(), transfer.action, system.average, lower)


def plan_for_requester(me: NodeView, requester: NodeView, units: Sequence[UnitView], system: SystemView,
                       bandwidth: float, now: float, settings: PolicySettings = PolicySettings()) -> Plan:
    """A receiver asked this node for work (algorithm 4): which guest gains from going there, if any.

    `requester` holds the figures the request carried, as fresh as a query; the move must
    still pass prediction (5.6) and pay off (5.1).
    """
    lower, _ = thresholds(system.average, settings.band)
    choice = select_guest(units, me.per_guest, requester.offer, bandwidth, now, settings)
    if choice is None:
        return Plan(Step.NOTHING, f"no guest here gains from moving to {requester.node_id}", Action.SEND,
                    system.average, lower)
    destination = confirm_destination(me, requester, choice.unit, system.average, lower, bandwidth, settings)
    if destination is None:
        return Plan(Step.NOTHING, f"moving {choice.unit.task_id} to {requester.node_id} would not bring both "
                    f"nodes nearer the average", Action.SEND, system.average, lower)
    return Plan(Step.SEND, f"{requester.node_id} asked for work; {choice.explain()}", Action.SEND, system.average,
                lower, unit=choice.unit, destinations=(destination,))


def table_system(me: NodeView, table: Sequence[NodeView]) -> SystemView:
    """`summarize` over the table with this node's own row replaced by its fresher figures."""
    return summarize([me] + [row for row in table if row.node_id != me.node_id])


def _owner_evicting(me: NodeView) -> NodeView:
    """This node as a destination sees it while its owner evicts: it offers guests nothing."""
    return replace(me, available=0.0)


def backoff_after(moved: bool, backoff: int) -> int:
    """Rounds to wait before the next attempt: 1 after a move, else double, up to MAX_BACKOFF.

    FROST's "skip migration for now": a node that found no partner asks again only later, so
    a cluster with no good move stays quiet.
    """
    return 1 if moved else min(max(backoff, 1) * 2, MAX_BACKOFF)


def _send(me: NodeView, peers: list[NodeView], units: Sequence[UnitView], average: float, lower: float,
          bandwidths: Mapping[str, float], now: float, settings: PolicySettings, wanted: Action, context: str, *,
          owner_forced: bool) -> Plan:
    """Selection, then location: the guest whose move saves most, then where it would finish first.

    The selection judges every guest against the best offer among the peers; the location
    policy then ranks the peers that pass prediction for that guest.
    """
    best = max(peers, key=lambda row: (row.offer, row.node_id), default=None)
    if best is None:
        return Plan(Step.NOTHING, f"{context}; no peer known", wanted, average, lower, owner_forced=owner_forced)
    bandwidth = bandwidths.get(best.node_id, settings.default_bandwidth)
    choice = select_guest(units, me.per_guest, best.offer, bandwidth, now, settings, owner_returned=owner_forced)
    if choice is None:
        return Plan(Step.NOTHING, f"{context}; no guest would finish sooner elsewhere, move included, or each "
                    f"arrived less than {settings.min_stay:.0f} s ago", wanted, average, lower,
                    owner_forced=owner_forced)
    ranked = rank_destinations(me, choice.unit, peers, average, lower, bandwidths, settings, owner_forced)
    if not ranked:
        return Plan(Step.NOTHING, f"{context}; no peer takes {choice.unit.task_id} and ends nearer the average",
                    wanted, average, lower, owner_forced=owner_forced)
    return Plan(Step.SEND, f"{context}; {choice.explain()}", wanted, average, lower, unit=choice.unit,
                destinations=ranked, owner_forced=owner_forced)

"""The location policy (FROST 5.4): where a selected guest goes, and whom an idle node asks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from frost_core.policies.information import fits_memory
from frost_core.policies.prediction import Prediction, predict_move
from frost_core.policies.selection import migration_cost, time_saved
from frost_core.policies.share import resources_per_guest
from frost_core.policies.views import NodeView, PolicySettings, UnitView

_NO_CAPACITY = 1e-9     # relative: less added speed than this is none (float rounding)


@dataclass(frozen=True)
class Destination:
    """A ranked target with the figures that justified it."""

    node_id: str
    gain: float
    cost: float
    finish: float             # seconds until the unit would be done there, move included
    prediction: Prediction

    def explain(self) -> str:
        return f"to {self.node_id}: saves {self.gain:.1f} s, move {self.cost:.1f} s; {self.prediction.explain()}"


def admits(node: NodeView, unit: UnitView) -> str | None:
    """Why `node` cannot host `unit` (memory pool, plugin, owner, eviction hold), or None."""
    if not node.accepting:
        return "not accepting guests"
    if node.owner_active:
        return "its owner is active"
    if not fits_memory(node.free_memory, unit.memory):
        return f"needs {unit.memory} bytes, {node.free_memory} free"
    if node.plugins is not None and unit.plugin and unit.plugin not in node.plugins:
        return f"plugin {unit.plugin} not allowed"
    return None


def added_capacity(node: NodeView) -> float:
    """Speed one more guest adds to what `node`'s guests get together (0 on a busy single-CPU node).

    On one CPU a newcomer only takes a share from the guests already there: the cluster
    gains nothing. It adds capacity on an empty node or one with an idle CPU left.
    """
    after = resources_per_guest(node.available, node.guests + 1, node.cpus, node.idle_extremity) * (node.guests + 1)
    before = resources_per_guest(node.available, node.guests, node.cpus, node.idle_extremity) * node.guests
    return after - before


def judge_destination(source: NodeView, candidate: NodeView, unit: UnitView, average: float, lower: float,
                      bandwidth: float, settings: PolicySettings, owner_forced: bool) -> Destination | None:
    """Apply 5.1 and 5.3-5.6 to one candidate; None if the move is not worth it.

    The unit runs at the source's per-guest share now and would get the destination's
    offer. Besides 5.6 the destination must stay above the lower threshold once it arrived
    (FROST states this for R_A*, which can only rise; the node that may sink is B). A
    guest forced out by its owner skips 5.6: it gets nothing where it is. It still goes only
    where it adds capacity (`added_capacity`): on a node whose CPUs its guests already fill
    it would slow them as much as it gains (and the minimum stay would then keep both there
    at that pace), so it waits for a free node instead.
    """
    if candidate.node_id == source.node_id or admits(candidate, unit) is not None:
        return None
    if owner_forced and added_capacity(candidate) <= _NO_CAPACITY * max(candidate.idle_extremity, 1e-9):
        return None
    prediction = predict_move(source, candidate, average)
    cost = migration_cost(unit.state_bytes, bandwidth, unit.restore_seconds, unit.since_checkpoint)
    here = 0.0 if owner_forced else source.per_guest
    gain = time_saved(unit.remaining_work, here, prediction.r_destination, cost)
    if gain <= settings.min_gain:
        return None
    if not owner_forced and (not prediction.improves or prediction.r_destination_after < lower):
        return None
    finish = cost + unit.remaining_work / prediction.r_destination
    return Destination(candidate.node_id, gain, cost, finish, prediction)


def rank_destinations(source: NodeView, unit: UnitView, table: Sequence[NodeView], average: float, lower: float,
                      bandwidths: Mapping[str, float], settings: PolicySettings = PolicySettings(),
                      owner_forced: bool = False) -> tuple[Destination, ...]:
    """Algorithm 5 with prediction: the acceptable targets, soonest finish first, at most `settings.candidates`.

    The caller queries the first one afresh (`confirm_destination`) and falls back to the
    next when its figures have changed for the worse.
    """
    found = []
    for candidate in table:
        bandwidth = bandwidths.get(candidate.node_id, settings.default_bandwidth)
        judged = judge_destination(source, candidate, unit, average, lower, bandwidth, settings, owner_forced)
        if judged is not None:
            found.append(judged)
    found.sort(key=lambda d: (d.finish, -d.prediction.r_destination, d.node_id))
    return tuple(found[: settings.candidates])


def choose_destination(source: NodeView, unit: UnitView, table: Sequence[NodeView], average: float, lower: float,
                       bandwidths: Mapping[str, float], settings: PolicySettings = PolicySettings(),
                       owner_forced: bool = False) -> Destination | None:
    """The best target from the (possibly stale) table, or None: skip migration for now."""
    ranked = rank_destinations(source, unit, table, average, lower, bandwidths, settings, owner_forced)
    return ranked[0] if ranked else None


def confirm_destination(source: NodeView, fresh: NodeView, unit: UnitView, average: float, lower: float,
                        bandwidth: float, settings: PolicySettings = PolicySettings(), owner_forced: bool = False,
                        expected: Destination | None = None) -> Destination | None:
    """Re-judge a chosen target on the figures it just sent back (FROST 5.4.1, last step).

    With `expected` (the table's judgement) the target is also refused when its fresh
    figure fell by more than the band: others sent it work meanwhile, so try the next.
    """
    judged = judge_destination(source, fresh, unit, average, lower, bandwidth, settings, owner_forced)
    if judged is None or expected is None:
        return judged
    floor = expected.prediction.r_destination * (1 - settings.band)
    return judged if judged.prediction.r_destination >= floor else None


def choose_source(requester: NodeView, table: Sequence[NodeView], average: float) -> NodeView | None:
    """Algorithm 4: a receiver asks the most loaded node with guests, if taking one would help.

    "Most loaded" is the lowest offer; the move must pass 5.6, and the unit must get more
    here than it gets there.
    """
    best: NodeView | None = None
    for node in table:
        if node.node_id == requester.node_id or node.guests == 0:
            continue
        if not predict_move(node, requester, average).improves or requester.offer <= node.per_guest:
            continue
        if best is None or (node.offer, node.node_id) < (best.offer, best.node_id):
            best = node
    return best

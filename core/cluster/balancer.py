"""The live node's load-balancing loop: every round one pure plan, a fresh query, then at most one move.

The decision itself is `frost_core.policies.balance.plan`, the function the simulator runs
too; this module only feeds it the node's figures, asks the chosen partner for its figures
afresh (FROST 5.4.1), calls the node's `move` or `request_work`, backs off when no partner
was found, and keeps the last decision so the UI can say why a guest left or stayed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

import trio

from frost_core.api.wording import counted
from frost_core.api.errors import FrostError
from frost_core.guest.views import GuestFigures
from frost_core.policies.balance import Plan, Step, backoff_after, plan, plan_for_requester, table_system, unit_estimate
from frost_core.policies.location import Destination
from frost_core.policies.owner import GuestAction
from frost_core.policies.transfer import Action, SystemView
from frost_core.policies.views import NodeView, PolicySettings, UnitView

log = logging.getLogger("frost.balancer")

OFF_RECHECK = 1.0
"""Seconds between looks at the interval while balancing is off (interval 0), so turning it on acts soon."""
MOVABLE_STATES = frozenset({"starting", "running", "paused"})   # not failing, leaving or mid-checkpoint


@dataclass(frozen=True)
class BalanceDecision:
    """What the loop did last and why, for the UI ("why did this guest leave?")."""

    at: float
    step: Step
    why: str
    task_id: str | None = None
    node_id: str | None = None
    refusal: str = ""   # what the partners said when they refused (empty when nobody was asked or all agreed)
    news: bool = False  # a move, a request, or a refusal that differs from the last one: worth an event


@dataclass(frozen=True)
class BalanceInputs:
    """One round's figures, as the node sees them now.

    `me` is this node's row (smoothed availability, guests running or arriving); `table` the
    gossiped rows (an own row there is ignored: `me` is fresher); `speed` this machine's
    calibrated speed, which turns a guest's CPU seconds into work; `owner` the owner
    policy's current action.
    """

    me: NodeView
    table: tuple[NodeView, ...]
    guests: tuple[GuestFigures, ...]
    bandwidths: Mapping[str, float]
    speed: float
    owner: GuestAction = GuestAction.RUN


def unit_view(guest: GuestFigures, speed: float, arrived_at: float) -> UnitView:
    """A running guest as the policies judge it (`policies.balance.unit_estimate`): moving it now
    ships its last checkpoint's bytes and loses its CPU time since."""
    return unit_estimate(
        task_id=guest.task_id, assignment_id=guest.assignment_id, plugin=guest.plugin, memory=guest.memory_bytes,
        state_bytes=guest.checkpoint_bytes, since_checkpoint=guest.cpu_since_checkpoint_seconds,
        progress=guest.progress, cpu_seconds=guest.cpu_seconds, speed=speed, arrived_at=arrived_at,
    )


Query = Callable[[str], Awaitable[NodeView | None]]
Move = Callable[[str, str], Awaitable[object]]
RequestWork = Callable[[str], Awaitable[object]]


class Balancer:
    """Runs `plan()` every `interval` seconds and carries it out through the node's callables.

    `read()` returns the round's `BalanceInputs`; `query(node_id)` asks a node for its current
    row (None when it does not answer); `move(task_id, node_id)` and `request_work(node_id)`
    raise FrostError when the peer refuses or the transfer fails. `interval` may be a callable
    (the node reads its configuration each round; 0 turns balancing off), `ready()` says whether
    the node has figures to plan on yet, `lock` is held for each round (the node's own evictions
    take it too) and `on_round(decision)` hears every round's decision.
    """

    def __init__(self, *, read: Callable[[], BalanceInputs], query: Query, move: Move, request_work: RequestWork,
                 settings: PolicySettings = PolicySettings(), interval: float | Callable[[], float] = 10.0,
                 clock: Callable[[], float] = trio.current_time, ready: Callable[[], bool] = lambda: True,
                 lock: trio.Lock | None = None,
                 on_round: Callable[[BalanceDecision | None], None] = lambda decision: None) -> None:
        self._read = read
        self._query = query
        self._move = move
        self._request_work = request_work
        self.settings = settings
        self._interval = interval if callable(interval) else (lambda: interval)
        self._clock = clock
        self._ready = ready
        self._lock = lock or trio.Lock()
        self._on_round = on_round
        self._arrivals: dict[str, float] = {}
        self._previous: float | None = None
        self._backoff = 1
        self._retry_at = float("-inf")
        self._last_refusal = ""
        self.last: BalanceDecision | None = None

    def note_arrival(self, task_id: str) -> None:
        """A guest arrived by migration: it stays `min_stay` seconds unless its new host's owner returns."""
        self._arrivals[task_id] = self._clock()

    @property
    def interval(self) -> float:
        """Seconds between rounds now (0: balancing is off)."""
        return self._interval()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run a round every `interval` seconds, forever: the loop the node runs."""
        task_status.started()
        while True:
            interval = self.interval
            if interval > 0 and self._ready():
                async with self._lock:
                    decision = await self.step()
                self._on_round(decision)
            await trio.sleep(interval if interval > 0 else OFF_RECHECK)

    async def step(self) -> BalanceDecision | None:
        """One round: read, plan, re-check the partner, act; None while backing off after a failed attempt."""
        inputs = self._read()
        now = self._clock()
        units = self._units(inputs, now)
        previous, self._previous = self._previous, inputs.me.offer
        system = table_system(inputs.me, inputs.table)
        if inputs.owner is GuestAction.EVICT:
            self.last = await self._evict(inputs, units, system, now)
            return self.last
        if now < self._retry_at:
            return None
        chosen = plan(inputs.me, inputs.table, units, previous, system, inputs.bandwidths, now, self.settings,
                      inputs.owner)
        if chosen.step is Step.SEND:
            decision = await self._send(chosen, inputs.me, inputs.bandwidths, now)
        elif chosen.step is Step.REQUEST:
            decision = await self._request(chosen, inputs.me, now)
        else:
            decision = BalanceDecision(now, Step.NOTHING, chosen.why)
        if chosen.wanted is not Action.STAY:
            moved = decision.step is not Step.NOTHING
            self._backoff = backoff_after(moved, self._backoff)
            self._retry_at = now if moved else now + self._backoff * self.interval
        self.last = decision = self._judge_news(decision)
        return decision

    def _judge_news(self, decision: BalanceDecision) -> BalanceDecision:
        """A move or a request is news; a refusal only when it differs from the one before.

        A peer that keeps refusing a guest (no room, owner away) is asked again every few rounds:
        one event says so, and the next when the reason changes, not one every twenty seconds.
        """
        if decision.step is not Step.NOTHING:
            self._last_refusal = ""
            return replace(decision, news=True)
        if not decision.refusal:
            return decision
        key = f"{decision.task_id}|{decision.refusal}"
        news, self._last_refusal = key != self._last_refusal, key
        return replace(decision, news=news)

    async def answer_request(self, requester: NodeView) -> BalanceDecision:
        """A peer asked for work and sent its current row: move it the guest that gains most, if any."""
        inputs = self._read()
        now = self._clock()
        bandwidth = inputs.bandwidths.get(requester.node_id, self.settings.default_bandwidth)
        system = table_system(inputs.me, (requester,) + tuple(r for r in inputs.table
                                                              if r.node_id != requester.node_id))
        chosen = plan_for_requester(inputs.me, requester, self._units(inputs, now), system, bandwidth, now,
                                    self.settings)
        if chosen.step is Step.SEND and inputs.owner is GuestAction.RUN:
            decision = await self._carry_out(chosen, chosen.destinations[0], now)
        elif chosen.step is Step.SEND:
            decision = BalanceDecision(now, Step.NOTHING, "the owner policy holds the guests")
        else:
            decision = BalanceDecision(now, Step.NOTHING, chosen.why)
        self.last = decision
        return decision

    async def _evict(self, inputs: BalanceInputs, units: list[UnitView], system: SystemView,
                     now: float) -> BalanceDecision:
        """The owner stays busy: place every guest that some peer takes, one plan per guest, at once.

        A guest no peer takes is left to the node, which returns it to its master's queue.
        """
        tried: set[str] = set()
        moved: list[BalanceDecision] = []
        while True:
            left = [unit for unit in units if unit.task_id not in tried]
            chosen = plan(inputs.me, inputs.table, left, None, system, inputs.bandwidths, now, self.settings,
                          GuestAction.EVICT)
            if chosen.step is not Step.SEND:
                break
            assert chosen.unit is not None
            tried.add(chosen.unit.task_id)
            decision = await self._send(chosen, inputs.me, inputs.bandwidths, now)
            if decision.step is Step.SEND:
                moved.append(decision)
        if not moved:
            return BalanceDecision(now, Step.NOTHING, chosen.why if not tried else
                                   f"owner active: no peer took any of {counted(len(tried), 'guest')}")
        last = moved[-1]
        return BalanceDecision(now, Step.SEND, f"owner active: moved {len(moved)} of {counted(len(units), 'guest')}; "
                               f"last {last.why}", last.task_id, last.node_id)

    def _units(self, inputs: BalanceInputs, now: float) -> list[UnitView]:
        present = {guest.task_id for guest in inputs.guests}
        self._arrivals = {task: at for task, at in self._arrivals.items() if task in present}
        return [unit_view(guest, inputs.speed, self._arrivals.get(guest.task_id, float("-inf")))
                for guest in inputs.guests if guest.state in MOVABLE_STATES]

    async def _send(self, chosen: Plan, me: NodeView, bandwidths: Mapping[str, float], now: float) -> BalanceDecision:
        """Query each ranked target afresh and send to the first whose answer still justifies the move."""
        assert chosen.unit is not None
        refusals = []
        refused = []  # what the partners that were asked to take the guest answered
        for expected in chosen.destinations:
            fresh = await self._query(expected.node_id)
            if fresh is None:
                refusals.append(f"{expected.node_id} did not answer")
                continue
            bandwidth = bandwidths.get(expected.node_id, self.settings.default_bandwidth)
            confirmed = chosen.confirm(me, fresh, bandwidth, self.settings)
            if confirmed is None:
                refusals.append(f"{expected.node_id}'s fresh figures no longer justify it")
                continue
            decision = await self._carry_out(chosen, confirmed, now)
            if decision.step is Step.SEND:
                return decision
            refusals.append(decision.why)
            refused.append(decision.refusal)
        return BalanceDecision(now, Step.NOTHING, f"{chosen.why}; but " + "; ".join(refusals),
                               task_id=chosen.unit.task_id, refusal="; ".join(refused))

    async def _carry_out(self, chosen: Plan, destination: Destination, now: float) -> BalanceDecision:
        assert chosen.unit is not None
        task_id = chosen.unit.task_id
        try:
            await self._move(task_id, destination.node_id)
        except FrostError as error:
            log.info("moving %s to %s failed: %s", task_id, destination.node_id, error.message)
            refusal = f"{destination.node_id} refused {task_id}: {error.message}"
            return BalanceDecision(now, Step.NOTHING, refusal, task_id=task_id, node_id=destination.node_id,
                                   refusal=refusal)
        return BalanceDecision(now, Step.SEND, f"{chosen.why}; {destination.explain()}", task_id=task_id,
                               node_id=destination.node_id)

    async def _request(self, chosen: Plan, me: NodeView, now: float) -> BalanceDecision:
        """Ask the most loaded node for work, once its fresh row shows it is still loaded."""
        assert chosen.source is not None
        node_id = chosen.source.node_id
        fresh = await self._query(node_id)
        if fresh is None or not chosen.still_loaded(me, fresh):
            return BalanceDecision(now, Step.NOTHING, f"{chosen.why}; but {node_id} is no longer loaded enough",
                                   node_id=node_id)
        try:
            await self._request_work(node_id)
        except FrostError as error:
            return BalanceDecision(now, Step.NOTHING, f"{chosen.why}; {node_id} refused: {error.message}",
                                   node_id=node_id, refusal=f"{node_id} refused: {error.message}")
        return BalanceDecision(now, Step.REQUEST, chosen.why, node_id=node_id)

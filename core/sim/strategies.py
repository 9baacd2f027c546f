"""The policies the simulator compares: none, random, threshold, ours and ideal."""

from __future__ import annotations

import heapq
from collections import deque

from ..policies import (
    Action,
    Mode,
    NodeView,
    OwnerPolicy,
    OwnerSettings,
    OwnerView,
    PolicySettings,
    SystemView,
    UnitView,
    choose_source,
    confirm_destination,
    decide_transfer,
    estimate_bandwidth,
    rank_destinations,
    resources_per_guest,
    select_guest,
    smooth,
    thresholds,
    transfer_mode,
    worth_publishing,
)
from ..policies.owner import GuestAction, Phase
from .engine import CHECK, Node, Simulation, Unit, restore_seconds

BUSY_LOAD = 0.5            # an owner above this counts in a baseline's queue length


class Strategy:
    """Hooks the engine calls; the default does nothing (the "none" policy)."""

    name = "none"

    def start(self, sim: Simulation) -> None: ...
    def on_submit(self, sim: Simulation, unit: Unit) -> None: ...
    def on_tick(self, sim: Simulation) -> None: ...
    def on_owner(self, sim: Simulation, node: Node) -> None: ...
    def on_complete(self, sim: Simulation, node: Node) -> None: ...
    def on_land(self, sim: Simulation, unit: Unit, node: Node) -> None: ...
    def on_check(self, sim: Simulation, node: Node, tag: object) -> None: ...


def queue_length(node: Node) -> int:
    """The classic load index: processes wanting the CPU, the owner's included."""
    return len(node.guests) + node.incoming + (1 if node.load >= BUSY_LOAD else 0)


class RandomStrategy(Strategy):
    """Eager, Lazowska & Zahorjan's Random: over threshold T, send a unit to any node, once."""

    name = "random"
    threshold = 2

    def on_tick(self, sim: Simulation) -> None:
        for node in sim.nodes:
            if queue_length(node) >= self.threshold:
                movable = [u for u in node.guests if u.moves == 0]
                if movable:
                    target = sim.nodes[sim.rng.randrange(len(sim.nodes) - 1)]
                    if target is node:
                        target = sim.nodes[-1]
                    sim.move(sim.rng.choice(movable), target, _reason(node))


class ThresholdStrategy(Strategy):
    """Eager, Lazowska & Zahorjan's Threshold: probe up to 3 random nodes, send where q+1 < T."""

    name = "threshold"
    threshold = 2
    probes = 3

    def on_tick(self, sim: Simulation) -> None:
        for node in sim.nodes:
            if queue_length(node) >= self.threshold and node.guests:
                for _ in range(self.probes):
                    target = sim.nodes[sim.rng.randrange(len(sim.nodes))]
                    if target is not node and queue_length(target) + 1 < self.threshold:
                        sim.move(sim.rng.choice(node.guests), target, _reason(node))
                        break


def _reason(node: Node) -> str:
    return "owner" if node.load >= BUSY_LOAD else "balance"


class IdealStrategy(Strategy):
    """One global queue with free, instant moves and perfect knowledge: a bound, not a policy.

    Every tick the units with the most work left take the places with the most speed per
    guest (longest remaining first, sharing a machine only when units outnumber machines).
    """

    name = "ideal"

    def on_tick(self, sim: Simulation) -> None:
        units = []
        for node in sim.nodes:
            sim.settle(node)
            units += node.guests
            node.guests = []
        units.sort(key=lambda u: (-u.remaining, u.spec.index))
        places = [(-node.available, node.index, 0) for node in sim.nodes]
        heapq.heapify(places)
        for unit in units:
            _, index, count = heapq.heappop(places)
            node = sim.nodes[index]
            node.guests.append(unit)
            unit.node = node
            heapq.heappush(places, (-node.available / (count + 2), index, count + 1))
        for node in sim.nodes:
            sim.reschedule(node)

    def on_owner(self, sim: Simulation, node: Node) -> None:
        """Perfect knowledge: guests leave a machine the moment its owner starts, for free."""
        if node.load < BUSY_LOAD or not node.guests:
            return
        for unit in list(node.guests):
            best = max(sim.nodes, key=lambda n: (n.available / (len(n.guests) + 1), -n.index))
            if best.available > node.available:
                sim.move(unit, best, "owner", free=True)


class OurNode:
    """A simulated node's policy state: the same objects the live node keeps."""

    __slots__ = ("owner", "window", "previous", "published", "last_integral", "decision", "retry_at", "backoff")

    def __init__(self, settings: OwnerSettings, window: int):
        self.owner = OwnerPolicy(settings)
        self.window: deque[float] = deque(maxlen=window)
        self.previous: float | None = None
        self.published: tuple[float, int] | None = None
        self.last_integral = 0.0
        self.decision = GuestAction.RUN
        self.retry_at = 0.0          # after a failed attempt, "skip migration for now" (algorithm 5)
        self.backoff = 1


class OursStrategy(Strategy):
    """frost-tui's policies, imported from frost_core.policies, on a gossip-stale table.

    Each tick a node reads what a guest got (smoothed over `window` ticks), publishes it
    on a 5 % change (visible to others after the gossip delay), and runs the transfer,
    selection and location policies; the owner policy runs on owner readings.
    """

    name = "ours"
    detect_delay = 1.5        # the live sampler reads every second: reaction within ~1.5 s
    memory_pool = 4 << 30
    now = 0.0                 # time of the event being handled

    def __init__(self, settings: PolicySettings | None = None, owner: OwnerSettings | None = None, window: int = 3):
        self.settings = settings or PolicySettings()
        self.owner_settings = owner or OwnerSettings(evict_after=15.0, resume_after=3.0, input_idle=0.0, evict_hold=60)
        self.window = window

    def start(self, sim: Simulation) -> None:
        self.visible_available = [node.speed for node in sim.nodes]
        self.visible_guests = [0] * len(sim.nodes)
        self.news: deque[tuple[float, int, float, int]] = deque()
        self.bandwidths: dict[int, dict[str, float]] = {}   # source -> destination id -> bytes/s
        self._targets: list[NodeView] | None = None
        self._sources: list[NodeView] | None = None
        self._tick_average: float | None = None
        self._idle_average = sum(n.speed for n in sim.nodes) / len(sim.nodes)
        for node in sim.nodes:
            node.policy = OurNode(self.owner_settings, self.window)

    # -- information policy -------------------------------------------------------------------
    def _read(self, sim: Simulation, node: Node) -> float:
        state: OurNode = node.policy
        integral = node.integral_at(sim.now)
        state.window.append((integral - state.last_integral) / sim.scenario.tick)
        state.last_integral = integral
        return smooth(state.window)

    def _view(self, node: Node, available: float, guests: int) -> NodeView:
        used = sum(u.spec.memory for u in node.guests)
        return NodeView(str(node.index), available, guests, 1, node.speed, 0.0,
                        free_memory=self.memory_pool - used,
                        owner_active=node.policy.owner.state.phase is not Phase.RUNNING,
                        accepting=node.policy.owner.accepting(self.now))

    def _fresh(self, node: Node) -> NodeView:
        """What a node answers when asked just before a move: its own current figures."""
        state: OurNode = node.policy
        available = smooth(state.window) if state.window else node.available
        return self._view(node, available, len(node.guests) + node.incoming)

    def _stale(self, node: Node) -> NodeView:
        return NodeView(str(node.index), self.visible_available[node.index], self.visible_guests[node.index], 1,
                        node.speed, 0.0)

    def _unit(self, unit: Unit) -> UnitView:
        return UnitView(str(unit.spec.index), memory=unit.spec.memory, state_bytes=unit.spec.state_bytes,
                        remaining_work=unit.remaining * unit.spec.estimate_error,
                        restore_seconds=restore_seconds(unit.spec.state_bytes), arrived_at=unit.arrived_at)

    def on_tick(self, sim: Simulation) -> None:
        self.now = sim.now
        while self.news and self.news[0][0] <= sim.now:
            _, index, available, guests = self.news.popleft()
            self.visible_available[index] = available
            self.visible_guests[index] = guests
        delay = sim.scenario.gossip_delay
        readings = []
        for node in sim.nodes:
            available = self._read(sim, node)
            guests = len(node.guests) + node.incoming
            state: OurNode = node.policy
            if (state.published is None or state.published[1] != guests
                    or worth_publishing(state.published[0], available, self.settings.broadcast_change)):
                state.published = (available, guests)
                self.news.append((sim.now + delay, node.index, available, guests))
            readings.append((available, resources_per_guest(available, guests + 1, 1, node.speed)))
        self._tick_average = self._average(sim)
        system = SystemView(self._tick_average, self._idle_average, 0.0, len(sim.nodes))
        lower, upper = thresholds(system.average, self.settings.band)
        # Only one side of the symmetric policy is on: skip readings that side ignores.
        sender = transfer_mode(system) is Mode.SENDER
        quiet_low, quiet_high = (lower, float("inf")) if sender else (float("-inf"), upper)
        self._targets: list[NodeView] | None = None
        self._sources: list[NodeView] | None = None
        for node, (available, reading) in zip(sim.nodes, readings):
            state = node.policy
            previous, state.previous = state.previous, reading
            if state.decision is GuestAction.EVICT and node.guests:
                self._evict(sim, node, system, lower)
                continue
            if (state.decision is not GuestAction.RUN or previous is None or quiet_low <= reading <= quiet_high
                    or sim.now < state.retry_at):
                continue   # decide_transfer would say STAY, or we wait after a failed attempt
            decision = decide_transfer(reading, previous, len(node.guests), system, self.settings)
            moved = False
            if decision.action is Action.SEND:
                moved = self._send(sim, node, resources_per_guest(available, len(node.guests), 1, node.speed),
                                   system, lower)
            elif decision.action is Action.REQUEST:
                moved = self._request(sim, node, system, lower)
            if decision.action is not Action.STAY:
                self._after_attempt(sim, state, moved)

    def _after_attempt(self, sim: Simulation, state: OurNode, moved: bool) -> None:
        """A node that found no partner waits 1, 2, 4 ... 8 ticks before asking peers again."""
        state.backoff = 1 if moved else min(state.backoff * 2, 8)
        state.retry_at = 0.0 if moved else sim.now + state.backoff * sim.scenario.tick

    def _average(self, sim: Simulation) -> float:
        """S_avg over the gossip-stale table: the mean offer (what one more guest would get)."""
        offers = [resources_per_guest(a, g + 1, 1, n.speed)
                  for a, g, n in zip(self.visible_available, self.visible_guests, sim.nodes)]
        return sum(offers) / len(offers)

    # -- sender and receiver initiated moves ----------------------------------------------------
    def _candidates(self, sim: Simulation) -> list[NodeView]:
        if self._targets is None:
            count = 3 * self.settings.candidates
            best = heapq.nlargest(count, sim.nodes, key=lambda n: resources_per_guest(
                self.visible_available[n.index], self.visible_guests[n.index] + 1, 1, n.speed))
            self._targets = [self._stale(n) for n in best]
        return self._targets

    def _bandwidths(self, source: Node) -> dict[str, float]:
        return self.bandwidths.setdefault(source.index, {})

    def _place(self, sim: Simulation, source: Node, unit: Unit, system: SystemView, lower: float,
               owner_forced: bool) -> bool:
        own = self._fresh(source)
        if owner_forced:
            own = NodeView(own.node_id, 0.0, own.guests, 1, source.speed, 0.0)
        view = self._unit(unit)
        bandwidths = self._bandwidths(source)
        for target in rank_destinations(own, view, self._candidates(sim), system.average, lower, bandwidths,
                                        self.settings, owner_forced):
            node = sim.nodes[int(target.node_id)]
            bandwidth = bandwidths.get(target.node_id, self.settings.default_bandwidth)
            if confirm_destination(own, self._fresh(node), view, system.average, lower, bandwidth, self.settings,
                                   owner_forced, expected=target):
                return sim.move(unit, node, "owner" if owner_forced else "balance")
        return False

    def _send(self, sim: Simulation, node: Node, here: float, system: SystemView, lower: float) -> bool:
        targets = self._candidates(sim)
        there = max((t.offer for t in targets), default=0.0)
        bandwidth = self.settings.default_bandwidth
        choice = select_guest([self._unit(u) for u in node.guests if not u.pinned], here, there, bandwidth,
                              sim.now, self.settings)
        if choice is None:
            return False
        return self._place(sim, node, sim.units[int(choice.unit.task_id)], system, lower, owner_forced=False)

    def _request(self, sim: Simulation, node: Node, system: SystemView, lower: float) -> bool:
        if self._sources is None:
            loaded = [n for n in sim.nodes if self.visible_guests[n.index] > 0]
            worst = heapq.nsmallest(3 * self.settings.candidates, loaded, key=lambda n: resources_per_guest(
                self.visible_available[n.index], self.visible_guests[n.index] + 1, 1, n.speed))
            self._sources = [self._stale(n) for n in worst]
        me = self._fresh(node)
        if not me.accepting:
            return False
        stale = choose_source(me, self._sources, system.average)
        if stale is None:
            return False
        source = sim.nodes[int(stale.node_id)]
        fresh = self._fresh(source)
        if source.policy.decision is not GuestAction.RUN or not source.guests:
            return False
        bandwidth = self._bandwidths(source).get(str(node.index), self.settings.default_bandwidth)
        choice = select_guest([self._unit(u) for u in source.guests if not u.pinned], fresh.per_guest,
                              me.offer, bandwidth, sim.now, self.settings)
        if choice is None or not confirm_destination(fresh, me, choice.unit, system.average, lower, bandwidth,
                                                     self.settings):
            return False
        return sim.move(sim.units[int(choice.unit.task_id)], node, "balance")

    def _evict(self, sim: Simulation, node: Node, system: SystemView, lower: float) -> None:
        for unit in list(node.guests):
            if not unit.pinned:
                self._place(sim, node, unit, system, lower, owner_forced=True)

    # -- owner policy ------------------------------------------------------------------------------
    def on_owner(self, sim: Simulation, node: Node) -> None:
        sim.push(sim.now + self.detect_delay, CHECK, node, "owner")

    def on_check(self, sim: Simulation, node: Node, tag: object) -> None:
        self.now = sim.now
        state: OurNode = node.policy
        decision = state.owner.decide(OwnerView(owner_cpu_percent=100.0 * node.load), sim.now)
        state.decision = decision.action
        sim.set_suspended(node, decision.action is not GuestAction.RUN)
        if decision.recheck_at is not None and decision.recheck_at > sim.now:
            sim.push(decision.recheck_at, CHECK, node, "timer")
        if decision.action is GuestAction.EVICT and node.guests:
            self._targets = None
            average = self._tick_average if self._tick_average is not None else self._average(sim)
            system = SystemView(average, self._idle_average, 0.0, len(sim.nodes))
            self._evict(sim, node, system, thresholds(average, self.settings.band)[0])

    def on_land(self, sim: Simulation, unit: Unit, node: Node) -> None:
        migration = None
        for m in reversed(sim.outcome.migrations):
            if m.unit == unit.spec.index and m.destination == node.index:
                migration = m
                break
        if migration is not None:
            transfer = max(migration.seconds - restore_seconds(migration.nbytes), 1e-6)
            known = self.bandwidths.setdefault(migration.source, {})
            key = str(migration.destination)
            known[key] = estimate_bandwidth(known.get(key), migration.nbytes, transfer)


STRATEGIES = {cls.name: cls for cls in (Strategy, RandomStrategy, ThresholdStrategy, OursStrategy, IdealStrategy)}

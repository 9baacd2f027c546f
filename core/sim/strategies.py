"""The policies the simulator compares: none, random, threshold, ours and ideal."""

from __future__ import annotations

import heapq
from collections import deque

from frost_core.policies import (
    Action,
    Bandwidths,
    Mode,
    NodeView,
    OwnerPolicy,
    OwnerSettings,
    OwnerView,
    PolicySettings,
    SystemView,
    UnitView,
    resources_per_guest,
    smooth,
    thresholds,
    transfer_mode,
    worth_publishing,
)
from frost_core.policies.balance import Plan, Step, backoff_after, plan, plan_for_requester
from frost_core.policies.owner import GuestAction, Phase
from frost_core.policies.selection import costliest_move
from frost_core.sim.engine import CHECK, Node, Simulation, Unit, restore_seconds

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
    sample_interval = 1.0     # ... so a reading covers the last second of owner CPU
    memory_pool = 4 << 30
    now = 0.0                 # time of the event being handled

    def __init__(self, settings: PolicySettings | None = None, owner: OwnerSettings | None = None, window: int = 3):
        self.settings = settings or PolicySettings()
        self.owner_settings = owner or OwnerSettings(
            busy_cpu_percent=25.0, evict_after=15.0, resume_after=3.0, input_idle=0.0, evict_hold=60)
        self.window = window

    def start(self, sim: Simulation) -> None:
        self.visible_available = [node.speed for node in sim.nodes]
        self.visible_guests = [0] * len(sim.nodes)
        self.news: deque[tuple[float, int, float, int]] = deque()
        self.bandwidths: dict[int, Bandwidths] = {}   # per source node
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
            # Like the live node, gossip zero while taking no guests (suspended, evicting, eviction hold):
            # otherwise peers rank a node that will refuse them above one that just became free.
            shown = available if state.owner.accepting(sim.now) else 0.0
            if (state.published is None or state.published[1] != guests
                    or worth_publishing(state.published[0], shown, self.settings.broadcast_change)):
                state.published = (shown, guests)
                self.news.append((sim.now + delay, node.index, shown, guests))
            readings.append(resources_per_guest(available, guests + 1, 1, node.speed))
        self._tick_average = self._average(sim)
        system = self._system(sim)
        lower, upper = thresholds(system.average, self.settings.band)
        # Only one side of the symmetric policy is on: skip readings that side ignores (plan() would
        # say NOTHING), and hand plan() only the partners that side can choose from.
        sender = transfer_mode(system) is Mode.SENDER
        quiet_low, quiet_high = (lower, float("inf")) if sender else (float("-inf"), upper)
        self._targets = None
        self._sources = None
        for node, reading in zip(sim.nodes, readings):
            state = node.policy
            previous, state.previous = state.previous, reading
            if state.decision is GuestAction.EVICT and node.guests:
                self._evict(sim, node, system)
                continue
            if (state.decision is not GuestAction.RUN or previous is None or quiet_low <= reading <= quiet_high
                    or sim.now < state.retry_at):
                continue
            me = self._fresh(node)
            peers = self._candidates(sim) if sender else self._loaded(sim)
            chosen = plan(me, peers, self._units(node), previous, system,
                          self._bandwidths(node).view(p.node_id for p in peers), sim.now, self.settings)
            moved = False
            if chosen.step is Step.SEND:
                moved = self._place(sim, node, me, chosen)
            elif chosen.step is Step.REQUEST:
                moved = self._request(sim, node, me, chosen, system)
            if chosen.wanted is not Action.STAY:
                state.backoff = backoff_after(moved, state.backoff)
                state.retry_at = 0.0 if moved else sim.now + state.backoff * sim.scenario.tick

    def _system(self, sim: Simulation) -> SystemView:
        average = self._tick_average if self._tick_average is not None else self._average(sim)
        return SystemView(average, self._idle_average, 0.0, len(sim.nodes))

    def _average(self, sim: Simulation) -> float:
        """S_avg over the gossip-stale table: the mean offer (what one more guest would get)."""
        offers = [resources_per_guest(a, g + 1, 1, n.speed)
                  for a, g, n in zip(self.visible_available, self.visible_guests, sim.nodes)]
        return sum(offers) / len(offers)

    # -- sender and receiver initiated moves ----------------------------------------------------
    def _candidates(self, sim: Simulation) -> list[NodeView]:
        """The best offers of the stale table: the only rows a sender's plan could pick."""
        if self._targets is None:
            count = 3 * self.settings.candidates
            best = heapq.nlargest(count, sim.nodes, key=lambda n: resources_per_guest(
                self.visible_available[n.index], self.visible_guests[n.index] + 1, 1, n.speed))
            self._targets = [self._stale(n) for n in best]
        return self._targets

    def _loaded(self, sim: Simulation) -> list[NodeView]:
        """The lowest offers among nodes with guests: the only rows a receiver's plan could ask."""
        if self._sources is None:
            loaded = [n for n in sim.nodes if self.visible_guests[n.index] > 0]
            worst = heapq.nsmallest(3 * self.settings.candidates, loaded, key=lambda n: resources_per_guest(
                self.visible_available[n.index], self.visible_guests[n.index] + 1, 1, n.speed))
            self._sources = [self._stale(n) for n in worst]
        return self._sources

    def _bandwidths(self, source: Node) -> Bandwidths:
        known = self.bandwidths.get(source.index)
        if known is None:
            known = self.bandwidths[source.index] = Bandwidths(self.settings.default_bandwidth)
        return known

    def _units(self, node: Node) -> list[UnitView]:
        return [self._unit(u) for u in node.guests if not u.pinned]

    def _place(self, sim: Simulation, source: Node, me: NodeView, chosen: Plan) -> bool:
        """The fresh query before sending: the first ranked target whose own answer still fits."""
        assert chosen.unit is not None
        bandwidths = self._bandwidths(source)
        for target in chosen.destinations:
            node = sim.nodes[int(target.node_id)]
            if chosen.confirm(me, self._fresh(node), bandwidths.get(target.node_id), self.settings):
                return sim.move(sim.units[int(chosen.unit.task_id)], node, "owner" if chosen.owner_forced
                                else "balance")
        return False

    def _request(self, sim: Simulation, node: Node, me: NodeView, chosen: Plan, system: SystemView) -> bool:
        assert chosen.source is not None
        source = sim.nodes[int(chosen.source.node_id)]
        fresh = self._fresh(source)
        if source.policy.decision is not GuestAction.RUN or not chosen.still_loaded(me, fresh):
            return False
        answer = plan_for_requester(fresh, me, self._units(source), system,
                                    self._bandwidths(source).get(me.node_id), sim.now, self.settings)
        if answer.step is not Step.SEND:
            return False
        assert answer.unit is not None
        return sim.move(sim.units[int(answer.unit.task_id)], node, "balance")

    def _evict(self, sim: Simulation, node: Node, system: SystemView) -> None:
        """Owner-forced: one plan per guest until no peer takes the next one."""
        tried: set[str] = set()
        while True:
            units = [u for u in self._units(node) if u.task_id not in tried]
            me = self._fresh(node)
            peers = self._candidates(sim)
            chosen = plan(me, peers, units, None, system, self._bandwidths(node).view(p.node_id for p in peers),
                          sim.now, self.settings, GuestAction.EVICT)
            if chosen.step is not Step.SEND:
                return
            assert chosen.unit is not None
            tried.add(chosen.unit.task_id)
            self._place(sim, node, me, chosen)

    # -- owner policy ------------------------------------------------------------------------------
    def on_owner(self, sim: Simulation, node: Node) -> None:
        sim.push(sim.now + self.detect_delay, CHECK, node, "owner")

    def on_check(self, sim: Simulation, node: Node, tag: object) -> None:
        self.now = sim.now
        state: OurNode = node.policy
        quiet_for = sim.now - node.owner_changed if node.load == 0 else 0.0
        view = OwnerView(cpu_share=100.0 * node.load, interval=min(self.sample_interval, quiet_for))
        decision = state.owner.decide(view, sim.now, self._leave_after(node))
        state.decision = decision.action
        sim.set_suspended(node, decision.action is not GuestAction.RUN)
        if decision.recheck_at is not None and decision.recheck_at > sim.now:
            sim.push(decision.recheck_at, CHECK, node, "timer")
        if decision.action is GuestAction.EVICT and node.guests:
            self._targets = None
            self._evict(sim, node, self._system(sim))

    def _leave_after(self, node: Node) -> float | None:
        return costliest_move(self._units(node), self._bandwidths(node).typical())

    def on_land(self, sim: Simulation, unit: Unit, node: Node) -> None:
        migration = None
        for m in reversed(sim.outcome.migrations):
            if m.unit == unit.spec.index and m.destination == node.index:
                migration = m
                break
        if migration is not None:
            transfer = max(migration.seconds - restore_seconds(migration.nbytes), 1e-6)
            self._bandwidths(sim.nodes[migration.source]).observe(str(migration.destination), migration.nbytes,
                                                                  transfer)


STRATEGIES = {cls.name: cls for cls in (Strategy, RandomStrategy, ThresholdStrategy, OursStrategy, IdealStrategy)}

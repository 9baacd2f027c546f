"""The discrete-event core: machines sharing their spare CPU among guests, owners, moves, ticks."""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from frost_core.sim.model import Scenario, UnitSpec, make_units

OWNER, COMPLETE, LAND, SUBMIT, TICK, CHECK = range(6)
LATENCY = 0.05             # seconds to set up a transfer
RESTORE_BASE = 0.5         # seconds to start a guest from its state ...
RESTORE_RATE = 200e6       # ... plus its bytes at this rate
EPSILON = 1e-6            # work a unit may lack and still count as finished


def restore_seconds(state_bytes: int) -> float:
    return RESTORE_BASE + state_bytes / RESTORE_RATE


class Node:
    __slots__ = ("index", "speed", "bandwidth", "load", "suspended", "guests", "incoming", "settled", "version",
                 "integral", "owner_changes", "owner_changed", "policy")

    def __init__(self, index: int, speed: float, bandwidth: float, owner_changes: Iterator[tuple[float, float]]):
        self.index = index
        self.speed = speed
        self.bandwidth = bandwidth
        self.load = 0.0
        self.suspended = False
        self.guests: list[Unit] = []
        self.incoming = 0
        self.settled = 0.0
        self.version = 0
        self.integral = 0.0          # ∫ obtainable dt, for readings over an interval
        self.owner_changes = owner_changes
        self.owner_changed = 0.0
        self.policy: object = None   # a strategy's per-node state

    @property
    def available(self) -> float:
        """What guests together could get now: the simulated machine has one CPU."""
        return self.speed * max(0.0, 1.0 - self.load)

    @property
    def obtainable(self) -> float:
        """What a guest-priority reading sees: nothing while the owner policy holds guests."""
        return 0.0 if self.suspended else self.available

    def rate(self) -> float:
        """Progress per second of each guest (processor sharing)."""
        if self.suspended or not self.guests:
            return 0.0
        return self.available / len(self.guests)

    def integral_at(self, now: float) -> float:
        return self.integral + self.obtainable * (now - self.settled)


class Unit:
    __slots__ = ("spec", "done", "node", "arrived_at", "finish", "moves", "pinned", "last_from")

    def __init__(self, spec: UnitSpec):
        self.spec = spec
        self.done = 0.0
        self.node: Node | None = None
        self.arrived_at = spec.arrival
        self.finish: float | None = None
        self.moves = 0
        self.pinned = False
        self.last_from: tuple[int, float] | None = None   # (node, when) of the last move away

    @property
    def remaining(self) -> float:
        return max(self.spec.size - self.done, 0.0)


@dataclass
class Migration:
    at: float
    unit: int
    ordinal: int
    source: int
    destination: int
    reason: str
    seconds: float
    nbytes: int
    pingpong: bool


@dataclass
class Outcome:
    """What one run produced, for the report."""

    strategy: str
    finish: dict[int, float]
    arrival: dict[int, float]
    size: dict[int, float]
    migrations: list[Migration] = field(default_factory=list)


class Simulation:
    """One world (scenario + seed) under one strategy; `veto` replays it without one move."""

    def __init__(self, scenario: Scenario, seed: int, strategy, *, owners: bool = True,
                 veto: tuple[int, int] | None = None, pingpong_window: float = 600.0):
        self.scenario = scenario
        self.seed = seed
        self.now = 0.0
        self.events: list = []
        self.seq = 0
        self.veto = veto
        self.pingpong_window = pingpong_window
        world = random.Random(f"{seed}:world")
        self.nodes = []
        for index in range(scenario.nodes):
            owner_rng = random.Random(f"{seed}:owner:{index}")
            changes = scenario.owners(owner_rng) if owners else iter([(0.0, 0.0)])
            self.nodes.append(Node(index, world.uniform(*scenario.speeds), world.choice(scenario.bandwidths), changes))
        self.units = [Unit(spec) for spec in make_units(scenario, random.Random(f"{seed}:units"))]
        self.active = 0
        self.pending = len(self.units)
        self.rng = random.Random(f"{seed}:policy")
        self.strategy = strategy
        self.outcome = Outcome(strategy.name, {}, {u.spec.index: u.spec.arrival for u in self.units},
                               {u.spec.index: u.spec.size for u in self.units})

    # -- events ---------------------------------------------------------------------------
    def push(self, at: float, kind: int, a=None, b=None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, a, b))

    def run(self) -> Outcome:
        for node in self.nodes:
            self._next_owner_change(node)
        for unit in self.units:
            self.push(unit.spec.arrival, SUBMIT, unit)
        self.strategy.start(self)
        self.push(self.scenario.tick, TICK)
        while self.events and self.pending:
            at, _, kind, a, b = heapq.heappop(self.events)
            self.now = at
            if kind == OWNER:
                self._owner(a, b)
            elif kind == COMPLETE:
                self._complete(a, b)
            elif kind == LAND:
                self.land_incoming(a, b)
                self.strategy.on_land(self, a, b)
            elif kind == SUBMIT:
                self._land(a, self.nodes[a.spec.node])
                self.strategy.on_submit(self, a)
            elif kind == TICK:
                self.strategy.on_tick(self)
                self.push(at + self.scenario.tick, TICK)
            elif kind == CHECK:
                self.strategy.on_check(self, a, b)
        return self.outcome

    def _next_owner_change(self, node: Node) -> None:
        change = next(node.owner_changes, None)
        if change is not None:
            self.push(change[0], OWNER, node, change[1])

    def _owner(self, node: Node, load: float) -> None:
        if load != node.load:
            self.settle(node)
            node.load = load
            node.owner_changed = self.now
            self.reschedule(node)
            self.strategy.on_owner(self, node)
        self._next_owner_change(node)

    def _complete(self, node: Node, version: int) -> None:
        if version != node.version:
            return
        self.settle(node)
        for unit in [u for u in node.guests if u.remaining <= EPSILON]:
            node.guests.remove(unit)
            unit.finish = self.now
            unit.node = None
            self.outcome.finish[unit.spec.index] = self.now
            self.pending -= 1
        self.reschedule(node)
        self.strategy.on_complete(self, node)

    def _land(self, unit: Unit, node: Node) -> None:
        self.settle(node)
        node.guests.append(unit)
        unit.node = node
        unit.arrived_at = self.now
        self.reschedule(node)

    # -- machine state ----------------------------------------------------------------------
    def settle(self, node: Node) -> None:
        """Credit every guest with the work done since the node's rate last changed."""
        elapsed = self.now - node.settled
        if elapsed > 0:
            rate = node.rate()
            if rate > 0:
                for unit in node.guests:
                    unit.done += rate * elapsed
            node.integral += node.obtainable * elapsed
        node.settled = self.now

    def reschedule(self, node: Node) -> None:
        node.version += 1
        rate = node.rate()
        if rate > 0:
            shortest = min(unit.remaining for unit in node.guests)
            # Never schedule at `now` itself: a float step too small to advance time would loop.
            self.push(max(self.now + shortest / rate, math.nextafter(self.now, math.inf)), COMPLETE, node,
                      node.version)

    def set_suspended(self, node: Node, suspended: bool) -> None:
        if node.suspended != suspended:
            self.settle(node)
            node.suspended = suspended
            self.reschedule(node)

    def transfer_seconds(self, unit: Unit, source: Node, destination: Node) -> float:
        """Migration cost grows with state size: latency + bytes over the slower link + restore."""
        bandwidth = min(source.bandwidth, destination.bandwidth)
        return LATENCY + unit.spec.state_bytes / bandwidth + restore_seconds(unit.spec.state_bytes)

    def move(self, unit: Unit, destination: Node, reason: str, *, free: bool = False) -> bool:
        """Start moving `unit`; False when this is the move a replay leaves out."""
        source = unit.node
        if source is None or source is destination or unit.pinned:
            return False
        ordinal = unit.moves + 1
        if self.veto == (unit.spec.index, ordinal):
            unit.pinned = True
            return False
        self.settle(source)
        source.guests.remove(unit)
        self.reschedule(source)
        unit.moves = ordinal
        unit.node = None
        seconds = 0.0 if free else self.transfer_seconds(unit, source, destination)
        if not free:
            pingpong = self._pingpong(unit, source, destination, reason)
            self.outcome.migrations.append(Migration(self.now, unit.spec.index, ordinal, source.index,
                                                     destination.index, reason, seconds, unit.spec.state_bytes,
                                                     pingpong))
        unit.last_from = (source.index, self.now)
        if free:
            self._land(unit, destination)
        else:
            destination.incoming += 1
            self.push(self.now + seconds, LAND, unit, destination)
        return True

    def _pingpong(self, unit: Unit, source: Node, destination: Node, reason: str) -> bool:
        """A→B→A for balance within the window while neither owner changed anything: thrashing."""
        if reason != "balance" or unit.last_from is None or unit.last_from[0] != destination.index:
            return False
        left_at = unit.last_from[1]
        return (self.now - left_at < self.pingpong_window and source.owner_changed <= left_at
                and destination.owner_changed <= left_at)

    def land_incoming(self, unit: Unit, destination: Node) -> None:
        destination.incoming -= 1
        self._land(unit, destination)

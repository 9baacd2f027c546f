"""What the simulator simulates: owners, machines, work units, and the named scenarios."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from frost_core.api.errors import ConfigError

FROST_BLOCK = 600.0        # FROST 11.2.2: ten-minute blocks
FROST_SPIKE = 5.0          # five-second spikes ...
FROST_SPIKE_PERIOD = 60.0  # ... once a minute


def frost_owner(rng: random.Random) -> Iterator[tuple[float, float]]:
    """FROST's simulated user: 10-minute blocks of heavy use, of 5 s spikes each minute, or idle.

    Yields (time, owner load) change points from time 0; the order of the three blocks is
    shuffled per cycle and the first cycle starts at a random phase, so machines differ.
    """
    load_at_zero = 0.0
    started = False
    last = None
    for at, level in _frost_points(rng, -rng.uniform(0, 3 * FROST_BLOCK)):
        if at <= 0:
            load_at_zero = level
            continue
        if not started:
            started, last = True, load_at_zero
            yield 0.0, load_at_zero
        if level != last:
            last = level
            yield at, level


def _frost_points(rng: random.Random, t: float) -> Iterator[tuple[float, float]]:
    while True:
        blocks = ["heavy", "spikes", "idle"]
        rng.shuffle(blocks)
        for block in blocks:
            end = t + FROST_BLOCK
            if block == "spikes":
                yield t, 0.0
                spike = t + rng.uniform(0, FROST_SPIKE_PERIOD)
                while spike < end:
                    yield spike, 1.0
                    yield min(spike + FROST_SPIKE, end), 0.0
                    spike += FROST_SPIKE_PERIOD
            else:
                yield t, 1.0 if block == "heavy" else 0.0
            t = end


def on_off_owner(rng: random.Random, mean_on: float, mean_off: float, level: float = 1.0) -> Iterator[tuple[float, float]]:
    """Polder's background jobs: busy and quiet periods with exponential lengths."""
    busy = rng.random() < mean_on / (mean_on + mean_off)
    t = 0.0
    while True:
        yield t, level if busy else 0.0
        t += rng.expovariate(1 / (mean_on if busy else mean_off))
        busy = not busy


def no_owner(rng: random.Random) -> Iterator[tuple[float, float]]:
    yield 0.0, 0.0


@dataclass(frozen=True)
class Scenario:
    """Everything that defines one simulated world; the seed decides the rest."""

    name: str
    nodes: int
    units_per_node: float
    owner: str                    # frost, onoff, none
    sizes: str                    # exponential, pareto
    mean_size: float              # seconds of work at speed 1
    placement: str                # spread (one per node, like FROST's master) or random
    speeds: tuple[float, float]   # uniform range of machine speeds
    arrival_window: float         # units arrive uniformly over this many seconds
    mean_state: float             # bytes of state, log-normal around this
    bandwidths: tuple[float, ...]  # bytes/s of a machine's link, chosen at random
    mean_on: float = 1200.0
    mean_off: float = 2400.0
    tick: float = 10.0            # seconds between policy rounds
    gossip: float = 1.0           # seconds per gossip round; news takes log2(N) rounds

    def __post_init__(self) -> None:
        if self.nodes < 2:
            raise ConfigError(f"the simulation needs at least 2 nodes, not {self.nodes}")
        if self.units_per_node <= 0:
            raise ConfigError("units per node must be positive")
        if self.owner not in ("frost", "onoff", "none"):
            raise ConfigError(f"unknown owner model {self.owner!r} (frost, onoff, none)")
        if self.sizes not in ("exponential", "pareto"):
            raise ConfigError(f"unknown unit size distribution {self.sizes!r} (exponential, pareto)")
        if self.placement not in ("spread", "random"):
            raise ConfigError(f"unknown placement {self.placement!r} (spread, random)")

    @property
    def gossip_delay(self) -> float:
        """Age of a table entry: push-pull gossip spreads news in about log2(N) rounds (BSPlib)."""
        return self.gossip * math.ceil(math.log2(self.nodes))

    def owners(self, rng: random.Random) -> Iterator[tuple[float, float]]:
        if self.owner == "frost":
            return frost_owner(rng)
        if self.owner == "onoff":
            return on_off_owner(rng, self.mean_on, self.mean_off)
        return no_owner(rng)


SCENARIOS = {
    "frost": Scenario("frost", nodes=30, units_per_node=1 / 3, owner="frost", sizes="exponential",
                      mean_size=3600.0, placement="spread", speeds=(1.0, 1.0), arrival_window=0.0,
                      mean_state=500e3, bandwidths=(12.5e6,)),
    "mixed": Scenario("mixed", nodes=100, units_per_node=1.5, owner="onoff", sizes="pareto",
                      mean_size=1800.0, placement="random", speeds=(0.5, 2.0), arrival_window=3600.0,
                      mean_state=8e6, bandwidths=(12.5e6, 125e6)),
}


@dataclass(frozen=True)
class UnitSpec:
    index: int
    arrival: float
    size: float          # work, speed units x seconds
    state_bytes: int
    memory: int
    node: int            # where its master placed it
    estimate_error: float  # the remaining-time estimate is off by this factor


def make_units(scenario: Scenario, rng: random.Random) -> list[UnitSpec]:
    """The workload, drawn from its own random stream so every policy sees the same one."""
    count = max(1, round(scenario.units_per_node * scenario.nodes))
    order = list(range(scenario.nodes))
    rng.shuffle(order)
    units = []
    for index in range(count):
        if scenario.sizes == "exponential":
            size = rng.expovariate(1 / scenario.mean_size)
        else:
            alpha = 1.5     # Pareto with finite mean, infinite variance
            size = scenario.mean_size * (alpha - 1) / alpha * rng.paretovariate(alpha)
        node = order[index % scenario.nodes] if scenario.placement == "spread" else rng.randrange(scenario.nodes)
        state = int(scenario.mean_state * rng.lognormvariate(-0.5, 1.0))
        units.append(UnitSpec(index, rng.uniform(0, scenario.arrival_window), max(size, 1.0), state,
                              memory=int(rng.choice((64, 128, 256, 512))) << 20, node=node,
                              estimate_error=rng.lognormvariate(0, 0.3)))
    return units

"""Gang (BSP) jobs in simulation: p members in supersteps at the slowest one's pace, and where to run them.

A gang of p members runs `supersteps` supersteps; in each, every member does `work` (speed units x
seconds) on its host at the rate the host's owner and other guests leave it, then all meet at the
barrier, which with the exchange takes `exchange` seconds more. A superstep therefore lasts as long
as its slowest member; the others wait at the barrier. Between supersteps the gang may check, take
a global checkpoint (the p images written one after another to a shared disk, as BSPlib's p x 19 s)
and restart all members on other hosts. The four strategies are BSPlib's table 1: random hosts, the
best p at start, a forced checkpoint and restart on the best p every interval, and selective
migration, which checkpoints only when `policies.gang_migration`'s predicate says a better set exists.
Hosts run one member at most; their owner traces are `model`'s (time, load) change points.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from frost_core.policies.gang_migration import (
    CheckCadence,
    check_due,
    choose_hosts,
    member_should_move,
    or_reduce,
)
from frost_core.policies.views import NodeView
from frost_core.sim.model import frost_owner, on_off_owner

STRATEGIES = ("random", "best", "forced", "selective")


@dataclass(frozen=True)
class GangJob:
    """One BSP job and the costs of checkpointing it; the defaults are BSPlib's orders of magnitude.

    BSPlib wrote a 7 MB image per process in 19 s (about 0.4 MB/s to a shared file server) and the
    p images one after another; restart cost is not given there, `restart_seconds` is ours.
    """

    p: int
    supersteps: int
    work: float = 1.0                 # per member and superstep, speed units x seconds
    exchange: float = 0.25            # seconds of communication and barrier per superstep
    state_bytes: int = 7_000_000      # one member's checkpoint image
    disk_rate: float = 0.4e6          # bytes/s to the shared disk
    checkpoint_fixed: float = 1.5     # seconds per image besides the bytes
    restart_seconds: float = 5.0      # all members start again from the images, in parallel
    x: float = 1.0                    # a member's anticipated load on a host outside the gang
    margin: float = 0.0               # how much more an outsider must offer (policies.gang_migration)
    check_seconds: float = 0.0        # one check at the barrier (the answers ride on its messages)
    cadence: CheckCadence = CheckCadence(every_seconds=120.0)
    window: float = 60.0              # the table's figures are means over this many seconds

    @property
    def checkpoint_seconds(self) -> float:
        """A global checkpoint: p images written in turn, each its bytes at the disk rate plus a fixed cost."""
        return self.p * (self.state_bytes / self.disk_rate + self.checkpoint_fixed)


class OwnerTrace:
    """A host's owner load over time, read from (time, load) change points, drawn as far as needed."""

    def __init__(self, changes: Iterator[tuple[float, float]]):
        self._changes = changes
        self._times: list[float] = []
        self._levels: list[float] = []
        self._exhausted = False
        self._extend()

    def _extend(self) -> bool:
        change = None if self._exhausted else next(self._changes, None)
        if change is None:
            self._exhausted = True
            return False
        self._times.append(change[0])
        self._levels.append(change[1])
        return True

    def segments(self, start: float) -> Iterator[tuple[float, float, float]]:
        """(from, until, load) pieces from `start` on; the last piece of a finite trace never ends."""
        while not self._exhausted and self._times[-1] <= start:
            self._extend()
        index = max(0, bisect.bisect_right(self._times, start) - 1)
        at = start
        while True:
            while index + 1 >= len(self._times) and self._extend():
                pass
            until = self._times[index + 1] if index + 1 < len(self._times) else math.inf
            yield at, until, self._levels[index]
            at, index = until, index + 1
            if until == math.inf:
                return


@dataclass
class GangHost:
    """A machine: its speed, the other lowest-priority guests it carries, its owner."""

    node_id: str
    speed: float
    others: int
    owner: OwnerTrace

    def rate(self, load: float) -> float:
        """A member's progress per second here: what the owner leaves, shared with the other guests."""
        return self.speed * max(0.0, 1.0 - load) / (self.others + 1)

    def compute_seconds(self, start: float, work: float) -> float:
        """Seconds from `start` until a member here has done `work` (inf if it never can)."""
        left = work
        for at, until, load in self.owner.segments(start):
            rate = self.rate(load)
            if rate > 0 and left <= rate * (until - at):
                return at + left / rate - start
            left -= rate * (until - at) if rate > 0 else 0.0
        return math.inf

    def mean_available(self, start: float, end: float) -> float:
        """Guest capacity (speed units) averaged over [start, end]: the smoothed figure a peer gossips."""
        if end <= start:
            return self.speed * max(0.0, 1.0 - next(self.owner.segments(end))[2])
        total = 0.0
        for at, until, load in self.owner.segments(start):
            total += self.speed * max(0.0, 1.0 - load) * (min(until, end) - at)
            if until >= end:
                break
        return total / (end - start)


def table(hosts: list[GangHost], gang: frozenset[str], now: float, window: float) -> tuple[NodeView, ...]:
    """The merged resource table at `now` as a member holds it: smoothed figures, the gang's members counted."""
    return tuple(
        NodeView(h.node_id, h.mean_available(max(0.0, now - window), now), h.others + (h.node_id in gang),
                 cpus=1, idle_extremity=h.speed)
        for h in hosts
    )


def make_hosts(seed: int, count: int, *, owner: str = "onoff", speeds: tuple[float, float] = (0.5, 2.0),
               busy_guests: float = 0.3, mean_on: float = 600.0, mean_off: float = 1800.0,
               level: float = 0.8) -> list[GangHost]:
    """A seeded pool of hosts; each has another guest with probability `busy_guests`."""
    if owner not in ("frost", "onoff"):
        raise ValueError(f"unknown owner model {owner!r} (frost, onoff)")
    world = random.Random(f"{seed}:gang-world")
    hosts = []
    for index in range(count):
        rng = random.Random(f"{seed}:gang-owner:{index}")
        changes = frost_owner(rng) if owner == "frost" else on_off_owner(rng, mean_on, mean_off, level)
        hosts.append(GangHost(f"h{index}", world.uniform(*speeds), int(world.random() < busy_guests),
                              OwnerTrace(changes)))
    return hosts


@dataclass
class GangOutcome:
    """What one run of one strategy produced."""

    strategy: str
    seconds: float
    migrations: int = 0
    checkpoints: int = 0
    checks: int = 0
    barrier_wait: list[float] = field(default_factory=list)   # per member rank
    hosts: list[tuple[str, ...]] = field(default_factory=list)  # the gang's hosts, in order of use


def run_gang(hosts: list[GangHost], job: GangJob, strategy: str, seed: int = 1) -> GangOutcome:
    """One job on `hosts` under `strategy` from time 0 to its last barrier."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown gang strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    if job.p > len(hosts):
        raise ValueError(f"a gang of {job.p} needs {job.p} hosts, the pool has {len(hosts)}")
    by_id = {h.node_id: h for h in hosts}
    if strategy == "random":
        placed = tuple(random.Random(f"{seed}:gang-random").sample(sorted(by_id), job.p))
    else:
        placed = choose_hosts(table(hosts, frozenset(), 0.0, job.window), frozenset(), job.p, job.x)
    outcome = GangOutcome(strategy, 0.0, barrier_wait=[0.0] * job.p, hosts=[placed])
    now, since_check, last_check = 0.0, 0, 0.0
    for _ in range(job.supersteps):
        if strategy in ("forced", "selective") and check_due(job.cadence, since_check, now - last_check):
            placed, now = _check(hosts, job, strategy, placed, now, outcome)
            since_check, last_check = 0, now
        times = [by_id[h].compute_seconds(now, job.work) for h in placed]
        slowest = max(times)
        for rank, own in enumerate(times):
            outcome.barrier_wait[rank] += slowest - own
        now += slowest + job.exchange
        since_check += 1
    outcome.seconds = now
    return outcome


def _check(hosts: list[GangHost], job: GangJob, strategy: str, placed: tuple[str, ...], now: float,
           outcome: GangOutcome) -> tuple[tuple[str, ...], float]:
    """At a barrier: each member's answer on the table, OR-reduced; checkpoint and restart as the strategy says."""
    outcome.checks += 1
    now += job.check_seconds
    gang = frozenset(placed)
    seen = table(hosts, gang, now, job.window)
    if strategy == "selective" and not or_reduce(member_should_move(seen, gang, job.p, job.x, h, job.margin) for h in placed):
        return placed, now
    now += job.checkpoint_seconds
    outcome.checkpoints += 1
    chosen = choose_hosts(seen, gang, job.p, job.x, job.margin)
    if frozenset(chosen) == gang:
        return placed, now
    # Members whose host stays keep their rank there; the others take the new hosts in order.
    kept = iter(h for h in chosen if h not in gang)
    placed = tuple(h if h in chosen else next(kept) for h in placed)
    outcome.migrations += 1
    outcome.hosts.append(placed)
    return placed, now + job.restart_seconds


def compare_gang(seed: int, job: GangJob, pool: int, **world) -> dict[str, GangOutcome]:
    """Every strategy on the same seeded pool (common random numbers: each run draws the same owners)."""
    return {name: run_gang(make_hosts(seed, pool, **world), job, name, seed) for name in STRATEGIES}


def no_move_checks(outcomes: dict[str, GangOutcome]) -> int:
    """Checks of selective migration that found no better set: the checks that cost only the predicate."""
    selective = outcomes["selective"]
    return selective.checks - selective.checkpoints


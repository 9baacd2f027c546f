"""Fair share in simulation: submitters of different sizes and arrival times on one pool of slots.

A discrete-event run of the queue order the masters use (`policies.fair_share.queue_order`):
first come, first served (fair share off) against fair share by decayed usage. Every free slot
takes the first unit of the order at that moment; usage is counted when a unit finishes, as a
master counts accepted results. Both orders keep every slot busy while units wait, so they differ
in who waits, not in how much gets done. What it reports (`measure`): Jain's index of each
submitter's slot-time against its weighted max-min fair share of the slots while it wanted them,
the slowdown of the small submitters (time to finish over the time alone on the pool), and the
throughput (CPU-seconds done per second until the last unit finishes).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from frost_core.policies.fair_share import ShareSettings, decayed, queue_order


@dataclass(frozen=True)
class Submission:
    submitter: str
    arrival: float
    sizes: tuple[float, ...]      # each unit's CPU-seconds on one slot


@dataclass(frozen=True)
class FairnessWorld:
    slots: int
    submissions: tuple[Submission, ...]
    half_life: float = 86400.0
    weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FairnessOutcome:
    finish: Mapping[str, float]           # submitter -> when its last unit finished
    slot_time: Mapping[str, float]        # submitter -> slot-seconds it held
    fair_time: Mapping[str, float]        # submitter -> slot-seconds its fair share was, while it wanted slots
    makespan: float


@dataclass(frozen=True)
class FairnessReport:
    jain: float
    small_slowdown: float
    throughput: float


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has everything."""
    squares = sum(v * v for v in values)
    return 1.0 if squares == 0 else sum(values) ** 2 / (len(values) * squares)


def fair_allocation(demands: Mapping[str, int], weights: Mapping[str, float], capacity: float) -> dict[str, float]:
    """Weighted max-min fair shares of `capacity` slots (water-filling): nobody gets more than it wants,
    the rest is split by weight among those who want more."""
    shares = {s: 0.0 for s in demands}
    wanting = {s for s, d in demands.items() if d > 0}
    left = capacity
    while wanting and left > 1e-12:
        total = sum(weights.get(s, 1.0) for s in wanting)
        level = left / total
        filled = {s for s in wanting if demands[s] - shares[s] <= level * weights.get(s, 1.0)}
        if not filled:
            for s in wanting:
                shares[s] += level * weights.get(s, 1.0)
            break
        for s in filled:
            left -= demands[s] - shares[s]
            shares[s] = float(demands[s])
        wanting -= filled
    return shares


def workload(rng: random.Random, *, slots: int = 20, big: int = 2, small: int = 6, big_units: int = 200,
             small_units: int = 12, mean_size: float = 60.0, spread: float = 1800.0) -> FairnessWorld:
    """Two kinds of submitters: a few big ones (sweeps of hundreds of units) and several small ones, all
    arriving at random within `spread` seconds, units of exponential size (common random numbers:
    the sizes are drawn here, once, for every order run on the world)."""
    submissions = []
    for n in range(big + small):
        count = big_units if n < big else small_units
        submissions.append(Submission(f"{'big' if n < big else 'small'}{n}", rng.uniform(0, spread),
                                      tuple(rng.expovariate(1 / mean_size) for _ in range(count))))
    return FairnessWorld(slots=slots, submissions=tuple(sorted(submissions, key=lambda s: s.arrival)))


def run(world: FairnessWorld, settings: ShareSettings) -> FairnessOutcome:
    """Simulate the pool under the queue order `settings` gives (fair share on or off)."""
    arrivals = sorted((s.arrival, i) for i, s in enumerate(world.submissions))
    queue: list[tuple[str, float]] = []                  # (submitter, size), first-come order
    running: list[tuple[float, int, str, float]] = []    # heap of (finish, seq, submitter, size)
    usage: dict[str, tuple[float, float]] = {}           # submitter -> (decayed CPU-seconds, as of when)
    left = {s.submitter: 0 for s in world.submissions}   # units not finished, per submitter
    finish: dict[str, float] = {}
    slot_time = {s.submitter: 0.0 for s in world.submissions}
    fair_time = dict(slot_time)
    now, seq, next_arrival = 0.0, 0, 0

    def usage_at(submitter: str) -> float:
        value, at = usage.get(submitter, (0.0, now))
        return decayed(value, now - at, world.half_life)

    while next_arrival < len(arrivals) or running:
        upcoming = arrivals[next_arrival][0] if next_arrival < len(arrivals) else math.inf
        later = min(upcoming, running[0][0] if running else math.inf)
        _account(world, queue, running, later - now, slot_time, fair_time)
        now = later
        while running and running[0][0] <= now:
            _, _, submitter, size = heapq.heappop(running)
            usage[submitter] = (usage_at(submitter) + size, now)
            left[submitter] -= 1
            if left[submitter] == 0:
                finish[submitter] = now
        while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= now:
            submission = world.submissions[arrivals[next_arrival][1]]
            queue.extend((submission.submitter, size) for size in submission.sizes)
            left[submission.submitter] += len(submission.sizes)
            next_arrival += 1
        free = world.slots - len(running)
        if free > 0 and queue:
            order = queue_order(queue, lambda unit: unit[0], usage_at, settings)
            for submitter, size in order[:free]:
                seq += 1
                heapq.heappush(running, (now + size, seq, submitter, size))
            taken = order[:free]
            for unit in taken:
                queue.remove(unit)
    return FairnessOutcome(finish=finish, slot_time=slot_time, fair_time=fair_time, makespan=now)


def _account(world: FairnessWorld, queue: list[tuple[str, float]], running: list[tuple[float, int, str, float]],
             elapsed: float, slot_time: dict[str, float], fair_time: dict[str, float]) -> None:
    """Add `elapsed` seconds of the current state: slots held, and the fair share of those wanting slots."""
    if elapsed <= 0 or math.isinf(elapsed):
        return
    held: dict[str, int] = {}
    for _, _, submitter, _ in running:
        held[submitter] = held.get(submitter, 0) + 1
    demands = dict(held)
    for submitter, _ in queue:
        demands[submitter] = demands.get(submitter, 0) + 1
    for submitter, share in fair_allocation(demands, world.weights, world.slots).items():
        fair_time[submitter] += share * elapsed
        slot_time[submitter] += held.get(submitter, 0) * elapsed


def measure(world: FairnessWorld, outcome: FairnessOutcome) -> FairnessReport:
    """Jain's index of slot-time over fair share, small submitters' mean slowdown, and throughput."""
    ratios = [outcome.slot_time[s] / outcome.fair_time[s] for s in outcome.fair_time if outcome.fair_time[s] > 0]
    mean_count = sum(len(s.sizes) for s in world.submissions) / len(world.submissions)
    slowdowns = []
    for submission in world.submissions:   # small: fewer units than the average submission
        if len(submission.sizes) < mean_count:
            alone = max(max(submission.sizes), sum(submission.sizes) / world.slots)
            slowdowns.append((outcome.finish[submission.submitter] - submission.arrival) / alone)
    work = sum(sum(s.sizes) for s in world.submissions)
    start = min(s.arrival for s in world.submissions)
    return FairnessReport(jain=jain_index(ratios), small_slowdown=sum(slowdowns) / max(len(slowdowns), 1),
                          throughput=work / (outcome.makespan - start))

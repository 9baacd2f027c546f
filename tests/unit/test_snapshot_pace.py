"""The pace of a node's snapshots: a sweep's stream of changes at the steady pace, a command's effect at once."""

from __future__ import annotations

import trio
import trio.testing

from frost_core.node.pace import PUBLISH_INTERVAL, SNAPSHOT_COST_SHARE, STEADY_INTERVAL, SnapshotPace


def publications(changes: list[tuple[float, bool]], *, cost: float = 0.001, until: float = 5.0) -> list[float]:
    """When a publishing loop like the node's builds snapshots, for changes at (time, by a command?)."""
    built: list[float] = []

    async def main():
        pace = SnapshotPace()

        async def publish():
            while True:
                await pace.changed()
                built.append(trio.current_time())
                await trio.sleep(cost)
                await pace.rest(cost)

        async def change():
            for at, command in changes:
                await trio.sleep_until(at)
                pace.mark(command=command)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(publish)
            nursery.start_soon(change)
            await trio.sleep_until(until)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return built


def test_a_sweeps_stream_of_changes_is_shown_at_the_steady_pace_not_at_every_change():
    results = [(0.001 * i, False) for i in range(1, 3_000)]   # a result a millisecond for three seconds
    built = publications(results)
    gaps = [b - a for a, b in zip(built, built[1:])]
    assert built[0] == 0.001                         # the first change after a quiet spell goes at once
    assert min(gaps) >= STEADY_INTERVAL and len(built) <= 3.0 / STEADY_INTERVAL + 1


def test_a_command_during_a_sweep_is_shown_at_most_publish_interval_after_the_last_snapshot():
    results = [(0.001 * i, False) for i in range(1, 3_000)]
    built = publications(sorted(results + [(1.23, True)]))
    after = next(b for b in built if b >= 1.23)
    before = max(b for b in built if b < 1.23)
    assert after <= max(1.23, before + 0.001 + PUBLISH_INTERVAL) + 1e-9   # at once, or as soon as the spacing allows
    assert after - before < STEADY_INTERVAL


def test_an_expensive_snapshot_keeps_its_share_even_for_a_command():
    cost = 0.2   # ten times that is longer than the steady pace
    built = publications([(0.001 * i, i % 100 == 0) for i in range(1, 3_000)], cost=cost)
    gaps = [b - a for a, b in zip(built, built[1:])]
    assert min(gaps) >= cost * SNAPSHOT_COST_SHARE

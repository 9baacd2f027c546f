"""A pushed snapshot arrives equal to the one sent, however big the node's history and assignments."""

from __future__ import annotations

import dataclasses

import trio
import trio.testing

from frost_core.node.attach_protocol import SnapshotPush, receive_snapshot, send_snapshot
from frost_core.wire.channel import Channel
from frost_tui.shots.fixed import demo_snapshot


def _big(snapshot):
    """3,000 units in three assignments: over a MiB, more than any single frame may carry."""
    assignment = snapshot.assignments[0]
    units = tuple(dataclasses.replace(assignment.units[0], index=i, task_id=f"abcdef12-1.{i}") for i in range(3000))
    return dataclasses.replace(snapshot, assignments=tuple(
        dataclasses.replace(assignment, id=f"abcdef12-{j}", units=units) for j in range(3)))


def test_a_snapshot_travels_whole_and_equal():
    sent = [demo_snapshot(peers=100, guests=10), _big(demo_snapshot())]

    async def main():
        left, right = trio.testing.memory_stream_pair()
        sender, receiver = Channel(left), Channel(right)
        received = []
        async with trio.open_nursery() as nursery:
            async def push():
                for snapshot in sent:
                    await send_snapshot(sender, snapshot)
            nursery.start_soon(push)
            for _ in sent:
                assert isinstance(await receiver.receive(), SnapshotPush)
                received.append(await receive_snapshot(receiver))
        return received

    received = trio.run(main)
    assert [r == s for r, s in zip(received, sent)] == [True, True]

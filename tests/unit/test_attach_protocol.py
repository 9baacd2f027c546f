"""A pushed snapshot arrives equal to the one sent, however big the node's history and assignments."""

from __future__ import annotations

import dataclasses

import pytest
import trio
import trio.testing

from frost_core.api.errors import ProtocolError
from frost_core.api.snapshot import NodeSnapshot
from frost_core.node.attach_protocol import (
    ReceivedViews, SentAssignments, SnapshotPush, receive_snapshot, send_snapshot,
)
from frost_core.wire.codec import encode
from frost_core.wire.messages import to_plain
from frost_core.wire.channel import Channel
from frost_tui.shots.fixed import demo_snapshot


def _big(snapshot):
    """3,000 units in three assignments: over a MiB, more than any single frame may carry."""
    assignment = snapshot.assignments[0]
    units = tuple(dataclasses.replace(assignment.units[0], index=i, task_id=f"abcdef12-1.{i}") for i in range(3000))
    return dataclasses.replace(snapshot, assignments=tuple(
        dataclasses.replace(assignment, id=f"abcdef12-{j}", units=units) for j in range(3)))


def _pushed(snapshots, *, one_connection: bool) -> list:
    """`snapshots` pushed and received in turn: as one attached UI's connection carries them (what each side kept of
    the pushes before), or each as the first push of a connection of its own."""
    async def main():
        left, right = trio.testing.memory_stream_pair()
        sender, receiver = Channel(left), Channel(right)
        views, received = ReceivedViews(), []
        async with trio.open_nursery() as nursery:
            async def push():
                pushed = SentAssignments()
                for snapshot in snapshots:
                    await send_snapshot(sender, snapshot, pushed if one_connection else None)
            nursery.start_soon(push)
            for _ in snapshots:
                assert isinstance(await receiver.receive(), SnapshotPush)
                received.append(await receive_snapshot(receiver, views if one_connection else None))
        return received

    return trio.run(main)


def test_a_snapshot_travels_whole_and_equal():
    sent = [demo_snapshot(peers=100, guests=10), _big(demo_snapshot())]
    received = _pushed(sent, one_connection=False)
    assert [r == s for r, s in zip(received, sent)] == [True, True]


def test_a_finished_assignment_travels_once_per_connection_and_a_changed_one_again():
    """What the UI holds of a finished sweep is the view it decoded first, push after push (later pushes carry
    its id alone); a running assignment that moved on arrives changed, and one the node no longer lists is gone."""
    base = _big(demo_snapshot())
    done = tuple(dataclasses.replace(a, state="done") for a in base.assignments[:2])
    running = dataclasses.replace(base.assignments[2], state="running")
    moved_on = dataclasses.replace(running, progress=running.progress / 2 + 0.5)
    sent = [dataclasses.replace(base, assignments=(*done, running)), dataclasses.replace(base, assignments=(*done, moved_on)),
            dataclasses.replace(base, assignments=(done[1],))]
    first, second, third = _pushed(sent, one_connection=True)
    assert (first, second, third) == tuple(sent)
    assert all(a is b for a, b in zip(first.assignments[:2], second.assignments[:2]))
    assert third.assignments[0] is first.assignments[1]
    assert second.assignments[2].progress == moved_on.progress


def test_a_snapshot_whose_assignments_are_not_encoded_items_is_refused_by_name():
    async def main():
        left, right = trio.testing.memory_stream_pair()
        sender, receiver = Channel(left), Channel(right)
        plain = to_plain(NodeSnapshot, demo_snapshot())   # as a node before encoded items sent it: maps
        await sender.send_bulk(SnapshotPush(), encode(plain))
        assert isinstance(await receiver.receive(), SnapshotPush)
        await receive_snapshot(receiver)

    with pytest.raises(ProtocolError, match="must be its CBOR or the id of one pushed before on this connection, not dict"):
        trio.run(main)


def test_a_running_assignment_that_did_not_change_between_two_pushes_is_not_sent_again():
    """A push that another change brought (a peer's figures, an event) carries a running sweep that did not move
    as its id: the UI keeps the view it has."""
    snapshot = _big(demo_snapshot())
    running = dataclasses.replace(snapshot, assignments=(dataclasses.replace(snapshot.assignments[0], state="running"),))
    later = dataclasses.replace(running, taken_at=running.taken_at + 1)
    first, second = _pushed([running, later], one_connection=True)
    assert (first, second) == (running, later)
    assert second.assignments[0] is first.assignments[0]

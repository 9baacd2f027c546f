"""A node tells its peers the moment a guest arrives or leaves, not at its next reading.

Otherwise a peer evicting a moment later still sees this node as it was (empty, or full) and
places its guests by stale figures. Here the desk node's periodic reading is pushed out to an
hour, so only the immediate republishing can bring the change to the peer.
"""

from __future__ import annotations

import pytest
import trio

import frost_core.node.wiring as node_module
from frost_core.api.commands import CancelAssignment, SubmitAssignment
from frost_core.config import Paths, load_config
from frost_core.node.wiring import Node
from frost_core.wire.security import ClusterKey
from tests.nodes import start_node

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LONG_PI = {"samples": 4_000_000_000, "units": 1}


async def guests_seen_by(peer, node_id: str, expected: int, *, timeout: float) -> None:
    """Wait until `peer`'s resource table shows `expected` guests on `node_id`."""
    seen = None
    with trio.move_on_after(timeout):
        while True:
            peers = await trio.to_thread.run_sync(peer.peers)
            seen = peers.get(node_id, {}).get("guests")
            if seen == expected:
                return
            await trio.sleep(0.1)
    raise AssertionError(f"after {timeout} s the peer still sees {seen} guest(s) on the desk, not {expected}")


async def test_a_peer_sees_a_guest_arrive_and_leave_without_waiting_for_the_next_reading(tmp_path, monkeypatch):
    key = tmp_path / "cluster.key"
    ClusterKey.generate().save(key)
    peer = await trio.to_thread.run_sync(lambda: start_node(tmp_path / "peer", key_file=key, name="peer"))
    try:
        await trio.to_thread.run_sync(peer.call, "pause")  # the unit must run on the desk
        monkeypatch.setattr(node_module, "FIGURES_INTERVAL", 3600.0)
        paths = Paths.resolve(config_file=tmp_path / "desk.toml", data_dir=tmp_path / "desk")
        desk = Node(load_config(paths, {
            "node.port": 0, "node.listen_host": "127.0.0.1", "node.broadcast_address": "", "node.name": "desk",
            "cluster.key_file": str(key), "node.seeds": [peer.address], "guests.cpus": 1,
            "gossip.interval": 0.3, "gossip.announce_interval": 2.0,
        }))
        async with trio.open_nursery() as nursery:
            await nursery.start(desk.serve)
            await guests_seen_by(peer, desk.node_id, 0, timeout=30)  # joined; its one reading is published
            assignment = await desk.execute(SubmitAssignment(plugin="montecarlo-pi", params=LONG_PI))
            with trio.fail_after(30):
                while not desk.snapshot().guests:
                    await trio.sleep(0.05)
            await guests_seen_by(peer, desk.node_id, 1, timeout=5)
            await desk.execute(CancelAssignment(assignment.id))
            await guests_seen_by(peer, desk.node_id, 0, timeout=5)
            nursery.cancel_scope.cancel()
    finally:
        await trio.to_thread.run_sync(peer.stop)

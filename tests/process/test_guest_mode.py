"""The node runs unchanged as a trio guest on an asyncio loop (how the Textual UI hosts it)."""

import asyncio

import trio

from frost_core.config import Paths, load_config
from frost_core.node.wiring import Node


def test_node_runs_as_a_trio_guest_on_asyncio_and_stops_cleanly(tmp_path):
    paths = Paths.resolve(config_file=tmp_path / "none.toml", data_dir=tmp_path / "data")
    config = load_config(paths, {"node.listen_host": "127.0.0.1", "node.port": 0, "node.broadcast_address": ""})
    node = Node(config)
    seen = []

    tokens = []

    async def trio_main(started: asyncio.Event, loop: asyncio.AbstractEventLoop):
        tokens.append(trio.lowlevel.current_trio_token())
        async with trio.open_nursery() as nursery:
            await nursery.start(node.serve)
            node.set_snapshot_listener(seen.append)
            loop.call_soon_threadsafe(started.set)
            await trio.sleep_forever()

    async def asyncio_main():
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        done = loop.create_future()
        cancel_scope = trio.CancelScope()

        async def wrapped():
            with cancel_scope:
                await trio_main(started, loop)

        trio.lowlevel.start_guest_run(
            wrapped, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=lambda outcome: done.set_result(outcome), host_uses_signal_set_wakeup_fd=True,
        )
        await asyncio.wait_for(started.wait(), 20)
        # The asyncio side keeps running while trio serves: the UI stays responsive.
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.05)
            ticks += 1
        snapshot = node.snapshot()
        tokens[0].run_sync_soon(cancel_scope.cancel)  # wakes trio's I/O wait at once
        outcome = await asyncio.wait_for(done, 20)
        return ticks, snapshot, outcome

    ticks, snapshot, outcome = asyncio.run(asyncio_main())
    outcome.unwrap()  # re-raises anything the node raised
    assert ticks == 20
    assert snapshot.node_id == node.node_id and snapshot.address.startswith("127.0.0.1:")
    assert [p.node_id for p in snapshot.peers] == [node.node_id]
    assert seen, "the node published snapshots to its listener"
    assert not (paths.data_dir / "control.sock").exists(), "the control socket is removed on a clean stop"

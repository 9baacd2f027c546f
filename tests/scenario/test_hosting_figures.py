"""A burst of hosting changes reaches the peers as one publication, and the last change is never left out."""

from __future__ import annotations

import trio

from frost_core.config import Paths, load_config
from frost_core.node.wiring import HOSTING_PUBLISH_GAP, Node


class Recorder:
    """Stands in for the membership service: what the node published, and when."""

    def __init__(self) -> None:
        self.published: list[tuple[float, int]] = []

    def members(self) -> list:
        return []

    def set_local_figures(self, figures) -> None:
        self.published.append((trio.current_time(), figures.guests))


async def test_a_burst_of_hosting_changes_is_published_once_at_once_and_once_after_the_gap(tmp_path, autojump_clock):
    paths = Paths.resolve(config_file=tmp_path / "node.toml", data_dir=tmp_path / "node")
    node = Node(load_config(paths, {"node.port": 0, "node.listen_host": "127.0.0.1", "node.broadcast_address": ""}))
    recorder = Recorder()
    node.membership = recorder
    async with trio.open_nursery() as nursery:
        nursery.start_soon(node._publish_hosting)
        began = trio.current_time()
        for _ in range(30):   # a sweep of tiny units: guests arrive and leave on every turn of the loop
            node._hosting_changed()
            await trio.sleep(0)
        await trio.sleep(HOSTING_PUBLISH_GAP * 5)
        assert [at - began for at, _ in recorder.published] == [0.0, HOSTING_PUBLISH_GAP]   # the first at once
        quiet = trio.current_time()
        node._hosting_changed()   # after a quiet spell a change goes out at once, with the ones of the same turn
        node._guest_count = lambda: 3
        node._hosting_changed()
        await trio.sleep(HOSTING_PUBLISH_GAP * 5)
        assert recorder.published[2:] == [(quiet, 3)]   # peers end with the last change
        nursery.cancel_scope.cancel()

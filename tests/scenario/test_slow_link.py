"""Results, checkpoints, replicas, input files and plugin code cross a slow link; a transfer that stalls fails.

Before, every such call had a deadline for the whole of it (ten seconds for a result, a minute
for a checkpoint, two for plugin code; an input file needed 1 MiB/s), so a state, result or file
too big for the link's speed could never cross: each attempt timed out and the next began anew.
The links here are a relay on loopback that passes bytes at a set rate with small socket buffers,
so the backlog waits in the sender's socket as it does on a slow link. Each test cuts the timeout
to half a second (the input file's, to a second: its test says why) so that a 2 MiB transfer at
1 MiB/s takes four times it without making the test slow.
"""

from __future__ import annotations

import os
import socket

import pytest
import trio

from frost_core.api.errors import NodeUnavailableError
from frost_core.cluster import files as files_module
from frost_core.cluster import links as links_module
from frost_core.cluster.code_shipping import fetch_plugin, install_plugin_code
from frost_core.cluster.files import FileCache, FileStore, fetch_file, install_files
from frost_core.cluster.links import Links
from frost_core.cluster.messages import CheckpointMeta, UnitOffer, UnitStart
from frost_core.cluster.replication import HeldReplicas
from frost_core.plugin.registry import PluginRegistry
from frost_core.storage.checkpoints import TEMP_PREFIX, CheckpointStore
from frost_core.wire.transport import open_transport
from tests.plugin_sources import good_source, write
from tests.unit.test_links import KEY, RecordingHost, RecordingMaster, pair, record, serve_transports, spec
from tests.waiting import wait_until

RATE = 1 << 20
"""Bytes a second the relay passes each way."""
BIG = 2 << 20
TIMEOUT = 0.5
SLICE = 16 << 10
SMALL_BUFFER = 32 << 10


class SlowLink:
    """A relay on loopback to `target` passing `rate` bytes a second each way; `stalled` stops it passing any."""

    def __init__(self, target: tuple[str, int], rate: int = RATE) -> None:
        self.target, self.rate = target, rate
        self.address: tuple[str, int] | None = None
        self.stalled = False

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)  # (inherited by what it accepts)
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        self.address = listener.getsockname()
        async with trio.open_nursery() as nursery:
            task_status.started()
            await trio.serve_listeners(self._relay, [trio.SocketListener(listener)], handler_nursery=nursery)

    async def _relay(self, client: trio.SocketStream) -> None:
        upstream_socket = trio.socket.socket()
        upstream_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
        await upstream_socket.connect(self.target)
        upstream = trio.SocketStream(upstream_socket)
        async with client, upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._pass, client, upstream)
            nursery.start_soon(self._pass, upstream, client)

    async def _pass(self, source: trio.SocketStream, sink: trio.SocketStream) -> None:
        while data := await source.receive_some(SLICE):
            while self.stalled:
                await trio.sleep(0.05)
            await sink.send_all(data)
            await trio.sleep(len(data) / self.rate)


async def slow_pair(nursery: trio.Nursery, tmp_path) -> tuple[Links, RecordingMaster, RecordingHost, SlowLink]:
    """Nodes a and b (each with links, as tests/unit/test_links.py's pair); a reaches b only through `SlowLink`."""
    transports = await serve_transports(nursery, {"a": KEY, "b": KEY})
    link = SlowLink(transports["b"].local_address)
    await nursery.start(link.serve)
    addresses = {"a": transports["a"].local_address, "b": link.address}
    master, host = RecordingMaster(), RecordingHost()
    links_a = Links(node_id="a", address_of=addresses.get)
    links_a.bind(master=RecordingMaster(), host=RecordingHost(), keeper=HeldReplicas(tmp_path / "a"))
    links_a.install(transports["a"])
    links_b = Links(node_id="b", address_of={"a": transports["a"].local_address}.get)
    links_b.bind(master=master, host=host, keeper=HeldReplicas(tmp_path / "b"))
    links_b.install(transports["b"])
    return links_a, master, host, link


async def test_a_result_many_times_the_call_timeout_in_transfer_time_reaches_the_master_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(links_module, "CALL_TIMEOUT", TIMEOUT)  # (see the module's docstring)
    result = os.urandom(BIG)
    async with trio.open_nursery() as nursery:
        links, master, _, _ = await slow_pair(nursery, tmp_path)
        began = trio.current_time()
        assert await links.master("b").host_result("a", "a-1.1", 2, result, 1.0)
        assert trio.current_time() - began > 2 * TIMEOUT, "the link was not slow: the test proves nothing"
        assert master.calls[0][4] == result
        nursery.cancel_scope.cancel()


async def test_a_checkpointed_start_and_a_replica_cross_a_slow_link_both_ways(tmp_path, monkeypatch):
    monkeypatch.setattr(links_module, "START_TIMEOUT", TIMEOUT)  # (see the module's docstring)
    checkpoint = record(os.urandom(BIG), seq=5)
    async with trio.open_nursery() as nursery:
        links, _, host, _ = await slow_pair(nursery, tmp_path)
        began = trio.current_time()
        assert (await links.host("b").start("a", spec(), checkpoint)).ok        # a -> b: a unit resumes there
        assert trio.current_time() - began > 2 * TIMEOUT, "the link was not slow: the test proves nothing"
        assert host.started == [(spec(), checkpoint)]
        await links.keeper("b").keep("m", checkpoint)                          # a -> b: a copy held for a master
        began = trio.current_time()
        assert await links.keeper("b").fetch("a-1.0", 0) == checkpoint         # b -> a: the copy handed back
        assert trio.current_time() - began > 2 * TIMEOUT, "the link was not slow: the test proves nothing"
        nursery.cancel_scope.cancel()


async def test_a_transfer_that_stalls_fails_once_nothing_moved_for_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(links_module, "CALL_TIMEOUT", TIMEOUT)  # (see the module's docstring)
    async with trio.open_nursery() as nursery:
        links, master, _, link = await slow_pair(nursery, tmp_path)

        async def stall_soon() -> None:
            await trio.sleep(0.3)
            link.stalled = True

        nursery.start_soon(stall_soon)
        with trio.fail_after(30), pytest.raises(NodeUnavailableError, match="did not answer UnitResult within 0.5 s"):
            await links.master("b").host_result("a", "a-1.1", 2, os.urandom(BIG), 1.0)
        assert master.calls == []
        nursery.cancel_scope.cancel()


async def test_an_input_file_many_times_the_timeout_in_transfer_time_is_fetched_whole(tmp_path, monkeypatch):
    # A second here, not half of one: the receiver sees progress a 256 KiB chunk at a time, half a second
    # apart at this link's half rate (slower than the 1 MiB/s the old deadline allowed a file).
    monkeypatch.setattr(files_module, "REPLY_TIMEOUT", 2 * TIMEOUT)
    content = os.urandom(BIG)
    (tmp_path / "input.bin").write_bytes(content)
    store = FileStore(tmp_path / "master" / "files")
    async with (
        open_transport(key=KEY, node_id="master", host="127.0.0.1") as master,
        open_transport(key=KEY, node_id="host", host="127.0.0.1") as host,
        trio.open_nursery() as nursery,
    ):
        install_files(master, store)
        link = SlowLink(master.local_address, RATE // 2)
        await nursery.start(link.serve)
        stored = store.add(tmp_path / "input.bin", "input.bin")
        began = trio.current_time()
        path = await fetch_file(host, link.address, stored, FileCache(tmp_path / "host" / "file-cache"))
        assert trio.current_time() - began > 2 * 2 * TIMEOUT, "the link was not slow: the test proves nothing"
        assert path.read_bytes() == content
        nursery.cancel_scope.cancel()


async def test_plugin_code_many_times_the_timeout_in_transfer_time_is_fetched_whole(tmp_path):
    master_plugins = PluginRegistry(tmp_path / "master", timeout=10.0, bundled_dir=tmp_path / "none")
    host_plugins = PluginRegistry(tmp_path / "host", timeout=10.0, bundled_dir=tmp_path / "none")
    write(tmp_path / "tables" / "__init__.py", good_source().replace('name = "squares"', 'name = "tables"'))
    (tmp_path / "tables" / "table.bin").write_bytes(os.urandom(BIG))   # data shipped with its code
    wanted = await master_plugins.add_async(tmp_path / "tables")
    async with (
        open_transport(key=KEY, node_id="master", host="127.0.0.1") as master,
        open_transport(key=KEY, node_id="host", host="127.0.0.1") as host,
        trio.open_nursery() as nursery,
    ):
        install_plugin_code(master, master_plugins)
        link = SlowLink(master.local_address)
        await nursery.start(link.serve)
        began = trio.current_time()
        fetched = await fetch_plugin(host, link.address, wanted.hash, host_plugins, allowed=True, timeout=TIMEOUT)
        assert trio.current_time() - began > 2 * TIMEOUT, "the link was not slow: the test proves nothing"
        assert fetched.ok and fetched.hash == wanted.hash
        nursery.cancel_scope.cancel()


async def test_a_peer_gone_silent_mid_transfer_is_dropped_and_leaves_nothing_staged(tmp_path, monkeypatch):
    # A laptop closed in the middle of sending a big checkpoint says nothing (no FIN): its receiver gives up once
    # nothing came for the timeout rather than keep the buffer and the staged file for as long as the connection
    # lives. (See the module's docstring for the timeout.)
    monkeypatch.setattr(links_module, "START_TIMEOUT", TIMEOUT)
    store = CheckpointStore(tmp_path / "b-checkpoints")
    checkpoint = record(bytes(16 << 20))   # from 8 MiB on, written to a staged file as it arrives

    def staged() -> list[str]:
        folder = store.root / checkpoint.task_id
        return [p.name for p in folder.glob(f"{TEMP_PREFIX}*")] if folder.is_dir() else []

    async with trio.open_nursery() as nursery:
        links, _, host = await pair(nursery, tmp_path, checkpoints=store)
        back = trio.Event()

        async def falls_silent(channel, deadline) -> None:
            async def pieces():
                yield checkpoint.state[:1 << 20]
                await back.wait()
                yield checkpoint.state[1 << 20:]
            await channel.send_bulk(UnitStart(spec=spec(), checkpoint=CheckpointMeta.of(checkpoint)), pieces(),
                                    size=len(checkpoint.state))

        ended: list[str] = []

        async def sender() -> None:
            try:
                await links.call("b", UnitStart(spec=spec()), send=falls_silent, timeout=60)
            except NodeUnavailableError as error:
                ended.append(error.message)

        nursery.start_soon(sender)
        await wait_until(staged, timeout=10, what="the checkpoint staged as it arrives")
        await wait_until(lambda: not staged(), timeout=10, what="the transfer given up and its staged file removed")
        back.set()
        offer = UnitOffer(task_id="a-1.1", plugin_hash="h", memory_bytes=1, state_bytes=0)
        assert (await links.host("b").offer("a", offer)).accepted, "the receiver still serves its peers"
        await wait_until(lambda: ended, timeout=10, what="the sender, back, finding the connection gone")
        assert "unreachable" in ended[0] and host.started == []
        nursery.cancel_scope.cancel()

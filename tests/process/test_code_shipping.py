"""A host fetches plugin code by content hash from a master over real loopback transports."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from frost_core.cluster.code_shipping import TURNED_OFF, PluginCode, fetch_plugin, install_plugin_code
from frost_core.api.errors import PluginError
from frost_core.plugin.archive import MAX_ARCHIVE_BYTES, pack_plugin
from frost_core.plugin.calls import split_units
from frost_core.plugin.registry import PluginRegistry, content_hash
from frost_core.wire.transport import NetworkTransport, open_transport
from frost_core.wire.channel import Channel
from frost_core.wire.codec import encode
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message
from frost_core.wire.security import ClusterKey

from tests.plugin_sources import good_source, write

KEY = ClusterKey.generate()
STRANGER_KEY = ClusterKey.generate()
LOOPBACK = "127.0.0.1"


@asynccontextmanager
async def node(name: str, key: ClusterKey = KEY) -> AsyncIterator[NetworkTransport]:
    async with open_transport(key=key, node_id=name, host=LOOPBACK) as transport:
        yield transport


async def scanned(data_dir: Path, bundled_dir: Path | None = None) -> PluginRegistry:
    registry = PluginRegistry(data_dir, timeout=10.0, bundled_dir=bundled_dir)
    await registry.scan_async()
    return registry


@pytest.fixture
async def master_plugins(tmp_path) -> PluginRegistry:
    """The bundled plugins plus an owner-added folder with a relative import."""
    registry = await scanned(tmp_path / "master")
    folder = tmp_path / "geometry"
    write(folder / "helper.py", "NAME = 'geometry'\n")
    write(folder / "__init__.py", "from .helper import NAME\n" + good_source().replace('name = "squares"', "name = NAME"))
    await registry.add_async(folder)
    return registry


@pytest.fixture
async def host_plugins(tmp_path) -> PluginRegistry:
    return await scanned(tmp_path / "host", tmp_path / "no-bundled")


def cluster_folder(registry: PluginRegistry) -> Path:
    return registry.data_dir / "plugins" / "cluster"


@pytest.mark.parametrize("name", ["mandelbrot", "geometry"])
async def test_a_host_fetches_a_plugin_runs_it_and_keeps_it_by_hash(master_plugins, host_plugins, tmp_path, name):
    wanted = master_plugins.get(name)
    async with node("master") as master, node("host") as host:
        install_plugin_code(master, master_plugins)
        fetched = await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True)
    assert fetched.ok and fetched.source == "cluster"
    assert (fetched.name, fetched.version, fetched.hash) == (wanted.name, wanted.version, wanted.hash)
    assert content_hash(fetched.path) == wanted.hash
    assert Path(fetched.path).is_relative_to(cluster_folder(host_plugins) / wanted.hash)
    assert host_plugins.by_hash(wanted.hash) == fetched
    units = await split_units(fetched, {})
    assert units == await split_units(wanted, {})

    # The master is gone now: the code is served from the cache, also after a restart.
    assert await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True) == fetched
    restarted = await scanned(tmp_path / "host", tmp_path / "no-bundled")
    assert await fetch_plugin(host, master.local_address, wanted.hash, restarted, allowed=True) == fetched


async def test_concurrent_fetches_of_one_hash_share_one_download(master_plugins, host_plugins, caplog):
    caplog.set_level(logging.INFO, logger="frost.code_shipping")
    wanted = master_plugins.get("raytrace")
    results = []
    async with node("master") as master, node("host") as host:
        install_plugin_code(master, master_plugins)

        async def fetch() -> None:
            results.append(await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(fetch)
    assert len(results) == 5 and all(info == results[0] for info in results)
    assert sum("sending plugin raytrace" in record.getMessage() for record in caplog.records) == 1


async def test_turned_off_cluster_plugins_are_neither_fetched_nor_run(master_plugins, host_plugins):
    wanted = master_plugins.get("geometry")
    async with node("master") as master, node("host") as host:
        install_plugin_code(master, master_plugins)
        with pytest.raises(PluginError, match=r"turned off in this node's config \(cluster.allow_cluster_plugins\)"):
            await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=False)
        assert not cluster_folder(host_plugins).exists()
        await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True)
        with pytest.raises(PluginError, match=TURNED_OFF.replace("(", r"\(").replace(")", r"\)")):
            await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=False)


async def test_code_the_host_already_has_is_never_fetched(tmp_path, master_plugins):
    host_plugins = await scanned(tmp_path / "host")  # has the bundled plugins itself
    wanted = master_plugins.get("mandelbrot")
    async with node("host") as host:
        unreachable = ("127.0.0.1", 9)  # nothing listens there; also fine with cluster plugins off
        info = await fetch_plugin(host, unreachable, wanted.hash, host_plugins, allowed=False)
    assert info.source == "bundled" and info.hash == wanted.hash


async def test_a_node_without_the_cluster_key_cannot_fetch(master_plugins, host_plugins):
    wanted = master_plugins.get("geometry")
    async with node("master") as master, node("stranger", STRANGER_KEY) as stranger:
        install_plugin_code(master, master_plugins)
        with pytest.raises(PluginError, match=f"fetching plugin code {wanted.hash[:12]} from 127.0.0.1:.* failed"):
            await fetch_plugin(stranger, master.local_address, wanted.hash, host_plugins, allowed=True)
    assert not cluster_folder(host_plugins).exists()
    assert host_plugins.plugins() == ()


async def test_unknown_and_broken_hashes_are_refused_with_the_reason(master_plugins, host_plugins, tmp_path):
    broken = await master_plugins.add_async(write(tmp_path / "bad.py", good_source(name="bad").replace("return 0.0", "return 2")))
    assert not broken.ok
    async with node("master") as master, node("host") as host:
        install_plugin_code(master, master_plugins)
        with pytest.raises(PluginError, match=r"127.0.0.1:\d+ did not send plugin code 000000000000: no plugin with code hash"):
            await fetch_plugin(host, master.local_address, "0" * 64, host_plugins, allowed=True)
        with pytest.raises(PluginError, match="did not send plugin code .* is broken: .*progress must return"):
            await fetch_plugin(host, master.local_address, broken.hash, host_plugins, allowed=True)
    assert not cluster_folder(host_plugins).exists()


async def test_code_that_breaks_on_the_host_is_listed_broken_with_its_reason(tmp_path, host_plugins):
    """Validated fine on the master, but it needs a file only the master has."""
    folder = tmp_path / "master-plugins"
    write(folder / "picky.py", "import pathlib\n"
          "if not (pathlib.Path(__file__).parent / 'marker').exists():\n"
          "    raise RuntimeError('this machine lacks the marker')\n" + good_source(name="picky"))
    (folder / "marker").write_text("")
    master_plugins = await scanned(tmp_path / "master", folder)
    wanted = master_plugins.get("picky")
    async with node("master") as master, node("host") as host:
        install_plugin_code(master, master_plugins)
        with pytest.raises(PluginError, match="plugin 'picky' .* is broken: .*this machine lacks the marker"):
            await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True)
    [listed] = host_plugins.plugins()
    assert (listed.source, listed.hash, listed.ok) == ("cluster", wanted.hash, False)
    assert "this machine lacks the marker" in listed.error and listed.path.endswith("picky.py")
    with pytest.raises(PluginError, match="is broken"):  # cached as broken: not fetched again
        await fetch_plugin(host, master.local_address, wanted.hash, host_plugins, allowed=True)


@asynccontextmanager
async def lying_master(archive: bytes) -> AsyncIterator[NetworkTransport]:
    """A cluster member that answers every fetch with `archive`, whatever was asked for."""

    async def answer(channel: Channel, request: Message) -> None:
        await channel.send_bulk(PluginCode(hash=request.hash, name="liar"), archive)  # type: ignore[attr-defined]

    async with node("liar") as liar:
        liar.set_stream_handler(MessageCode.PLUGIN_FETCH, answer)
        yield liar


async def test_code_that_does_not_match_its_hash_is_thrown_away(master_plugins, host_plugins):
    wanted, other = master_plugins.get("mandelbrot"), master_plugins.get("raytrace")
    async with lying_master(pack_plugin(other.path)) as liar, node("host") as host:
        with pytest.raises(PluginError, match=f"received as {wanted.hash[:12]} hashes to {other.hash[:12]}"):
            await fetch_plugin(host, liar.local_address, wanted.hash, host_plugins, allowed=True)
    assert list(cluster_folder(host_plugins).iterdir()) == []
    assert host_plugins.plugins() == ()


async def test_an_oversized_archive_is_refused_while_receiving(host_plugins):
    async with lying_master(bytes(MAX_ARCHIVE_BYTES + 1)) as liar, node("host") as host:
        with pytest.raises(PluginError, match="over the limit"):
            await fetch_plugin(host, liar.local_address, "a" * 64, host_plugins, allowed=True)
    assert not cluster_folder(host_plugins).exists()


@pytest.mark.parametrize("path", ["../evil.py", "/tmp/evil.py", "evil/../../x.py"])
async def test_a_malicious_archive_leaves_nothing_behind(host_plugins, tmp_path, path):
    archive = encode({"format": 1, "files": [[path, b"import os\n"]]})
    with pytest.raises(PluginError, match="the plugin archive has"):
        await host_plugins.add_cluster_async(archive, "b" * 64)
    assert list(cluster_folder(host_plugins).iterdir()) == []
    assert not (tmp_path / "evil.py").exists() and not Path("/tmp/evil.py").exists()
    with pytest.raises(PluginError, match="is not a content hash"):
        await host_plugins.add_cluster_async(pack_plugin(write(tmp_path / "ok.py", good_source())), "../" + "c" * 61)

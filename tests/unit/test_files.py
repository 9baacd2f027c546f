"""Input files by content hash: the master's store, a host's cache, and fetches over real loopback transports."""

import hashlib
import os
import stat
from contextlib import asynccontextmanager

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.cluster.files import (
    FileCache,
    FileData,
    FileFetch,
    FileStore,
    InputFiles,
    fetch_file,
    install_files,
)
from frost_core.api.errors import ConfigError, FrostError, NodeUnavailableError, ProtocolError
from frost_core.guest.views import GuestTask, InputFile
from frost_core.plugin.api import WorkUnit
from frost_core.wire.transport import open_transport
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import decode_message, encode_message
from frost_core.wire.security import ClusterKey

KEY = ClusterKey.generate()
CONTENT = bytes(range(256)) * 5000 + b"the end\n"  # a little over 1 MiB: several bulk chunks


@asynccontextmanager
async def master_and_host(tmp_path):
    """A master serving its FileStore and a host with an empty cache, on two loopback transports."""
    store = FileStore(tmp_path / "master" / "files")
    async with (
        open_transport(key=KEY, node_id="master", host="127.0.0.1") as master,
        open_transport(key=KEY, node_id="host", host="127.0.0.1") as host,
    ):
        install_files(master, store)
        yield store, master, host, FileCache(tmp_path / "host" / "file-cache")


def source(tmp_path, data=CONTENT, name="input.bin"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


async def test_a_host_fetches_a_whole_file_once_and_verifies_it(tmp_path):
    async with master_and_host(tmp_path) as (store, master, host, cache):
        stored = store.add(source(tmp_path), "data.bin")
        assert stored == InputFile("data.bin", hashlib.sha256(CONTENT).hexdigest(), len(CONTENT))
        path = await fetch_file(host, master.local_address, stored, cache)
        assert path.read_bytes() == CONTENT
        assert path.parent == tmp_path / "host" / "file-cache"
        assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), "cached files are read-only"
        assert [p.name for p in path.parent.iterdir()] == [stored.sha256], "no partial file left behind"


async def test_a_cached_file_is_reused_without_the_network(tmp_path):
    async with master_and_host(tmp_path) as (store, master, host, cache):
        stored = store.add(source(tmp_path), "data.bin")
        first = await fetch_file(host, master.local_address, stored, cache)
        nobody = ("127.0.0.1", 1)  # nothing listens there: only the cache can answer
        assert await fetch_file(host, nobody, stored, cache) == first


async def test_units_opening_the_same_file_at_once_share_one_download(tmp_path):
    cache = FileCache(tmp_path / "cache")
    wanted = InputFile("data.bin", hashlib.sha256(CONTENT).hexdigest(), len(CONTENT))
    downloads = []

    async def slow_download(destination):
        downloads.append(destination)
        await trio.sleep(0.05)
        destination.write_bytes(CONTENT)

    paths = []

    async def open_one():
        paths.append(await cache.get(wanted, slow_download))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(open_one)
    assert len(downloads) == 1 and len(set(paths)) == 1 and paths[0].read_bytes() == CONTENT


async def test_a_hash_the_master_does_not_hold_is_refused(tmp_path):
    async with master_and_host(tmp_path) as (store, master, host, cache):
        unknown = InputFile("ghost.bin", hashlib.sha256(b"never stored").hexdigest(), 12)
        with pytest.raises(FrostError, match="has no input file 'ghost.bin'") as refused:
            await fetch_file(host, master.local_address, unknown, cache)
        assert not isinstance(refused.value, ProtocolError)
        assert not cache.root.exists() or not any(cache.root.iterdir())


async def test_a_path_instead_of_a_hash_is_refused_and_the_server_goes_on(tmp_path):
    async with master_and_host(tmp_path) as (store, master, host, cache):
        stored = store.add(source(tmp_path), "data.bin")
        async with await host.connect(master.local_address) as channel:
            await channel.send(FileFetch(sha256="../../../etc/passwd"))
            reply = await channel.receive()
        assert isinstance(reply, FileData) and reply.refusal and "SHA-256" in reply.refusal
        assert (await fetch_file(host, master.local_address, stored, cache)).read_bytes() == CONTENT


@pytest.mark.parametrize("tamper", ["same-size", "other-size"])
async def test_a_file_changed_at_the_master_is_an_error_and_never_cached(tmp_path, tamper):
    async with master_and_host(tmp_path) as (store, master, host, cache):
        stored = store.add(source(tmp_path), "data.bin")
        kept = store.path(stored.sha256)
        kept.chmod(0o644)
        kept.write_bytes(CONTENT[:-4] + b"EVIL" if tamper == "same-size" else CONTENT + b"more")
        message = "other bytes than it was submitted with" if tamper == "same-size" else "not the .* it was submitted"
        with pytest.raises(ProtocolError, match=message):
            await fetch_file(host, master.local_address, stored, cache)
        assert not any(cache.root.iterdir())


async def test_an_unreachable_master_is_reported_as_such(tmp_path):
    async with open_transport(key=KEY, node_id="host", host="127.0.0.1") as host:
        with pytest.raises(NodeUnavailableError, match="cannot fetch input file 'data.bin'"):
            await fetch_file(host, ("127.0.0.1", 1), InputFile("data.bin", "ab" * 32, 10), FileCache(tmp_path))


async def test_a_peer_with_another_cluster_key_gets_nothing(tmp_path):
    async with master_and_host(tmp_path) as (store, master, _host, cache):
        stored = store.add(source(tmp_path), "data.bin")
        async with open_transport(key=ClusterKey.generate(), node_id="stranger", host="127.0.0.1") as stranger:
            with pytest.raises(FrostError):
                await fetch_file(stranger, master.local_address, stored, cache)
        assert not cache.root.exists() or not any(cache.root.iterdir())


async def test_input_files_read_the_masters_own_copy_and_fetch_other_masters_files(tmp_path):
    async with master_and_host(tmp_path) as (_store, master, host_transport, _cache):
        at_master = InputFiles(node_id="master", data_dir=tmp_path / "m", address_of=lambda node: None)
        at_host = InputFiles(node_id="host", data_dir=tmp_path / "h",
                             address_of=lambda node: master.local_address if node == "master" else None)
        install_files(master, at_master.store)
        at_host.install(host_transport)
        stored = at_master.store.add(source(tmp_path), "data.bin")
        task = GuestTask(task_id="master-1.0", assignment_id="master-1", origin="master", plugin_name="p",
                         plugin_version="1", plugin_hash="0" * 64, plugin_path="/p.py",
                         unit=WorkUnit(0, {}, 1, 1.0), epoch=1, inputs=(stored,))
        assert await at_master.open(task, stored) == at_master.store.path(stored.sha256)
        fetched = await at_host.open(task, stored)
        assert fetched.parent == tmp_path / "h" / "file-cache" and fetched.read_bytes() == CONTENT
        orphan = GuestTask(**{**vars(task), "origin": "gone"})
        with pytest.raises(NodeUnavailableError, match="not reachable"):
            await at_host.open(orphan, InputFile("other", "cd" * 32, 3))


def test_the_store_keeps_equal_bytes_once_and_names_what_is_wrong(tmp_path):
    store = FileStore(tmp_path / "files")
    first = store.add(source(tmp_path, b"same", "a.txt"), "a")
    second = store.add(source(tmp_path, b"same", "b.txt"), "b")
    assert first.sha256 == second.sha256 and [p.name for p in store.root.iterdir()] == [first.sha256]
    with pytest.raises(ConfigError, match="does not exist"):
        store.add(tmp_path / "missing.txt", "missing")
    with pytest.raises(ConfigError, match="is not a file"):
        store.add(tmp_path, "folder")
    for bad in ("../x", "a/b", ".hidden", "", "tab\there", "x" * 300):
        with pytest.raises(ConfigError, match="must be a plain file name"):
            store.add(source(tmp_path, b"x", "x.txt"), bad)
    with pytest.raises(FrostError, match="no input file"):
        store.path("ab" * 32)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300))
def test_any_file_data_body_decodes_to_a_valid_message_or_a_protocol_error(body):
    for code in (MessageCode.FILE_DATA, MessageCode.FILE_FETCH):
        try:
            message = decode_message(code, body)
        except ProtocolError:
            continue
        assert isinstance(message, FileData | FileFetch)
        assert isinstance(message.sha256, str)


@settings(max_examples=200, deadline=None)
@given(sha256=st.text(max_size=80), size=st.integers(min_value=0, max_value=2**63), refusal=st.none() | st.text(max_size=200))
def test_file_data_survives_the_wire(sha256, size, refusal):
    message = FileData(sha256=sha256, size=size, refusal=refusal)
    assert decode_message(MessageCode.FILE_DATA, encode_message(message)) == message

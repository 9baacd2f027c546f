"""Cluster security: join codes, key files, sealed datagrams, handshake and stream AEAD."""

import logging
import os
import stat

import pytest
import trio
import trio.testing

from frost_core.api.errors import AuthenticationError, ConfigError, ProtocolError
from frost_core.wire.channel import Channel, accept_channel, connect_channel
from frost_core.wire.codes import MessageCode
from frost_core.wire.framing import HEADER, HEADER_SIZE, MAX_CHUNK_SIZE, encode_header
from frost_core.wire.messages import BulkEnd
from frost_core.wire.security import (
    ClusterKey,
    DatagramOpener,
    DatagramSealer,
    RefusalLog,
    ReplayWindow,
)

KEY = ClusterKey(bytes(range(32)))
OTHER = ClusterKey(bytes(range(1, 33)))


# --- join codes and key files -------------------------------------------------------------------


def test_join_code_round_trip_tolerates_case_spaces_and_lookalikes() -> None:
    code = KEY.to_join_code()
    assert code.startswith("FROST-")
    assert ClusterKey.from_join_code(code) == KEY
    assert ClusterKey.from_join_code("  " + code.lower().replace("-", " ") + "\n") == KEY
    assert ClusterKey.from_join_code(code.replace("O", "0").replace("I", "1")) == KEY


def test_join_code_typos_are_named() -> None:
    code = KEY.to_join_code()
    at = code.index("-") + 3
    swapped = "A" if code[at] != "A" else "B"
    with pytest.raises(ConfigError, match="checksum does not match: a character was mistyped"):
        ClusterKey.from_join_code(code[:at] + swapped + code[at + 1 :])
    with pytest.raises(ConfigError, match="invalid character '9' at position 3"):
        ClusterKey.from_join_code("FROST-AB9" + code[9:])
    with pytest.raises(ConfigError, match="has 55 characters.*expected 56"):
        ClusterKey.from_join_code(code[:-1])


def test_key_file_is_private_and_a_fresh_install_gets_its_own_key(tmp_path) -> None:
    path = tmp_path / "conf" / "cluster.key"
    first = ClusterKey.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ClusterKey.load_or_create(path) == first
    assert ClusterKey.load_or_create(tmp_path / "other.key") != first
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        ClusterKey.load(path)


def test_key_never_shows_its_secret() -> None:
    assert KEY.secret.hex() not in repr(KEY)
    assert KEY.fingerprint() != OTHER.fingerprint()


# --- datagrams ----------------------------------------------------------------------------------


def test_sealed_datagram_opens_once_and_never_again() -> None:
    sealer, opener = DatagramSealer(KEY, "alice"), DatagramOpener(KEY)
    datagram = sealer.seal(MessageCode.PING, b"body")
    opened = opener.open(datagram)
    assert (opened.sender, opened.code, opened.body) == ("alice", MessageCode.PING, b"body")
    with pytest.raises(AuthenticationError, match="already seen"):
        opener.open(datagram)


def test_wrong_key_and_tampering_are_refused() -> None:
    datagram = DatagramSealer(OTHER, "mallory").seal(MessageCode.PING, b"body")
    with pytest.raises(AuthenticationError, match="MAC does not match"):
        DatagramOpener(KEY).open(datagram)
    good = bytearray(DatagramSealer(KEY, "alice").seal(MessageCode.PING, b"body"))
    good[-20] ^= 1
    with pytest.raises(AuthenticationError):
        DatagramOpener(KEY).open(bytes(good))
    with pytest.raises(AuthenticationError, match="too short"):
        DatagramOpener(KEY).open(b"\x01")


def test_out_of_order_within_window_is_fine_and_a_restart_is_accepted() -> None:
    opener = DatagramOpener(KEY)
    before = DatagramSealer(KEY, "alice", epoch=100)
    first, second = before.seal(1, b"a"), before.seal(1, b"b")
    opener.open(second)
    opener.open(first)  # reordered by the network, not replayed
    after = DatagramSealer(KEY, "alice", epoch=200)  # the sender restarted: counter back at 1
    assert opener.open(after.seal(1, b"c")).body == b"c"
    with pytest.raises(AuthenticationError, match="earlier boot"):
        opener.open(before.seal(1, b"d"))


def test_replay_window_edges() -> None:
    window = ReplayWindow(size=8)
    window.accept(1, 10)
    window.accept(1, 3)  # age 7: still inside
    with pytest.raises(AuthenticationError, match="too old"):
        window.accept(1, 2)
    window.accept(1, 100)  # jump past the window
    with pytest.raises(AuthenticationError, match="already seen"):
        window.accept(1, 100)


def test_refusals_are_logged_once_per_source(caplog) -> None:
    now = [0.0]
    log = RefusalLog(logging.getLogger("test"), interval=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        results = [log.refuse("10.0.0.1", "bad MAC") for _ in range(1000)]
        log.refuse("10.0.0.2", "bad MAC")
        now[0] = 61
        log.refuse("10.0.0.1", "bad MAC")
    assert results.count(True) == 1
    assert len(caplog.records) == 3


# --- streams ------------------------------------------------------------------------------------


async def _pair(client_key: ClusterKey, server_key: ClusterKey):
    """A handshaken client/server pair over memory streams, plus the client's raw stream."""
    left, right = trio.testing.memory_stream_pair()
    result: dict[str, Channel] = {}

    async def serve() -> None:
        result["server"] = await accept_channel(right, server_key, "server")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        result["client"] = await connect_channel(left, client_key, "client")
    return result["client"], result["server"], left


async def test_handshake_with_the_key_gives_an_encrypted_channel() -> None:
    client, server, _ = await _pair(KEY, KEY)
    assert (client.peer_node_id, server.peer_node_id) == ("server", "client")
    await client.send(BulkEnd(5))
    assert await server.receive() == BulkEnd(5)
    await server.send(BulkEnd(6))
    assert await client.receive() == BulkEnd(6)


async def test_a_node_without_the_key_is_refused() -> None:
    refused = pytest.RaisesExc(AuthenticationError, match="node 'client' does not hold our cluster key")
    told_why = pytest.RaisesExc(AuthenticationError, match="^refused us: different cluster key$")
    with pytest.RaisesGroup(refused, told_why, flatten_subgroups=True):
        await _pair(OTHER, KEY)


@pytest.mark.parametrize("attack", ["tamper", "replay", "reorder"])
async def test_tampered_replayed_and_reordered_frames_fail(attack: str) -> None:
    client, server, client_stream = await _pair(KEY, KEY)
    recorder = trio.testing.MemorySendStream()
    client._send_stream = recorder  # capture two genuine encrypted frames
    await client.send(BulkEnd(1))
    await client.send(BulkEnd(2))
    wire = recorder.get_data_nowait()
    first, second = wire[: len(wire) // 2], wire[len(wire) // 2 :]
    forged = {
        "tamper": first[:-1] + bytes([first[-1] ^ 1]),
        "replay": first + first,
        "reorder": second + first,
    }[attack]
    await client_stream.send_all(forged)
    if attack == "replay":
        assert await server.receive() == BulkEnd(1)
    with pytest.raises(AuthenticationError, match="failed authentication"):
        await server.receive()


async def test_a_tampered_bulk_chunk_is_refused_and_its_text_never_shown() -> None:
    client, server, client_stream = await _pair(KEY, KEY)
    recorder = trio.testing.MemorySendStream()
    client._send_stream = recorder  # capture a genuine bulk transfer: BulkEnd, begin, two chunks, end
    await client.send_bulk(BulkEnd(0), b"a" * MAX_CHUNK_SIZE + b"b" * 1000)
    wire = bytearray(recorder.get_data_nowait())
    at = 0
    for _ in range(3):  # skip BulkEnd(0), BULK_BEGIN and the first chunk
        at += HEADER_SIZE + HEADER.unpack_from(wire, at)[0]
    assert HEADER.unpack_from(wire, at) == (1000 + 16, MessageCode.BULK_CHUNK)
    wire[at + HEADER_SIZE + 100] ^= 1  # one bit of the second chunk's ciphertext: only the tag can tell
    await client_stream.send_all(bytes(wire))
    assert await server.receive() == BulkEnd(0)
    chunks = server.iterate_bulk_data(max_size=2 * MAX_CHUNK_SIZE)
    first = await anext(chunks)
    assert bytes(first[:3]) == b"aaa"
    with pytest.raises(AuthenticationError, match="failed authentication"):
        await anext(chunks)
    assert not any(first[:1000])  # the buffer the chunks share holds no unauthenticated text


async def test_oversize_encrypted_frame_header_drops_before_buffering() -> None:
    _, server, client_stream = await _pair(KEY, KEY)
    await client_stream.send_all(encode_header(MessageCode.BULK_END, 2**31))
    with pytest.raises(ProtocolError, match="over its cap"):
        await server.receive()

"""NetworkTransport over real loopback sockets: datagrams, exchanges, streams, and strangers."""

import logging
import os
import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from frost_core.api.errors import ProtocolError
from frost_core.wire.transport import NetworkTransport, open_transport
from frost_core.wire.channel import Channel
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import BulkBegin, BulkEnd, Hello, Message
from frost_core.wire.security import ClusterKey, DatagramSealer
from tests.waiting import wait_until

KEY = ClusterKey.generate()
STRANGER_KEY = ClusterKey.generate()
LOOPBACK = "127.0.0.1"


@asynccontextmanager
async def node(name: str, key: ClusterKey = KEY, **options) -> AsyncIterator[NetworkTransport]:
    async with open_transport(key=key, node_id=name, host=LOOPBACK, **options) as transport:
        yield transport


async def _receive(transport: NetworkTransport) -> tuple[tuple[str, int], Message]:
    with trio.fail_after(10):
        return await transport.receive_datagram()


async def test_udp_and_tcp_share_one_port_and_datagrams_round_trip() -> None:
    async with node("alice") as alice, node("bob") as bob:
        assert alice.local_address[1] != 0
        await alice.send_datagram(bob.local_address, BulkEnd(1))
        source, message = await _receive(bob)
        assert (source, message) == (alice.local_address, BulkEnd(1))


async def test_broadcast_reaches_a_node_bound_to_loopback() -> None:
    async with node("bob", broadcast_address=("127.255.255.255", 0)) as bob:
        async with node("alice", broadcast_address=("127.255.255.255", bob.local_address[1])) as alice:
            await alice.broadcast(BulkEnd(7))
            assert await _receive(bob) == (alice.local_address, BulkEnd(7))


async def test_exchange_reuses_channels_and_survives_an_idle_close() -> None:
    seen: list[tuple[tuple[str, int], Message]] = []

    async def answer(address: tuple[str, int], request: Message) -> Message:
        seen.append((address, request))
        assert isinstance(request, BulkEnd)
        return BulkEnd(request.size * 2)

    async with node("server", idle_timeout=0.05) as server, node("client") as client:
        server.set_exchange_handler(MessageCode.BULK_END, answer)
        for n in range(5):
            assert await client.exchange(server.local_address, BulkEnd(n), timeout=10) == BulkEnd(2 * n)
        await trio.sleep(0.3)  # the server closes the idle pooled channel
        assert await client.exchange(server.local_address, BulkEnd(21), timeout=10) == BulkEnd(42)
    # Handlers see the client's own address (its listening port), not an ephemeral one.
    assert {address for address, _ in seen} == {client.local_address}


async def test_a_kept_channel_idle_past_its_timeout_is_closed_by_the_caller() -> None:
    async def answer(address: tuple[str, int], request: Message) -> Message:
        return request

    async with node("server") as server, node("client", idle_timeout=0.4) as client:
        server.set_exchange_handler(MessageCode.BULK_END, answer)
        for n in range(3):
            assert await client.exchange(server.local_address, BulkEnd(n), timeout=10) == BulkEnd(n)
        assert client.pool.idle(server.local_address) == 1, "three calls in turn share one kept channel"
        await wait_until(lambda: client.pool.idle(server.local_address) == 0, timeout=10,
                         what="the idle channel to be closed")
        assert await client.exchange(server.local_address, BulkEnd(9), timeout=10) == BulkEnd(9)


async def test_stream_handler_gets_a_raw_channel_for_bulk() -> None:
    data = os.urandom(700_000)
    received: trio.MemorySendChannel[bytes]
    received, results = trio.open_memory_channel[bytes](1)

    async def take_checkpoint(channel: Channel, first: Message) -> None:
        assert isinstance(first, Hello)
        await received.send(await channel.receive_bulk_data(max_size=10**6))
        await channel.send(BulkEnd(0))

    async with node("host") as host, node("origin") as origin:
        host.set_stream_handler(MessageCode.HELLO, take_checkpoint)
        async with await origin.connect(host.local_address) as channel:
            assert channel.peer_node_id == "host"
            await channel.send_bulk(Hello(1, "checkpoint", b""), data)
            assert await channel.receive() == BulkEnd(0)
        with trio.fail_after(10):
            assert await results.receive() == data


async def test_wrong_key_node_is_refused_once_logged_and_the_cluster_carries_on(caplog) -> None:
    async def echo(address: tuple[str, int], request: Message) -> Message:
        return request

    caplog.set_level(logging.WARNING, logger="frost_core.wire.transport")
    async with node("alice") as alice, node("bob") as bob, node("mallory", STRANGER_KEY) as mallory:
        bob.set_exchange_handler(MessageCode.BULK_END, echo)
        for n in range(50):
            await mallory.send_datagram(bob.local_address, BulkEnd(n))
        for _ in range(3):
            with pytest.raises((ProtocolError, trio.BrokenResourceError, OSError)):
                await mallory.exchange(bob.local_address, BulkEnd(1), timeout=10)
        # The good pair is undisturbed: datagrams and exchanges still flow.
        await alice.send_datagram(bob.local_address, BulkEnd(99))
        assert await _receive(bob) == (alice.local_address, BulkEnd(99))
        assert await alice.exchange(bob.local_address, BulkEnd(5), timeout=10) == BulkEnd(5)
        # Mallory never learns anything either: her side refuses bob's answers.
    refusals = [r for r in caplog.records if r.getMessage().startswith("refused 127.0.0.1")]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]


async def test_garbage_and_bad_frames_drop_only_that_connection() -> None:
    async def echo(address: tuple[str, int], request: Message) -> Message:
        return request

    async with node("bob") as bob, node("alice") as alice:
        bob.set_exchange_handler(MessageCode.BULK_END, echo)
        for garbage in (b"\xff" * 64, b"\x00\x00\x00\x05\x00\x01" + b"\x00" * 5, b"\x7f\xff\xff\xff\x00\x02"):
            stream = await trio.open_tcp_stream(*bob.local_address)
            async with stream:
                await stream.send_all(garbage)
                with trio.fail_after(10):
                    assert await stream.receive_some() == b""  # bob hung up on us
        # Datagrams sealed with the right key but carrying nonsense are dropped too.
        sealer = DatagramSealer(KEY, "fuzzer")
        rng = random.Random(1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with sock:
            for _ in range(200):
                code = rng.choice([int(c) for c in MessageCode] + [999])
                sock.sendto(sealer.seal(code, rng.randbytes(rng.randrange(40))), bob.local_address)
        await alice.send_datagram(bob.local_address, BulkBegin(3))
        while (message := (await _receive(bob))[1]) != BulkBegin(3):
            assert isinstance(message, BulkBegin | BulkEnd)  # only well-formed ones got through
        assert await alice.exchange(bob.local_address, BulkEnd(8), timeout=10) == BulkEnd(8)


async def test_a_handler_that_breaks_drops_only_that_connection_and_the_node_keeps_answering(caplog) -> None:
    async def brittle(address: tuple[str, int], request: Message) -> Message:
        assert isinstance(request, BulkEnd)
        return BulkEnd({7: 14}[request.size])  # a KeyError for any other size: a bug, not a refusal

    async with node("bob") as bob, node("alice") as alice:
        bob.set_exchange_handler(MessageCode.BULK_END, brittle)
        with pytest.raises(ProtocolError, match="closed the connection without replying"):
            await alice.exchange(bob.local_address, BulkEnd(8), timeout=10)
        assert await alice.exchange(bob.local_address, BulkEnd(7), timeout=10) == BulkEnd(14)
    assert any("answering" in r.message and r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)


async def test_a_restarted_node_is_heard_again() -> None:
    async with node("bob") as bob:
        async with node("alice") as alice:
            await alice.send_datagram(bob.local_address, BulkEnd(1))
            assert (await _receive(bob))[1] == BulkEnd(1)
            port = alice.local_address[1]
        async with node("alice", port=port) as alice_again:
            await alice_again.send_datagram(bob.local_address, BulkEnd(2))
            assert (await _receive(bob))[1] == BulkEnd(2)


async def test_exchange_with_a_peer_that_resets_the_connection_raises_a_connection_error() -> None:
    """A peer killed mid-handshake resets the TCP connection: callers see an OSError, never a crash."""
    listener = trio.socket.socket()
    await listener.bind((LOOPBACK, 0))
    listener.listen(1)

    async def reset_every_connection() -> None:
        while True:
            connection, _ = await listener.accept()
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            connection.close()  # linger 0: an RST instead of a FIN

    async with trio.open_nursery() as nursery, node("client") as client:
        nursery.start_soon(reset_every_connection)
        for _ in range(5):
            with pytest.raises((OSError, ProtocolError)):
                await client.exchange(listener.getsockname(), BulkEnd(size=1), timeout=2)
        nursery.cancel_scope.cancel()
    listener.close()


async def test_a_malformed_peer_host_fails_that_send_like_an_unreachable_one(caplog) -> None:
    """idna refuses `desk..lan` with UnicodeError; a name that slips past the checks must not stop the node."""
    caplog.set_level(logging.DEBUG, logger="frost.transport")
    async with node("alice") as alice:
        await alice.send_datagram(("desk..lan", 47631), BulkEnd(1))  # best effort: logged, not raised
        assert any("not sent" in r.getMessage() and "desk..lan" in r.getMessage() for r in caplog.records)
        with pytest.raises(OSError, match="desk..lan"):
            await alice.exchange(("desk..lan", 47631), BulkEnd(1), timeout=10)


async def test_a_node_that_rekeys_hears_nothing_more_of_its_old_cluster_and_talks_with_its_new_one() -> None:
    async def answer(address: tuple[str, int], request: Message) -> Message:
        return request

    async with node("switcher") as switcher, node("old-peer") as old_peer, node("new-peer", STRANGER_KEY) as new_peer:
        for transport in (switcher, old_peer, new_peer):
            transport.set_exchange_handler(MessageCode.BULK_END, answer)
        # Channels both ways under the old key, kept for the next call.
        assert await switcher.exchange(old_peer.local_address, BulkEnd(1), timeout=10) == BulkEnd(1)
        assert await old_peer.exchange(switcher.local_address, BulkEnd(2), timeout=10) == BulkEnd(2)
        await old_peer.send_datagram(switcher.local_address, BulkEnd(3))   # queued, not yet read
        await wait_until(lambda: switcher._datagram_receive.statistics().current_buffer_used == 1,
                         what="the old cluster's datagram queued")

        switcher.rekey(STRANGER_KEY)
        assert switcher.pool.idle(old_peer.local_address) == 0, "channels kept under the old key are closed"
        with pytest.raises((ProtocolError, OSError)):   # the old peer's kept channel is dropped unanswered
            await old_peer.exchange(switcher.local_address, BulkEnd(4), timeout=10)
        with pytest.raises((ProtocolError, OSError)):   # and a fresh one fails the handshake
            await old_peer.exchange(switcher.local_address, BulkEnd(5), timeout=10)
        with pytest.raises((ProtocolError, OSError)):
            await switcher.exchange(old_peer.local_address, BulkEnd(6), timeout=10)

        assert await switcher.exchange(new_peer.local_address, BulkEnd(7), timeout=10) == BulkEnd(7)
        assert await new_peer.exchange(switcher.local_address, BulkEnd(8), timeout=10) == BulkEnd(8)
        await old_peer.send_datagram(switcher.local_address, BulkEnd(9))   # refused: another key now
        await new_peer.send_datagram(switcher.local_address, BulkEnd(10))
        # The datagram queued before the switch is dropped, not read as the new cluster's.
        assert await _receive(switcher) == (new_peer.local_address, BulkEnd(10))


async def test_an_exchange_answered_after_a_rekey_is_not_taken_as_the_new_clusters() -> None:
    answered = trio.Event()
    go_on = trio.Event()

    async def slow_answer(address: tuple[str, int], request: Message) -> Message:
        answered.set()
        await go_on.wait()
        return request

    async with node("switcher") as switcher, node("old-peer") as old_peer:
        old_peer.set_exchange_handler(MessageCode.BULK_END, slow_answer)
        async with trio.open_nursery() as nursery:
            outcome: list[object] = []

            async def call() -> None:
                try:
                    outcome.append(await switcher.exchange(old_peer.local_address, BulkEnd(1), timeout=10))
                except ProtocolError as error:
                    outcome.append(error)

            nursery.start_soon(call)
            await answered.wait()
            switcher.rekey(STRANGER_KEY)
            go_on.set()
        [error] = outcome
        assert isinstance(error, ProtocolError) and "cluster key this node has left" in error.message

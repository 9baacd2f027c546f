"""An in-memory network of transports with loss, latency, partitions, crashes and stalls, for MockClock tests."""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from frost_core.api.errors import ProtocolError
from frost_core.membership.records import Address
from frost_core.membership.transport_protocol import ExchangeHandler
from frost_core.membership.wire_cost import ABORT, DATAGRAM_OVERHEAD, ChannelPools, stream_message
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message, decode_message, encode_message

INBOX_CAPACITY = 4096


@dataclass
class TrafficCounter:
    """Bytes and messages one node sent and received: bodies, and on-wire totals (see wire_cost)."""

    sent_bytes: int = 0
    received_bytes: int = 0
    sent_wire_bytes: int = 0
    received_wire_bytes: int = 0
    datagrams_sent: int = 0
    exchanges_opened: int = 0
    connections_opened: int = 0


class MemoryNetwork:
    """A simulated LAN: every message is really encoded and decoded, then delayed, lost or held.

    `loss` applies independently to each datagram and to each direction of an exchange; a lost
    exchange leg looks like a TCP connection that never answers (the caller's timeout fires).
    With `codec` off, messages travel as the frozen objects they are, neither encoded nor
    counted: for long timing runs, once the wire format is covered by runs with it on. With
    `broadcasts` off, broadcasts reach nobody: a formed cluster's benchmarks, where N nodes'
    start-up announcements would cost N² deliveries before the first measured round.
    """

    def __init__(
        self, rng: random.Random, *, loss: float, latency: float, codec: bool = True, broadcasts: bool = True
    ) -> None:
        self.rng = rng
        self.loss = loss
        self.latency = latency
        self.codec = codec
        self.broadcasts = broadcasts
        self._hosts: dict[Address, MemoryTransport] = {}
        self._groups: dict[Address, int] | None = None
        self._queue: list[tuple[float, int, Address, Address, int, bytes | Message]] = []
        self._held: list[tuple[float, int, Address, Address, int, bytes | Message]] = []
        self._order = itertools.count()
        self._wake = trio.Event()
        self.traffic: dict[Address, TrafficCounter] = {}
        self.bytes_by_message: dict[str, int] = {}
        self.wire_by_kind: dict[str, int] = {}
        """Bytes sent on the wire beyond bodies: datagram headers, stream framing, connections."""
        self.pools = ChannelPools()

    def attach(self, address: Address) -> MemoryTransport:
        """A transport for a new host at `address` (a restarted node may reuse an address)."""
        transport = MemoryTransport(self, address)
        self._hosts[address] = transport
        self.traffic.setdefault(address, TrafficCounter())
        return transport

    def crash(self, address: Address) -> None:
        """The host vanishes: messages to it are dropped and exchanges to it time out."""
        transport = self._hosts.pop(address, None)
        if transport is not None:
            transport.crashed = True

    def stall(self, address: Address, seconds: float) -> None:
        """The host's event loop is starved: its I/O waits, arriving messages queue up unread."""
        transport = self._hosts[address]
        transport.stalled_until = max(transport.stalled_until, trio.current_time() + seconds)

    def is_stalled(self, address: Address) -> bool:
        transport = self._hosts.get(address)
        return transport is not None and transport.stalled_until > trio.current_time()

    def partition(self, *groups: set[Address]) -> None:
        """Only hosts in the same group can reach each other (hosts in no group form their own)."""
        self._groups = {address: n for n, group in enumerate(groups) for address in group}

    def heal(self) -> None:
        self._groups = None

    def reachable(self, source: Address, target: Address) -> MemoryTransport | None:
        if self._groups is not None and self._groups.get(source, -1) != self._groups.get(target, -2):
            return None
        return self._hosts.get(target)

    def lost(self) -> bool:
        return self.loss > 0 and self.rng.random() < self.loss

    def post(self, source: Address, target: Address, message: Message) -> None:
        if self.codec:
            body: bytes | Message = encode_message(message)
            self._count(source, target, len(body), message)
            self._count_wire(source, target, DATAGRAM_OVERHEAD, 0, "datagram headers")
        else:
            body = message
        self.traffic[source].datagrams_sent += 1
        host = self.reachable(source, target)
        if host is None or self.lost():
            return
        if self.latency == 0 and host.stalled_until <= trio.current_time():
            host.deliver(source, decode_message(int(message.CODE), body) if self.codec else message)
            return
        if not self._queue:
            self._wake.set()
        deliver_at = trio.current_time() + self.latency
        heapq.heappush(self._queue, (deliver_at, next(self._order), source, target, int(message.CODE), body))

    def post_broadcast(self, source: Address, message: Message) -> None:
        """One datagram leaves the sender; every other host on the segment receives a copy."""
        sent = self.traffic[source]
        before = (sent.sent_bytes, sent.sent_wire_bytes, sent.datagrams_sent)
        name = type(message).__name__
        by_message = (self.bytes_by_message.get(name, 0), self.wire_by_kind.get("datagram headers", 0))
        targets = [address for address in self._hosts if address != source] if self.broadcasts else []
        for address in targets:
            self.post(source, address, message)
        if targets:
            size = len(encode_message(message))
            sent.sent_bytes, sent.sent_wire_bytes, sent.datagrams_sent = before
            sent.sent_bytes += size
            sent.sent_wire_bytes += size + DATAGRAM_OVERHEAD
            sent.datagrams_sent += 1
            self.bytes_by_message[name] = by_message[0] + size
            self.wire_by_kind["datagram headers"] = by_message[1] + DATAGRAM_OVERHEAD

    def _count(self, source: Address, target: Address, size: int, message: Message) -> None:
        """A body sent from `source` to `target` (its framing is counted by _count_wire)."""
        name = type(message).__name__
        self.bytes_by_message[name] = self.bytes_by_message.get(name, 0) + size
        sent = self.traffic[source]
        sent.sent_bytes += size
        sent.sent_wire_bytes += size
        received = self.traffic.setdefault(target, TrafficCounter())
        received.received_bytes += size
        received.received_wire_bytes += size

    def _count_wire(self, a: Address, b: Address, a_sends: int, b_sends: int, kind: str) -> None:
        """Bytes beyond bodies that `a` sends to `b` and `b` sends back."""
        self.wire_by_kind[kind] = self.wire_by_kind.get(kind, 0) + a_sends + b_sends
        first, second = self.traffic[a], self.traffic.setdefault(b, TrafficCounter())
        first.sent_wire_bytes += a_sends
        second.received_wire_bytes += a_sends
        second.sent_wire_bytes += b_sends
        first.received_wire_bytes += b_sends

    async def run(self) -> None:
        """Deliver queued datagrams when they are due; held for stalled hosts until they wake.

        Datagrams in flight are due in the order they were posted (the latency is fixed), so the
        runner sleeps until the head without being woken by later posts; only held datagrams,
        due when their host wakes, need a wake-up that can be cut short.
        """
        while True:
            now = trio.current_time()
            for queue in (self._queue, self._held):
                while queue and queue[0][0] <= now:
                    _, _, source, target, code, body = heapq.heappop(queue)
                    host = self.reachable(source, target)
                    if host is None:
                        continue
                    if host.stalled_until > now:
                        heapq.heappush(self._held, (host.stalled_until, next(self._order), source, target, code, body))
                        continue
                    host.deliver(source, decode_message(code, body) if self.codec else body)
            if self._queue:
                await trio.sleep_until(self._queue[0][0])
            else:
                self._wake = trio.Event()
                with trio.move_on_at(self._held[0][0] if self._held else math.inf):
                    await self._wake.wait()

    async def carry(self, source: MemoryTransport, target: Address, message: Message, timeout: float) -> Message:
        """One exchange: request, the target's handler, reply; each leg can be lost or delayed.

        Connections are pooled as NetworkTransport pools them, so a handshake is paid only when
        no idle channel to `target` is left open (wire_cost.ChannelPools).
        """
        client = source.local_address
        self.traffic[client].exchanges_opened += 1
        try:
            with trio.fail_after(timeout):
                await source.wait_runnable()
                if self.codec:
                    request = encode_message(message)
                    setup_client, setup_server, fresh = self.pools.take(client, target, trio.current_time(), len(request))
                    self.traffic[client].connections_opened += fresh
                    self._count_wire(client, target, setup_client, setup_server, "connections")
                    self._count(client, target, len(request), message)
                    self._count_wire(client, target, *stream_message(len(request), acked_by_reply=True), "stream framing")
                host = self.reachable(client, target)
                if host is None or self.lost():
                    await trio.sleep_forever()
                if self.latency:
                    await trio.sleep(self.latency)
                await host.wait_runnable()
                if host.crashed:
                    await trio.sleep_forever()
                handler = host.handlers.get(message.CODE)
                if handler is None:
                    raise ConnectionResetError(f"{target} does not serve {message.CODE.name}")
                try:
                    reply = await handler(client, decode_message(int(message.CODE), request) if self.codec else message)
                except ProtocolError as exc:
                    raise ConnectionResetError(f"{target} dropped the connection: {exc.message}") from None
                if self.codec:
                    body = encode_message(reply)
                    self._count(target, client, len(body), reply)
                    self._count_wire(target, client, *stream_message(len(body), acked_by_reply=False), "stream framing")
                if self.lost():
                    await trio.sleep_forever()
                if self.latency:
                    await trio.sleep(self.latency)
        except BaseException:
            if self.codec:
                self._count_wire(client, target, *ABORT, "connections")
            raise
        if not self.codec:
            return reply
        self._count_wire(client, target, *self.pools.park(client, target, trio.current_time()), "connections")
        return decode_message(int(reply.CODE), body)


class MemoryTransport:
    """One host's end of a MemoryNetwork; implements the Transport protocol."""

    def __init__(self, network: MemoryNetwork, address: Address) -> None:
        self.network = network
        self.local_address = address
        self.handlers: dict[MessageCode, ExchangeHandler] = {}
        self.crashed = False
        self.overflowed = 0
        self.stalled_until = -math.inf
        self._send, self._receive = trio.open_memory_channel[tuple[Address, Message]](INBOX_CAPACITY)

    async def wait_runnable(self) -> None:
        if self.stalled_until > trio.current_time():
            await trio.sleep_until(self.stalled_until)

    def deliver(self, source: Address, message: Message) -> None:
        try:
            self._send.send_nowait((source, message))
        except trio.WouldBlock:
            self.overflowed += 1  # a full socket buffer drops the datagram, as the kernel would

    async def send_datagram(self, address: Address, message: Message) -> None:
        await self.wait_runnable()
        if not self.crashed:
            self.network.post(self.local_address, address, message)

    async def broadcast(self, message: Message) -> None:
        await self.wait_runnable()
        if not self.crashed:
            self.network.post_broadcast(self.local_address, message)

    async def receive_datagram(self) -> tuple[Address, Message]:
        return await self._receive.receive()

    async def exchange(self, address: Address, message: Message, *, timeout: float) -> Message:
        if self.crashed:
            raise OSError("transport of a crashed host")
        return await self.network.carry(self, address, message, timeout)

    def set_exchange_handler(self, code: MessageCode, handler: ExchangeHandler) -> None:
        self.handlers[code] = handler


@asynccontextmanager
async def open_memory_network(
    rng: random.Random, *, loss: float = 0.0, latency: float = 0.0005, codec: bool = True, broadcasts: bool = True
) -> AsyncIterator[MemoryNetwork]:
    """A running MemoryNetwork; leaving the block stops delivery."""
    async with trio.open_nursery() as nursery:
        network = MemoryNetwork(rng, loss=loss, latency=latency, codec=codec, broadcasts=broadcasts)
        nursery.start_soon(network.run)
        yield network
        nursery.cancel_scope.cancel()

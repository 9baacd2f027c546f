"""The real network: sealed UDP datagrams and authenticated TCP channels sharing one port number.

Implements the `Transport` protocol of docs/architecture.md. Nothing a stranger sends reaches a
handler: datagrams must carry our MAC, streams must complete the key handshake, and a refused
source is logged once per interval, never once per packet. Bad input costs one log line and the
connection, never the listener.
"""

import errno
import logging
import socket as stdlib_socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from frost_core.api.errors import AuthenticationError, FrostError, ProtocolError
from frost_core.wire.channel import Address, Channel, accept_channel, connect_channel
from frost_core.wire.codes import MessageCode
from frost_core.wire.hosts import unresolvable_as_os_error
from frost_core.wire.messages import Message, decode_message, encode_message
from frost_core.wire.pool import ChannelPool
from frost_core.wire.security import (
    MAX_DATAGRAM_SIZE,
    ClusterKey,
    DatagramOpener,
    DatagramSealer,
    RefusalLog,
)

logger = logging.getLogger("frost.transport")

ExchangeHandler = Callable[[Address, Message], Awaitable[Message]]
StreamHandler = Callable[[Channel, Message], Awaitable[None]]
CallHandler = Callable[[Channel, Message], Awaitable[None]]

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_BIND_ATTEMPTS = 20


class NetworkTransport:
    """One node's sockets; build it with `open_transport`, which also runs its serve tasks."""

    def __init__(
        self,
        *,
        key: ClusterKey,
        node_id: str,
        host: str,
        port: int,
        broadcast_address: Address | None,
        handshake_timeout: float,
        idle_timeout: float,
        datagram_queue: int,
    ) -> None:
        self.key = key
        self.node_id = node_id
        self.host = host
        self.broadcast_address = broadcast_address
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.local_address: Address = (host, port)
        self.refusals = RefusalLog(logger)
        self._sealer = DatagramSealer(key, node_id)
        self._opener = DatagramOpener(key)
        self._key_generation = 0
        """How many times `rekey` changed the key: what was opened under an older one is not listened to."""
        self._datagram_send, self._datagram_receive = trio.open_memory_channel[tuple[int, Address, Message]](
            datagram_queue
        )
        self._exchange_handlers: dict[int, ExchangeHandler] = {}
        self._stream_handlers: dict[int, StreamHandler] = {}
        self._call_handlers: dict[int, CallHandler] = {}
        self.pool = ChannelPool(self.connect, idle_timeout=idle_timeout / 2)
        """Channels kept for calls to peers; they close well before the peer's server gives up on them."""
        self._udp: list[trio.socket.SocketType] = []
        self._tcp: trio.socket.SocketType | None = None

    # --- the Transport protocol --------------------------------------------------------------

    async def send_datagram(self, address: Address, message: Message) -> None:
        """Best effort: an unreachable peer is logged at debug level, not raised."""
        datagram = self._sealer.seal(message.CODE, encode_message(message))
        try:
            with unresolvable_as_os_error(address):
                await self._udp[0].sendto(datagram, address)
        except OSError as exc:
            logger.debug("datagram to %s not sent: %s", address, exc)

    async def broadcast(self, message: Message) -> None:
        """To the configured broadcast address; its port 0 means our own port (the usual case).

        With broadcast turned off (no address) this does nothing: discovery then relies on seeds.
        """
        if self.broadcast_address is None:
            return
        host, port = self.broadcast_address
        await self.send_datagram((host, port or self.local_address[1]), message)

    async def receive_datagram(self) -> tuple[Address, Message]:
        while True:
            generation, address, message = await self._datagram_receive.receive()
            if generation == self._key_generation:
                return address, message

    def rekey(self, key: ClusterKey) -> None:
        """Speak another cluster's key from now on (the owner joined it). Nothing of the old cluster is listened to
        again: its datagrams still queued are dropped, kept channels are closed, a channel a peer opened under the
        old key is closed at its next request unanswered, and an exchange begun before fails once its reply comes."""
        self.key = key
        self._sealer = DatagramSealer(key, self.node_id)
        self._opener = DatagramOpener(key)
        self._key_generation += 1
        self.pool.renew()

    async def exchange(self, address: Address, message: Message, *, timeout: float) -> Message:
        """Send a request and wait for its reply, on a channel kept for `address` if there is one.

        Failures keep the Transport contract: trio.TooSlowError, ProtocolError or OSError (a
        connection the peer broke, e.g. because it was killed mid-handshake, is a ConnectionError).
        """
        generation = self._key_generation
        try:
            with trio.fail_after(timeout):
                reply = await self.pool.call(address, lambda channel: channel.send(message), Channel.receive)
        except trio.BrokenResourceError as error:
            raise ConnectionResetError(f"{address[0]}:{address[1]} broke the connection: {error}") from error
        except trio.EndOfChannel:
            raise ProtocolError(f"{address} closed the connection without replying") from None
        if generation != self._key_generation:
            raise ProtocolError(f"{address[0]}:{address[1]} answered under the cluster key this node has left")
        return reply

    def set_exchange_handler(self, code: MessageCode, handler: ExchangeHandler) -> None:
        self._exchange_handlers[code] = handler

    # --- raw channels, for protocols that are more than request/reply (e.g. migration) ----------

    def set_stream_handler(self, code: MessageCode, handler: StreamHandler) -> None:
        """A connection whose first message has `code` is handed to `handler`, which owns it."""
        self._stream_handlers[code] = handler

    def set_call_handler(self, code: MessageCode, handler: CallHandler) -> None:
        """A request with `code` is handed to `handler`, which reads all of it and sends its whole answer.

        The channel then waits for the caller's next request (see `pool`): `handler` must leave it
        between frames, or raise to drop it.
        """
        self._call_handlers[code] = handler

    async def connect(self, address: Address) -> Channel:
        """An authenticated channel to `address`; the caller closes it (e.g. `async with`)."""
        with unresolvable_as_os_error(address):
            stream = await trio.open_tcp_stream(*address)
        try:
            return await connect_channel(
                stream, self.key, self.node_id, listen_port=self.local_address[1], peer_address=address
            )
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise

    # --- internals ---------------------------------------------------------------------------

    async def _bind(self) -> None:
        family = stdlib_socket.AF_INET6 if ":" in self.host else stdlib_socket.AF_INET
        port = self.local_address[1]
        for _ in range(_BIND_ATTEMPTS):
            tcp = trio.socket.socket(family, stdlib_socket.SOCK_STREAM)
            udp = trio.socket.socket(family, stdlib_socket.SOCK_DGRAM)
            try:
                tcp.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
                await tcp.bind((self.host, port))
                chosen = tcp.getsockname()[1]
                udp.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_BROADCAST, 1)
                await udp.bind((self.host, chosen))
            except OSError as exc:
                tcp.close()
                udp.close()
                if port == 0 and exc.errno == errno.EADDRINUSE:
                    continue  # TCP got a port whose UDP twin is taken: pick another
                raise
            tcp.listen(128)
            self._tcp, self._udp = tcp, [udp]
            self.local_address = (self.host, chosen)
            await self._bind_broadcast_receiver(family, chosen)
            return
        raise OSError(errno.EADDRINUSE, "no port free for both TCP and UDP")

    async def _bind_broadcast_receiver(self, family: int, port: int) -> None:
        """A socket bound to a specific host misses broadcasts; add one bound to the broadcast address."""
        if self.broadcast_address is None or self.host in _WILDCARD_HOSTS:
            return
        receiver = trio.socket.socket(family, stdlib_socket.SOCK_DGRAM)
        try:
            receiver.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_REUSEADDR, 1)
            await receiver.bind((self.broadcast_address[0], port))
        except OSError as exc:
            receiver.close()
            logger.warning("cannot listen for broadcasts on %s:%s: %s", self.broadcast_address[0], port, exc)
            return
        self._udp.append(receiver)

    def _close(self) -> None:
        for sock in [*self._udp, self._tcp]:
            if sock is not None:
                sock.close()
        self.pool.close()

    async def serve_datagrams(
        self, sock: trio.socket.SocketType, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open, check and queue every datagram; a full queue drops (the sender retries or gossips)."""
        task_status.started()
        while True:
            try:
                datagram, source = await sock.recvfrom(MAX_DATAGRAM_SIZE + 1)
            except OSError as exc:  # e.g. ICMP port unreachable reported on Linux
                logger.debug("datagram receive error: %s", exc)
                continue
            address: Address = (source[0], source[1])
            try:
                opened = self._opener.open(datagram)
                if opened.sender == self.node_id:
                    continue  # our own broadcast, looped back
                message = decode_message(opened.code, opened.body)
            except AuthenticationError as exc:
                self.refusals.refuse(address[0], exc.message)
                continue
            except ProtocolError as exc:
                self.refusals.refuse(address[0], f"bad datagram: {exc.message}")
                continue
            try:
                self._datagram_send.send_nowait((self._key_generation, address, message))
            except trio.WouldBlock:
                self.refusals.refuse("datagram queue", "full; dropping datagrams until it drains")

    async def serve_streams(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self._tcp is not None
        await trio.serve_listeners(self._handle_stream, [trio.SocketListener(self._tcp)], task_status=task_status)

    async def _handle_stream(self, stream: trio.SocketStream) -> None:
        try:
            source = stream.socket.getpeername()
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        address: Address = (source[0], source[1])
        generation = self._key_generation
        try:
            try:
                with trio.fail_after(self.handshake_timeout):
                    channel = await accept_channel(stream, self.key, self.node_id, peer_address=address)
            except trio.TooSlowError:
                self.refusals.refuse(address[0], "no handshake within the timeout")
                return
            await self._serve_channel(channel, generation)
        except AuthenticationError as exc:
            self.refusals.refuse(address[0], exc.message)
        except ProtocolError as exc:
            logger.warning("dropped connection from %s: %s", address, exc.message)
        except (trio.BrokenResourceError, trio.EndOfChannel, OSError) as exc:
            logger.debug("connection from %s ended: %s", address, exc)
        except Exception:  # a bug behind one peer's call must not take the node and its guests down with it
            logger.exception("answering %s failed; its connection is dropped", address)
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve_channel(self, channel: Channel, generation: int) -> None:
        """Answer requests one after another until the peer goes quiet or hands over to a stream handler; a channel
        opened under a key this node has left since (`rekey`) is closed at its next request, unanswered."""
        assert channel.peer_address is not None
        while True:
            request: Message | None = None
            with trio.move_on_after(self.idle_timeout):
                request = await channel.receive()
            if request is None:
                return  # idle: the client's pool reconnects when it needs to
            if generation != self._key_generation:
                return
            stream_handler = self._stream_handlers.get(request.CODE)
            if stream_handler is not None:
                await stream_handler(channel, request)
                return
            call_handler = self._call_handlers.get(request.CODE)
            if call_handler is not None:
                await call_handler(channel, request)
                continue
            handler = self._exchange_handlers.get(request.CODE)
            if handler is None:
                raise ProtocolError(f"no handler for {type(request).__name__} requests")
            try:
                reply = await handler(channel.peer_address, request)
            except FrostError as exc:
                raise ProtocolError(f"handler for {type(request).__name__} failed: {exc.message}") from exc
            await channel.send(reply)


@asynccontextmanager
async def open_transport(
    *,
    key: ClusterKey,
    node_id: str,
    host: str = "0.0.0.0",
    port: int = 0,
    broadcast_address: Address | None = None,
    handshake_timeout: float = 5.0,
    idle_timeout: float = 60.0,
    datagram_queue: int = 1024,
) -> AsyncIterator[NetworkTransport]:
    """Bind UDP and TCP on one port (0 = any free one) and serve both while the block runs."""
    transport = NetworkTransport(
        key=key,
        node_id=node_id,
        host=host,
        port=port,
        broadcast_address=broadcast_address,
        handshake_timeout=handshake_timeout,
        idle_timeout=idle_timeout,
        datagram_queue=datagram_queue,
    )
    await transport._bind()
    try:
        async with trio.open_nursery() as nursery:
            for sock in transport._udp:
                await nursery.start(transport.serve_datagrams, sock)
            await nursery.start(transport.serve_streams)
            await nursery.start(transport.pool.serve_sweeps)
            yield transport
            nursery.cancel_scope.cancel()
    finally:
        transport._close()

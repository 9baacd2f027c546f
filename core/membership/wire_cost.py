"""What membership's messages cost on a real LAN: IP, UDP and TCP headers, sealing, frames and pooled connections.

The in-memory network counts message bodies exactly; this model adds what `frost_core.wire.transport`
puts around them, so a traffic benchmark reports bytes on the wire rather than bodies. Sizes
of the sealing, frames and handshake messages come from the real wire code, not from constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from frost_core.wire.framing import HEADER_SIZE
from frost_core.wire.messages import encode_message
from frost_core.wire.security import TAG_SIZE, ClusterKey, DatagramSealer, answer_hello, make_hello

NODE_ID_SIZE = 32
"""Node ids are 32 hex digits (frost_core.node.identity); every sealed datagram names its sender."""
IP_UDP = 20 + 8
TCP_SEGMENT = 20 + 20 + 12
"""IPv4 + TCP header with the timestamp option Linux sends on every segment."""
TCP_SYN = 20 + 40
"""SYN and SYN-ACK carry MSS, SACK, timestamp and window-scale options."""
TCP_RST = 20 + 20
MSS = 1500 - TCP_SEGMENT
IDLE_TIMEOUT = 60.0
"""`open_transport`'s default: a server closes a channel idle this long."""
IDLE_CHANNELS_PER_PEER = 2
"""A client parks at most this many idle channels per peer (NetworkTransport)."""


def _handshake_frames() -> tuple[int, int]:
    key = ClusterKey.generate()
    hello = make_hello(key, "0" * NODE_ID_SIZE, listen_port=7946)
    ack, _ = answer_hello(key, hello, "1" * NODE_ID_SIZE)
    return HEADER_SIZE + len(encode_message(hello)), HEADER_SIZE + len(encode_message(ack))


DATAGRAM_OVERHEAD = IP_UDP + len(DatagramSealer(ClusterKey.generate(), "0" * NODE_ID_SIZE).seal(0, b""))
"""Bytes a sealed datagram adds to its body: IPv4/UDP headers, sealing head, sender id, MAC."""
FRAME_OVERHEAD = HEADER_SIZE + TAG_SIZE
"""Bytes an encrypted stream frame adds to its body: frame header plus AEAD tag."""
HELLO_FRAME, HELLO_ACK_FRAME = _handshake_frames()


def segments(payload: int) -> int:
    return max(1, math.ceil(payload / MSS))


def stream_message(body: int, *, acked_by_reply: bool) -> tuple[int, int]:
    """(sender, receiver) bytes beyond the body for one framed message on an open connection.

    The receiver acks every second segment; the last ack of a request rides on the reply.
    """
    count = segments(body + FRAME_OVERHEAD)
    acks = math.ceil(count / 2) - (1 if acked_by_reply else 0)
    return FRAME_OVERHEAD + count * TCP_SEGMENT, acks * TCP_SEGMENT


CONNECT = (TCP_SYN + TCP_SEGMENT + HELLO_FRAME + TCP_SEGMENT, TCP_SYN + HELLO_ACK_FRAME + TCP_SEGMENT)
"""(client, server) bytes to open an authenticated channel: SYN, SYN-ACK, ACK, HELLO, HELLO_ACK
(the acks of HELLO and HELLO_ACK ride on the next message)."""
IDLE_CLOSE = (TCP_SEGMENT, TCP_SEGMENT + TCP_RST)
"""(client, server) bytes when a server closes an idle channel (FIN, ACK) and the client later
finds out by writing to it (RST); the client's wasted request is counted separately."""
CLIENT_CLOSE = (2 * TCP_SEGMENT, 2 * TCP_SEGMENT)
"""(client, server) bytes of an orderly close: FIN and ACK each way."""
ABORT = (TCP_RST, 0)
"""A client abandoning a failed exchange resets the connection."""


@dataclass
class ChannelPools:
    """The client-side pools of NetworkTransport, per (client, server) pair: when is a handshake paid?

    A pooled channel idle longer than IDLE_TIMEOUT has been closed by the server; the client
    only learns so by sending its request on it, then connects afresh.
    """

    idle: dict[tuple[object, object], list[float]] = field(default_factory=dict)

    def take(self, client: object, server: object, now: float, request: int) -> tuple[int, int, bool]:
        """(client bytes, server bytes, fresh connection?) to get a channel for one request."""
        pool = self.idle.get((client, server), [])
        client_bytes = server_bytes = 0
        while pool:
            last_used = pool.pop()
            if now - last_used <= IDLE_TIMEOUT:
                return client_bytes, server_bytes, False
            wasted, _ = stream_message(request, acked_by_reply=True)
            client_bytes += IDLE_CLOSE[0] + wasted + request
            server_bytes += IDLE_CLOSE[1]
        return client_bytes + CONNECT[0], server_bytes + CONNECT[1], True

    def park(self, client: object, server: object, now: float) -> tuple[int, int]:
        """Return a channel after a successful exchange; bytes of closing it if the pool is full."""
        pool = self.idle.setdefault((client, server), [])
        if len(pool) < IDLE_CHANNELS_PER_PEER:
            pool.append(now)
            return 0, 0
        return CLIENT_CLOSE

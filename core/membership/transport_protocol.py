"""The transport seam membership is written against; `frost_core.wire.transport` and the in-memory network implement it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from frost_core.membership.records import Address
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message

ExchangeHandler = Callable[[Address, Message], Awaitable[Message]]


class Transport(Protocol):
    """Datagrams for probes and announcements, request/reply streams for table exchanges."""

    local_address: Address

    async def send_datagram(self, address: Address, message: Message) -> None:
        """Best effort: may be lost, never raises for an unreachable peer."""

    async def broadcast(self, message: Message) -> None:
        """To the configured broadcast address (a no-op where broadcast is off)."""

    async def receive_datagram(self) -> tuple[Address, Message]:
        """The next authenticated, decoded datagram."""

    async def exchange(self, address: Address, message: Message, *, timeout: float) -> Message:
        """Request/reply over a stream; raises trio.TooSlowError, ProtocolError or OSError."""

    def set_exchange_handler(self, code: MessageCode, handler: ExchangeHandler) -> None:
        """Serve requests of type `code` arriving on streams."""

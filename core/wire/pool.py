"""Authenticated channels kept open per peer, so a call between nodes costs a frame, not a connect and a handshake.

A kept channel is lent to one call at a time: the call sends its request and reads its whole
answer before the channel goes back. Any failure or cancellation closes the channel instead, so
a reused channel can never hand one call's answer to the next. A kept channel the peer has
closed meanwhile (restart, idle timeout) is noticed before it is used; if sending on a reused
channel fails anyway, the request never reached the peer and is sent once more on a fresh one.
A failure after the request left is the caller's: the peer may have acted on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from frost_core.wire.channel import Address, Channel

T = TypeVar("T")

KEPT_PER_PEER = 4
"""Idle channels kept per peer: calls beyond this many at once use a channel of their own, closed after."""

__all__ = ["KEPT_PER_PEER", "ChannelPool"]


class ChannelPool:
    """Idle channels per peer address; `close` (shutdown) and `forget` (a peer died or left) close them."""

    def __init__(self, connect: Callable[[Address], Awaitable[Channel]], *, idle_timeout: float) -> None:
        self._connect = connect
        self.idle_timeout = idle_timeout
        self._idle: dict[Address, list[tuple[float, Channel]]] = {}
        self._generation = 0   # `renew`s so far: a channel lent out before the last one is not kept again

    def idle(self, address: Address) -> int:
        """How many channels to `address` wait for a call."""
        return len(self._idle.get(address, ()))

    async def call(
        self,
        address: Address,
        send: Callable[[Channel], Awaitable[None]],
        receive: Callable[[Channel], Awaitable[T]],
    ) -> T:
        """`send` a request on a kept (else a new) channel to `address` and `receive` its whole answer."""
        generation = self._generation
        channel = self._take(address)
        reused = channel is not None
        if channel is None:
            channel = await self._connect(address)
        try:
            try:
                await send(channel)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                if not reused:
                    raise
                await trio.aclose_forcefully(channel)  # the request never left: once more, on a fresh channel
                channel = await self._connect(address)
                await send(channel)
            answer = await receive(channel)
        except BaseException:
            await trio.aclose_forcefully(channel)  # its state is unknown: never lent again
            raise
        if generation == self._generation:
            self._keep(address, channel)
        else:
            _close_soon(channel)
        return answer

    def forget(self, address: Address) -> None:
        """Close the channels kept for `address`: the peer there died or left."""
        for _, channel in self._idle.pop(address, ()):
            _close_soon(channel)

    def close(self) -> None:
        for address in list(self._idle):
            self.forget(address)

    def renew(self) -> None:
        """Close every kept channel, and those lent out now once their calls end: they were opened under a cluster
        key this node has left (`NetworkTransport.rekey`), and a later call must not reach the old cluster on them."""
        self._generation += 1
        self.close()

    async def serve_sweeps(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Close channels idle for longer than `idle_timeout`, a few times per timeout."""
        task_status.started()
        while True:
            await trio.sleep(self.idle_timeout / 4)
            self.sweep(trio.current_time())

    def sweep(self, now: float) -> None:
        for address, kept in list(self._idle.items()):
            fresh = [(since, channel) for since, channel in kept if now - since < self.idle_timeout]
            for since, channel in kept:
                if now - since >= self.idle_timeout:
                    _close_soon(channel)
            if fresh:
                self._idle[address] = fresh
            else:
                del self._idle[address]

    def _take(self, address: Address) -> Channel | None:
        kept = self._idle.get(address)
        while kept:
            _, channel = kept.pop()
            if channel.quiet():
                return channel
            _close_soon(channel)  # the peer closed it (restart, idle timeout) or sent what nobody asked for
        return None

    def _keep(self, address: Address, channel: Channel) -> None:
        kept = self._idle.setdefault(address, [])
        if len(kept) < KEPT_PER_PEER:
            kept.append((trio.current_time(), channel))
        else:
            _close_soon(channel)


def _close_soon(channel: Channel) -> None:
    trio.lowlevel.spawn_system_task(trio.aclose_forcefully, channel)

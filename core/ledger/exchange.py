"""Summaries travel push-pull over the cluster's authenticated channels: each node now and then swaps with one peer.

Every `EXCHANGE_INTERVAL` a node sends one live peer its own freshly signed summary plus the
peers' summaries it holds, and gets the same back (BSP-style push-pull of whole tables, so news
spreads in O(log n) rounds). Summaries are relayed as they were signed: a relay can drop one but
not change it. Each is checked on arrival (`Ledger.accept`); a forged or altered one is refused
and reported, the rest of the batch still counts.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Awaitable, Callable

import trio

from frost_core.api.errors import AuthenticationError, ProtocolError, StorageError
from frost_core.ledger.book import MAX_HELD, Ledger
from frost_core.ledger.summary import MAX_BODY_BYTES, SignedSummary
from frost_core.wire.channel import Address
from frost_core.wire.codes import MessageCode
from frost_core.wire.messages import Message, register
from frost_core.wire.transport import NetworkTransport

log = logging.getLogger("frost.ledger")

EXCHANGE_INTERVAL = 30.0
EXCHANGE_TIMEOUT = 10.0
MAX_BATCH = MAX_HELD + 1


@register
@dataclasses.dataclass(frozen=True)
class LedgerExchange(Message):
    """Here are my summary and those I hold; send me yours."""

    CODE = MessageCode.LEDGER_EXCHANGE
    MAX_SIZE = MAX_BATCH * (MAX_BODY_BYTES + 256)
    summaries: tuple[SignedSummary, ...] = ()


@register
@dataclasses.dataclass(frozen=True)
class LedgerExchangeReply(Message):
    CODE = MessageCode.LEDGER_EXCHANGE_REPLY
    MAX_SIZE = MAX_BATCH * (MAX_BODY_BYTES + 256)
    summaries: tuple[SignedSummary, ...] = ()


Outgoing = Callable[[], Awaitable[tuple[SignedSummary, ...]]]
"""This node's own signed summary first, then the held ones to relay."""
Refused = Callable[[str, str], None]
"""(who sent it, why) for a summary that did not verify."""


def take_in(ledger: Ledger, summaries: tuple[SignedSummary, ...]) -> tuple[int, list[str]]:
    """Accept what verifies (blocking: SQLite and signatures): how many were new, and why each other was refused."""
    new, refusals = 0, []
    for signed in summaries[:MAX_BATCH]:
        try:
            new += ledger.accept(signed) is not None
        except (AuthenticationError, ProtocolError) as error:
            refusals.append(error.message)
        except StorageError as error:   # the disk is full: they come again at a later exchange
            log.info("peers' ledger summaries not kept: %s", error.message)
            break
    return new, refusals


async def _take_in(ledger: Ledger, summaries: tuple[SignedSummary, ...], source: str, refused: Refused) -> int:
    new, refusals = await trio.to_thread.run_sync(take_in, ledger, summaries)
    for reason in refusals:
        refused(source, reason)
    return new


def install_ledger(transport: NetworkTransport, ledger: Ledger, outgoing: Outgoing, refused: Refused) -> None:
    """Answer peers' exchanges on `transport`; the blocking work runs in a thread."""

    async def answer(address: Address, request: Message) -> Message:
        assert isinstance(request, LedgerExchange)
        await _take_in(ledger, request.summaries, f"{address[0]}:{address[1]}", refused)
        return LedgerExchangeReply(await outgoing())

    transport.set_exchange_handler(MessageCode.LEDGER_EXCHANGE, answer)


async def exchange_with(transport: NetworkTransport, ledger: Ledger, address: Address, outgoing: Outgoing,
                        refused: Refused) -> int:
    """One push-pull with the peer at `address`; how many of its summaries were new here."""
    mine = await outgoing()
    reply = await transport.exchange(address, LedgerExchange(mine), timeout=EXCHANGE_TIMEOUT)
    if not isinstance(reply, LedgerExchangeReply):
        raise ProtocolError(f"{address} answered a ledger exchange with {type(reply).__name__}")
    return await _take_in(ledger, reply.summaries, f"{address[0]}:{address[1]}", refused)


async def serve_exchanges(transport: NetworkTransport, ledger: Ledger, peers: Callable[[], list[Address]],
                          outgoing: Outgoing, refused: Refused, on_news: Callable[[], None], *,
                          interval: float = EXCHANGE_INTERVAL,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Swap summaries with one random live peer every `interval` seconds, until cancelled."""
    task_status.started()
    while True:
        await trio.sleep(interval * random.uniform(0.75, 1.25))   # spread: peers do not swap in lockstep
        choices = peers()
        if not choices:
            continue
        address = random.choice(choices)
        try:
            if await exchange_with(transport, ledger, address, outgoing, refused):
                on_news()
        except (OSError, ProtocolError, trio.TooSlowError) as error:
            log.info("ledger exchange with %s failed: %s", address, error)

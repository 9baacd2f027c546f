"""Changes that arrive together are committed together: a burst of results costs one transaction and one fsync.

The first caller commits what is pending, then whatever arrived while it committed, until nothing
waits; the others wait for the batch that carries theirs. Each caller returns only once its change
is durable, so a host is never told its result was taken before it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from frost_core.api.errors import FrostError

T = TypeVar("T")
R = TypeVar("R")


class _Ticket(Generic[T, R]):
    def __init__(self, item: T) -> None:
        self.item = item
        self.woken = trio.Event()     # its batch is durable, or it is its turn to commit
        self.done = False
        self.outcome: R | None = None
        self.error: BaseException | None = None


class GroupCommit(Generic[T, R]):
    def __init__(self, commit: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        """`commit` makes a batch durable in one transaction and returns each item's outcome, in order."""
        self._commit = commit
        self._pending: list[_Ticket[T, R]] = []
        self._committing = False

    async def submit(self, item: T) -> R:
        """`item`'s outcome, once the batch that carries it is durable."""
        ticket: _Ticket[T, R] = _Ticket(item)
        self._pending.append(ticket)
        if self._committing:
            await ticket.woken.wait()
        if not ticket.done:   # nobody commits, or the committer handed over: commit what waits, this one too
            await self._commit_pending()
        if ticket.error is not None:
            raise FrostError(f"the master could not store a result: {ticket.error}") from ticket.error
        return ticket.outcome  # type: ignore[return-value]

    async def _commit_pending(self) -> None:
        """One batch; what arrives meanwhile is the next caller's to commit (this one's caller is answered now)."""
        self._committing = True
        await trio.lowlevel.checkpoint()   # results delivered at the same moment join this batch
        batch, self._pending = self._pending, []
        try:
            outcomes = await self._commit([t.item for t in batch])
        except Exception as error:   # every caller of the batch hears it alike, this one too
            for ticket in batch:
                ticket.error = error
        except BaseException as error:   # cancelled: the others hear it; this caller's cancellation goes on
            for ticket in batch:
                ticket.error = error
            raise
        else:
            for ticket, outcome in zip(batch, outcomes, strict=True):
                ticket.outcome = outcome
        finally:
            for ticket in batch:
                ticket.done = True
                ticket.woken.set()
            self._committing = False
            if self._pending:
                self._pending[0].woken.set()

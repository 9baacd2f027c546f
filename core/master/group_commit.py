"""Changes that arrive together are committed together: a burst of results costs one transaction and one fsync.

Whoever finds nobody committing commits everything pending, its own change too; the others wait for the
batch in progress to end and look again: done, or their turn to commit what is pending now. One batch
at a time, and each caller returns only once its change is durable, so a host is never told its result
was taken before it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from frost_core.api.errors import FrostError, StorageError

T = TypeVar("T")
R = TypeVar("R")


class _Ticket(Generic[T, R]):
    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.outcome: R | None = None
        self.error: BaseException | None = None


class GroupCommit(Generic[T, R]):
    def __init__(self, commit: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        """`commit` makes a batch durable in one transaction and returns each item's outcome, in order."""
        self._commit = commit
        self._pending: list[_Ticket[T, R]] = []
        self._committing = False
        self._batch_ended = trio.Event()   # set (and replaced) as each batch ends

    async def submit(self, item: T) -> R:
        """`item`'s outcome, once the batch that carries it is durable.

        A waiter looks again after each batch rather than being handed the next turn: a caller that came
        while the turn was on its way found nobody committing and took the waiter's change into its own
        batch (the waiter then committed an empty batch beside it and returned with no outcome)."""
        ticket: _Ticket[T, R] = _Ticket(item)
        self._pending.append(ticket)
        while not ticket.done:
            if self._committing:
                await self._batch_ended.wait()
            else:
                await self._commit_pending()
        if isinstance(ticket.error, StorageError):   # (the disk's: what was given is to come again)
            raise StorageError(ticket.error.message) from ticket.error
        if ticket.error is not None:
            raise FrostError(f"the master could not store a result: {ticket.error}") from ticket.error
        return ticket.outcome  # type: ignore[return-value]

    async def _commit_pending(self) -> None:
        """One batch of what is pending; what arrives meanwhile waits for the next."""
        self._committing = True
        batch: list[_Ticket[T, R]] = []
        try:
            await trio.lowlevel.checkpoint()   # results delivered at the same moment join this batch
            batch, self._pending = self._pending, []
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
            self._committing = False
            self._batch_ended.set()
            self._batch_ended = trio.Event()

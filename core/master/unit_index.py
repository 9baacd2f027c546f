"""Which units wait and which run, kept in memory from the store's own writes: a wake costs no table scan.

SQLite stays the durable record; this index is read from it once when the store opens and then
follows every committed change, so placing a unit or accepting a result touches only that unit's
rows, however many units the master holds.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def _locked(method):
    def locked(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)
    locked.__doc__ = method.__doc__
    return locked


@dataclass(frozen=True)
class Placed:
    """A unit running (or last heard running) on a host under an ownership epoch."""

    assignment_id: str
    index: int
    host: str
    epoch: int
    progress: float = 0.0   # the master stores no progress for a running unit: its copies report it live

    @property
    def task_id(self) -> str:
        return f"{self.assignment_id}.{self.index}"


@dataclass(frozen=True)
class AssignmentHead:
    """What placing any unit of an assignment needs to know of it, without its units."""

    id: str
    seq: int
    plugin: str
    plugin_version: str
    plugin_hash: str
    one_per_host: bool
    submitter: str
    inputs: Any = ()


class UnitIndex:
    """Safe to share between threads: every method but `head` holds `lock`, which a writer also holds across its
    transaction so that the index changes in the order of the commits."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._heads: dict[str, AssignmentHead] = {}           # assignments whose units may still be placed
        self._queued: dict[str, set[int]] = {}                 # assignment -> queued unit indices
        self._order: dict[str, list[int]] = {}                 # assignment -> a heap of them (stale entries skipped)
        self._running: dict[tuple[str, int], Placed] = {}
        self._unfinished: set[str] = set()                     # assignments with a unit failed for good

    # -- reading -------------------------------------------------------------------------------

    @_locked
    def queued_count(self, assignment_id: str) -> int:
        return len(self._queued.get(assignment_id, ()))

    @_locked
    def waiting(self) -> list[AssignmentHead]:
        """Assignments with queued units."""
        return [self._heads[a] for a, queued in self._queued.items() if queued and a in self._heads]

    @_locked
    def idle(self) -> list[str]:
        """Assignments with no unit waiting or running (all done: to combine), oldest first."""
        busy = {placed.assignment_id for placed in self._running.values()} | self._unfinished
        heads = sorted(self._heads.values(), key=lambda head: head.seq)
        return [h.id for h in heads if h.id not in busy and not self._queued.get(h.id)]

    @_locked
    def has_units_left(self, assignment_id: str) -> bool:
        """Whether a unit of the assignment waits, runs or failed for good: it is not ready to combine."""
        return (bool(self._queued.get(assignment_id)) or assignment_id in self._unfinished
                or any(key[0] == assignment_id for key in self._running))

    def head(self, assignment_id: str) -> AssignmentHead | None:
        """Without the lock: one read of a dict whose values never change (the lock is held by a writer's
        whole transaction body, and the master asks for a head once per result)."""
        return self._heads.get(assignment_id)

    @_locked
    def first_queued(self, assignment_id: str, count: int) -> list[int]:
        """The `count` lowest queued unit indices of an assignment, in order (O(count log n))."""
        heap, queued = self._order.get(assignment_id, []), self._queued.get(assignment_id, set())
        taken: list[int] = []
        while heap and len(taken) < count:
            index = heapq.heappop(heap)
            if index in queued and (not taken or taken[-1] != index):
                taken.append(index)
        for index in taken:
            heapq.heappush(heap, index)
        return taken

    @_locked
    def running(self) -> list[Placed]:
        return list(self._running.values())

    @_locked
    def placed(self, assignment_id: str, index: int) -> Placed | None:
        """Where and under which epoch the unit runs, or None if it does not."""
        return self._running.get((assignment_id, index))

    @_locked
    def holders(self) -> dict[str, frozenset[str]]:
        """Assignment -> the hosts running one of its units."""
        held: dict[str, set[str]] = {}
        for placed in self._running.values():
            held.setdefault(placed.assignment_id, set()).add(placed.host)
        return {a: frozenset(hosts) for a, hosts in held.items()}

    # -- following the store's writes ------------------------------------------------------------

    @_locked
    def clear(self) -> None:
        self._heads.clear()
        self._queued.clear()
        self._order.clear()
        self._running.clear()
        self._unfinished.clear()

    @_locked
    def add_assignment(self, head: AssignmentHead, queued: Iterable[int]) -> None:
        self._heads[head.id] = head
        for index in queued:
            self.queue(head.id, index)

    @_locked
    def close_assignment(self, assignment_id: str) -> None:
        """Done, failed or cancelled: none of its units waits or runs any more."""
        self._heads.pop(assignment_id, None)
        self._queued.pop(assignment_id, None)
        self._order.pop(assignment_id, None)
        self._unfinished.discard(assignment_id)
        for key in [k for k in self._running if k[0] == assignment_id]:
            del self._running[key]

    @_locked
    def queue(self, assignment_id: str, index: int) -> None:
        self._running.pop((assignment_id, index), None)
        queued = self._queued.setdefault(assignment_id, set())
        if index not in queued:
            queued.add(index)
            heapq.heappush(self._order.setdefault(assignment_id, []), index)

    @_locked
    def run(self, assignment_id: str, index: int, *, host: str, epoch: int) -> None:
        self._queued.get(assignment_id, set()).discard(index)
        self._running[(assignment_id, index)] = Placed(assignment_id, index, host, epoch)

    @_locked
    def finish(self, assignment_id: str, index: int, *, failed: bool = False) -> None:
        """Done, or `failed` for good (its assignment is not to be combined): neither waiting nor running."""
        self._queued.get(assignment_id, set()).discard(index)
        self._running.pop((assignment_id, index), None)
        if failed:
            self._unfinished.add(assignment_id)

"""Which units wait and which run, kept in memory from the store's own writes: a wake costs no table scan.

SQLite stays the durable record; this index is read from it once when the store opens and then
follows every committed change, so placing a unit or accepting a result touches only that unit's
rows, however many units the master holds.
"""

from __future__ import annotations

import heapq
import threading
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


class QueuedUnits:
    """One assignment's queued unit indices: a run `lo`..`hi` queued as submitted (less those `taken` out of its
    middle), and the others (queued again below it, or found queued past a gap when the store opened) in a set
    with a heap for their order. A 100,000-unit submit put 100,000 entries into a set and a heap under the
    index's lock, 67 ms the event loop could wait for and 8 MB kept while they waited; now it adds one run."""

    __slots__ = ("lo", "hi", "taken", "others", "order")

    def __init__(self, lo: int = 0, hi: int = 0) -> None:
        self.lo, self.hi = lo, hi
        self.taken: set[int] = set()     # within lo..hi, not queued (always above lo and below hi - 1)
        self.others: set[int] = set()    # queued, outside lo..hi
        self.order: list[int] = []       # a heap of `others` (stale and repeated entries skipped)

    def __len__(self) -> int:
        return self.hi - self.lo - len(self.taken) + len(self.others)

    def add(self, index: int) -> None:
        if self.lo <= index < self.hi:
            self.taken.discard(index)
        elif index in self.others:
            return
        elif index == self.hi:
            self.hi += 1
        elif self.lo == self.hi:   # empty: a run starts here
            self.lo, self.hi = index, index + 1
        else:
            self.others.add(index)
            heapq.heappush(self.order, index)

    def discard(self, index: int) -> None:
        if not self.lo <= index < self.hi:
            self.others.discard(index)
        elif index == self.lo:
            self.lo += 1
            while self.lo in self.taken:
                self.taken.remove(self.lo)
                self.lo += 1
        elif index == self.hi - 1:
            self.hi -= 1
            while self.hi - 1 in self.taken:
                self.taken.remove(self.hi - 1)
                self.hi -= 1
        else:
            self.taken.add(index)

    def first(self, count: int) -> list[int]:
        """The `count` lowest, in order: O(count log n) plus the taken ones skipped in the run."""
        run: list[int] = []
        index = self.lo
        while index < self.hi and len(run) < count:
            if index not in self.taken:
                run.append(index)
            index += 1
        others: list[int] = []
        while self.order and len(others) < count:
            index = heapq.heappop(self.order)
            if index in self.others and (not others or others[-1] != index):
                others.append(index)
        for index in others:
            heapq.heappush(self.order, index)
        return list(heapq.merge(run, others))[:count]


class UnitIndex:
    """Safe to share between threads: every method but `head` holds `lock`, which a writer also holds across its
    transaction so that the index changes in the order of the commits."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._heads: dict[str, AssignmentHead] = {}           # assignments whose units may still be placed
        self._queued: dict[str, QueuedUnits] = {}
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
        """The `count` lowest queued unit indices of an assignment, in order."""
        queued = self._queued.get(assignment_id)
        return queued.first(count) if queued is not None else []

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
        self._running.clear()
        self._unfinished.clear()

    @_locked
    def add_assignment(self, head: AssignmentHead, queued: range = range(0)) -> None:
        """`queued`: its units queued from the start (a fresh submit's), as one run."""
        self._heads[head.id] = head
        if queued:
            self._queued[head.id] = QueuedUnits(queued.start, queued.stop)

    @_locked
    def close_assignment(self, assignment_id: str) -> None:
        """Done, failed or cancelled: none of its units waits or runs any more."""
        self._heads.pop(assignment_id, None)
        self._queued.pop(assignment_id, None)
        self._unfinished.discard(assignment_id)
        for key in [k for k in self._running if k[0] == assignment_id]:
            del self._running[key]

    @_locked
    def queue(self, assignment_id: str, index: int) -> None:
        self._running.pop((assignment_id, index), None)
        self._queued.setdefault(assignment_id, QueuedUnits()).add(index)

    @_locked
    def run(self, assignment_id: str, index: int, *, host: str, epoch: int) -> None:
        self._unqueue(assignment_id, index)
        self._running[(assignment_id, index)] = Placed(assignment_id, index, host, epoch)

    @_locked
    def finish(self, assignment_id: str, index: int, *, failed: bool = False) -> None:
        """Done, or `failed` for good (its assignment is not to be combined): neither waiting nor running."""
        self._unqueue(assignment_id, index)
        self._running.pop((assignment_id, index), None)
        if failed:
            self._unfinished.add(assignment_id)

    def _unqueue(self, assignment_id: str, index: int) -> None:
        queued = self._queued.get(assignment_id)
        if queued is not None:
            queued.discard(index)

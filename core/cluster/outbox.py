"""Finished work a host owes to masters it cannot reach right now, kept durably until delivered.

A master may be down for a while (its owner rebooted it, its laptop went home for the weekend);
the host's work must not be lost meanwhile, nor when the host itself restarts. Each entry is
written (WAL, synchronous=FULL) before the first delivery attempt and removed only once the
master has answered.

The host looks at what it holds every report interval, for as long as a master is away, so
that look reads no payload: 200 held results of 1 MiB took 1.25 s of CPU to read whole
(2,000 of 0.1 MiB, 1.1 s), every 2 s, at the node's normal priority on the owner's desk. A
payload is read only when its master can be tried (`Outbox.owed`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from frost_core.cluster.messages import SpentRun
from frost_core.storage.sqlite import disk_writes, open_durably

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    task_id TEXT PRIMARY KEY,
    master TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload BLOB NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    retryable INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_held ON outbox (created_at, task_id, master, epoch, kind);
CREATE TABLE IF NOT EXISTS spent (
    master TEXT NOT NULL,
    task_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    cpu_seconds REAL NOT NULL,
    ended_at REAL NOT NULL,
    PRIMARY KEY (task_id, epoch, ended_at)
);
"""
_CPU_COLUMN = "ALTER TABLE outbox ADD COLUMN cpu_seconds REAL NOT NULL DEFAULT 0"
"""Added later: an outbox written before it gets the column, and its results count as 0 CPU-seconds."""
_HELD_COLUMNS = "task_id, master, epoch, kind, created_at"
"""What `held` reads, all from the index `outbox_held`: a row's `created_at` lies beyond its payload, and SQLite
reads a big payload's overflow pages to reach it (without the index, 200 held results of 1 MiB still cost the
node 5.5 % of a core)."""


@dataclass(frozen=True)
class Held:
    """What the host holds for a master, without the outcome itself: whose it is, and since when."""

    task_id: str
    master: str
    epoch: int
    kind: str           # "result" or "failed"
    created_at: float


@dataclass(frozen=True)
class Owed(Held):
    """One result (kind "result") or failure (kind "failed") waiting for its master, whole."""

    payload: bytes = b""
    reason: str = ""
    retryable: bool = False
    cpu_seconds: float = 0.0    # a result's: the CPU its guest used


class Outbox:
    """Raises StorageError where the disk refuses a write: the entry is then not put (or not removed)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db = open_durably(path, _SCHEMA)
        if "cpu_seconds" not in {row[1] for row in self._db.execute("PRAGMA table_info(outbox)")}:
            self._db.execute(_CPU_COLUMN)

    def close(self) -> None:
        self._db.close()

    def put(self, owed: Owed) -> None:
        with disk_writes(self._path):
            self._db.execute(
                "INSERT OR REPLACE INTO outbox (task_id, master, epoch, kind, payload, reason, retryable, created_at,"
                " cpu_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (owed.task_id, owed.master, owed.epoch, owed.kind, owed.payload, owed.reason, int(owed.retryable),
                 owed.created_at, owed.cpu_seconds),
            )

    def remove(self, task_id: str) -> None:
        with disk_writes(self._path):
            self._db.execute("DELETE FROM outbox WHERE task_id = ?", (task_id,))

    def held(self) -> list[Held]:
        """Everything held, oldest first, without payloads."""
        rows = self._db.execute(f"SELECT {_HELD_COLUMNS} FROM outbox ORDER BY created_at").fetchall()
        return [Held(*row) for row in rows]

    def owed(self, task_id: str) -> Owed | None:
        """The whole outcome held for `task_id`; None if it left meanwhile."""
        row = self._db.execute(f"SELECT {_HELD_COLUMNS}, payload, reason, retryable, cpu_seconds FROM outbox"
                               " WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else Owed(*row[:5], bytes(row[5]), row[6], bool(row[7]), row[8])

    # Runs of masters' units that ended here without a result, until their masters hear what they used: this
    # node's ledger counted each as given when it ended, so one lost with the node (kill -9, a power cut) would
    # leave the two sides of the ledger apart for good. A run sent twice counts once (its master keys it by
    # task, epoch and end), so a write that lands after its report was answered costs nothing.

    def owe_spent(self, master: str, run: SpentRun) -> None:
        with disk_writes(self._path):
            self._db.execute("INSERT OR IGNORE INTO spent (master, task_id, epoch, cpu_seconds, ended_at)"
                             " VALUES (?, ?, ?, ?, ?)", (master, run.task_id, run.epoch, run.cpu_seconds, run.ended_at))

    def settle_spent(self, runs: Iterable[SpentRun]) -> None:
        """Their masters heard of these runs (or this host gave up telling them)."""
        with disk_writes(self._path):
            self._db.executemany("DELETE FROM spent WHERE task_id = ? AND epoch = ? AND ended_at = ?",
                                 [(run.task_id, run.epoch, run.ended_at) for run in runs])

    def spent_owed(self) -> dict[str, list[SpentRun]]:
        """Master -> the runs it has not heard of, oldest first."""
        owed: dict[str, list[SpentRun]] = {}
        for master, *run in self._db.execute(
                "SELECT master, task_id, epoch, cpu_seconds, ended_at FROM spent ORDER BY ended_at"):
            owed.setdefault(master, []).append(SpentRun(*run))
        return owed

    def expire_spent(self, older_than: float) -> int:
        """Drop the runs that ended before `older_than` (their masters stayed away too long); how many."""
        with disk_writes(self._path):
            return self._db.execute("DELETE FROM spent WHERE ended_at < ?", (older_than,)).rowcount

    def expire(self, older_than: float) -> list[Held]:
        """Drop and return entries held longer than their masters may take to come back."""
        expired = [Held(*row) for row in self._db.execute(
            f"SELECT {_HELD_COLUMNS} FROM outbox WHERE created_at < ? ORDER BY created_at", (older_than,))]
        if expired:   # (nothing put now is that old)
            with disk_writes(self._path):
                self._db.execute("DELETE FROM outbox WHERE created_at < ?", (older_than,))
        return expired


def owed_result(task_id: str, master: str, epoch: int, result: bytes, cpu_seconds: float = 0.0) -> Owed:
    return Owed(task_id, master, epoch, "result", time.time(), payload=result, cpu_seconds=cpu_seconds)


def owed_failure(task_id: str, master: str, epoch: int, reason: str, retryable: bool) -> Owed:
    return Owed(task_id, master, epoch, "failed", time.time(), reason=reason, retryable=retryable)

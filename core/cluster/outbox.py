"""Finished work a host owes to masters it cannot reach right now, kept durably until delivered.

A master may be down for a while (its owner rebooted it); the host's work must not be lost
meanwhile, nor when the host itself restarts. Each entry is written (WAL, synchronous=FULL)
before the first delivery attempt and removed only once the master has answered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

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
"""
_CPU_COLUMN = "ALTER TABLE outbox ADD COLUMN cpu_seconds REAL NOT NULL DEFAULT 0"
"""Added later: an outbox written before it gets the column, and its results count as 0 CPU-seconds."""


@dataclass(frozen=True)
class Owed:
    """One result (kind "result") or failure (kind "failed") waiting for its master."""

    task_id: str
    master: str
    epoch: int
    kind: str
    payload: bytes
    reason: str
    retryable: bool
    created_at: float
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

    def entries(self) -> list[Owed]:
        rows = self._db.execute(
            "SELECT task_id, master, epoch, kind, payload, reason, retryable, created_at, cpu_seconds FROM outbox"
            " ORDER BY created_at"
        ).fetchall()
        return [Owed(r[0], r[1], r[2], r[3], bytes(r[4]), r[5], bool(r[6]), r[7], r[8]) for r in rows]

    def expire(self, older_than: float) -> list[Owed]:
        """Drop and return entries held longer than their masters may take to come back."""
        expired = [owed for owed in self.entries() if owed.created_at < older_than]
        for owed in expired:
            self.remove(owed.task_id)
        return expired


def owed_result(task_id: str, master: str, epoch: int, result: bytes, cpu_seconds: float = 0.0) -> Owed:
    return Owed(task_id, master, epoch, "result", result, "", False, time.time(), cpu_seconds)


def owed_failure(task_id: str, master: str, epoch: int, reason: str, retryable: bool) -> Owed:
    return Owed(task_id, master, epoch, "failed", b"", reason, retryable, time.time())

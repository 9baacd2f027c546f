"""The master's durable memory: assignments, their units and results, and owner intents, in SQLite.

Every change is one transaction in WAL mode with synchronous=FULL, so a `kill -9` (or a power
cut) at any moment leaves either the state before or the state after, never half of it: a
restarted node finds every completed unit result it ever acknowledged.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2

from ..errors import FrostError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS assignments (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    plugin TEXT NOT NULL,
    plugin_version TEXT NOT NULL,
    plugin_hash TEXT NOT NULL,
    params BLOB NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    result BLOB,
    result_media_type TEXT,
    result_filename TEXT,
    error TEXT
);
CREATE TABLE IF NOT EXISTS units (
    assignment_id TEXT NOT NULL REFERENCES assignments(id),
    idx INTEGER NOT NULL,
    data BLOB NOT NULL,
    memory_bytes INTEGER NOT NULL,
    cost REAL NOT NULL,
    state TEXT NOT NULL,
    host TEXT NOT NULL DEFAULT '',
    epoch INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    moves INTEGER NOT NULL DEFAULT 0,
    progress REAL NOT NULL DEFAULT 0,
    error TEXT,
    result BLOB,
    PRIMARY KEY (assignment_id, idx)
);
CREATE TABLE IF NOT EXISTS intents (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


class UnknownAssignmentError(FrostError):
    title = "Unknown assignment"


@dataclass(frozen=True)
class UnitRecord:
    assignment_id: str
    index: int
    data: dict[str, Any]
    memory_bytes: int
    cost: float
    state: str          # queued, running, done, failed
    host: str
    epoch: int
    failures: int       # failed runs so far; bounded by guests.max_retries
    moves: int
    progress: float
    error: str | None

    @property
    def task_id(self) -> str:
        return f"{self.assignment_id}.{self.index}"


@dataclass(frozen=True)
class AssignmentRecord:
    id: str
    plugin: str
    plugin_version: str
    plugin_hash: str
    params: dict[str, Any]
    state: str          # running, combining, done, failed, cancelled
    created_at: float
    finished_at: float | None
    result_media_type: str | None
    result_filename: str | None
    error: str | None
    units: tuple[UnitRecord, ...]

    @property
    def progress(self) -> float:
        if not self.units:
            return 1.0 if self.state == "done" else 0.0
        done = sum(1.0 if u.state == "done" else u.progress for u in self.units)
        return done / len(self.units)


@dataclass(frozen=True)
class NewUnit:
    """A unit as the plugin's split declared it."""

    data: dict[str, Any]
    memory_bytes: int
    cost: float


class MasterStore:
    """One SQLite file per node; used from the node's trio thread only (calls take milliseconds)."""

    def __init__(self, path: Path, *, node_id: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._prefix = node_id[:8]
        self._version = 0        # grows with every write: the node rebuilds snapshots up to ten times a second
        self._listed: tuple[int, list[AssignmentRecord]] | None = None

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._version += 1

    # -- assignments -------------------------------------------------------------------

    def create_assignment(
        self, *, plugin: str, plugin_version: str, plugin_hash: str,
        params: dict[str, Any], units: list[NewUnit], now: float | None = None,
    ) -> str:
        """Store an assignment and all its units as queued, atomically; return its id.

        The id carries this node's id so it stays unique across the cluster and says who
        its master is wherever its units run.
        """
        now = time.time() if now is None else now
        with self._transaction() as db:
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM assignments").fetchone()
            assignment_id = f"{self._prefix}-{seq}"
            db.execute(
                "INSERT INTO assignments (id, seq, plugin, plugin_version, plugin_hash, params, state, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                (assignment_id, seq, plugin, plugin_version, plugin_hash, cbor2.dumps(params), now),
            )
            db.executemany(
                "INSERT INTO units (assignment_id, idx, data, memory_bytes, cost, state) VALUES (?, ?, ?, ?, ?, 'queued')",
                [(assignment_id, i, cbor2.dumps(u.data), u.memory_bytes, u.cost) for i, u in enumerate(units)],
            )
        return assignment_id

    def assignment(self, assignment_id: str) -> AssignmentRecord:
        row = self._db.execute(
            "SELECT id, plugin, plugin_version, plugin_hash, params, state, created_at, finished_at,"
            " result_media_type, result_filename, error FROM assignments WHERE id = ?",
            (assignment_id,),
        ).fetchone()
        if row is None:
            raise UnknownAssignmentError(f"no assignment {assignment_id!r} on this node")
        return self._assignment_from_row(row)

    def assignments(self) -> list[AssignmentRecord]:
        """Every assignment with its units; read from SQLite only when something was written since."""
        if self._listed is not None and self._listed[0] == self._version:
            return list(self._listed[1])
        rows = self._db.execute(
            "SELECT id, plugin, plugin_version, plugin_hash, params, state, created_at, finished_at,"
            " result_media_type, result_filename, error FROM assignments ORDER BY seq"
        ).fetchall()
        records = [self._assignment_from_row(row) for row in rows]
        self._listed = (self._version, records)
        return list(records)

    def result(self, assignment_id: str) -> tuple[bytes, str, str]:
        """The combined output: (data, media type, suggested file name)."""
        record = self.assignment(assignment_id)
        if record.state != "done":
            raise FrostError(
                f"assignment {assignment_id} has no result yet (it is {record.state})", title="No result yet"
            )
        (data,) = self._db.execute("SELECT result FROM assignments WHERE id = ?", (assignment_id,)).fetchone()
        return data, record.result_media_type or "application/octet-stream", record.result_filename or assignment_id

    def unit_results(self, assignment_id: str) -> list[Any]:
        """Decoded unit results in unit order: what the plugin's combine receives."""
        rows = self._db.execute(
            "SELECT result FROM units WHERE assignment_id = ? ORDER BY idx", (assignment_id,)
        ).fetchall()
        return [cbor2.loads(result) for (result,) in rows]

    def finish_assignment(self, assignment_id: str, *, data: bytes, media_type: str, filename: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE assignments SET state = 'done', finished_at = ?, result = ?, result_media_type = ?,"
                " result_filename = ? WHERE id = ? AND state IN ('running', 'combining')",
                (time.time(), data, media_type, filename, assignment_id),
            )

    def fail_assignment(self, assignment_id: str, error: str) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE assignments SET state = 'failed', finished_at = ?, error = ? WHERE id = ? AND state IN ('running', 'combining')",
                (time.time(), error, assignment_id),
            )
            db.execute("UPDATE units SET state = 'failed' WHERE assignment_id = ? AND state != 'done'", (assignment_id,))

    def cancel_assignment(self, assignment_id: str) -> AssignmentRecord:
        record = self.assignment(assignment_id)
        if record.state not in ("running", "combining"):
            raise FrostError(f"assignment {assignment_id} is already {record.state}", title="Cannot cancel")
        with self._transaction() as db:
            db.execute(
                "UPDATE assignments SET state = 'cancelled', finished_at = ? WHERE id = ?", (time.time(), assignment_id)
            )
            db.execute("UPDATE units SET state = 'cancelled' WHERE assignment_id = ? AND state != 'done'", (assignment_id,))
        return self.assignment(assignment_id)

    # -- units -------------------------------------------------------------------------

    def queued_units(self) -> list[UnitRecord]:
        """Units waiting for a host, oldest assignment first, in unit order."""
        rows = self._db.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units u JOIN assignments a ON a.id = u.assignment_id"
            " WHERE u.state = 'queued' AND a.state = 'running' ORDER BY a.seq, u.idx"
        ).fetchall()
        return [_unit_from_row(row) for row in rows]

    def running_units(self) -> list[UnitRecord]:
        rows = self._db.execute(f"SELECT {_UNIT_COLUMNS} FROM units u WHERE u.state = 'running'").fetchall()
        return [_unit_from_row(row) for row in rows]

    def place_unit(self, assignment_id: str, index: int, *, host: str) -> int:
        """Mark a queued unit as running on `host` under a new ownership epoch; return the epoch.

        The epoch grows at every placement, so a stale copy of the unit that comes back
        later can be told apart and its result refused.
        """
        with self._transaction() as db:
            row = db.execute(
                "SELECT epoch, state FROM units WHERE assignment_id = ? AND idx = ?", (assignment_id, index)
            ).fetchone()
            if row is None or row[1] != "queued":
                raise FrostError(f"unit {assignment_id}.{index} is not queued", title="Cannot place unit")
            epoch = row[0] + 1
            db.execute(
                "UPDATE units SET state = 'running', host = ?, epoch = ?,"
                " moves = moves + (CASE WHEN host != '' AND host != ? THEN 1 ELSE 0 END)"
                " WHERE assignment_id = ? AND idx = ?",
                (host, epoch, host, assignment_id, index),
            )
        return epoch

    def accept_result(self, assignment_id: str, index: int, *, epoch: int, result: bytes) -> bool:
        """Store a unit's result once: a second result, or one from a stale epoch, is refused.

        Returns True when this call completed the unit. The check and the write are one
        transaction, so two deliveries racing each other cannot both be accepted.
        """
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'done', result = ?, progress = 1.0, error = NULL"
                " WHERE assignment_id = ? AND idx = ? AND epoch = ? AND state = 'running'",
                (result, assignment_id, index, epoch),
            )
            return cursor.rowcount == 1

    def requeue_unit(self, assignment_id: str, index: int, *, epoch: int, error: str | None = None) -> bool:
        """Send a running unit back to the queue: evicted, or (with `error`) failed and worth a retry."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'queued', error = ?, failures = failures + ?"
                " WHERE assignment_id = ? AND idx = ? AND epoch = ? AND state = 'running'",
                (error, 0 if error is None else 1, assignment_id, index, epoch),
            )
            return cursor.rowcount == 1

    def fail_unit(self, assignment_id: str, index: int, *, epoch: int, error: str) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'failed', error = ? WHERE assignment_id = ? AND idx = ? AND epoch = ? AND state = 'running'",
                (error, assignment_id, index, epoch),
            )
            return cursor.rowcount == 1

    def requeue_running(self) -> int:
        """At start-up: units this node was running when it died go back to the queue."""
        with self._transaction() as db:
            return db.execute("UPDATE units SET state = 'queued' WHERE state = 'running'").rowcount

    def all_units_done(self, assignment_id: str) -> bool:
        (pending,) = self._db.execute(
            "SELECT COUNT(*) FROM units WHERE assignment_id = ? AND state != 'done'", (assignment_id,)
        ).fetchone()
        return pending == 0

    def mark_combining(self, assignment_id: str) -> None:
        with self._transaction() as db:
            db.execute("UPDATE assignments SET state = 'combining' WHERE id = ? AND state = 'running'", (assignment_id,))

    def combining_assignments(self) -> list[str]:
        """Assignments whose units are all done but whose combined result is not stored yet."""
        rows = self._db.execute(
            "SELECT a.id FROM assignments a WHERE a.state IN ('running', 'combining') AND NOT EXISTS"
            " (SELECT 1 FROM units u WHERE u.assignment_id = a.id AND u.state != 'done') ORDER BY a.seq"
        ).fetchall()
        return [assignment_id for (assignment_id,) in rows]

    # -- owner intents -----------------------------------------------------------------

    def intent(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM intents WHERE key = ?", (key,)).fetchone()
        return default if row is None else cbor2.loads(row[0])

    def set_intent(self, key: str, value: Any) -> None:
        """Remember what the owner asked for (pause, pause until, finish) across restarts."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO intents (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, cbor2.dumps(value)),
            )

    # -- rows --------------------------------------------------------------------------

    def _assignment_from_row(self, row: tuple) -> AssignmentRecord:
        units = self._db.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units u WHERE u.assignment_id = ? ORDER BY u.idx", (row[0],)
        ).fetchall()
        return AssignmentRecord(
            id=row[0], plugin=row[1], plugin_version=row[2], plugin_hash=row[3], params=cbor2.loads(row[4]),
            state=row[5], created_at=row[6], finished_at=row[7], result_media_type=row[8],
            result_filename=row[9], error=row[10], units=tuple(_unit_from_row(u) for u in units),
        )


_UNIT_COLUMNS = (
    "u.assignment_id, u.idx, u.data, u.memory_bytes, u.cost, u.state, u.host, u.epoch, u.failures,"
    " u.moves, u.progress, u.error"
)


def _unit_from_row(row: tuple) -> UnitRecord:
    return UnitRecord(
        assignment_id=row[0], index=row[1], data=cbor2.loads(row[2]), memory_bytes=row[3], cost=row[4],
        state=row[5], host=row[6], epoch=row[7], failures=row[8], moves=row[9], progress=row[10], error=row[11],
    )

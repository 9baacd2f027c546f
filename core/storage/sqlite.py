"""One way to open the node's SQLite files, so every one of them survives a `kill -9` alike, and one way to
write to them, so every one of them survives a full disk alike.

WAL with synchronous=FULL makes each committed transaction durable before the call returns;
autocommit mode (isolation_level=None) leaves transactions to the caller's explicit BEGIN.
A write the disk refuses (full, read-only, failing) raises `StorageError` naming the file, with nothing
half-written: the node's tasks catch that one error and try again later, where an `sqlite3` error escaping
one of them stopped the node and every guest on it the moment the owner's disk filled.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from frost_core.api.errors import StorageError

REFUSALS = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN})
"""SQLite's primary result codes for a disk that refused a write; any other error (a wrong statement, a
constraint) is a fault of the code and stays what it is."""


def open_durably(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating its folder and tables if need be) a database whose commits outlive a crash; StorageError
    if the disk refuses (a full one refuses even the opening: SQLite writes its shared-memory index then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with disk_writes(path):
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(schema)
    return db


@contextmanager
def disk_writes(path: Path) -> Iterator[None]:
    """Writes of the database at `path` (named in the message: which disk refused) whose refusal by the disk is a
    StorageError."""
    try:
        yield
    except sqlite3.OperationalError as error:
        if error.sqlite_errorcode & 0xFF in REFUSALS:
            raise StorageError(f"could not write {path}: {error}") from error
        raise


@contextmanager
def transaction(db: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction (BEGIN IMMEDIATE ... COMMIT) of the database at `path`, rolled back whole on any error,
    the COMMIT's own included: a disk that fills at the commit leaves the file as it was before the BEGIN."""
    with disk_writes(path):
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:   # (a full disk may have rolled it back already)
                db.execute("ROLLBACK")
            raise

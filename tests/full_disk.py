"""SQLite databases that refuse writes as a full or read-only disk does, for tests that need no mount.

`cap` refuses growth (SQLITE_FULL, "database or disk is full"), as a full disk does an insert;
`refuse_writes` refuses every write (SQLITE_READONLY), an update in place included, which a capped
database would still take.
"""

from __future__ import annotations

import sqlite3

from frost_core.master.store import MasterStore

UNCAPPED = 1073741823   # SQLite's own default max_page_count


def cap(*connections: sqlite3.Connection) -> None:
    """No page more than each database has now: its next growth is refused as on a full disk."""
    for db in connections:
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")


def uncap(*connections: sqlite3.Connection) -> None:
    for db in connections:
        db.execute(f"PRAGMA max_page_count = {UNCAPPED}")


def refuse_writes(*connections: sqlite3.Connection, refused: bool = True) -> None:
    for db in connections:
        db.execute(f"PRAGMA query_only = {'ON' if refused else 'OFF'}")


def connections_of(store: MasterStore) -> tuple[sqlite3.Connection, ...]:
    """The master store's three connections (loop, batches, reads): a private detail the refusal must reach."""
    return store._db, store._batches, store._reads

"""One way to open the node's SQLite files, so every one of them survives a `kill -9` alike.

WAL with synchronous=FULL makes each committed transaction durable before the call returns;
autocommit mode (isolation_level=None) leaves transactions to the caller's explicit BEGIN.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_durably(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating its folder and tables if need be) a database whose commits outlive a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=5000")
    db.executescript(schema)
    return db

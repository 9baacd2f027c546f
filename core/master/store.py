"""The master's durable memory: assignments, their units and results, and owner intents, in SQLite.

Every change is one transaction in WAL mode with synchronous=FULL, so a `kill -9` (or a power
cut) at any moment leaves either the state before or the state after, never half of it: a
restarted node finds every completed unit result it ever acknowledged. A batch of placements or
of results is one transaction on a second connection, which a worker thread may use (its fsync
off the event loop); an in-memory `UnitIndex` follows every commit, so the master finds what waits
and what runs without scanning the tables.

Results (a unit's, an assignment's combined one) live in tables of their own, read only when asked
for. In the rows they came with, they lay before columns every listing reads (a unit's `checked`, an
assignment's `submitter`), and SQLite walks a big value's overflow pages to reach what follows it:
fifty finished assignments with a 10 MiB image each made every listing take 115-140 ms, and the node
lists its assignments for the UI up to once a second while a run is going.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cbor2

from frost_core.storage.sqlite import disk_writes, open_durably, transaction
from frost_core.api.errors import FrostError
from frost_core.guest.views import InputFile
from frost_core.master.unit_index import AssignmentHead, Placed, UnitIndex
from frost_core.master.verification import Decision, decide

SETTLED = frozenset({"done", "failed", "cancelled"})
"""An assignment in one of these states changes no more, but for the work its units' late copies wasted."""
SCHEMA_VERSION = 2
"""1: results in the `assignments` and `units` rows; 2: in `assignment_results` and `unit_results`."""

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
    PRIMARY KEY (assignment_id, idx)
);
CREATE TABLE IF NOT EXISTS assignment_results (
    id TEXT PRIMARY KEY REFERENCES assignments(id),
    result BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS unit_results (
    assignment_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    result BLOB NOT NULL,
    files BLOB,                 -- CBOR map of the unit's output files; NULL: none
    PRIMARY KEY (assignment_id, idx)
);
CREATE TABLE IF NOT EXISTS waste (
    assignment_id TEXT NOT NULL REFERENCES assignments(id),
    idx INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    reason TEXT NOT NULL,
    seconds REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS unit_copies (
    assignment_id TEXT NOT NULL REFERENCES assignments(id),
    idx INTEGER NOT NULL,
    host TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    result BLOB NOT NULL,
    files BLOB
);
CREATE INDEX IF NOT EXISTS units_by_state ON units (assignment_id, state, idx);
CREATE INDEX IF NOT EXISTS unit_copies_of_unit ON unit_copies (assignment_id, idx, host);
CREATE INDEX IF NOT EXISTS waste_of_unit ON waste (assignment_id, idx);
CREATE TABLE IF NOT EXISTS intents (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
"""


_TALLIES = (
    """CREATE TABLE unit_tallies (
        assignment_id TEXT PRIMARY KEY REFERENCES assignments(id),
        units INTEGER NOT NULL DEFAULT 0,
        done INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,      -- failed or cancelled
        queued INTEGER NOT NULL DEFAULT 0,
        moves INTEGER NOT NULL DEFAULT 0,
        verified INTEGER NOT NULL DEFAULT 0,    -- checked and done
        progress REAL NOT NULL DEFAULT 0        -- a done unit's 1, any other's stored progress
    )""",
    """INSERT INTO unit_tallies
        SELECT assignment_id, COUNT(*), SUM(state = 'done'), SUM(state IN ('failed', 'cancelled')),
            SUM(state = 'queued'), SUM(moves), SUM(checked AND state = 'done'),
            TOTAL(CASE WHEN state = 'done' THEN 1.0 ELSE progress END)
        FROM units GROUP BY assignment_id""",
    """CREATE TRIGGER unit_recounted AFTER UPDATE OF state, moves, checked, progress ON units BEGIN
        UPDATE unit_tallies SET done = done + (NEW.state = 'done') - (OLD.state = 'done'),
            failed = failed + (NEW.state IN ('failed', 'cancelled')) - (OLD.state IN ('failed', 'cancelled')),
            queued = queued + (NEW.state = 'queued') - (OLD.state = 'queued'), moves = moves + NEW.moves - OLD.moves,
            verified = verified + (NEW.checked AND NEW.state = 'done') - (OLD.checked AND OLD.state = 'done'),
            progress = progress + (CASE WHEN NEW.state = 'done' THEN 1.0 ELSE NEW.progress END)
                                - (CASE WHEN OLD.state = 'done' THEN 1.0 ELSE OLD.progress END)
        WHERE assignment_id = NEW.assignment_id;
    END""",
)
"""Each assignment's units counted as they change, by a trigger in the transaction that changes them: counting a
100,000-unit sweep's rows for every listing took 44 ms of the node's event loop, up to twice a second while a UI
watched, and grew with the sweep. Made once, from the units already there, with the trigger, in one transaction.
Units are added only by `create_assignment`, which writes their tally with them (a trigger per row made a
100,000-unit submit 190 ms longer), and never deleted."""

_ADDED_COLUMNS = (
    ("assignments", "one_per_host", "INTEGER NOT NULL DEFAULT 0"),
    ("assignments", "inputs", "BLOB"),  # CBOR list of [name, sha256, size]; NULL: none
    ("assignments", "submitter", "TEXT NOT NULL DEFAULT ''"),  # identity.submitter_id; '' until migrated
    ("units", "cpu_seconds", "REAL NOT NULL DEFAULT 0"),       # the accepted copy's guest CPU time
    ("units", "finished_at", "REAL"),                          # wall time its result was accepted
    ("assignments", "verify", "REAL NOT NULL DEFAULT 0"),      # the fraction of units checked by a second host
    ("units", "checked", "INTEGER NOT NULL DEFAULT 0"),        # 1: its result must come twice alike (verification)
    ("assignments", "check_interval", "REAL"),      # a gang's submitted seconds between checks; NULL: [gang] option
    ("assignments", "check_supersteps", "INTEGER"),  # a gang's submitted supersteps between checks; NULL: [gang] option
    ("assignments", "check_forced", "INTEGER NOT NULL DEFAULT 0"),  # 1: each of a gang's checks restarts it on the best p
    ("assignments", "gang_members", "INTEGER NOT NULL DEFAULT 0"),  # a gang's p (0: units, or a gang stored before it)
)


class UnknownAssignmentError(FrostError):
    title = "Unknown assignment"


@dataclass(frozen=True)
class UnitRecord:
    assignment_id: str
    index: int
    data: dict[str, Any]
    memory_bytes: int
    cost: float
    state: str          # queued, running, done, failed, cancelled (the last three settle it)
    host: str
    epoch: int
    failures: int       # failed runs so far; bounded by guests.max_retries
    moves: int
    progress: float
    error: str | None
    inputs: tuple[InputFile, ...] = ()  # the assignment's input files
    submitter: str = ""                 # who submitted the assignment (`identity.submitter_id`)
    checked: bool = False               # chosen for verification: done once two hosts' results agree
    copied_on: tuple[str, ...] = ()     # hosts whose result of it is in (a checked unit's copies so far)

    @property
    def task_id(self) -> str:
        return f"{self.assignment_id}.{self.index}"


def split_task_id(task_id: str) -> tuple[str, int]:
    """(assignment id, unit index) of a task id; UnknownAssignmentError if it is not one."""
    assignment_id, _, index = task_id.rpartition(".")
    if not assignment_id or not index.isdigit():
        raise UnknownAssignmentError(f"{task_id!r} is not a task id (ASSIGNMENT.UNIT)")
    return assignment_id, int(index)


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
    one_per_host: bool = False
    """FROST's rule: at most one unit of this assignment per host (otherwise one per free core)."""
    inputs: tuple[InputFile, ...] = ()
    waste: tuple[tuple[str, float], ...] = ()
    """Guest-seconds thrown away, by reason (`master.waste`), largest first."""
    submitter: str = ""
    verify: float = 0.0
    """The fraction of units asked to be checked by a second host (`master.verification`)."""
    check_interval: float | None = None
    check_supersteps: int | None = None
    """A gang's check cadence as its submitter gave it (0: off), kept for a restart; None: the node's [gang] option."""
    check_forced: bool = False
    """Whether each of the gang's checks restarts it on the best p (`submit --check-every ...,forced`)."""
    gang_members: int = 0
    """A gang's p: a gang has no units, and its coordinator's view of its members lives only while it runs."""

    @property
    def verified(self) -> int:
        """Units whose result two hosts agreed on."""
        return sum(1 for u in self.units if u.checked and u.state == "done")

    @property
    def wasted_seconds(self) -> float:
        return sum(seconds for _, seconds in self.waste)


@dataclass(frozen=True)
class UnitTally:
    """All of an assignment's units counted, for a screen that lists a window of them (`MasterStore.listing`)."""

    count: int
    done: int
    failed: int                              # failed or cancelled
    queued: int
    moves: int
    verified: int                            # checked units whose result two hosts agreed on
    progress: float                          # summed as stored: a done unit's 1, a running one's as last reported
    running: tuple[tuple[int, float], ...]   # (index, stored progress) of each running unit

    @classmethod
    def of(cls, units: Sequence[UnitRecord]) -> UnitTally:
        """The tally of all of `units` (an assignment's, in index order)."""
        return cls(count=len(units), done=sum(1 for u in units if u.state == "done"),
                   failed=sum(1 for u in units if u.state in ("failed", "cancelled")),
                   queued=sum(1 for u in units if u.state == "queued"), moves=sum(u.moves for u in units),
                   verified=sum(1 for u in units if u.checked and u.state == "done"),
                   progress=sum(1.0 if u.state == "done" else u.progress for u in units),
                   running=tuple((u.index, u.progress) for u in units if u.state == "running"))


@dataclass(frozen=True)
class Listed:
    """An assignment as a screen lists it: its record with some of its units (`MasterStore.listing` says which), and
    the tally of all of them."""

    record: AssignmentRecord
    tally: UnitTally


@dataclass(frozen=True)
class NewUnit:
    """A unit as the plugin's split declared it."""

    data: dict[str, Any]
    memory_bytes: int
    cost: float


@dataclass(frozen=True)
class Placement:
    """A queued unit to run on `host`."""

    assignment_id: str
    index: int
    host: str


@dataclass(frozen=True)
class Delivery:
    """A unit's result as a host delivered it (`accept_result` says what each field means)."""

    assignment_id: str
    index: int
    epoch: int
    result: bytes
    files: dict[str, bytes] | None = None
    cpu_seconds: float = 0.0


class MasterStore:
    """One SQLite file per node, used from the node's trio thread, except `create_assignment`, `place_units`,
    `accept_results`, `record_copy`, `settle_unchecked` and `finish_assignment`, which any one thread may call
    (they write on a connection of their own): the node runs them off its event loop, which would otherwise
    wait for their fsync. `result`, `unit_files`, `unit_results`, `assignment`, `found` and `searchable_units`,
    which exports, the combine and queries that go through every unit read in worker threads, also read on a
    connection of their own: a read on the loop's connection may run inside the snapshot of a statement the
    loop has in progress, and so not see a commit made on another connection a moment before (an assignment
    just finished read back as still running)."""

    def __init__(self, path: Path, *, node_id: str, submitter: str = "") -> None:
        """`submitter`: who submits here (`identity.submitter_id`); assignments stored before submitters
        were recorded are this node's owner's, and take it."""
        self._path = path
        self._db = open_durably(path, _SCHEMA)
        self._submitter = submitter
        with disk_writes(self._path):
            self._add_missing_columns()
            self._add_tallies()
            if self._db.execute("PRAGMA user_version").fetchone()[0] < 2:
                self._move_results_out()
            if submitter:
                with self._db:
                    self._db.execute("UPDATE assignments SET submitter = ? WHERE submitter = ''", (submitter,))
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._prefix = node_id[:8]
        self._version = 0        # grows with every write: the node rebuilds snapshots up to ten times a second
        self._shown: tuple[int, int, list[Listed]] | None = None   # the last `listing`, at (_version, rows)
        self._settled_listed: dict[tuple[str, int], Listed] = {}
        """The listing of each SETTLED assignment, read once: only its waste can change it still."""
        self._batches = open_durably(path, _SCHEMA)
        self._batching = threading.Lock()        # one batch at a time on its connection
        self._reads = open_durably(path, _SCHEMA)
        self._reading = threading.Lock()         # one read at a time on it (a query, or `_snapshot`'s few)
        self.index = UnitIndex()
        self._load_index(self._db)

    def close(self) -> None:
        self._reads.close()
        self._batches.close()
        self._db.close()

    def _load_index(self, db: sqlite3.Connection) -> None:
        for row in db.execute(
                "SELECT id, seq, plugin, plugin_version, plugin_hash, one_per_host, submitter, inputs FROM assignments"
                " WHERE state IN ('running', 'combining')"):
            self.index.add_assignment(_head_from_row(row))
        for assignment_id, index, state, host, epoch in db.execute(
                "SELECT u.assignment_id, u.idx, u.state, u.host, u.epoch FROM units u JOIN assignments a"
                " ON a.id = u.assignment_id WHERE u.state != 'done' AND a.state IN ('running', 'combining')"):
            if state == "queued":
                self.index.queue(assignment_id, index)
            elif state == "running":
                self.index.run(assignment_id, index, host=host, epoch=epoch)
            else:  # failed for good, its assignment's failure not stored yet (a crash between the two)
                self.index.finish(assignment_id, index, failed=True)

    def _move_results_out(self) -> None:
        """A database from before schema 2: its results move to their own tables, and their old columns are
        emptied (not dropped: that would rewrite both tables), in one transaction."""
        moves = []
        units = {row[1] for row in self._db.execute("PRAGMA table_info(units)")}
        if "result" in units:
            files = "files" if "files" in units else "NULL"
            moves += [f"INSERT OR IGNORE INTO unit_results (assignment_id, idx, result, files)"
                      f" SELECT assignment_id, idx, result, {files} FROM units WHERE result IS NOT NULL",
                      "UPDATE units SET result = NULL" + (", files = NULL" if "files" in units else "")
                      + " WHERE result IS NOT NULL"]
        if "result" in {row[1] for row in self._db.execute("PRAGMA table_info(assignments)")}:
            moves += ["INSERT OR IGNORE INTO assignment_results (id, result)"
                      " SELECT id, result FROM assignments WHERE result IS NOT NULL",
                      "UPDATE assignments SET result = NULL WHERE result IS NOT NULL"]
        with transaction(self._db, self._path):
            for statement in moves:
                self._db.execute(statement)

    def _add_missing_columns(self) -> None:
        """Columns added after a database was created are added to it, with their defaults."""
        for table, column, declaration in _ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    def _add_tallies(self) -> None:
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'unit_tallies'").fetchone():
            return
        with transaction(self._db, self._path):
            for statement in _TALLIES:
                self._db.execute(statement)

    @contextmanager
    def _transaction(self, db: sqlite3.Connection | None = None, *,
                     index_locked: ExitStack | None = None) -> Iterator[sqlite3.Connection]:
        """One transaction; the index changes inside it, under its lock: in the order of the commits. A
        StorageError (the disk refused the commit) leaves the file and the index as they were before it.
        `index_locked`: the body locks the index there itself (`enter_context(index.lock)`) once its rows are
        written, rather than for the whole transaction: a 100,000-unit submit locked it, and the event loop
        waiting for it, 0.4 s. (The lock goes before the COMMIT's fsync, which other writers wait for anyway.)"""
        db = self._db if db is None else db
        try:
            with transaction(db, self._path), ExitStack() as held:
                held.enter_context(index_locked or self.index.lock)
                yield db
        except BaseException:
            with self.index.lock:  # it may have followed a change that is now undone
                self.index.clear()
                self._load_index(db)
            raise
        self._version += 1

    # -- assignments -------------------------------------------------------------------

    def create_assignment(
        self, *, plugin: str, plugin_version: str, plugin_hash: str,
        params: dict[str, Any], units: list[NewUnit], now: float | None = None, one_per_host: bool = False,
        inputs: tuple[InputFile, ...] = (), submitter: str | None = None, verify: float = 0.0,
        checked: frozenset[int] = frozenset(), cadence: tuple[float | None, int | None] = (None, None),
        forced: bool = False, gang_members: int = 0,
    ) -> str:
        """Store an assignment and all its units as queued, atomically; return its id.

        The id carries this node's id so it stays unique across the cluster and says who
        its master is wherever its units run. `cadence`: a gang's submitted (check_interval,
        check_supersteps), None for each left to the node's [gang] options, and whether its checks are
        `forced`, kept for a restart; `gang_members`: a gang's p (it has no units).
        """
        now = time.time() if now is None else now
        with self._batching, ExitStack() as index_locked, self._transaction(self._batches,
                                                                          index_locked=index_locked) as db:
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM assignments").fetchone()
            assignment_id = f"{self._prefix}-{seq}"
            db.execute(
                "INSERT INTO assignments (id, seq, plugin, plugin_version, plugin_hash, params, state, created_at,"
                " one_per_host, inputs, submitter, verify, check_interval, check_supersteps, check_forced,"
                " gang_members)"
                " VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (assignment_id, seq, plugin, plugin_version, plugin_hash, cbor2.dumps(params), now, int(one_per_host),
                 _encode_inputs(inputs), self._submitter if submitter is None else submitter, verify, *cadence,
                 int(forced), gang_members),
            )
            db.executemany(   # each row made as it is inserted: a list of 100,000 of them took 6 MB more at once
                "INSERT INTO units (assignment_id, idx, data, memory_bytes, cost, state, checked)"
                " VALUES (?, ?, ?, ?, ?, 'queued', ?)",
                ((assignment_id, i, cbor2.dumps(u.data), u.memory_bytes, u.cost, int(i in checked))
                 for i, u in enumerate(units)),
            )
            db.execute("INSERT INTO unit_tallies (assignment_id, units, queued) VALUES (?, ?, ?)",
                       (assignment_id, len(units), len(units)))
            index_locked.enter_context(self.index.lock)
            self.index.add_assignment(self._head(db, assignment_id), range(len(units)))
        return assignment_id

    def head(self, assignment_id: str) -> AssignmentHead:
        """An assignment without its units: from the index while its units may still be placed (a head never
        changes: the master asks for it once per result), else its one row."""
        return self.index.head(assignment_id) or self._head(self._db, assignment_id)

    def _head(self, db: sqlite3.Connection, assignment_id: str) -> AssignmentHead:
        row = db.execute(
            "SELECT id, seq, plugin, plugin_version, plugin_hash, one_per_host, submitter, inputs FROM assignments"
            " WHERE id = ?", (assignment_id,)).fetchone()
        if row is None:
            raise UnknownAssignmentError(f"no assignment {assignment_id!r} on this node")
        return _head_from_row(row)

    def assignment(self, assignment_id: str) -> AssignmentRecord:
        """The assignment with every unit, read whole in one transaction; any one thread may call it (a
        100,000-unit sweep takes 0.6 s: the node reads it in a worker thread)."""
        with self._snapshot() as db:
            return self._assignment_from_row(db, self._assignment_row(db, assignment_id))

    def assignment_count(self) -> int:
        (count,) = self._db.execute("SELECT COUNT(*) FROM assignments").fetchone()
        return count

    def assignments(self) -> list[AssignmentRecord]:
        """Every assignment with all its units, read now: what a query asks for (a screen lists with `listing`)."""
        rows = self._db.execute(f"SELECT {_ASSIGNMENT_COLUMNS} FROM assignments ORDER BY seq").fetchall()
        return [self._assignment_from_row(self._db, row) for row in rows]

    def done_assignments(self) -> list[str]:
        """The ids of the assignments whose combined result is stored, oldest first."""
        return [row[0] for row in self._db.execute("SELECT id FROM assignments WHERE state = 'done' ORDER BY seq")]

    def listing(self, rows: int) -> list[Listed]:
        """Every assignment with `rows` of its units and the tally of all, for a screen: a running 10,000-unit
        sweep's every row read for each snapshot was most of what the node spent on one (23 ms); the tally is
        kept as the units change (`_TALLIES`). The units are every running one, then the others not done by
        number, then the last done, in index order: a straggler (a unit paused on a desk for an hour) and the
        sweep's front both show, however far apart, where a window from the first unit not done showed the
        straggler and the 199 done units after it. A settled assignment is read once and kept."""
        if self._shown is not None and self._shown[:2] == (self._version, rows):
            return list(self._shown[2])
        listed = []
        for row in self._db.execute(f"SELECT {_ASSIGNMENT_COLUMNS} FROM assignments ORDER BY seq").fetchall():
            kept = self._settled_listed.get((row[0], rows))
            if kept is None:
                kept = self._listed_from_row(self._db, row, rows)
                if kept.record.state in SETTLED:
                    self._settled_listed[(row[0], rows)] = kept
            listed.append(kept)
        self._shown = (self._version, rows, listed)
        return list(listed)

    def result(self, assignment_id: str) -> tuple[bytes, str, str]:
        """The combined output: (data, media type, suggested file name). Any one thread may call it."""
        row = self._read_one("SELECT a.state, r.result, a.result_media_type, a.result_filename FROM assignments a"
                             " LEFT JOIN assignment_results r ON r.id = a.id WHERE a.id = ?", (assignment_id,))
        if row is None:
            raise UnknownAssignmentError(f"no assignment {assignment_id!r} on this node")
        state, data, media_type, filename = row
        if state in ("cancelled", "failed"):   # (it never will: a failed one's error says why)
            raise FrostError(f"assignment {assignment_id} {state}: it has no result", title="No result")
        if state != "done":
            raise FrostError(f"assignment {assignment_id} has no result yet (it is {state})", title="No result yet")
        return data, media_type or "application/octet-stream", filename or assignment_id

    def unit_results(self, assignment_id: str) -> list[Any]:
        """Decoded unit results in unit order: what the plugin's combine receives. Any one thread may call it."""
        with self._snapshot() as db:
            rows = db.execute(
                "SELECT r.result FROM units u LEFT JOIN unit_results r ON r.assignment_id = u.assignment_id"
                " AND r.idx = u.idx WHERE u.assignment_id = ? ORDER BY u.idx", (assignment_id,)).fetchall()
        return [cbor2.loads(result) for (result,) in rows]

    def unit_files(self, assignment_id: str) -> Iterator[dict[str, bytes]]:
        """Each unit's output files in unit order, decoded one unit at a time (they may be large). Any one
        thread may call it."""
        (count,) = self._read_one("SELECT COUNT(*) FROM units WHERE assignment_id = ?", (assignment_id,))
        for index in range(count):
            row = self._read_one("SELECT files FROM unit_results WHERE assignment_id = ? AND idx = ?",
                                 (assignment_id, index))
            yield {} if row is None or row[0] is None else cbor2.loads(row[0])

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """The read connection, for one thread at a time, in a transaction: each query of a read that takes several
        sees the database as the first found it. It writes nothing, so it ends with a rollback."""
        with self._reading:
            self._reads.execute("BEGIN")
            try:
                yield self._reads
            finally:
                self._reads.execute("ROLLBACK")

    def _read_one(self, query: str, parameters: tuple) -> tuple | None:
        with self._reading:
            return self._reads.execute(query, parameters).fetchone()

    def finish_assignment(self, assignment_id: str, *, data: bytes, media_type: str, filename: str) -> bool:
        """Store the combined output; False, storing nothing, if the assignment was cancelled while it combined."""
        with self._batching, self._transaction(self._batches) as db:
            stored = db.execute(
                "UPDATE assignments SET state = 'done', finished_at = ?, result_media_type = ?, result_filename = ?"
                " WHERE id = ? AND state IN ('running', 'combining')",
                (time.time(), media_type, filename, assignment_id),
            ).rowcount == 1
            if stored:
                db.execute("INSERT OR REPLACE INTO assignment_results (id, result) VALUES (?, ?)", (assignment_id, data))
            self.index.close_assignment(assignment_id)
        return stored

    def fail_assignment(self, assignment_id: str, error: str, *, failed_unit: tuple[int, str] | None = None,
                        standing: Mapping[int, float] | None = None) -> None:
        """`failed_unit`: (index, error) of a unit that failed the assignment and is not stored as failed yet;
        `standing`: each placed unit's last reported progress, by index (`_keep_standing`).

        Only a unit that failed reads "failed"; the others it stopped read "cancelled", so the owner looking for
        the culprit among a sweep's units finds one failed row with its error, not a column of unexplained ones."""
        with self._transaction() as db:
            _keep_standing(db, assignment_id, standing)
            db.execute(
                "UPDATE assignments SET state = 'failed', finished_at = ?, error = ? WHERE id = ? AND state IN ('running', 'combining')",
                (time.time(), error, assignment_id),
            )
            if failed_unit is not None:
                db.execute("UPDATE units SET state = 'failed', error = ? WHERE assignment_id = ? AND idx = ?"
                           " AND state NOT IN ('done', 'failed')", (failed_unit[1], assignment_id, failed_unit[0]))
            db.execute("UPDATE units SET state = 'cancelled' WHERE assignment_id = ? AND state NOT IN ('done', 'failed')",
                       (assignment_id,))
            self.index.close_assignment(assignment_id)

    def cancel_assignment(self, assignment_id: str, *, standing: Mapping[int, float] | None = None) -> AssignmentRecord:
        """`standing`: each placed unit's last reported progress, by index (`_keep_standing`)."""
        record = self.assignment(assignment_id)
        if record.state not in ("running", "combining"):
            raise FrostError(f"assignment {assignment_id} is already {record.state}", title="Cannot cancel")
        with self._transaction() as db:
            _keep_standing(db, assignment_id, standing)
            db.execute(
                "UPDATE assignments SET state = 'cancelled', finished_at = ? WHERE id = ?", (time.time(), assignment_id)
            )
            db.execute("UPDATE units SET state = 'cancelled' WHERE assignment_id = ? AND state != 'done'", (assignment_id,))
            self.index.close_assignment(assignment_id)
        return self.assignment(assignment_id)

    # -- units -------------------------------------------------------------------------

    def queued_units(self) -> list[UnitRecord]:
        """Units waiting for a host, oldest assignment first, in unit order."""
        rows = self._db.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units u JOIN assignments a ON a.id = u.assignment_id"
            " WHERE u.state = 'queued' AND a.state = 'running' ORDER BY a.seq, u.idx"
        ).fetchall()
        return [_unit_from_row(row) for row in rows]

    def queued(self, assignment_id: str, count: int) -> list[UnitRecord]:
        """The first `count` queued units of an assignment, in unit order: only their rows are read."""
        indices = self.index.first_queued(assignment_id, count)
        if not indices:
            return []
        rows = self._db.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units u WHERE u.assignment_id = ? AND u.idx IN"
            f" ({', '.join('?' * len(indices))}) AND u.state = 'queued' ORDER BY u.idx", (assignment_id, *indices),
        ).fetchall()
        return [_unit_from_row(row) for row in rows]

    def running_units(self) -> list[Placed]:
        return self.index.running()

    def place_unit(self, assignment_id: str, index: int, *, host: str) -> int:
        """Mark a queued unit as running on `host` under a new ownership epoch; return the epoch.

        The epoch grows at every placement, so a stale copy of the unit that comes back
        later can be told apart and its result refused.
        """
        (epoch,) = self.place_units([Placement(assignment_id, index, host)])
        if epoch is None:
            raise FrostError(f"unit {assignment_id}.{index} is not queued", title="Cannot place unit")
        return epoch

    def place_units(self, placements: list[Placement]) -> list[int | None]:
        """`place_unit` for a batch, in one transaction: each unit's new epoch, None for one no longer queued."""
        with self._batching, self._transaction(self._batches) as db:
            epochs: list[int | None] = []
            for p in placements:
                row = db.execute("SELECT epoch, state FROM units WHERE assignment_id = ? AND idx = ?",
                                 (p.assignment_id, p.index)).fetchone()
                if row is None or row[1] != "queued":
                    epochs.append(None)
                    continue
                epochs.append(row[0] + 1)
                db.execute(
                    "UPDATE units SET state = 'running', host = ?, epoch = ?,"
                    " moves = moves + (CASE WHEN host != '' AND host != ? THEN 1 ELSE 0 END)"
                    " WHERE assignment_id = ? AND idx = ?",
                    (p.host, row[0] + 1, p.host, p.assignment_id, p.index),
                )
                self.index.run(p.assignment_id, p.index, host=p.host, epoch=row[0] + 1)
        return epochs

    def accept_result(
        self, assignment_id: str, index: int, *, epoch: int, result: bytes, files: dict[str, bytes] | None = None,
        cpu_seconds: float = 0.0,
    ) -> bool:
        """Store a unit's result once: the first complete result wins, whatever copy it came from.

        A unit's result is the same wherever and from whichever checkpoint it ran, so a copy
        given up earlier (its host was cut off, then came back with the work done) is as good as
        the current one, and better, since it is here first; the newer copies are stopped at their
        next report. A result from an epoch newer than the stored one comes from a move this master
        had not heard of yet. Only a second result, or one for a cancelled assignment, is refused.
        Returns True when this call completed the unit; the check and the write are one
        transaction, so two deliveries racing each other cannot both be accepted. `cpu_seconds` (the
        accepted copy's guest CPU time) is kept with the time of acceptance: its submitter's usage.
        """
        (accepted,) = self.accept_results([Delivery(assignment_id, index, epoch, result, files, cpu_seconds)])
        return accepted

    def accept_results(self, deliveries: list[Delivery]) -> list[bool]:
        """`accept_result` for results that arrived together, in one transaction (one fsync): each accepted?"""
        with self._batching, self._transaction(self._batches) as db:
            accepted = []
            for d in deliveries:
                cursor = db.execute(
                    "UPDATE units SET state = 'done', progress = 1.0, error = NULL, cpu_seconds = ?, finished_at = ?"
                    " WHERE assignment_id = ? AND idx = ? AND epoch >= 1 AND ? >= 1 AND state IN ('running', 'queued')"
                    " AND EXISTS (SELECT 1 FROM assignments a WHERE a.id = assignment_id AND a.state = 'running')",
                    (max(d.cpu_seconds, 0.0), time.time(), d.assignment_id, d.index, d.epoch),
                )
                accepted.append(cursor.rowcount == 1)
                if cursor.rowcount == 1:
                    db.execute("INSERT OR REPLACE INTO unit_results (assignment_id, idx, result, files) VALUES (?, ?, ?, ?)",
                               (d.assignment_id, d.index, d.result,
                                cbor2.dumps(d.files, canonical=True) if d.files else None))
                    self.index.finish(d.assignment_id, d.index)
            for assignment_id in {d.assignment_id for d, taken in zip(deliveries, accepted) if taken}:
                if not self.index.has_units_left(assignment_id):   # its last result: combining, in this commit
                    db.execute("UPDATE assignments SET state = 'combining' WHERE id = ? AND state = 'running'",
                               (assignment_id,))
        return accepted

    def record_copy(
        self, assignment_id: str, index: int, *, epoch: int, host: str, result: bytes,
        files: dict[str, bytes] | None = None, cpu_seconds: float = 0.0,
    ) -> Decision | None:
        """Keep one host's result of a checked unit and decide (`verification.decide`), in one transaction.

        None when this copy is not the current one (stale, or the unit is no longer open). Agreed: the
        majority's result becomes the unit's and it is done. Otherwise it waits in the queue for another
        host's copy (placed on none that already sent one). Any one thread may call it, as `place_units`.
        """
        with self._batching, self._transaction(self._batches) as db:
            row = db.execute(
                "SELECT u.epoch, u.state, a.state FROM units u JOIN assignments a ON a.id = u.assignment_id"
                " WHERE u.assignment_id = ? AND u.idx = ?", (assignment_id, index)).fetchone()
            if row is None or row[1] not in ("running", "queued") or row[2] != "running" or epoch != row[0]:
                return None
            db.execute("INSERT INTO unit_copies (assignment_id, idx, host, sha256, result, files) VALUES (?, ?, ?, ?, ?, ?)",
                       (assignment_id, index, host, hashlib.sha256(result).hexdigest(), result,
                        cbor2.dumps(files, canonical=True) if files else None))
            copies = db.execute("SELECT host, sha256 FROM unit_copies WHERE assignment_id = ? AND idx = ? ORDER BY rowid",
                                (assignment_id, index)).fetchall()
            decision = decide(tuple((h, sha) for h, sha in copies))
            if decision.agreed is not None:
                db.execute(
                    "UPDATE units SET state = 'done', progress = 1.0, error = NULL, cpu_seconds = cpu_seconds + ?,"
                    " finished_at = ? WHERE assignment_id = ? AND idx = ?",
                    (max(cpu_seconds, 0.0), time.time(), assignment_id, index))
                _take_copy(db, assignment_id, index, " AND sha256 = ?", (decision.agreed,))
                self.index.finish(assignment_id, index)
            else:
                db.execute("UPDATE units SET state = 'queued', progress = 0, cpu_seconds = cpu_seconds + ?"
                           " WHERE assignment_id = ? AND idx = ?", (max(cpu_seconds, 0.0), assignment_id, index))
                self.index.queue(assignment_id, index)
            return decision

    def settle_unchecked(self, assignment_id: str, index: int) -> bool:
        """A checked unit with one copy in and no other host to run it: take that copy's result as it is,
        no longer counted as checked (its assignment's summary says fewer units verified). Any one thread
        may call it, as `place_units`."""
        with self._batching, self._transaction(self._batches) as db:
            cursor = db.execute(
                "UPDATE units SET state = 'done', checked = 0, progress = 1.0, error = NULL, finished_at = ?"
                " WHERE assignment_id = ? AND idx = ? AND state = 'queued'"
                " AND (SELECT COUNT(*) FROM unit_copies c WHERE c.assignment_id = units.assignment_id"
                " AND c.idx = units.idx) = 1", (time.time(), assignment_id, index))
            if cursor.rowcount == 1:
                _take_copy(db, assignment_id, index, "", ())
                self.index.finish(assignment_id, index)
            return cursor.rowcount == 1

    def confirm_location(self, assignment_id: str, index: int, *, epoch: int, host: str) -> bool:
        """A host reports it runs the unit at `epoch`: True if that copy is the current one.

        A newer epoch than the stored one is a move this master missed (it adopts it); the same
        epoch on another host loses to the stored host, so two copies never both go on.
        """
        location = self._location(self._db, assignment_id, index)
        if location is None or epoch <= location[0]:  # the common case: a read, no write lock, no commit
            return location == (epoch, host, "running")
        with self._transaction() as db:
            location = self._location(db, assignment_id, index)
            if location is None or epoch <= location[0]:  # changed meanwhile: judged as it is now
                return location == (epoch, host, "running")
            db.execute(
                "UPDATE units SET epoch = ?, host = ?, state = 'running',"
                " moves = moves + (CASE WHEN host != ? THEN 1 ELSE 0 END) WHERE assignment_id = ? AND idx = ?",
                (epoch, host, host, assignment_id, index),
            )
            self.index.run(assignment_id, index, host=host, epoch=epoch)
            return True

    def _location(self, db: sqlite3.Connection, assignment_id: str, index: int) -> tuple | None:
        """(epoch, host, state) of a unit still waiting or running in a running assignment, else None."""
        row = db.execute(
            "SELECT u.epoch, u.host, u.state, a.state FROM units u JOIN assignments a ON a.id = u.assignment_id"
            " WHERE u.assignment_id = ? AND u.idx = ?", (assignment_id, index),
        ).fetchone()
        if row is None or row[2] not in ("running", "queued") or row[3] != "running":
            return None
        return row[:3]

    def holds_result(self, assignment_id: str, index: int, result: bytes) -> bool:
        """Whether the unit is done with exactly this result: a delivery repeated (its answer was lost), or
        another copy's identical result; either way nothing to take and nothing wrong."""
        row = self._db.execute("SELECT u.state, r.result FROM units u LEFT JOIN unit_results r"
                               " ON r.assignment_id = u.assignment_id AND r.idx = u.idx"
                               " WHERE u.assignment_id = ? AND u.idx = ?", (assignment_id, index)).fetchone()
        return row is not None and row[0] == "done" and row[1] == result

    def readopt(self, assignment_id: str, index: int, *, epoch: int, host: str) -> bool:
        """A unit queued after its copy at `epoch` on `host` was given up: that copy still runs, so keep it.

        Only while the unit waits in the queue under that same epoch: once placed again, the newer
        epoch owns it and the old copy is stopped at its next report.
        """
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'running' WHERE assignment_id = ? AND idx = ? AND epoch = ? AND host = ?"
                " AND state = 'queued'",
                (assignment_id, index, epoch, host),
            )
            if cursor.rowcount == 1:
                self.index.run(assignment_id, index, host=host, epoch=epoch)
            return cursor.rowcount == 1

    def add_waste(self, assignment_id: str, index: int, *, epoch: int, reason: str, seconds: float) -> None:
        """Count guest-seconds thrown away by the copy at `epoch` of a unit (`master.waste` says why)."""
        if seconds <= 0:
            return
        self._forget_settled(assignment_id)
        with self._transaction() as db:
            db.execute("INSERT INTO waste (assignment_id, idx, epoch, reason, seconds) VALUES (?, ?, ?, ?, ?)",
                       (assignment_id, index, epoch, reason, seconds))

    def withdraw_waste(self, assignment_id: str, index: int, *, reason: str) -> None:
        """Take back a unit's waste of one kind: the work it counted was kept after all."""
        self._forget_settled(assignment_id)
        with self._transaction() as db:
            db.execute("DELETE FROM waste WHERE assignment_id = ? AND idx = ? AND reason = ?",
                       (assignment_id, index, reason))

    def _forget_settled(self, assignment_id: str) -> None:
        """A settled assignment's waste changes: its listing is read again."""
        for key in [key for key in self._settled_listed if key[0] == assignment_id]:
            del self._settled_listed[key]

    def requeue_unit(self, assignment_id: str, index: int, *, epoch: int, progress: float,
                     error: str | None = None) -> bool:
        """Send a running unit back to the queue: evicted, or (with `error`) failed and worth a retry.
        `progress`: what the checkpoint it will go on from holds (0: it starts afresh)."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'queued', error = ?, failures = failures + ?, progress = ?"
                " WHERE assignment_id = ? AND idx = ? AND epoch = ? AND state = 'running'",
                (error, 0 if error is None else 1, progress, assignment_id, index, epoch),
            )
            if cursor.rowcount == 1:
                self.index.queue(assignment_id, index)
            return cursor.rowcount == 1

    def fail_unit(self, assignment_id: str, index: int, *, epoch: int, error: str) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE units SET state = 'failed', error = ?, failures = failures + 1"
                " WHERE assignment_id = ? AND idx = ? AND epoch = ? AND state = 'running'",
                (error, assignment_id, index, epoch),
            )
            if cursor.rowcount == 1:
                self.index.finish(assignment_id, index, failed=True)
            return cursor.rowcount == 1

    def requeue_hosted_by(self, host: str) -> list[UnitRecord]:
        """Queue again the running units `host` holds (it died, or this node restarted); return them."""
        with self._transaction() as db:
            rows = db.execute(
                f"SELECT {_UNIT_COLUMNS} FROM units u WHERE u.state = 'running' AND u.host = ?", (host,)
            ).fetchall()
            db.execute("UPDATE units SET state = 'queued' WHERE state = 'running' AND host = ?", (host,))
            for row in rows:
                self.index.queue(row[0], row[1])
        return [_unit_from_row(row) for row in rows]

    def unit(self, assignment_id: str, index: int) -> UnitRecord:
        row = self._db.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units u WHERE u.assignment_id = ? AND u.idx = ?", (assignment_id, index)
        ).fetchone()
        if row is None:
            raise UnknownAssignmentError(f"no unit {assignment_id}.{index} on this node")
        return _unit_from_row(row)

    def mark_combining(self, assignment_id: str) -> None:
        """Store that an assignment's units are all done; a read and no commit where the transaction that
        accepted its last result did so already (`accept_results`)."""
        row = self._db.execute("SELECT state FROM assignments WHERE id = ?", (assignment_id,)).fetchone()
        if row is None or row[0] != "running":
            return
        with self._transaction() as db:
            db.execute("UPDATE assignments SET state = 'combining' WHERE id = ? AND state = 'running'", (assignment_id,))

    def combining_assignments(self) -> list[str]:
        """Assignments whose units are all done but whose combined result is not stored yet."""
        return self.index.idle()

    def accepted_cpu(self, since: float) -> list[tuple[str, str, float, float]]:
        """(submitter, host, CPU-seconds, accepted at) of every unit result accepted since `since` (wall time):
        what this master's submitters used of the cluster (`master.usage` weighs it)."""
        return self._db.execute(
            "SELECT a.submitter, u.host, u.cpu_seconds, u.finished_at FROM units u"
            " JOIN assignments a ON a.id = u.assignment_id"
            " WHERE u.finished_at >= ? AND u.cpu_seconds > 0", (since,)).fetchall()

    # -- owner intents -----------------------------------------------------------------

    def intent(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM intents WHERE key = ?", (key,)).fetchone()
        return default if row is None else cbor2.loads(row[0])

    def set_intents(self, values: dict[str, Any]) -> None:
        """Remember what the owner asked for (pause, pause until, finish) across restarts, all or nothing."""
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO intents (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [(key, cbor2.dumps(value)) for key, value in values.items()],
            )

    # -- rows --------------------------------------------------------------------------

    def _assignment_from_row(self, db: sqlite3.Connection, row: tuple) -> AssignmentRecord:
        units = db.execute(
            f"SELECT {_LISTED_UNIT_COLUMNS} FROM units u WHERE u.assignment_id = ? ORDER BY u.idx",
            (row[12], row[13], row[0]),
        ).fetchall()
        return self._record_from_row(db, row, tuple(_unit_from_row(unit) for unit in units))

    def listed(self, assignment_id: str, rows: int) -> Listed:
        """One assignment as `listing` lists it, read now."""
        return self._listed_from_row(self._db, self._assignment_row(self._db, assignment_id), rows)

    def _listed_from_row(self, db: sqlite3.Connection, row: tuple, rows: int) -> Listed:
        tally = self._tally(db, row[0])
        shown = self._units_at(db, row, self._shown_indexes(db, row[0], rows, tally))
        return Listed(self._record_from_row(db, row, shown), tally)

    def _shown_indexes(self, db: sqlite3.Connection, assignment_id: str, rows: int, tally: UnitTally) -> list[int]:
        """The indexes of the `rows` units `listing` shows of the assignment (its docstring says which), each read
        from `units_by_state` by state and number: a limit on a query of every unit not done walked all of them."""
        shown = [index for index, _ in tally.running[:rows]]
        waiting = []
        for state in _WAITING:
            waiting += [index for (index,) in db.execute(
                "SELECT idx FROM units WHERE assignment_id = ? AND state = ? ORDER BY idx LIMIT ?",
                (assignment_id, state, rows - len(shown)))]
        shown += sorted(waiting)[:rows - len(shown)]
        shown += [index for (index,) in db.execute(
            "SELECT idx FROM units WHERE assignment_id = ? AND state = 'done' ORDER BY idx DESC LIMIT ?",
            (assignment_id, max(rows - (tally.count - tally.done), 0)))]
        return sorted(shown)

    def _tally(self, db: sqlite3.Connection, assignment_id: str) -> UnitTally:
        counts = db.execute("SELECT units, done, failed, queued, moves, verified, progress FROM unit_tallies"
                            " WHERE assignment_id = ?", (assignment_id,)).fetchone() or (0, 0, 0, 0, 0, 0, 0.0)
        running = db.execute("SELECT idx, progress FROM units WHERE assignment_id = ? AND state = 'running'"
                             " ORDER BY idx", (assignment_id,)).fetchall()
        count, done, failed, queued, moves, verified, progress = counts
        return UnitTally(count=count, done=done, failed=failed, queued=queued, moves=moves, verified=verified,
                         progress=progress, running=tuple(running))

    def searchable_units(self, assignment_id: str,
                         index: int | None = None) -> list[tuple[int, str, str, str | None, int]]:
        """(index, state, host, error, failures) of each of the assignment's units in index order, or of the one at
        `index`: what a search through them reads (`FindUnits`), without their data. Any one thread may call it:
        a 100,000-unit sweep takes 70 ms, and matching its rows 50 more (the node searches in a worker thread)."""
        one = "" if index is None else " AND idx = ?"
        with self._snapshot() as db:
            self._assignment_row(db, assignment_id)
            return db.execute(f"SELECT idx, state, host, error, failures FROM units WHERE assignment_id = ?{one}"
                              " ORDER BY idx", (assignment_id, *(() if index is None else (index,)))).fetchall()

    def found(self, assignment_id: str, indexes: Sequence[int]) -> Listed:
        """The assignment with its units at `indexes` (in index order), and the tally of all of them, read in one
        transaction; any one thread may call it."""
        with self._snapshot() as db:
            row = self._assignment_row(db, assignment_id)
            return Listed(self._record_from_row(db, row, self._units_at(db, row, indexes)), self._tally(db, row[0]))

    def _units_at(self, db: sqlite3.Connection, row: tuple, indexes: Sequence[int]) -> tuple[UnitRecord, ...]:
        """The units at `indexes` of the assignment whose row (`_ASSIGNMENT_COLUMNS`) is `row`, in index order."""
        units: list[tuple] = []
        for start in range(0, len(indexes), _IN_AT_ONCE):
            part = indexes[start:start + _IN_AT_ONCE]
            units += db.execute(
                f"SELECT {_LISTED_UNIT_COLUMNS} FROM units u WHERE u.assignment_id = ? AND u.idx IN"
                f" ({', '.join('?' * len(part))})", (row[12], row[13], row[0], *part)).fetchall()
        units.sort(key=lambda unit: unit[1])
        return tuple(_unit_from_row(unit) for unit in units)

    def _assignment_row(self, db: sqlite3.Connection, assignment_id: str) -> tuple:
        row = db.execute(f"SELECT {_ASSIGNMENT_COLUMNS} FROM assignments WHERE id = ?", (assignment_id,)).fetchone()
        if row is None:
            raise UnknownAssignmentError(f"no assignment {assignment_id!r} on this node")
        return row

    def _record_from_row(self, db: sqlite3.Connection, row: tuple,
                         units: tuple[UnitRecord, ...]) -> AssignmentRecord:
        """An assignment's record from its row (`_ASSIGNMENT_COLUMNS`) and the units given."""
        return AssignmentRecord(
            id=row[0], plugin=row[1], plugin_version=row[2], plugin_hash=row[3], params=cbor2.loads(row[4]),
            state=row[5], created_at=row[6], finished_at=row[7], result_media_type=row[8],
            result_filename=row[9], error=row[10], units=units,
            one_per_host=bool(row[11]), inputs=_decode_inputs(row[12]), submitter=row[13], verify=row[14],
            check_interval=row[15], check_supersteps=row[16], check_forced=bool(row[17]), gang_members=row[18],
            waste=tuple(db.execute(
                "SELECT reason, SUM(seconds) AS total FROM waste WHERE assignment_id = ? GROUP BY reason"
                " ORDER BY total DESC", (row[0],)).fetchall()),
        )


def _take_copy(db: sqlite3.Connection, assignment_id: str, index: int, which: str, parameters: tuple) -> None:
    """A checked unit's result becomes the first of its copies kept (`which`: a further condition on them)."""
    db.execute("INSERT OR REPLACE INTO unit_results (assignment_id, idx, result, files) SELECT assignment_id, idx,"
               f" result, files FROM unit_copies WHERE assignment_id = ? AND idx = ?{which} ORDER BY rowid LIMIT 1",
               (assignment_id, index, *parameters))


def _keep_standing(db: sqlite3.Connection, assignment_id: str, standing: Mapping[int, float] | None) -> None:
    """Store how far each running unit got as its host last reported it (the store keeps a placed unit's progress
    only at a checkpoint's replica or a requeue): a stopped sweep's rows show where each unit stood, not 0 %."""
    db.executemany("UPDATE units SET progress = MAX(progress, ?) WHERE assignment_id = ? AND idx = ?"
                   " AND state = 'running'",
                   [(progress, assignment_id, index) for index, progress in (standing or {}).items()])


_WAITING = ("queued", "failed", "cancelled")
"""The states of a unit neither running nor done."""
_IN_AT_ONCE = 500
"""Unit indexes per `IN (...)` list: SQLite builds before 3.32 allow 999 parameters to a statement."""

_ASSIGNMENT_COLUMNS = ("id, plugin, plugin_version, plugin_hash, params, state, created_at, finished_at, result_media_type,"
                       " result_filename, error, one_per_host, inputs, submitter, verify, check_interval,"
                       " check_supersteps, check_forced, gang_members")


def _unit_columns(inputs: str, submitter: str) -> str:
    """The columns `_unit_from_row` reads, the assignment's inputs and submitter as the SQL given."""
    return ("u.assignment_id, u.idx, u.data, u.memory_bytes, u.cost, u.state, u.host, u.epoch, u.failures,"
            f" u.moves, u.progress, u.error, {inputs}, {submitter}, u.checked,"
            " (SELECT group_concat(c.host) FROM unit_copies c"
            " WHERE c.assignment_id = u.assignment_id AND c.idx = u.idx)")


_UNIT_COLUMNS = _unit_columns("(SELECT a.inputs FROM assignments a WHERE a.id = u.assignment_id)",
                              "(SELECT a.submitter FROM assignments a WHERE a.id = u.assignment_id)")
_LISTED_UNIT_COLUMNS = _unit_columns("?", "?")
"""For a listing, which has the assignment's row: looking its inputs and submitter up again for each unit was a third
of the time a 10,000-unit assignment's units took to read (23 ms)."""


def _unit_from_row(row: tuple) -> UnitRecord:
    return UnitRecord(
        assignment_id=row[0], index=row[1], data=cbor2.loads(row[2]), memory_bytes=row[3], cost=row[4],
        state=row[5], host=row[6], epoch=row[7], failures=row[8], moves=row[9], progress=row[10], error=row[11],
        inputs=_decode_inputs(row[12]), submitter=row[13], checked=bool(row[14]),
        copied_on=tuple(row[15].split(",")) if row[15] else (),
    )


def _head_from_row(row: tuple) -> AssignmentHead:
    return AssignmentHead(id=row[0], seq=row[1], plugin=row[2], plugin_version=row[3], plugin_hash=row[4],
                          one_per_host=bool(row[5]), submitter=row[6], inputs=_decode_inputs(row[7]))


def _encode_inputs(inputs: tuple[InputFile, ...]) -> bytes | None:
    return cbor2.dumps([[f.name, f.sha256, f.size] for f in inputs]) if inputs else None


def _decode_inputs(blob: bytes | None) -> tuple[InputFile, ...]:
    return () if blob is None else tuple(InputFile(name, sha256, size) for name, sha256, size in cbor2.loads(blob))

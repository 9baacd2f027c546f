"""The ledger itself: every guest run's CPU given or received, and the peers' verified summaries, in SQLite.

One row per guest run this host gave (a result, an eviction, a move, a failure or a stop: the CPU the
guest's process really used, from /proc or its cgroup) and per run of its units this master heard of
(a result with it, any other end with its host's next report): the two sides count the same runs. CPU is kept raw with
the speed of the machine it ran on; normalised CPU-seconds (speed units x seconds) are computed on
reading. WAL with synchronous=FULL (`storage.sqlite.open_durably`): a committed row survives
`kill -9`. Peers' summaries are kept as they arrived (body, signature, key) so they can be relayed,
with the first key seen for each node pinned.

Everything the node reads of its runs is a sum per hour, and `run_hours` keeps those sums, one row per
direction, peer, submitter and hour, added to by a trigger in the transaction that writes the runs: a
rebuild of the ledger's figures, and every summary signed for a peer's exchange, then costs what the hours
with runs cost, not what the runs do (a 100,000-unit sweep on one node leaves 200,000 runs in minutes, and
the runs are never deleted). Only the hour `since` falls in is read run by run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from frost_core.api.errors import AuthenticationError
from frost_core.ledger.summary import BUCKET_SECONDS, SignedSummary, Summary, build_summary, open_summary
from frost_core.policies.fair_share import decayed
from frost_core.storage.sqlite import disk_writes, open_durably, transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    direction TEXT NOT NULL CHECK (direction IN ('given', 'received')),
    run TEXT NOT NULL,              -- what makes a row unique: a result delivered twice counts once
    peer TEXT NOT NULL,             -- given: the unit's master; received: the host it ran on
    submitter TEXT NOT NULL,
    task_id TEXT NOT NULL,
    cpu_seconds REAL NOT NULL,
    speed REAL NOT NULL,            -- of the machine the guest ran on
    at REAL NOT NULL,               -- wall time the run ended
    PRIMARY KEY (direction, run)
);
CREATE INDEX IF NOT EXISTS runs_at ON runs (at);
CREATE TABLE IF NOT EXISTS summaries (
    node_id TEXT PRIMARY KEY,
    issued_at REAL NOT NULL,
    body BLOB NOT NULL,
    signature BLOB NOT NULL,
    public_key BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS pinned_keys (node_id TEXT PRIMARY KEY, public_key BLOB NOT NULL);
"""

_HOUR = int(BUCKET_SECONDS)
"""The hours the sums are kept in: the summary's buckets, and the screen's hours."""
_HOURLY_SUMS = (f"""
CREATE TABLE run_hours (
    direction TEXT NOT NULL,
    peer TEXT NOT NULL,
    submitter TEXT NOT NULL,
    hour INTEGER NOT NULL,          -- CAST(at / {_HOUR} AS INTEGER) of the runs summed
    cpu_seconds REAL NOT NULL,      -- SUM(cpu_seconds)
    normalised REAL NOT NULL,       -- SUM(cpu_seconds * speed)
    weighted_at REAL NOT NULL,      -- SUM(cpu_seconds * speed * at): for their CPU-weighted mean time
    first_at REAL NOT NULL,         -- MIN(at)
    PRIMARY KEY (direction, peer, submitter, hour)
) WITHOUT ROWID""", f"""
CREATE TRIGGER run_summed AFTER INSERT ON runs BEGIN
    INSERT INTO run_hours VALUES (NEW.direction, NEW.peer, NEW.submitter, CAST(NEW.at / {_HOUR} AS INTEGER),
                                  NEW.cpu_seconds, NEW.cpu_seconds * NEW.speed, NEW.cpu_seconds * NEW.speed * NEW.at,
                                  NEW.at)
    ON CONFLICT DO UPDATE SET cpu_seconds = cpu_seconds + excluded.cpu_seconds,
                              normalised = normalised + excluded.normalised,
                              weighted_at = weighted_at + excluded.weighted_at,
                              first_at = MIN(first_at, excluded.first_at);
END""", f"""
INSERT INTO run_hours
SELECT direction, peer, submitter, CAST(at / {_HOUR} AS INTEGER), SUM(cpu_seconds), SUM(cpu_seconds * speed),
       SUM(cpu_seconds * speed * at), MIN(at)
FROM runs GROUP BY 1, 2, 3, 4""")
"""Made, with the runs written before it summed, in one transaction when a ledger from before it is opened."""

MAX_HELD = 64
"""Peers' summaries kept for reading and relaying: the most recently issued (bounded, like gossip)."""


@dataclass(frozen=True)
class Run:
    direction: str
    peer: str
    submitter: str
    task_id: str
    cpu_seconds: float
    speed: float
    at: float

    @property
    def normalised(self) -> float:
        return self.cpu_seconds * self.speed


@dataclass(frozen=True)
class RunsInHour:
    """The runs of one direction with one peer within one clock hour, summed: what the ledger's screen counts
    (`stats.ledger_view`)."""

    direction: str
    peer: str
    normalised: float
    at: float          # the hour's first run


@dataclass(frozen=True)
class LedgerReading:
    """What one rebuild of the node's ledger figures reads (`Ledger.read`)."""

    own: Summary                                    # this node's summary now
    summaries: list[Summary]                        # the peers' latest, verified
    hours: list[RunsInHour]                         # since the rebuild's `since`
    usage: dict[str, list[tuple[float, float]]]     # fair share's records: submitter -> (when, normalised CPU)


@dataclass(frozen=True)
class NewRun:
    """A run on its way into the table, with what makes it unique there."""

    key: str
    run: Run

    def row(self) -> tuple:
        r = self.run
        return (r.direction, self.key, r.peer, r.submitter, r.task_id, r.cpu_seconds, r.speed, r.at)


def given_run(*, master: str, submitter: str, task_id: str, epoch: int, cpu_seconds: float, speed: float,
              at: float) -> NewRun:
    """A guest run of `task_id` that ended on this host, whatever its outcome."""
    return NewRun(f"{task_id}/{epoch}/{at!r}", Run("given", master, submitter, task_id, cpu_seconds, speed, at))


def received_run(*, host: str, submitter: str, task_id: str, epoch: int, cpu_seconds: float, speed: float,
                 at: float, ended_at: float | None = None) -> NewRun:
    """A run of `task_id` on `host` as this master heard of it: its result (one per task and epoch), or with
    `ended_at` a run that ended without one (its host's report says when, which makes it unique), so what
    a host gave this node's units and what this node received from it are the same runs.

    `speed` is the host's as known now (this node's own, or 1.0 before its summary arrives); on
    reading, the speed its latest summary states takes over, so both sides count alike.
    """
    key = f"{task_id}/{epoch}" if ended_at is None else f"{task_id}/{epoch}/{ended_at!r}"
    return NewRun(key, Run("received", host, submitter, task_id, cpu_seconds, speed, at))


class Ledger:
    def __init__(self, path: Path, *, node_id: str) -> None:
        self.node_id = node_id
        self._path = path
        self._db = open_durably(path, _SCHEMA)
        self._lock = threading.Lock()   # writes come from the node's thread pool as well as its loop
        self._add_hourly_sums()

    def _add_hourly_sums(self) -> None:
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_hours'").fetchone():
            return
        with transaction(self._db, self._path) as db:
            for statement in _HOURLY_SUMS:
                db.execute(statement)

    def close(self) -> None:
        self._db.close()

    # -- writing ---------------------------------------------------------------------------------

    def record(self, runs: Iterable[NewRun]) -> int:
        """Write `runs` in one transaction, one fsync however many; how many were new (a run recorded
        twice counts once, so writing a batch again after an interruption is harmless)."""
        rows = [new.row() for new in runs if new.run.cpu_seconds > 0 and math.isfinite(new.run.cpu_seconds)]
        if not rows:
            return 0
        with self._lock:
            with transaction(self._db, self._path) as db:
                # rowcount: the runs written, without what `run_summed` changes (total_changes counts that too)
                return db.executemany(
                    "INSERT OR IGNORE INTO runs (direction, run, peer, submitter, task_id, cpu_seconds, speed, at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows).rowcount

    def pin(self, node_id: str, public_key: bytes) -> None:
        """Know `node_id` by this key from now on (this node pins its own: a summary in its name is a forgery)."""
        with self._lock, disk_writes(self._path):
            self._db.execute("INSERT OR IGNORE INTO pinned_keys (node_id, public_key) VALUES (?, ?)",
                             (node_id, public_key))

    def accept(self, signed: SignedSummary) -> Summary | None:
        """Keep a peer's summary if it verifies and is newer than the one held; None if it is not newer.

        Raises AuthenticationError for a forged or altered summary (and ProtocolError for a malformed
        one): the caller reports it. This node's own summary, coming back by relay, is ignored.
        """
        with self._lock:
            summary = open_summary(signed, None)
            row = self._db.execute("SELECT public_key FROM pinned_keys WHERE node_id = ?",
                                   (summary.node_id,)).fetchone()
            if row is not None and bytes(row[0]) != signed.public_key:
                raise AuthenticationError(
                    f"the ledger summary of {summary.node_id[:8]} is signed by a key that is not that node's")
            if summary.node_id == self.node_id:
                return None
            held = self._db.execute("SELECT issued_at FROM summaries WHERE node_id = ?", (summary.node_id,)).fetchone()
            if held is not None and held[0] >= summary.issued_at:
                return None
            with transaction(self._db, self._path) as db:
                db.execute("INSERT OR IGNORE INTO pinned_keys (node_id, public_key) VALUES (?, ?)",
                           (summary.node_id, signed.public_key))
                db.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?)",
                           (summary.node_id, summary.issued_at, signed.body, signed.signature, signed.public_key))
                db.execute("DELETE FROM summaries WHERE node_id NOT IN (SELECT node_id FROM summaries"
                           " ORDER BY issued_at DESC LIMIT ?)", (MAX_HELD,))
            return summary

    # -- reading ---------------------------------------------------------------------------------

    def runs(self, since: float = 0.0) -> list[Run]:
        """Every run since `since`, oldest first; what a host gave here at the speed its summary states."""
        with self._lock:
            rows = self._db.execute("SELECT direction, peer, submitter, task_id, cpu_seconds, speed, at FROM runs"
                                    " WHERE at >= ? ORDER BY at", (since,)).fetchall()
        speeds = peer_speeds(self.summaries())
        return [Run(d, peer, sub, task, cpu, speeds.get(peer, speed) if d == "received" else speed, at)
                for d, peer, sub, task, cpu, speed, at in rows]

    def held(self) -> list[SignedSummary]:
        """The peers' summaries as they arrived, to relay (each is still signed by its node)."""
        with self._lock:
            rows = self._db.execute("SELECT body, signature, public_key FROM summaries"
                                    " ORDER BY issued_at DESC").fetchall()
        return [SignedSummary(bytes(b), bytes(s), bytes(k)) for b, s, k in rows]

    def summaries(self) -> list[Summary]:
        """The peers' latest verified summaries (verified again: the file could have been edited)."""
        out = []
        for signed in self.held():
            try:
                out.append(open_summary(signed, signed.public_key))
            except (AuthenticationError, ValueError):
                continue
        return out

    def read(self, *, since: float, now: float, speed: float) -> LedgerReading:
        """What a rebuild of the node's ledger figures reads, each part once: the peers' summaries verified once
        (up to `MAX_HELD` signatures), what this host gave per submitter and hour summed once for both the
        node's summary and fair share."""
        summaries = self.summaries()
        speeds = peer_speeds(summaries)
        given = self._given_per_bucket()
        return LedgerReading(own=self._summary(now, speed, speeds, given), summaries=summaries,
                             hours=self._hours(since, speeds), usage=self._usage(summaries, given))

    def summary(self, now: float, speed: float) -> Summary:
        """This node's own summary now, from its own rows only: per peer, and what each submitter was given per
        `BUCKET_SECONDS` (all the summary keeps of it)."""
        return self._summary(now, speed, peer_speeds(self.summaries()), self._given_per_bucket())

    def decayed_usage(self, submitter: str, now: float, half_life: float) -> float:
        """The submitter's normalised CPU-seconds given by every host, decayed with `half_life` (fair share).

        This host's own runs plus what each peer's verified summary says it gave; each host reports only
        its own giving, so nothing is counted twice.
        """
        records = self._usage(self.summaries(), self._given_per_bucket()).get(submitter, ())
        return sum(decayed(cpu, now - at, half_life) for at, cpu in records)

    def _summary(self, now: float, speed: float, speeds: dict[str, float],
                 given: list[tuple[str, float, float]]) -> Summary:
        with self._lock:
            totals = self._db.execute("SELECT direction, peer, SUM(cpu_seconds), SUM(normalised) FROM run_hours"
                                      " GROUP BY direction, peer").fetchall()
        peers: dict[str, tuple[float, float]] = {}
        for direction, peer, cpu, normalised in totals:
            given_to, received = peers.get(peer, (0.0, 0.0))
            if direction == "given":
                peers[peer] = (given_to + normalised, received)
            else:
                peers[peer] = (given_to, received + (cpu * speeds[peer] if peer in speeds else normalised))
        return build_summary(self.node_id, now, speed, peers, given)

    def _hours(self, since: float, speeds: dict[str, float]) -> list[RunsInHour]:
        """The runs since `since` per direction, peer and hour, oldest first, what a host gave here at the speed
        its summary states: the hours after `since`'s from their sums, `since`'s own hour from its runs."""
        hour = int(since / _HOUR)
        with self._lock:
            rows = self._db.execute(
                "SELECT direction, peer, SUM(cpu_seconds), SUM(normalised), MIN(first_at) FROM run_hours"
                " WHERE hour > ? GROUP BY direction, peer, hour"
                " UNION ALL SELECT direction, peer, SUM(cpu_seconds), SUM(cpu_seconds * speed), MIN(at) FROM runs"
                f" WHERE at >= ? AND at < ? AND CAST(at / {_HOUR} AS INTEGER) = ? GROUP BY direction, peer"
                " ORDER BY 5", (hour, since, (hour + 2) * _HOUR, hour)).fetchall()
        return [RunsInHour(d, peer, cpu * speeds[peer] if d == "received" and peer in speeds else normalised, at)
                for d, peer, cpu, normalised, at in rows]

    def _given_per_bucket(self) -> list[tuple[str, float, float]]:
        """(submitter, normalised CPU, when) of what this host gave, one record per submitter and `BUCKET_SECONDS`,
        at the CPU-weighted mean time of the bucket's runs (kept inside the bucket against rounding): what
        `build_summary` and fair share make of each run, bucket by bucket, but as many records as hours."""
        with self._lock:
            rows = self._db.execute(
                "SELECT submitter, hour, SUM(normalised), SUM(weighted_at) FROM run_hours WHERE direction = 'given'"
                " GROUP BY 1, 2 ORDER BY 2, 1").fetchall()
        records = []
        for submitter, bucket, cpu, weighted in rows:
            start = bucket * BUCKET_SECONDS
            records.append((submitter, cpu, min(max(weighted / cpu, start), start + BUCKET_SECONDS - 1e-6)))
        return records

    def _usage(self, summaries: Iterable[Summary],
               given: list[tuple[str, float, float]]) -> dict[str, list[tuple[float, float]]]:
        """Submitter -> (when, normalised CPU) given to it: this host's runs an hour at a time (`given`), then the
        peers' summaries (which keep them so too)."""
        records: dict[str, list[tuple[float, float]]] = {}
        for submitter, cpu, at in given:
            records.setdefault(submitter, []).append((at, cpu))
        for summary in summaries:
            if summary.node_id == self.node_id:
                continue
            for usage in summary.usage:
                records.setdefault(usage.submitter, []).extend(usage.buckets)
        return records


def peer_speeds(summaries: Iterable[Summary]) -> dict[str, float]:
    """Each peer's speed as its verified summary states it."""
    return {s.node_id: s.speed for s in summaries if s.speed > 0}

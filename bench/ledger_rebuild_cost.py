"""What the ledger's figures cost to read after a long history of runs, against summing every run.

Question: does a node that has hosted and mastered for months pay for all of it at every rebuild of its
ledger's figures (the screen, fair share's records; at most every 2 s) and at every summary it signs for a
peer's exchange (about twice a minute)? The runs are never deleted: one node's 100,000-unit sweep writes
200,000 of them in minutes. Goal: the reads cost the same at 50,000 and 200,000 runs over the same days
(within 20 %). From about 50,000 runs on every hour of the 40 days holds runs of every peer and submitter
(twelve pairs); at 10,000 (five runs an hour) fewer pairs have runs in an hour, so fewer sums are read:
what the reads cost follows the hours, peers and submitters with runs, never more than the runs. Since 2026-11-28 they read the hourly sums `Ledger` keeps as it writes each run
(`run_hours`, a trigger); the baseline, measured in the same run on the same file, is the sums taken over
every run as the node did before (the queries of f7353e9, kept here), and the writes are timed against the
same runs written to a ledger without the trigger (what each run's sums cost the writer, in its thread).

Method: runs in batches of 200 (the node writes at most every 0.1 s), each a given and a received side,
spread evenly over 40 days, three submitters and four peers; a rebuild reads since 30 days ago, as the
screen does. Medians of REPEATS. Run: `.venv/bin/python bench/ledger_rebuild_cost.py` (about a minute).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.ledger.book import Ledger, NewRun, given_run, received_run  # noqa: E402

DAY = 86400.0
NOW = 1_800_000_000.0
REPEATS = 5
BATCH = 200
GOAL = 1.2
"""A rebuild's reads at the most runs / at the fewest."""

_EVERY_RUN = (
    # The node's summary: per peer, then what each submitter was given per hour.
    "SELECT direction, peer, SUM(cpu_seconds), SUM(cpu_seconds * speed) FROM runs GROUP BY direction, peer",
    "SELECT submitter, CAST(at / 3600 AS INTEGER), SUM(cpu_seconds * speed), SUM(cpu_seconds * speed * at)"
    " FROM runs WHERE direction = 'given' GROUP BY 1, 2 ORDER BY 2, 1",
    # The screen's hours since 30 days ago; fair share's records (the hourly giving again).
    f"SELECT direction, peer, SUM(cpu_seconds), SUM(cpu_seconds * speed), MIN(at) FROM runs WHERE at >= {NOW - 30 * DAY}"
    " GROUP BY direction, peer, CAST(at / 3600 AS INTEGER) ORDER BY MIN(at)",
    "SELECT submitter, CAST(at / 3600 AS INTEGER), SUM(cpu_seconds * speed), SUM(cpu_seconds * speed * at)"
    " FROM runs WHERE direction = 'given' GROUP BY 1, 2 ORDER BY 2, 1",
)
"""A rebuild summed over every run: the queries the node ran until 2026-11-28 (the summary's two again for
each signed summary)."""


def history(count: int) -> list[NewRun]:
    """`count` runs (both sides of count / 2) spread over the 40 days before NOW."""
    runs = []
    for i in range(count // 2):
        at = NOW - 40 * DAY * (1 - i / (count // 2))
        peer, submitter = f"{i % 4}" * 32, f"s{i % 3}@" + "m" * 32
        runs.append(given_run(master=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=0.3,
                              speed=1.0, at=at))
        runs.append(received_run(host=peer, submitter=submitter, task_id=f"t.{i}", epoch=1, cpu_seconds=0.3,
                                 speed=1.0, at=at))
    return runs


def write_seconds(ledger: Ledger, runs: list[NewRun]) -> float:
    began = time.perf_counter()
    for start in range(0, len(runs), BATCH):
        ledger.record(runs[start:start + BATCH])
    return time.perf_counter() - began


def median_ms(action) -> float:
    times = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def measure(folder: Path, count: int) -> dict:
    runs = history(count)
    bare = Ledger(folder / f"bare-{count}.sqlite", node_id="a" * 32)
    try:
        bare._db.executescript("DROP TRIGGER run_summed; DROP TABLE run_hours;")
        bare_write = write_seconds(bare, runs)
    finally:
        bare.close()
    ledger = Ledger(folder / f"{count}.sqlite", node_id="a" * 32)
    try:
        summed_write = write_seconds(ledger, runs)
        rebuild = median_ms(lambda: ledger.read(since=NOW - 30 * DAY, now=NOW, speed=1.0))
        summary = median_ms(lambda: ledger.summary(NOW, 1.0))
    finally:
        ledger.close()
    with sqlite3.connect(folder / f"{count}.sqlite") as db:
        every_run = median_ms(lambda: [db.execute(query).fetchall() for query in _EVERY_RUN])
        every_run_summary = median_ms(lambda: [db.execute(query).fetchall() for query in _EVERY_RUN[:2]])
    return {"runs": count, "rebuild_ms": rebuild, "every_run_rebuild_ms": every_run, "summary_ms": summary,
            "every_run_summary_ms": every_run_summary, "write_us_per_run": summed_write / count * 1e6,
            "write_us_per_run_without_sums": bare_write / count * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frost-ledger-") as folder:
        rows = [measure(Path(folder), count) for count in args.runs]
    print_table(["runs", "rebuild ms", "summed every run ms", "ratio", "summary ms", "summed every run ms",
                 "write us/run", "without the sums", "ratio"],
                [[r["runs"], r["rebuild_ms"], r["every_run_rebuild_ms"], r["every_run_rebuild_ms"] / r["rebuild_ms"],
                  r["summary_ms"], r["every_run_summary_ms"], r["write_us_per_run"],
                  r["write_us_per_run_without_sums"], r["write_us_per_run"] / r["write_us_per_run_without_sums"]]
                 for r in rows])
    most, fewer = rows[-1], next((r for r in rows if r["runs"] >= 50_000), rows[0])
    growth = most["rebuild_ms"] / fewer["rebuild_ms"]
    print(f"\ngoal: a rebuild at {most['runs']:,} runs / at {fewer['runs']:,}: {growth:.2f} "
          f"(<= {GOAL}: {'yes' if growth <= GOAL else 'NO'}); summed every run: "
          f"{most['every_run_rebuild_ms'] / fewer['every_run_rebuild_ms']:.1f}")
    write_results("ledger_rebuild_cost", {"cases": rows, "growth": growth, "goal": GOAL})


if __name__ == "__main__":
    main()

"""A host's CPU while it holds finished results for a master that is away, against the same node holding none.

Question: what does a submitter's closed laptop cost the desks that computed for it? Each host
keeps the results it could not deliver in its outbox and looks at them every report interval
(`cluster.report_interval`, 2 s by default) for up to `cluster.hold_results` (a week). Goal: the
holding node's CPU within 1 percentage point of a core of the empty node's, measured side by side
in the same window (until 2026-11-27 every look read every held payload: 200 results of 1 MiB
took 1.25 s of CPU a round, so the node held about a third of a core for as long as the master
was away).

Method: real `frost-tui --headless` nodes on loopback with the default configuration, started
side by side: one with an empty outbox (the baseline), and one per case whose outbox is filled
before it starts with results for a master no node knows (64 hex digits; a laptop gone before
this node started). After SETTLE seconds, each node's CPU time (psutil) is read over WINDOW
seconds; then the outbox is checked to still hold every result (nothing given up early). Run:
`.venv/bin/python bench/held_results_cost.py` (about a minute; `--window 10` is quicker).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from _nodes import BenchNode, start_node, stop_all  # noqa: E402

from frost_core.cluster.outbox import Outbox, owed_result  # noqa: E402
from frost_core.wire.security import ClusterKey  # noqa: E402

MIB = 1 << 20
CASES = {"none held (baseline)": (0, 0), "200 results of 1 MiB": (200, MIB), "2,000 results of 0.1 MiB": (2000, MIB // 10)}
"""Case name -> (held results, bytes each)."""
AWAY_MASTER = "ab" * 32
SETTLE = 8.0
GOAL_POINTS = 1.0
"""The holding node's CPU may exceed the baseline's by this many percentage points of one core."""


def fill_outbox(data_dir: Path, count: int, size: int) -> None:
    """`count` results of `size` random bytes held for a master that is away, as a host leaves them."""
    data_dir.mkdir(parents=True, exist_ok=True)
    outbox = Outbox(data_dir / "outbox.sqlite")
    try:
        for i in range(count):
            outbox.put(owed_result(f"away-{i // 100}.{i % 100}", AWAY_MASTER, 1, os.urandom(size)))
    finally:
        outbox.close()


def held_count(data_dir: Path) -> int:
    with contextlib.closing(sqlite3.connect(data_dir / "outbox.sqlite")) as db:
        return db.execute("SELECT count(*) FROM outbox").fetchone()[0]


def measure(folder: Path, window: float) -> dict[str, dict]:
    key_file = folder / "cluster.key"
    ClusterKey.generate().save(key_file)
    nodes: dict[str, BenchNode] = {}
    try:
        for n, (case, (count, size)) in enumerate(CASES.items()):
            data_dir = folder / f"node{n}"
            fill_outbox(data_dir, count, size)
            nodes[case] = start_node(data_dir, key_file=key_file, base_config="", env={"NO_COLOR": "1"},
                                     log_level="info")
        time.sleep(SETTLE)
        processes = {case: psutil.Process(node.process.pid) for case, node in nodes.items()}
        before = {case: sum(p.cpu_times()[:2]) for case, p in processes.items()}
        began = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - began
        used = {case: sum(p.cpu_times()[:2]) - before[case] for case, p in processes.items()}
    finally:
        stop_all(list(nodes.values()))
    return {case: {"held": CASES[case][0], "bytes_each": CASES[case][1], "cpu_percent": 100 * used[case] / elapsed,
                   "still_held": held_count(nodes[case].data_dir), "window_s": elapsed} for case in nodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=30.0, help="seconds of CPU time measured (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frost-held-") as tmp:
        figures = measure(Path(tmp), args.window)
    baseline = figures["none held (baseline)"]["cpu_percent"]
    rows = []
    for case, f in figures.items():
        f["over_baseline_points"] = f["cpu_percent"] - baseline
        f["goal_met"] = f["over_baseline_points"] <= GOAL_POINTS and f["still_held"] == f["held"]
        rows.append([case, f["cpu_percent"], f["over_baseline_points"], f"{f['still_held']} of {f['held']}",
                     f"<= {GOAL_POINTS:g} points: {'yes' if f['goal_met'] else 'NO'}"])
    print_table(["outbox", "node CPU % of a core", "over baseline, points", "still held", "goal"], rows)
    write_results("held_results_cost", figures)


if __name__ == "__main__":
    main()

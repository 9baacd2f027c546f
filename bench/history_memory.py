"""A node's memory with finished sweeps behind it, against the same node with none.

Question: does a node that has run sweeps for months hold them in memory? A desk node runs for weeks, and its
database keeps every finished assignment (its results stay fetchable). Until 2026-11-27 the master listed every
assignment with every unit when it started (to export the finished results) and kept the finished ones' records for
good, and so did each snapshot listing after it. Goal: a node with HISTORY finished 10,000-unit sweeps behind it
uses at most BUDGET_MB more resident memory than the same node with none.

Method: two real `frost-tui --headless` nodes with the benchmarks' configuration (`_nodes.py`), one after the other,
one on a fresh data folder (the baseline) and one whose database holds the history, written through
`MasterStore` before it starts. Resident memory (psutil) once each answers `status` and SETTLE_S seconds later, then
after an attached UI's receiving side (`_watcher.py`) has taken its first pushes. Run:
`.venv/bin/python bench/history_memory.py [--history 5]` (about a minute).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402
from _nodes import BENCH_CONFIG, start_node  # noqa: E402

from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement  # noqa: E402
from frost_core.wire.security import ClusterKey  # noqa: E402

UNITS = 10_000
SETTLE_S = 5.0
BUDGET_MB = 20.0
WATCHER = Path(__file__).resolve().parent / "_watcher.py"


def write_history(database: Path, sweeps: int) -> None:
    store = MasterStore(database, node_id="ab" * 16)
    try:
        for _ in range(sweeps):
            aid = store.create_assignment(plugin="montecarlo-pi", plugin_version="1", plugin_hash="h" * 64,
                                          params={"units": UNITS},
                                          units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(UNITS)])
            store.place_units([Placement(aid, i, f"host-{i % 7}") for i in range(UNITS)])
            store.accept_results([Delivery(aid, i, 1, b"\x00" * 16, cpu_seconds=1.0) for i in range(UNITS)])
            store.mark_combining(aid)
            store.finish_assignment(aid, data=b"3.14159", media_type="text/plain", filename="pi.txt")
    finally:
        store.close()


def resident_mb(pid: int) -> float:
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def measure(folder: Path, sweeps: int) -> dict:
    key = folder / "cluster.key"
    ClusterKey.generate().save(key)
    data_dir = folder / f"history-{sweeps}"
    data_dir.mkdir()
    write_history(data_dir / "node.sqlite", sweeps)
    node = start_node(data_dir, key_file=key, base_config=BENCH_CONFIG, name=f"history-{sweeps}")
    try:
        started = resident_mb(node.process.pid)
        time.sleep(SETTLE_S)
        settled = resident_mb(node.process.pid)
        watcher = subprocess.Popen([sys.executable, str(WATCHER), str(node.paths.control_socket)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        time.sleep(3.0)
        watched = resident_mb(node.process.pid)
        watcher.communicate(timeout=60)
    finally:
        node.stop()
    return {"sweeps": sweeps, "units": sweeps * UNITS, "started_mb": started, "settled_mb": settled,
            "watched_mb": watched}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=5, help="finished 10,000-unit sweeps behind the node")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frost-history-memory-") as folder:
        runs = [measure(Path(folder), sweeps) for sweeps in (0, args.history)]
    baseline, history = runs
    extra = {key: round(history[key] - baseline[key], 1) for key in ("started_mb", "settled_mb", "watched_mb")}
    print_table(["finished sweeps", "units behind it", "MB once started", f"after {SETTLE_S:g} s", "once watched"],
                [[r["sweeps"], r["units"], r["started_mb"], r["settled_mb"], r["watched_mb"]] for r in runs])
    worst = max(extra.values())
    print(f"\nthe history's extra memory: {extra} (goal <= {BUDGET_MB:g} MB: {'yes' if worst <= BUDGET_MB else 'NO'})")
    write_results("history_memory", {"runs": runs, "extra_mb": extra, "budget_mb": BUDGET_MB})
    return 0


if __name__ == "__main__":
    sys.exit(main())

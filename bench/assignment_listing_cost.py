"""The master's assignment listing with a history of big results, against the same history with tiny ones.

Question: does what finished assignments produced slow down what the node does while a run goes on?
The node lists every assignment (`MasterStore.listing`: a window of its units, the counts of all) for the UI's
snapshot while anything is written (each placement, each batch of results); a finished one is read once, the listing
is cached between writes. Until 2026-11-27 16:00 UTC it listed every unit (`MasterStore.assignments`, which a query
still reads). Goal: with big results the listing takes at most 1.5x what it takes with
tiny ones (until 2026-11-27 results lay in the rows the listing reads, before columns it needs, and
SQLite walked their overflow pages: 50 finished assignments with a 10 MiB image each took 115-140 ms
a listing against 4-5 ms).

Method: two stores in the same run, each with the same finished history and one running assignment
of 10 units: one whose results are big (per case), one whose results are 8 bytes (the baseline).
Each trial places a unit of the running assignment (a write: the cached listing is stale) and times
one listing; median of TRIALS, in process CPU time. Run: `.venv/bin/python bench/assignment_listing_cost.py`
(about 20 s).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.api.snapshot import SNAPSHOT_UNITS  # noqa: E402
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement  # noqa: E402

MIB = 1 << 20
CASES = {
    "50 assignments of 10 units, 10 MiB combined": (50, 10, 1024, 10 * MIB),
    "10 assignments of 100 units of 100 KiB, 10 MiB combined": (10, 100, 100 << 10, 10 * MIB),
    "5 assignments of 1,000 units of 10 KiB": (5, 1000, 10 << 10, 1 * MIB),
}
"""Case -> (finished assignments, units each, bytes per unit result, bytes of the combined result)."""
TRIALS = 9
GOAL_RATIO = 1.5


def build(path: Path, assignments: int, units: int, unit_bytes: int, combined_bytes: int) -> tuple[MasterStore, str]:
    """A store with `assignments` finished ones and one running assignment (its id returned) of 10 units."""
    store = MasterStore(path, node_id="ab" * 16)
    for _ in range(assignments):
        aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(units)])
        store.place_units([Placement(aid, i, "host") for i in range(units)])
        store.accept_results([Delivery(aid, i, 1, os.urandom(unit_bytes), cpu_seconds=1.0) for i in range(units)])
        store.mark_combining(aid)
        store.finish_assignment(aid, data=os.urandom(combined_bytes), media_type="image/png", filename="r.png")
    running = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(10)])
    return store, running


def listing_ms(store: MasterStore, running: str, trial: int) -> float:
    store.place_units([Placement(running, trial % 10, f"host-{trial}")])
    began = time.process_time()
    store.listing(SNAPSHOT_UNITS)
    return 1000 * (time.process_time() - began)


def measure(folder: Path) -> dict[str, dict]:
    figures = {}
    for n, (case, (assignments, units, unit_bytes, combined_bytes)) in enumerate(CASES.items()):
        big, big_running = build(folder / f"big{n}.sqlite", assignments, units, unit_bytes, combined_bytes)
        tiny, tiny_running = build(folder / f"tiny{n}.sqlite", assignments, units, 8, 8)
        try:
            big_ms, tiny_ms = [], []
            for trial in range(TRIALS):   # alternated, so both see the same machine
                big_ms.append(listing_ms(big, big_running, trial))
                tiny_ms.append(listing_ms(tiny, tiny_running, trial))
        finally:
            big.close()
            tiny.close()
        figures[case] = {"big_ms": statistics.median(big_ms), "tiny_ms": statistics.median(tiny_ms),
                         "ratio": statistics.median(big_ms) / max(statistics.median(tiny_ms), 1e-3)}
    return figures


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="frost-listing-") as tmp:
        figures = measure(Path(tmp))
    rows = [[case, f["big_ms"], f["tiny_ms"], f["ratio"], f"<= {GOAL_RATIO:g}: {'yes' if f['ratio'] <= GOAL_RATIO else 'NO'}"]
            for case, f in figures.items()]
    print_table(["finished history", "listing ms, big results", "tiny results (baseline)", "ratio", "goal"], rows)
    write_results("assignment_listing_cost", figures)


if __name__ == "__main__":
    main()

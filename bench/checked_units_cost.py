"""The master's cost per result of a checked unit (verification), at 1,000 and at 10,000 checked units.

Question: does a master that checks every unit's result on a second host (`--verify`, the fair-share
issue's cross-check) still do the same work per result however many units its assignment has? Goal:
`record_copy` per result and the listing per unit at 10,000 units within 1.2x of the same at 1,000,
measured in the same run (until 2026-11-27 the kept copies had no index: each result scanned every
copy kept so far, and each listing did so once per unit; at 4,000 units a listing took 2.0 s).

Method: a `MasterStore` per size with one assignment whose every unit is checked; each unit placed,
its first copy recorded (`record_copy`, from one host), placed again and its second copy recorded
(from another host, agreeing: the unit is done); then one listing. Times are wall time of this one
thread (the store is used as the node's worker threads use it). Run:
`.venv/bin/python bench/checked_units_cost.py` (about 20 s).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.master.store import MasterStore, NewUnit, Placement  # noqa: E402

SIZES = (1_000, 10_000)
GOAL_RATIO = 1.2


def measure(folder: Path, units: int) -> dict:
    store = MasterStore(folder / f"{units}.sqlite", node_id="ab" * 16)
    try:
        aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={}, verify=1.0,
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(units)],
                                      checked=frozenset(range(units)))
        timed = {}
        for copy, host, epoch in (("first", "host-a", 1), ("second", "host-b", 2)):
            store.place_units([Placement(aid, i, host) for i in range(units)])
            began = time.perf_counter()
            for i in range(units):
                store.record_copy(aid, i, epoch=epoch, host=host, result=b"r%d" % i)
            timed[f"{copy}_copy_ms"] = 1000 * (time.perf_counter() - began) / units
        began = time.perf_counter()
        (record,) = store.assignments()
        timed["listing_ms"] = 1000 * (time.perf_counter() - began)
        assert record.verified == units, record.verified
    finally:
        store.close()
    return timed


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="frost-checked-") as tmp:
        figures = {units: measure(Path(tmp), units) for units in SIZES}
    small, big = (figures[n] for n in SIZES)
    ratios = {"second_copy": big["second_copy_ms"] / small["second_copy_ms"],
              "listing_per_unit": (big["listing_ms"] / SIZES[1]) / (small["listing_ms"] / SIZES[0])}
    rows = [[f"{n:,}", f["first_copy_ms"], f["second_copy_ms"], f["listing_ms"], f["listing_ms"] / n] for n, f in figures.items()]
    print_table(["checked units", "first copy ms", "second copy ms", "listing ms", "listing ms a unit"], rows)
    met = all(r <= GOAL_RATIO for r in ratios.values())
    print(f"\n10,000 / 1,000: a second copy {ratios['second_copy']:.2f}x, the listing per unit {ratios['listing_per_unit']:.2f}x"
          f" (goal <= {GOAL_RATIO:g}: {'yes' if met else 'NO'})")
    write_results("checked_units_cost", {"sizes": {str(n): f for n, f in figures.items()}, "ratios": ratios,
                                         "goal_met": met})


if __name__ == "__main__":
    main()

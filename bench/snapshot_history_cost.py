"""What finished assignments cost every snapshot pushed to an attached UI, node side and UI side.

Question: with finished sweeps behind it, does the node still refresh its UI as cheaply as a fresh
one? After each write (a placement, a batch of results) the node lists its assignments, makes their
views, encodes them for each attached UI (`frost-tui` attaches to its node), and the UI decodes them.
Goal: with 30,000 finished units behind it, a push costs the node at most 1.5x, and the UI at most
1.5x, what the same push costs with none (until 2026-11-27: node 187-218 ms listing, 89-114 views,
330-360 encoding; UI 280-290 ms decoding, against a few ms without the history).

Method: two stores in the same run, each with one running assignment of 100 units (`--running N`: of N), one with
three finished assignments of 10,000 units behind it. A snapshot carries SNAPSHOT_UNITS units of each assignment and
the counts of all, which the store counts in SQLite (until 2026-11-27 16:00 UTC every unit, read, made into views and
sent: `--running 10000` cost the node 83-100 ms and the UI 109-113 ms a push, 1.3 MB). Each trial places a unit of
the running assignment (a write: the listing is stale, the running assignment's view changes), then times what
`node.views.build_snapshot` does for the assignments (the store's listing, `SettledViews`), the node's encoding of
them for a push to one attached UI (`attach_protocol.SentAssignments`: an assignment the connection's last push
carried unchanged goes as its id) and the UI's decoding (`decode_strict`, `ReceivedViews`), in process CPU time;
medians of TRIALS after the connection's first push (which carries everything, and is shown apart), the two stores
alternated. Run: `.venv/bin/python bench/snapshot_history_cost.py` (about 10 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.api.snapshot import SNAPSHOT_UNITS  # noqa: E402
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement  # noqa: E402
from frost_core.node.attach_protocol import ReceivedViews, SentAssignments  # noqa: E402
from frost_core.node.views import SettledViews, assignment_view  # noqa: E402
from frost_core.wire.codec import decode_strict, encode  # noqa: E402

FINISHED, UNITS_EACH = 3, 10_000
TRIALS = 9
GOAL_RATIO = 1.5


def build(path: Path, finished: int, running_units: int) -> tuple[MasterStore, str]:
    store = MasterStore(path, node_id="ab" * 16)
    for _ in range(finished):
        aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(UNITS_EACH)])
        store.place_units([Placement(aid, i, f"host-{i % 7}") for i in range(UNITS_EACH)])
        store.accept_results([Delivery(aid, i, 1, b"\x00", cpu_seconds=1.0) for i in range(UNITS_EACH)])
        store.mark_combining(aid)
        store.finish_assignment(aid, data=b"r", media_type="text/plain", filename="r.txt")
    running = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(running_units)])
    return store, running


class Side:
    """One node's store with its caches, and one attached UI's."""

    def __init__(self, store: MasterStore, running: str, running_units: int, folder: Path) -> None:
        self.store, self.running, self.running_units, self.folder = store, running, running_units, folder
        self.views, self.sent, self.received = SettledViews(), SentAssignments(), ReceivedViews()
        self.names = {f"host-{i}": f"desk-{i}" for i in range(7)}

    def push(self, trial: int) -> tuple[float, float, int]:
        """(node ms, UI ms, bytes) of one push after one write."""
        self.store.place_units([Placement(self.running, trial % self.running_units, f"host-{trial % 7}")])
        began = time.process_time()
        views = [self.views.view(listed.record, self.names, lambda listed=listed: assignment_view(
            listed.record, now=time.time(), results_dir=self.folder, names=self.names, tally=listed.tally))
            for listed in self.store.listing(SNAPSHOT_UNITS)]
        data = encode({"assignments": self.sent.items(views)})
        self.bytes = len(data)
        node = time.process_time()
        shown = self.received.read(decode_strict(data)["assignments"])
        ui = time.process_time()
        assert len(shown) == len(views)
        return 1000 * (node - began), 1000 * (ui - node), len(data)


def measure(folder: Path, running_units: int) -> dict[str, dict]:
    sides = {}
    for name, finished in (("none finished (baseline)", 0), (f"{FINISHED} x {UNITS_EACH:,} units finished", FINISHED)):
        store, running = build(folder / f"{finished}.sqlite", finished, running_units)
        sides[name] = Side(store, running, running_units, folder)
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in sides}
    first: dict[str, tuple[float, float, int]] = {}
    try:
        for trial in range(TRIALS + 1):
            for name, side in sides.items():
                sample = side.push(trial)
                if trial:
                    samples[name].append(sample)
                else:   # (the first push of a connection carries everything, and makes what later ones keep)
                    first[name] = sample
    finally:
        for side in sides.values():
            side.store.close()
    return {name: {"node_ms": statistics.median(s[0] for s in got), "ui_ms": statistics.median(s[1] for s in got),
                   "push_bytes": statistics.median(s[2] for s in got), "first_push_node_ms": first[name][0],
                   "first_push_ui_ms": first[name][1], "first_push_bytes": first[name][2]}
            for name, got in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--running", type=int, default=100, help="units of the running assignment (default 100)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frost-history-") as tmp:
        figures = measure(Path(tmp), args.running)
    baseline = figures["none finished (baseline)"]
    rows = []
    for name, f in figures.items():
        f["node_ratio"] = f["node_ms"] / max(baseline["node_ms"], 1e-3)
        f["ui_ratio"] = f["ui_ms"] / max(baseline["ui_ms"], 1e-3)
        met = f["node_ratio"] <= GOAL_RATIO and f["ui_ratio"] <= GOAL_RATIO
        rows.append([name, f["node_ms"], f["node_ratio"], f["ui_ms"], f["ui_ratio"], f["push_bytes"],
                     f"<= {GOAL_RATIO:g}: {'yes' if met else 'NO'}",
                     f"{f['first_push_node_ms']:.0f} / {f['first_push_ui_ms']:.0f} ms, {f['first_push_bytes']:,} bytes"])
    print_table(["history", "node ms a push", "ratio", "UI ms a push", "ratio", "bytes", "goal",
                 "first push: node / UI, bytes"], rows)
    print(f"(the running assignment: {args.running:,} units)")
    write_results("snapshot_history_cost", {"running_units": args.running, "cases": figures})


if __name__ == "__main__":
    main()

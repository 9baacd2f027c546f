"""What a script's question costs the node's event loop when long sweeps are behind it and one is running.

Question: `frost-tui assignments` prints a row per assignment, and `submit --wait` asks about its assignment twice a
second until it ends. With 10,000-unit sweeps, how long does the node's event loop (which also supervises the
guests, gossips and places units) spend answering each? Until 2026-11-27 19:40 UTC both answers carried every unit:
`ListAssignments` read every assignment whole, made a view of every unit and encoded them all for the control
socket; `submit --wait` asked `GetAssignment` for the whole running sweep. Now `ListAssignments` answers as the
screen lists (SNAPSHOT_UNITS units of each and the counts of all, a settled assignment's view made once) and
`submit --wait` asks `GetAssignment(every_unit=False)`, then once for every unit at the end. The old answers are
the baselines, measured in the same run on the same store: "every unit" is what each answer did before.

Method: one store with FINISHED finished sweeps of 10,000 units and one running sweep of 10,000 (3,000 done, 6
running, the rest queued), a stand-in node around it with the parts the answers read. Each trial times the
node's answer (`answers.answer`) and its encoding for the control socket (`control.reply_body`), in process CPU
time, alternating the variants; medians of TRIALS after one unmeasured round (which makes the settled views).
`FindUnits` (the screen's `/` and `frost-tui units`) is timed beside them, for reference. Run:
`.venv/bin/python bench/query_cost.py` (about 30 s, most of it building the store).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

import trio  # noqa: E402

from frost_core.api.queries import FindUnits, GetAssignment, ListAssignments  # noqa: E402
from frost_core.master.store import Delivery, MasterStore, NewUnit, Placement  # noqa: E402
from frost_core.node.answers import answer  # noqa: E402
from frost_core.node.control import reply_body  # noqa: E402
from frost_core.node.views import SettledViews, assignment_view  # noqa: E402

FINISHED, UNITS_EACH = 5, 10_000
TRIALS = 7


def build(path: Path) -> tuple[MasterStore, str]:
    store = MasterStore(path, node_id="ab" * 16)
    for index in range(FINISHED + 1):
        aid = store.create_assignment(plugin="p", plugin_version="1", plugin_hash="h" * 64, params={},
                                      units=[NewUnit(data={"i": i}, memory_bytes=1, cost=1.0) for i in range(UNITS_EACH)])
        if index == FINISHED:   # the running one
            store.place_units([Placement(aid, i, f"host-{i % 7}") for i in range(3_006)])
            store.accept_results([Delivery(aid, i, 1, b"\x00", cpu_seconds=1.0) for i in range(3_000)])
            return store, aid
        store.place_units([Placement(aid, i, f"host-{i % 7}") for i in range(UNITS_EACH)])
        store.accept_results([Delivery(aid, i, 1, b"\x00", cpu_seconds=1.0) for i in range(UNITS_EACH)])
        store.mark_combining(aid)
        store.finish_assignment(aid, data=b"r", media_type="text/plain", filename="r.txt")
    raise AssertionError("unreachable")


def stand_in(store: MasterStore, folder: Path) -> SimpleNamespace:
    """The parts of a node the answers read, with nothing running here."""
    return SimpleNamespace(
        store=store, results_dir=folder, node_id="ab" * 16, config=SimpleNamespace(node_name="desk"), membership=None,
        settled_views=SettledViews(), live_progress=dict, unit_etas=dict, unit_waiting=dict, unit_states=dict,
        gang_views=dict)


async def every_unit_of_all(node: SimpleNamespace) -> tuple:
    """`ListAssignments`' answer before 2026-11-27 19:40 UTC: every assignment read whole, every unit a view."""
    return tuple(assignment_view(record, now=time.time(), results_dir=node.results_dir)
                 for record in node.store.assignments())


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store, running = build(folder / "master.sqlite")
        node = stand_in(store, folder)
        variants = {
            "assignments: as listed (now)": ListAssignments(),
            "assignments: every unit (before)": None,
            "submit --wait poll: as listed (now)": GetAssignment(assignment_id=running, every_unit=False),
            "submit --wait poll: every unit (before)": GetAssignment(assignment_id=running),
            "units ASSIGNMENT failed (FindUnits)": FindUnits(assignment_id=running, match="failed"),
        }
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        sizes: dict[str, int] = {}
        for trial in range(TRIALS + 1):
            for name, query in variants.items():
                began = time.process_time()
                if query is None:
                    reply = await every_unit_of_all(node)
                    body = reply_body(ListAssignments(), reply)
                else:
                    body = reply_body(query, await answer(node, query))
                took = time.process_time() - began
                if trial:
                    seconds[name].append(took)
                sizes[name] = len(body)
        store.close()
    median = {name: statistics.median(values) for name, values in seconds.items()}
    pairs = (("assignments: as listed (now)", "assignments: every unit (before)"),
             ("submit --wait poll: as listed (now)", "submit --wait poll: every unit (before)"))
    rows = [[name, round(median[name] * 1e3, 1), round(sizes[name] / 1e6, 2),
             next((f"{median[now] / median[before]:.3f}" for now, before in pairs if name == now), "")]
            for name in variants]
    print_table(["answer", "node loop ms (median)", "reply MB", "now / before"], rows)
    write_results("query_cost", {
        "finished_sweeps": FINISHED, "units_each": UNITS_EACH, "trials": TRIALS,
        "median_ms": {name: median[name] * 1e3 for name in variants},
        "reply_bytes": sizes,
        "ratio_now_of_before": {now: median[now] / median[before] for now, before in pairs},
    })


if __name__ == "__main__":
    trio.run(main)

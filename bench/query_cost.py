"""What a script's question costs the node's event loop when long sweeps are behind it and one is running.

Question: `frost-tui assignments` prints a row per assignment, and `submit --wait` asks about its assignment twice a
second until it ends. With 10,000-unit sweeps, how long does the node's event loop (which also supervises the
guests, gossips and places units) spend answering each? Until 2026-11-27 19:40 UTC both answers carried every unit:
`ListAssignments` read every assignment whole, made a view of every unit and encoded them all for the control
socket; `submit --wait` asked `GetAssignment` for the whole running sweep. Now `ListAssignments` answers as the
screen lists (SNAPSHOT_UNITS units of each and the counts of all, a settled assignment's view made once) and
`submit --wait` asks `GetAssignment(every_unit=False)`, then once for every unit at the end. The old answers are
the baselines, measured in the same run on the same store: "every unit" is what each answer did before.
Since 2026-11-27 22:12 UTC the answers that go through every unit (`GetAssignment` whole, which `submit --wait`
asks once at the end; `FindUnits`) read and make their views in a worker thread, and the loop only copies what
the views need: each is timed beside the same answer made on the event loop, as it was before.

Method: one store with FINISHED finished sweeps of 10,000 units and one running sweep of 10,000 (3,000 done, 6
running, the rest queued), a stand-in node around it with the parts the answers read. Each trial times the
node's answer to the control socket's request, encoded (`control.answer_request`), in process CPU
time (every thread's), and the longest the event loop went without running another task meanwhile (a task that
wakes every 0.5 ms notes the gaps), alternating the variants; medians of TRIALS after one unmeasured round (which
makes the settled views). Run: `.venv/bin/python bench/query_cost.py` (about 30 s, most of it building the store).
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
from frost_core.node.answers import _find_units, _seen, answer  # noqa: E402
from frost_core.node.control import answer_request, reply_body, request_message  # noqa: E402
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


class LoopHold:
    """The longest gap between two wake-ups of a task that sleeps TICK at a time: how long the loop was held."""

    TICK = 0.0005

    def __init__(self) -> None:
        self.longest = 0.0

    async def run(self) -> None:
        last = time.perf_counter()
        while True:
            await trio.sleep(self.TICK)
            now = time.perf_counter()
            self.longest, last = max(self.longest, now - last - self.TICK), now


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store, running = build(folder / "master.sqlite")
        node = stand_in(store, folder)
        whole = GetAssignment(assignment_id=running)
        failed = FindUnits(assignment_id=running, match="failed")

        def asked(query):
            async def ask():   # as the control socket answers it: the request decoded, the reply encoded
                reply = await answer_request(request_message(query), lambda typed: answer(node, typed))
                assert reply.ok, reply.error_message
                return reply.body
            return ask

        async def every_unit_on_the_loop():
            return reply_body(whole, _seen(node).view(node.store.assignment(running)))

        async def found_on_the_loop():
            return reply_body(failed, _find_units(node.store, _seen(node), running, ["failed"], failed.limit))

        async def every_unit_before():
            return reply_body(ListAssignments(), await every_unit_of_all(node))

        variants = {
            "assignments: as listed (now)": asked(ListAssignments()),
            "assignments: every unit (before)": every_unit_before,
            "submit --wait poll: as listed (now)": asked(GetAssignment(assignment_id=running, every_unit=False)),
            "submit --wait's last read, every unit: worker thread (now)": asked(whole),
            "every unit on the event loop (both, before)": every_unit_on_the_loop,
            "units ASSIGNMENT failed (FindUnits): worker thread (now)": asked(failed),
            "units ASSIGNMENT failed (FindUnits): event loop (before)": found_on_the_loop,
            "units ASSIGNMENT 4711 (FindUnits)": asked(FindUnits(assignment_id=running, match="4711")),
        }
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        holds: dict[str, list[float]] = {name: [] for name in variants}
        sizes: dict[str, int] = {}
        for trial in range(TRIALS + 1):
            for name, ask in variants.items():
                hold = LoopHold()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hold.run)
                    await trio.sleep(0.01)
                    hold.longest = 0.0
                    began = time.process_time()
                    body = await ask()
                    took = time.process_time() - began
                    await trio.sleep(0.002)
                    nursery.cancel_scope.cancel()
                if trial:
                    seconds[name].append(took)
                    holds[name].append(hold.longest)
                sizes[name] = len(body)
        store.close()
    median = {name: statistics.median(values) for name, values in seconds.items()}
    held = {name: statistics.median(values) for name, values in holds.items()}
    pairs = (("assignments: as listed (now)", "assignments: every unit (before)"),
             ("submit --wait poll: as listed (now)", "every unit on the event loop (both, before)"),
             ("submit --wait's last read, every unit: worker thread (now)",
              "every unit on the event loop (both, before)"),
             ("units ASSIGNMENT failed (FindUnits): worker thread (now)",
              "units ASSIGNMENT failed (FindUnits): event loop (before)"))

    def ratio(name: str, figures: dict[str, float]) -> str:
        return next((f"{figures[now] / figures[before]:.3f}" for now, before in pairs if name == now), "")

    rows = [[name, round(median[name] * 1e3, 1), round(held[name] * 1e3, 1), round(sizes[name] / 1e6, 2),
             ratio(name, median), ratio(name, held)] for name in variants]
    print_table(["answer", "node CPU ms (median)", "loop held ms (median)", "reply MB", "CPU now / before",
                 "held now / before"], rows)
    write_results("query_cost", {
        "finished_sweeps": FINISHED, "units_each": UNITS_EACH, "trials": TRIALS,
        "median_ms": {name: median[name] * 1e3 for name in variants},
        "median_loop_held_ms": {name: held[name] * 1e3 for name in variants},
        "reply_bytes": sizes,
        "ratio_now_of_before": {now: median[now] / median[before] for now, before in pairs},
        "loop_held_ratio_now_of_before": {now: held[now] / held[before] for now, before in pairs},
    })


if __name__ == "__main__":
    trio.run(main)

"""How much CPU does the idle UI take with 100 peers and 10 guests? Goal: <= 2 % of one core.

The UI runs headless (Textual renders every frame, the terminal write is all it skips) on a
fake node that behaves like a live one (`tests.tui.fake_node.live_node`): ten snapshots a
second, as a live node at most publishes, wall-clock times, every peer heard from every two
seconds and one history sample a second. Baseline, in the same run: the same node publishing
with no UI. Each case runs for WINDOW seconds after a warm-up.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from frost_tui.app import create_app  # noqa: E402
from tests.tui.fake_node import live_node  # noqa: E402

WINDOW = 20.0
WARM_UP = 3.0
PEERS, GUESTS, HZ = 100, 10, 10.0


def cpu_seconds() -> float:
    return time.process_time()


def measure_baseline() -> float:
    """The node alone publishing under trio: what any UI must pay on top of."""
    node = live_node(peers=PEERS, guests=GUESTS, tick_hz=HZ)
    node.set_snapshot_listener(lambda snapshot: None)

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.serve)
            await trio.sleep(WARM_UP)
            start = cpu_seconds()
            await trio.sleep(WINDOW)
            used = cpu_seconds() - start
            nursery.cancel_scope.cancel()
        return used

    return trio.run(main) / WINDOW * 100


def measure_ui(tab: str) -> float:
    node = live_node(peers=PEERS, guests=GUESTS, tick_hz=HZ)

    async def main() -> float:
        app = create_app(node)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press(tab)
            await asyncio.sleep(WARM_UP)
            start = cpu_seconds()
            await asyncio.sleep(WINDOW)
            return cpu_seconds() - start

    return asyncio.run(main()) / WINDOW * 100


def main() -> None:
    baseline = measure_baseline()
    rows = [["node alone (baseline)", baseline, 1.0]]
    figures = {"baseline_cpu_percent": baseline, "window_seconds": WINDOW, "snapshots_per_second": HZ}
    for tab, name in (("1", "machine"), ("3", "peers"), ("2", "guests")):
        percent = measure_ui(tab)
        rows.append([f"UI on tab {tab} ({name})", percent, percent / baseline if baseline else float("inf")])
        figures[f"ui_{name}_cpu_percent"] = percent
    worst = max(v for k, v in figures.items() if k.startswith("ui_"))
    figures["worst_ui_cpu_percent"] = worst
    figures["goal_cpu_percent"] = 2.0
    print_table(["case", "CPU % of one core", "x baseline"], rows)
    print(f"\nworst UI case: {worst:.2f} % of a core (goal <= 2 %)")
    write_results("ui_idle_cpu", figures)


if __name__ == "__main__":
    main()

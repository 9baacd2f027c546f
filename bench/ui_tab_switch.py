"""The CPU a tab switch costs the UI: to the Settings tab and away from it, against a switch between two table tabs.

Headless under Textual's Pilot at 132x40, against the fake node of the UI tests (a node that
answers at once, so the figures are the UI's own). Settings is opened once first (its form is
built on its first showing: bench/ui_startup.py times that). Then each cycle presses 7 (to
Settings), 1 (away from it, to Machine), 2 and 1 (Guests and back, the baseline: two tabs of a
table each), and takes the process's CPU time of each key and what follows until Pilot's wait
returns (its redraw). Medians over the cycles of each fresh app, then the median of the apps;
ratios to the baseline in the same app. Quick run: `--apps 2`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_tui.app import create_app  # noqa: E402
from frost_tui.shots.fixed import DEMO_NOW  # noqa: E402
from tests.tui.fake_node import FakeNode  # noqa: E402

SIZE = (132, 40)
CYCLES = 8
SWITCHES = (("7", "to Settings"), ("1", "from Settings"), ("2", "between two tables"), ("1", None))
"""Each cycle's keys and what each measures (None: the way back, not counted)."""


async def one_app() -> dict[str, float]:
    """Median CPU seconds of each switch over CYCLES cycles in a fresh app."""
    app = create_app(FakeNode(), clock=lambda: DEMO_NOW)
    cpu: dict[str, list[float]] = {name: [] for _, name in SWITCHES if name}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("7")
        await pilot.pause()
        await asyncio.sleep(1)   # the form built, laid out and drawn
        await pilot.press("1")
        await pilot.pause()
        for _ in range(CYCLES):
            for key, name in SWITCHES:
                began = time.process_time()
                await pilot.press(key)
                await pilot.pause()
                if name:
                    cpu[name].append(time.process_time() - began)
    return {name: statistics.median(values) for name, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=5)
    args = parser.parse_args()
    apps = [asyncio.run(one_app()) for _ in range(args.apps)]
    medians = {name: statistics.median(app[name] for app in apps) for name in apps[0]}
    base = "between two tables"
    ratios = {name: statistics.median(app[name] / app[base] for app in apps) for name in apps[0]}
    print_table(["switch", "CPU ms (median of apps)", "min-max of apps", f"/ {base} (same app)"],
                [[name, medians[name] * 1000, f"{min(a[name] for a in apps) * 1000:.0f}-"
                  f"{max(a[name] for a in apps) * 1000:.0f}", ratios[name]] for name in medians])
    write_results("ui_tab_switch", {"apps": args.apps, "cycles": CYCLES, "median_cpu_seconds": medians,
                                    "per_app_cpu_seconds": apps, "ratio_of_switch_between_two_tables": ratios})


if __name__ == "__main__":
    main()

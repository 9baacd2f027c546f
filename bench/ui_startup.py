"""How long the UI takes to show its first screen, and to open the Settings tab the first time.

Headless under Textual's Pilot at 132x40, against the fake node of the UI tests (a node that
answers at once, so the figures are the UI's own): from `run_test` entered to the first screen
painted, wall and CPU time; then the `7` that opens Settings, whose form (435 widgets, one field
per option) is built when the tab is first shown (since 2026-11-28; before, the app built it at
start-up). Baseline, in the same run: a Textual app with one Static, through the same steps, which
is the framework's own start-up. Each round starts a fresh app; medians of the rounds.
Quick run: `--rounds 3`.
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
from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Static  # noqa: E402

from frost_tui.app import create_app  # noqa: E402
from frost_tui.shots.fixed import DEMO_NOW  # noqa: E402
from tests.tui.fake_node import FakeNode  # noqa: E402

SIZE = (132, 40)


class Bare(App):
    def compose(self) -> ComposeResult:
        yield Static("ready")


async def start(app: App) -> dict[str, float]:
    """Seconds to the first screen (wall, CPU) and to the screen after `7`."""
    began, cpu = time.perf_counter(), time.process_time()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        figures = {"first_screen": time.perf_counter() - began, "first_screen_cpu": time.process_time() - cpu}
        pressed = time.perf_counter()
        await pilot.press("7")
        await pilot.pause()
        figures["settings_opened"] = time.perf_counter() - pressed
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    rounds: dict[str, list[dict[str, float]]] = {"frost-tui": [], "bare Textual app": []}
    for _ in range(args.rounds):   # alternated, so a slow moment of the machine hits both
        rounds["frost-tui"].append(asyncio.run(start(create_app(FakeNode(), clock=lambda: DEMO_NOW))))
        rounds["bare Textual app"].append(asyncio.run(start(Bare())))
    medians = {app: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for app, runs in rounds.items()}
    ui, bare = medians["frost-tui"], medians["bare Textual app"]
    rows = [[app, m["first_screen"] * 1000, m["first_screen_cpu"] * 1000, m["settings_opened"] * 1000]
            for app, m in medians.items()]
    print_table(["app", "first screen ms", "its CPU ms", "7 (Settings, first time) ms"], rows)
    print(f"frost-tui's first screen / the bare app's: {ui['first_screen'] / bare['first_screen']:.2f}")
    write_results("ui_startup", {"rounds": args.rounds, "medians_seconds": medians,
                                 "ratio_first_screen_of_bare": ui["first_screen"] / bare["first_screen"],
                                 "ratio_settings_opened_of_bare": ui["settings_opened"] / bare["settings_opened"]})


if __name__ == "__main__":
    main()

"""Keypress to updated screen for `p` and `e`: goal <= 50 ms p95.

Measured headless (Textual composes every frame; only the terminal write is skipped) with a
node that answers at once, so the figure is the UI's own share: key event, command, snapshot
message, redraw, up to the end of the first screen update after the new snapshot is shown.
Baseline, in the same run: the same path without a key: a snapshot published by the node
itself (a new name in the top bar), from publication to the end of the screen update.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from textual import events  # noqa: E402
from textual.screen import Screen  # noqa: E402

from frost_tui.app import create_app  # noqa: E402
from tests.tui.fake_node import live_node  # noqa: E402

PRESSES = 40


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


async def measure() -> dict[str, list[float]]:
    node = live_node()
    full = node.snapshot()
    app = create_app(node)
    painted: list[float] = []
    original = Screen._compositor_refresh

    def record(screen: Screen) -> None:
        original(screen)
        painted.append(time.perf_counter())

    Screen._compositor_refresh = record  # type: ignore[method-assign]
    timings: dict[str, list[float]] = {"snapshot (baseline)": [], "p": [], "e": []}
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("2")
            await pilot.pause(1.0)
            for _ in range(PRESSES):
                for key in timings:
                    name = key.split()[0]
                    if name == "e":  # guests to evict each time (not timed)
                        node.publish(guests=full.guests)
                    await pilot.pause(0.05)
                    before = app.snapshot
                    start = time.perf_counter()
                    if name == "snapshot":
                        app._last_command_at = time.monotonic()  # redraw at once, as after a command
                        node.publish(name=f"desk-{len(painted)}")
                    else:
                        event = events.Key(name, name)
                        event.set_sender(app)
                        app._driver.send_message(event)  # as a terminal's key arrives
                    deadline = start + 2.0
                    while app.snapshot is before and time.perf_counter() < deadline:
                        await asyncio.sleep(0.0005)
                    shown = time.perf_counter()
                    while (not painted or painted[-1] <= shown) and time.perf_counter() < deadline:
                        await asyncio.sleep(0.0005)
                    timings[key].append((painted[-1] - start) * 1000)
    finally:
        Screen._compositor_refresh = original  # type: ignore[method-assign]
    return timings


def main() -> None:
    timings = asyncio.run(measure())
    base = statistics.median(timings["snapshot (baseline)"])
    rows, figures = [], {"presses": PRESSES, "goal_p95_ms": 50.0}
    for key, values in timings.items():
        p50, p95 = statistics.median(values), percentile(values, 0.95)
        rows.append([key, p50, p95, p50 / base])
        figures[f"{key.split()[0]}_p50_ms"] = p50
        figures[f"{key.split()[0]}_p95_ms"] = p95
    print_table(["key", "p50 ms", "p95 ms", "p50 x baseline"], rows)
    write_results("ui_keypress_latency", figures)


if __name__ == "__main__":
    main()

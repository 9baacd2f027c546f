"""Keypress to updated screen for `p` and `e`: goal <= 50 ms p95.

Measured headless (Textual composes every frame; only the terminal write is skipped), up to the
end of the first screen update after the snapshot showing the key's effect, on two nodes:
- real: an in-process `frost_core.node.wiring.Node`, as `frost-tui` runs it, hosting ten
  ballast guests (real processes at the lowest priority) with 100 real peers in its table
  (bench/_desk.py). `p` alternately pauses and resumes hosting: key event, command, the node
  stopping or continuing its ten guests, snapshot, redraw; the clock stops at the first paint
  after the hosting state shown has changed. `e` evicts the ten guests: the clock stops at the
  first paint after the screen shows fewer than ten running (or checkpointing). The swarm's peers host nothing, so
  the units come back through the node's own master queue; the next `e` waits (untimed) until
  all ten run again, which takes seconds, so `e` is pressed a quarter as often as `p`.
- fake (this script's figure before issue 15, kept beside): a node that answers at once, so
  the figure is the UI's own share; `e` re-publishes the guests before each press.
Baseline, in the same run (fake node): the same path without a key: a snapshot published by the
node itself, from publication to the end of the screen update. Quick run: `--presses 5`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench._common import print_table, write_results  # noqa: E402
from textual import events  # noqa: E402
from textual.screen import Screen  # noqa: E402

from _desk import GUESTS, active_guests, desk_node, populate, stop_swarm, until  # noqa: E402
from frost_tui.app import create_app  # noqa: E402
from tests.tui.fake_node import live_node  # noqa: E402

PRESSES = 40
GOAL_P95_MS = 50.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


@contextmanager
def recording_paints() -> Iterator[list[float]]:
    """perf_counter() at the end of every screen update while the block runs."""
    painted: list[float] = []
    original = Screen._compositor_refresh

    def record(screen: Screen) -> None:
        original(screen)
        painted.append(time.perf_counter())

    Screen._compositor_refresh = record  # type: ignore[method-assign]
    try:
        yield painted
    finally:
        Screen._compositor_refresh = original  # type: ignore[method-assign]


def press(app, name: str) -> None:
    event = events.Key(name, name)
    event.set_sender(app)
    app._driver.send_message(event)  # as a terminal's key arrives


async def until_painted(app, painted: list[float], shown, start: float) -> float:
    """ms from `start` to the end of the first paint after `shown(app.snapshot)` holds (2 s at most)."""
    deadline = start + 2.0
    while not shown(app.snapshot) and time.perf_counter() < deadline:
        await asyncio.sleep(0.0005)
    at = time.perf_counter()
    while (not painted or painted[-1] <= at) and time.perf_counter() < deadline:
        await asyncio.sleep(0.0005)
    return (painted[-1] - start) * 1000


async def measure_fake(presses: int) -> dict[str, list[float]]:
    node = live_node()
    full = node.snapshot()
    app = create_app(node)
    timings: dict[str, list[float]] = {"snapshot (baseline)": [], "p": [], "e": []}
    with recording_paints() as painted:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("2")
            await pilot.pause(1.0)
            for _ in range(presses):
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
                        press(app, name)
                    timings[key].append(await until_painted(app, painted, lambda s, b=before: s is not b, start))
    return timings


async def measure_real(presses: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"p (pause)": [], "p (resume)": [], "e": []}
    with tempfile.TemporaryDirectory() as tmp, recording_paints() as painted:
        folder = Path(tmp)
        node = desk_node(folder)
        app = create_app(node)
        async with app.run_test(size=(160, 50)) as pilot:
            swarm = await populate(node, folder, asyncio.sleep)
            try:
                await pilot.press("2")
                await pilot.pause(1.0)
                for n in range(2 * presses):
                    pausing = n % 2 == 0
                    await pilot.pause(0.3)  # the node settles; the last change is on screen
                    start = time.perf_counter()
                    press(app, "p")
                    done = lambda s, pausing=pausing: (s.hosting.state == "paused") == pausing  # noqa: E731
                    timings["p (pause)" if pausing else "p (resume)"].append(
                        await until_painted(app, painted, done, start))
                for _ in range(max(1, presses // 4)):
                    await until(lambda: active_guests(node.snapshot()) == GUESTS, asyncio.sleep, "ten guests back")
                    await pilot.pause(0.3)
                    start = time.perf_counter()
                    press(app, "e")
                    timings["e"].append(await until_painted(app, painted, lambda s: active_guests(s) < GUESTS, start))
            finally:
                stop_swarm(swarm)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=PRESSES, help=f"presses of each key (default {PRESSES})")
    args = parser.parse_args()
    real = asyncio.run(measure_real(args.presses))
    fake = asyncio.run(measure_fake(args.presses))
    base = statistics.median(fake["snapshot (baseline)"])
    rows, figures = [], {"presses": args.presses, "goal_p95_ms": GOAL_P95_MS, "real": {}, "fake": {}}
    for node, timings in (("real", real), ("fake", fake)):
        for key, values in timings.items():
            p50, p95 = statistics.median(values), percentile(values, 0.95)
            rows.append([node, key, p50, p95, p50 / base, "yes" if p95 <= GOAL_P95_MS else "NO"])
            name = key.replace(" (", "_").rstrip(")").split()[0]
            figures[node][f"{name}_p50_ms"] = p50
            figures[node][f"{name}_p95_ms"] = p95
    print_table(["node", "key", "p50 ms", "p95 ms", "p50 x baseline", f"p95 <= {GOAL_P95_MS:g} ms"], rows)
    write_results("ui_keypress_latency", figures)


if __name__ == "__main__":
    main()

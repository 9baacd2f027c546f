"""How much CPU does the idle UI take with 100 peers and 10 guests? Goal: <= 2 % of one core.

The UI runs headless (Textual renders every frame, the terminal write is all it skips), on two nodes:
- real: an in-process `frost_core.node.wiring.Node`, as `frost-tui` runs it, hosting ten guests
  of the ballast plugin (real guest processes at the lowest priority, sleeping in their steps)
  and holding 100 real peers in its membership table: `bench/_peer_swarm.py` runs 100
  membership services with their own transports on loopback, which join through the node and
  gossip drifting figures (bench/_desk.py);
- fake (this script's figure before issue 15, kept beside): `tests.tui.fake_node.live_node`,
  ten snapshots a second, every peer heard from every two seconds, one history sample a second.
Baseline for each, in the same run: the same node serving with no UI. CPU is this process's
(node and UI threads; guests and the swarm are other processes), over WINDOW seconds after a
warm-up. Quick run: `--quick` (a shorter window, the peers tab only).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench._common import print_table, write_results  # noqa: E402
from _desk import GUESTS, PEERS, desk_node, populate, stop_swarm  # noqa: E402
from frost_tui.app import create_app  # noqa: E402
from tests.tui.fake_node import live_node  # noqa: E402

WINDOW = 15.0
QUICK_WINDOW = 5.0
WARM_UP = 3.0
HZ = 10.0
TABS = (("1", "machine"), ("3", "peers"), ("2", "guests"))
GOAL = 2.0


def cpu_seconds() -> float:
    return time.process_time()


def measure_fake_baseline(window: float) -> float:
    """The fake node alone publishing under trio."""
    node = live_node(peers=PEERS, guests=GUESTS, tick_hz=HZ)
    node.set_snapshot_listener(lambda snapshot: None)

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.serve)
            await trio.sleep(WARM_UP)
            start = cpu_seconds()
            await trio.sleep(window)
            used = cpu_seconds() - start
            nursery.cancel_scope.cancel()
        return used

    return trio.run(main) / window * 100


def measure_real_baseline(window: float) -> float:
    """The real node alone, with its guests and peers, serving under trio."""
    with tempfile.TemporaryDirectory() as tmp:
        node = desk_node(Path(tmp))

        async def main() -> float:
            async with trio.open_nursery() as nursery:
                await nursery.start(node.serve)
                swarm = await populate(node, Path(tmp), trio.sleep)
                try:
                    await trio.sleep(WARM_UP)
                    start = cpu_seconds()
                    await trio.sleep(window)
                    used = cpu_seconds() - start
                finally:
                    stop_swarm(swarm)
                nursery.cancel_scope.cancel()
            return used

        return trio.run(main) / window * 100


def measure_ui(node, tabs, window: float, setup=None) -> dict[str, float]:
    """CPU % of the UI with `node` on each tab in turn; `setup(node)` runs once the node serves."""

    async def main() -> dict[str, float]:
        app = create_app(node)
        used = {}
        async with app.run_test(size=(160, 50)) as pilot:
            cleanup = await setup(node) if setup else None
            try:
                for key, name in tabs:
                    await pilot.press(key)
                    await asyncio.sleep(WARM_UP)
                    start = cpu_seconds()
                    await asyncio.sleep(window)
                    used[name] = (cpu_seconds() - start) / window * 100
            finally:
                if cleanup:
                    cleanup()
        return used

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_WINDOW:g} s windows, the peers tab only")
    args = parser.parse_args()
    window = QUICK_WINDOW if args.quick else WINDOW
    tabs = TABS[1:2] if args.quick else TABS
    figures: dict = {"window_seconds": window, "peers": PEERS, "guests": GUESTS, "goal_cpu_percent": GOAL}
    rows = []

    real_base = measure_real_baseline(window)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        async def setup(node):
            swarm = await populate(node, folder, asyncio.sleep)
            return lambda: stop_swarm(swarm)

        real = measure_ui(desk_node(folder), tabs, window, setup)
    fake_base = measure_fake_baseline(window)
    fake = measure_ui(live_node(peers=PEERS, guests=GUESTS, tick_hz=HZ), tabs, window)

    figures["real"] = {"baseline_cpu_percent": real_base, **{f"ui_{k}_cpu_percent": v for k, v in real.items()},
                       "worst_ui_cpu_percent": max(real.values())}
    figures["fake"] = {"baseline_cpu_percent": fake_base, "snapshots_per_second": HZ,
                       **{f"ui_{k}_cpu_percent": v for k, v in fake.items()}, "worst_ui_cpu_percent": max(fake.values())}
    rows.append(["real node alone (baseline)", real_base, "", 1.0])
    for name, percent in real.items():
        rows.append([f"real node + UI, {name} tab", percent, percent - real_base, percent / real_base])
    rows.append(["fake node alone (baseline)", fake_base, "", 1.0])
    for name, percent in fake.items():
        rows.append([f"fake node + UI, {name} tab", percent, percent - fake_base, percent / fake_base if fake_base else ""])
    print(f"{PEERS} peers, {GUESTS} guests, {window:g} s windows; CPU of this process (node + UI)\n")
    print_table(["case", "CPU % of one core", "UI's share (minus baseline)", "x baseline"], rows)
    worst = figures["real"]["worst_ui_cpu_percent"]
    figures["goal_met"] = worst <= GOAL
    print(f"\nworst real case: {worst:.2f} % of a core (goal <= {GOAL:g} %; fake node: "
          f"{figures['fake']['worst_ui_cpu_percent']:.2f} %)")
    figures["quick"] = args.quick
    write_results("ui_idle_cpu", figures)


if __name__ == "__main__":
    main()

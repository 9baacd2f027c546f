"""A resumed unit's start in the warm spare: its state handed over as a sealed memfd against sent through the pipe.

Question: how long from the supervisor's `run` with a checkpoint in hand (as a move-in calls it)
to the unit's first step in the guest, with its state of 1 / 10 / 100 MiB, by each way in?
This is the "guest start-up" stage of `migration_latency.py` without the move around it: taking
the waiting spare, its memory limit, GuestStart, the guest settling in and loading its plugin,
the state handed over (memfd: the node copies it into a memfd in a thread, seals it and sends the
fd; the guest maps it) or sent (1 MiB pipe: the guest, at the lowest priority, wakes once per MiB
to read it), the decode from there and the first step.

One node process (a `GuestSupervisor` with its warm spare, the product's settings), the ballast
plugin (bench/bench_plugins/ballast.py: it prints the time of the first step in each process). A
trial starts the unit from the same checkpoint, times the first step, kills the guest and waits
for the next spare. The two ways alternate trial by trial, so both see the same machine; the pipe
trials make the memfd step fail at once, which is exactly the path without it (GuestStart names
no handed state, the bulk data carries it). `--load N` adds N busy processes at normal priority
(the owner's work, which the idle-priority guest waits behind). Run:
`.venv/bin/python bench/guest_hand_in.py` (about a minute; `--sizes 1,10 --trials 4` is quicker).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.guest import Evicted, GuestEvent, GuestSettings, GuestSupervisor, GuestTask  # noqa: E402
from frost_core.guest import running  # noqa: E402
from frost_core.plugin.registry import content_hash, load_plugin_file  # noqa: E402

PLUGIN = Path(__file__).resolve().parent / "bench_plugins" / "ballast.py"
FIRST_STEP = "bench-first-step"
MIB = 1 << 20
WAYS = ("memfd", "pipe")


def _burn() -> None:
    while True:
        pass


def _no_memfd(state) -> int:
    raise OSError("this trial sends the state through the pipe")


class FirstSteps:
    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, event: GuestEvent) -> None:
        if FIRST_STEP in event.message:
            self.times.append(float(event.message.split(FIRST_STEP)[1].split()[0]))


async def spare_ready(supervisor_pid: int, *, timeout: float = 60.0) -> None:
    """Until a spare waits in the supervisor's .spare folder (it has lowered itself and blocks on its pipe)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(supervisor_pid).children():
            try:
                if child.cwd().endswith(".spare") and child.status() == psutil.STATUS_SLEEPING:
                    await trio.sleep(0.2)  # well into its wait
                    return
            except psutil.Error:
                continue
        await trio.sleep(0.02)
    raise TimeoutError("no spare came")


async def measure_size(folder: Path, size_mib: float, trials: int) -> dict[str, list[float]]:
    steps = FirstSteps()
    settings = GuestSettings(warm_spare=True)  # as a node has it: `guests.warm_spare` is on by default
    guests = GuestSupervisor(data_dir=folder / f"node-{size_mib}", settings=settings, on_event=steps)
    plugin = load_plugin_file(PLUGIN)
    (unit,) = plugin.split({"ballast_bytes": int(size_mib * MIB), "units": 1, "steps": 10**9, "step_ms": 2})
    task = GuestTask(task_id="b0b0b0b0-1.0", assignment_id="b0b0b0b0-1", origin="b0b0b0b0", plugin_name=plugin.name,
                     plugin_version=plugin.version, plugin_hash=content_hash(PLUGIN), plugin_path=str(PLUGIN),
                     unit=unit, epoch=1)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    real_sealed_state = running.sealed_state
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.keep_warm)
        outcome = []

        async def run(checkpoint=None) -> None:
            outcome.append(await guests.run(task, checkpoint=checkpoint))

        evicted = None
        while evicted is None:  # a first checkpoint to start from: the unit's state once it runs
            steps.times.clear()
            nursery.start_soon(run)
            while not steps.times:
                await trio.sleep(0.02)
            await guests.evict(task.task_id)
            while not outcome:
                await trio.sleep(0.02)
            evicted = outcome.pop()
            assert isinstance(evicted, Evicted), evicted
            if evicted.checkpoint is None:  # the capture missed the evict deadline (a busy machine): again
                evicted = None
        for trial in range(trials * len(WAYS)):
            way = WAYS[trial % len(WAYS)]
            running.sealed_state = real_sealed_state if way == "memfd" else _no_memfd
            await spare_ready(os.getpid())
            steps.times.clear()
            began = time.time()
            nursery.start_soon(run, evicted.checkpoint)
            while not steps.times:
                await trio.sleep(0.002)
            seconds[way].append(steps.times[0] - began)
            for pid in guests.guest_pids():
                os.kill(pid, signal.SIGKILL)
            while not outcome:
                await trio.sleep(0.01)
            outcome.clear()
        running.sealed_state = real_sealed_state
        nursery.cancel_scope.cancel()
    guests.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="state sizes in MiB")
    parser.add_argument("--trials", type=int, default=8, help="trials per size and way")
    parser.add_argument("--load", type=int, default=0, help="busy processes at normal priority meanwhile")
    args = parser.parse_args()
    sizes = [float(size) for size in args.sizes.split(",")]
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.load)]
    for burner in burners:
        burner.start()
    try:
        with tempfile.TemporaryDirectory(prefix="frost-hand-in-") as folder:
            figures = {size: trio.run(measure_size, Path(folder), size, args.trials) for size in sizes}
    finally:
        for burner in burners:
            burner.kill()
            burner.join()
    rows, results = [], {}
    for size, seconds in figures.items():
        row: list = [size, args.trials]
        for way in WAYS:
            ms = sorted(s * 1000 for s in seconds[way])
            row += [statistics.median(ms), ms[-1]]
            results[f"{size:g} MiB {way}"] = {"ms": ms}
        row.append(statistics.median(seconds["pipe"]) / statistics.median(seconds["memfd"]))
        rows.append(row)
    print(f"load average {os.getloadavg()[0]:.1f}, {args.load} busy processes added")
    print_table(["state MiB", "trials", "memfd p50 ms", "memfd max", "pipe p50 ms", "pipe max", "pipe/memfd p50"], rows)
    write_results("guest_hand_in", {"load_added": args.load, "figures": results})


if __name__ == "__main__":
    main()

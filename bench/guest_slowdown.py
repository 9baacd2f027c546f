"""Slowdown of the owner's foreground jobs with one guest per core running at guest priority.

Question: how much longer does the owner's job take while guests run? Goal: <= 2 % for a
CPU-bound job; the memory-bound job (streams over a buffer larger than the caches) is reported,
since idle priority cannot protect caches and memory bandwidth. Baseline: the same job with the
guests paused (SIGSTOP: no CPU at all). Runs alternate paused / running in quick pairs and the
median of the paired ratios is reported, so load from other users of the machine, which drifts
over tens of seconds, hits both halves of a pair alike.

As on a systemd desktop, the node (this process) and the owner's jobs run in different cgroups
of equal weight where a cpu hierarchy is writable (root): the guests' own cgroups then decide
(`frost_core.guest.cgroups`), not the priority recipe, which ranks only inside one cgroup.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from guest_pause_latency import SPINNER  # noqa: E402

from frost_core.guest import GuestSettings, GuestSupervisor, GuestTask  # noqa: E402
from frost_core.guest.cgroups import current_mounts, remove_folder  # noqa: E402
from frost_core.plugin.api import WorkUnit  # noqa: E402
from frost_core.plugin.registry import content_hash  # noqa: E402

PAIRS = int(os.environ.get("SLOWDOWN_PAIRS", "12"))
JOBS = {
    "cpu-bound": "x = 0\nfor i in range(3_000_000):\n    x += i * i\n",
    "memory-bound": "buf = bytearray(64 << 20)\nfor _ in range(5):\n    buf[:] = bytes(buf)\n",
}


@contextlib.contextmanager
def separate_cgroups() -> Iterator[Path | None]:
    """Move this process (the node) into a cgroup of its own and yield another for the owner's jobs."""
    top = current_mounts().v1_roots.get("cpu")
    if top is None or not os.access(top, os.W_OK):
        yield None
        return
    node, desk = (top / f"bench-{role}-{os.getpid()}" for role in ("node", "desk"))
    home = current_mounts().v1["cpu"]
    node.mkdir()
    desk.mkdir()
    (node / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield desk
    finally:
        (home / "cgroup.procs").write_text(str(os.getpid()))
        for folder in (node, desk):
            remove_folder(folder)  # once the kernel has let its killed processes go


def run_job(code: str, desk: Path | None) -> float:
    """One foreground job per core, in the owner's own session and cgroup; the wall time of the slowest."""
    began = time.perf_counter()
    enter = None if desk is None else lambda: (desk / "cgroup.procs").write_text(str(os.getpid()))
    jobs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True, preexec_fn=enter)
            for _ in range(os.cpu_count() or 1)]
    for job in jobs:
        job.wait()
    return time.perf_counter() - began


async def measure(tmp: Path, desk: Path | None) -> dict[str, dict[str, list[float]]]:
    plugin = tmp / "spinner.py"
    plugin.write_text(SPINNER)
    guests = GuestSupervisor(data_dir=tmp / "node", settings=GuestSettings(step_timeout=3600), on_event=lambda e: None)
    cores = os.cpu_count() or 1
    times: dict[str, dict[str, list[float]]] = {name: {"alone": [], "with guests": []} for name in JOBS}
    async with trio.open_nursery() as nursery:
        for n in range(cores):
            task = GuestTask(task_id=f"bench0001-1.{n}", assignment_id="bench0001-1", origin="bench0001",
                             plugin_name="spinner", plugin_version="1", plugin_hash=content_hash(plugin),
                             plugin_path=str(plugin), unit=WorkUnit(n, {}, 1 << 20, 1.0), epoch=1)
            nursery.start_soon(guests.run, task)
        while sum(f.state == "running" for f in guests.figures()) < cores:
            await trio.sleep(0.05)
        for _ in range(PAIRS):
            for name, code in JOBS.items():
                guests.pause_all()
                times[name]["alone"].append(await trio.to_thread.run_sync(run_job, code, desk))
                guests.resume_all()
                await trio.sleep(0.2)  # guests back on the CPU before the job starts
                times[name]["with guests"].append(await trio.to_thread.run_sync(run_job, code, desk))
        await guests.evict()
    guests.close()
    return times


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, separate_cgroups() as desk:
        print("node and foreground jobs in different cgroups" if desk else "no writable cpu cgroup: one cgroup")
        times = trio.run(measure, Path(tmp), desk)
    rows, figures = [], {}
    for name, runs in times.items():
        alone, loaded = statistics.median(runs["alone"]), statistics.median(runs["with guests"])
        slowdown = statistics.median(b / a for a, b in zip(runs["alone"], runs["with guests"])) - 1
        goal = ("yes" if slowdown <= 0.02 else "NO") if name == "cpu-bound" else "(reported)"
        rows.append([name, alone, loaded, f"{slowdown:+.1%}", goal])
        figures[name] = {"alone_seconds": runs["alone"], "with_guests_seconds": runs["with guests"],
                         "median_paired_slowdown": slowdown}
    print_table(["foreground job (one per core)", "median alone s", "median with guests s", "paired slowdown",
                 "<= 2 %"], rows)
    write_results("guest_slowdown", figures)


if __name__ == "__main__":
    main()

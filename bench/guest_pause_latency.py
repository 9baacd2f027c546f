"""Pause latency: from `GuestSupervisor.pause_all()` until the busy guest is stopped (state T, or D when frozen in its cgroup).

Question: how soon after the owner presses pause does a guest stop using the CPU? Goal: p99
< 100 ms. Baseline in the same run: SIGSTOP to a plain busy process at normal priority
(the kernel's own floor for "stop a running process"). A stop takes effect when the process
next runs, and a SCHED_IDLE guest on a busy machine may not run for a while - so the second
figure is the CPU time (ns, /proc/PID/schedstat) the guest used between pause_all() and being
stopped, which is what the owner feels. Also checks that CPU time does not grow while paused.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402

from frost_core.guest import GuestSettings, GuestSupervisor, GuestTask  # noqa: E402
from frost_core.plugin.api import WorkUnit  # noqa: E402
from frost_core.plugin.registry import content_hash  # noqa: E402

ROUNDS = int(os.environ.get("PAUSE_ROUNDS", "200"))
SPINNER = textwrap.dedent(
    """
    from frost_core import Done, Output, Plugin, WorkUnit

    class Spinner(Plugin):
        name = "spinner"
        version = "1"
        def split(self, params):
            return [WorkUnit(0, {}, 1 << 20, 1.0)]
        def start(self, unit):
            return {"i": 0}
        def step(self, state):
            x = 0
            for k in range(20000):
                x += k
            return {"i": state["i"] + 1}
        def progress(self, state):
            return 0.5
        def combine(self, params, results):
            return Output(b"", "text/plain", "x.txt")

    plugin = Spinner()
    """
)


def stopped(pid: int) -> bool:
    """Stopped by SIGSTOP ("T") or frozen in its cgroup ("D": the spinner does no I/O to be in it otherwise)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rpartition(")")[2].split()[0] in ("T", "D")
    except FileNotFoundError:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_DISK_SLEEP)


def wait_stopped(pid: int) -> float:
    began = time.perf_counter()
    while not stopped(pid):
        pass
    return time.perf_counter() - began


def run_ns(pid: int) -> int:
    """Nanoseconds this process has spent on a CPU (Linux schedstat; 0 where unavailable)."""
    try:
        with open(f"/proc/{pid}/schedstat") as file:
            return int(file.read().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return 0


def cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def guest_latencies(tmp: Path) -> tuple[list[float], list[float], int]:
    plugin = tmp / "spinner.py"
    plugin.write_text(SPINNER)
    task = GuestTask(task_id="bench0001-1.0", assignment_id="bench0001-1", origin="bench0001",
                     plugin_name="spinner", plugin_version="1", plugin_hash=content_hash(plugin),
                     plugin_path=str(plugin), unit=WorkUnit(0, {}, 1 << 20, 1.0), epoch=1)
    guests = GuestSupervisor(data_dir=tmp / "node", settings=GuestSettings(step_timeout=3600), on_event=lambda e: None)
    latencies, used, grew = [], [], 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(guests.run, task)
        while not any(f.state == "running" for f in guests.figures()):
            await trio.sleep(0.01)
        pid = next(p.pid for p in psutil.Process().children() if "frost_core.guest.child" in " ".join(p.cmdline()))
        for _ in range(ROUNDS):
            ran = run_ns(pid)
            began = time.perf_counter()
            guests.pause_all()
            wait_stopped(pid)
            latencies.append(time.perf_counter() - began)
            used.append((run_ns(pid) - ran) / 1e6)
            frozen = cpu(pid)
            await trio.sleep(0.02)
            grew += cpu(pid) != frozen
            guests.resume_all()
            await trio.sleep(0.02)
        await guests.evict()
    return latencies, used, grew


def baseline_latencies() -> list[float]:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    time.sleep(0.3)
    latencies = []
    try:
        for _ in range(ROUNDS):
            began = time.perf_counter()
            os.killpg(busy.pid, signal.SIGSTOP)
            wait_stopped(busy.pid)
            latencies.append(time.perf_counter() - began)
            time.sleep(0.02)
            os.killpg(busy.pid, signal.SIGCONT)
            time.sleep(0.02)
    finally:
        busy.kill()
        busy.wait()
    return latencies


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        guest, used, grew = trio.run(guest_latencies, Path(tmp))
    base = baseline_latencies()
    rows, figures = [], {}
    for name, values in (("guest via pause_all()", guest), ("plain SIGSTOP (baseline)", base)):
        p50, p99, worst = statistics.median(values), percentile(values, 0.99), max(values)
        rows.append([name, len(values), p50 * 1000, p99 * 1000, worst * 1000])
        figures[name] = {"rounds": len(values), "p50_ms": p50 * 1000, "p99_ms": p99 * 1000, "max_ms": worst * 1000}
    figures["guest via pause_all()"]["rounds_where_cpu_grew_while_paused"] = grew
    figures["guest via pause_all()"]["cpu_ms_used_after_pause_p50"] = statistics.median(used)
    figures["guest via pause_all()"]["cpu_ms_used_after_pause_p99"] = percentile(used, 0.99)
    print_table(["what", "rounds", "p50 ms", "p99 ms", "max ms"], rows)
    print(f"guest CPU used between pause_all() and stopping: p50 {statistics.median(used):.3f} ms, "
          f"p99 {percentile(used, 0.99):.3f} ms")
    print(f"rounds where guest CPU time grew while paused: {grew} of {len(guest)}")
    write_results("guest_pause_latency", figures)


if __name__ == "__main__":
    main()

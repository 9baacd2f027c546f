"""Evict latency: from the owner's `evict` until the node's guests have left the CPU.

Question: how soon after the owner presses `e` is the CPU theirs again? Goal: p95 < 1 s on the
default guest settings. Baseline in the same run: SIGTERM to a plain busy process at nice 19
and reaping it (the kernel's own floor for "make a running process go away"). The ratio is
evict / baseline. One lone node (no peer takes the guests, so they are checkpointed and their
units requeued here); between rounds the requeued units start again.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from _nodes import start_cluster, stop_all, wait_for  # noqa: E402

ROUNDS = int(os.environ.get("EVICT_ROUNDS", "20"))
ENDLESS = {"samples": "1000000000000", "units": "2"}
SPIN = "while True: pass"


def guest_pids(node_pid: int) -> list[int]:
    """The node's guest processes that run a unit (the warm spare waits in its own folder)."""
    found = []
    for child in psutil.Process(node_pid).children(recursive=True):
        try:
            if "frost_core.guest.child" in " ".join(child.cmdline()) and Path(child.cwd()).name != ".spare":
                found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def gone(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)


def evict_once(node) -> float:
    pids = wait_for(lambda: guest_pids(node.process.pid), timeout=60, what="guests running")
    time.sleep(0.3)  # let them compute a little, as a real guest would be
    started = time.perf_counter()
    node.call("evict")
    wait_for(lambda: gone(pids), timeout=30, what="guests gone", interval=0.002)
    return time.perf_counter() - started


def baseline_once() -> float:
    process = subprocess.Popen([sys.executable, "-c", SPIN], preexec_fn=lambda: os.nice(19))
    time.sleep(0.3)
    started = time.perf_counter()
    process.terminate()
    process.wait()
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        (node,) = start_cluster(Path(folder), ["desk"])
        try:
            node.call("submit", plugin="montecarlo-pi", params=ENDLESS)
            evicts = [evict_once(node) for _ in range(ROUNDS)]
        finally:
            stop_all([node])
    baselines = [baseline_once() for _ in range(ROUNDS)]
    p = lambda xs, q: statistics.quantiles(xs, n=100, method="inclusive")[q - 1] * 1000  # noqa: E731 - ms
    rows = [
        ["evict (guests gone)", p(evicts, 50), p(evicts, 95), max(evicts) * 1000],
        ["baseline: SIGTERM + reap", p(baselines, 50), p(baselines, 95), max(baselines) * 1000],
    ]
    print_table(["path", "p50 ms", "p95 ms", "max ms"], rows)
    ratio = statistics.median(evicts) / statistics.median(baselines)
    print(f"\nevict / baseline at the median: {ratio:.3g}; goal p95 < 1000 ms")
    write_results("evict_latency", {
        "rounds": ROUNDS, "evict_ms": {"p50": p(evicts, 50), "p95": p(evicts, 95), "max": max(evicts) * 1000},
        "baseline_ms": {"p50": p(baselines, 50), "p95": p(baselines, 95)}, "ratio_median": ratio,
        "goal_p95_ms": 1000,
    })


if __name__ == "__main__":
    main()

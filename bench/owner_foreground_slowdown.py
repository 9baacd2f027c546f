"""Foreground slowdown with guests running under the default `share` policy, light and heavy owner work.

Question: does the owner notice guests that keep computing while they work? A real node (empty
config: every default, `share`) runs one long montecarlo-pi guest per core; the owner's job runs
in its own session. Light: 20 bursts of fixed work with a pause after each (an editor, a browser:
~30 % of a core). Heavy: one CPU-bound job per core. Baseline: the same job with the node paused
(`frost-tui pause`: the guests get no CPU at all). Runs alternate paused / share in quick pairs
and the median of the paired ratios is reported, so other load on the machine, which drifts over
tens of seconds, hits both halves alike. Goal: <= 2 %. Under `share`, heavy work is contention:
the policy suspends the guests, which is part of what is measured.
Usage: .venv/bin/python bench/owner_foreground_slowdown.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import print_table, write_results  # noqa: E402

from frost_core.wire.security import ClusterKey  # noqa: E402
from tests.nodes import start_node  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

JOBS = {
    "light (20 bursts, ~30 % of a core)": ("import time\nfor _ in range(20):\n    x = 0\n    for i in range(150_000):\n"
                                           "        x += i * i\n    time.sleep(0.05)\n", 1),
    "heavy (one CPU-bound job per core)": ("x = 0\nfor i in range(10_000_000):\n    x += i * i\n", os.cpu_count() or 1),
}
LONG_PI = ("montecarlo-pi", "--param", "samples=1000000000000", "--param", f"units={os.cpu_count() or 1}")


def run_job(code: str, copies: int) -> float:
    began = time.perf_counter()
    jobs = [subprocess.Popen([sys.executable, "-c", code], start_new_session=True) for _ in range(copies)]
    for job in jobs:
        job.wait()
    return time.perf_counter() - began


def measure(folder: Path, pairs: int) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    key = folder / "cluster.key"
    ClusterKey.generate().save(key)
    node = start_node(folder / "node", key_file=key, base_config="", log_level="info")
    times = {name: {"paused": [], "share": []} for name in JOBS}
    try:
        node.cli("submit", *LONG_PI)
        try:
            wait_for(lambda: len(node.call("status")["guests"]) >= 1, timeout=30, what="guests running")
        except AssertionError:
            # Other work already contends for this machine's CPU: `share` rightly places nothing.
            return times, [f"no guest started in 30 s: {node.call('status')['hosting']['reason']}"]
        for _ in range(pairs):
            for name, (code, copies) in JOBS.items():
                node.call("pause")
                times[name]["paused"].append(run_job(code, copies))
                node.call("resume")
                time.sleep(0.3)
                times[name]["share"].append(run_job(code, copies))
        events = [e["message"] for e in node.call("events") if e["kind"] == "owner"]
    finally:
        node.stop()
    return times, events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frost-slowdown-") as folder:
        times, events = measure(Path(folder), args.pairs)
    if not any(runs["share"] for runs in times.values()):
        print(f"nothing measured: {events[0]}\nRe-run on a machine that other programs leave mostly idle.")
        write_results("owner_foreground_slowdown", {"pairs": 0, "jobs": {}, "owner_events": events})
        return 1
    rows, figures = [], {}
    for name, runs in times.items():
        slowdown = statistics.median(b / a for a, b in zip(runs["paused"], runs["share"])) - 1
        rows.append([name, statistics.median(runs["paused"]), statistics.median(runs["share"]), f"{slowdown:+.1%}",
                     "yes" if slowdown <= 0.02 else "NO"])
        figures[name] = {"paused_seconds": runs["paused"], "share_seconds": runs["share"],
                         "median_paired_slowdown": slowdown}
    print_table(["foreground job", "median paused s", "median share s", "paired slowdown", "<= 2 %"], rows)
    print(f"\nowner policy events during the run: {len(events)}")
    for message in events[:4]:
        print("  ", message)
    write_results("owner_foreground_slowdown", {"pairs": args.pairs, "jobs": figures, "owner_events": events})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long a big submit holds the node's event loop, against the same node's answers before it.

Question: the owner submits a 100,000-unit sweep while guests run; does the node go on answering (a pause key, a
guest's messages, its peers) while it splits the sweep and stores its units, and how much memory does it take for
it? Until 2026-11-27 22:28 UTC the split's
reply was decoded in one call on the event loop (0.5 s at 100,000 units), its units made into rows there, and the
store locked its index for the whole insert, which the loop waits for: a `status` waited up to 1.2 s.

Method: one real `frost-tui --headless` node (two guest CPUs, the owner policy off as in `unit_throughput.py`) with
a small sweep running; a thread asks `status` every 20 ms throughout. Each round submits `--units` no-op units of
`montecarlo-pi` and notes how long the submit took and the longest a `status` waited from the submit's start to a
second after it, against the median `status` of the second before (the baseline, same node, same run), and the
node's resident memory, sampled with each `status` (psutil), at its highest during against the second before (since
2026-11-28). ROUNDS rounds; the swept units run on meanwhile.

Usage: .venv/bin/python bench/submit_loop_hold.py [--units 100000] [--rounds 3]   (about 30 s)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402
from _nodes import start_cluster, stop_all  # noqa: E402
from unit_throughput import TWO_GUEST_CPUS  # noqa: E402


def timed_statuses(node, stop: threading.Event, waits: list[tuple[float, float, int]]) -> None:
    """(when asked, seconds waited, the node's resident bytes then) of a `status` every 20 ms until `stop`."""
    process = psutil.Process(node.process.pid)
    while not stop.is_set():
        began = time.perf_counter()
        node.call("status")
        waits.append((began, time.perf_counter() - began, process.memory_info().rss))
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="frost-submit-") as folder:
        (node,) = start_cluster(Path(folder), ["n0"], base_config=TWO_GUEST_CPUS)
        try:
            node.call("submit", plugin="montecarlo-pi", params={"samples": 10_000_000, "units": 20})
            time.sleep(2.0)
            for _ in range(args.rounds):
                waits: list[tuple[float, float, int]] = []
                stop = threading.Event()
                asking = threading.Thread(target=timed_statuses, args=(node, stop, waits))
                asking.start()
                time.sleep(1.0)
                began = time.perf_counter()
                node.call("submit", plugin="montecarlo-pi", params={"samples": args.units, "units": args.units})
                ended = time.perf_counter()
                time.sleep(1.0)
                stop.set()
                asking.join()
                before = [(waited, rss) for at, waited, rss in waits if at < began]
                during = [(waited, rss) for at, waited, rss in waits if at >= began]
                rounds.append({"submit_s": ended - began,
                               "status_before_median_ms": statistics.median(w for w, _ in before) * 1e3,
                               "status_longest_during_ms": max(w for w, _ in during) * 1e3,
                               "rss_before_mb": max(r for _, r in before) / 2**20,
                               "rss_highest_during_mb": max(r for _, r in during) / 2**20})
                print(rounds[-1], flush=True)
        finally:
            stop_all([node])
    print_table(["round", "submit s", "status ms, median before", "status ms, longest during", "longest / median",
                 "node MB before", "highest during"],
                [[n + 1, round(r["submit_s"], 2), round(r["status_before_median_ms"], 1),
                  round(r["status_longest_during_ms"]), round(r["status_longest_during_ms"] / r["status_before_median_ms"]),
                  round(r["rss_before_mb"]), round(r["rss_highest_during_mb"])]
                 for n, r in enumerate(rounds)])
    write_results("submit_loop_hold", {"units": args.units, "rounds": rounds})
    return 0


if __name__ == "__main__":
    sys.exit(main())

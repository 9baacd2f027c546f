"""What an attached UI costs a node running a sweep of thousands of units, and what the UI spends on it.

Question: the owner runs `frost-tui` attached to the node (the README's way) while a 10,000-unit sweep runs; does
watching slow the sweep, and how much CPU does the UI's side take on the owner's desk? The node pushes a snapshot
after writes (ten a second at most, building them at most a tenth of its time); until 2026-11-27 each one carried
every unit of the sweep (`snapshot_history_cost.py --running 10000`: the node 83-100 ms a push, the UI 109-113 ms).

Method: one real `frost-tui --headless` node (two guest CPUs, the owner policy off as in `unit_throughput.py`), the
bundled `montecarlo-pi` with one sample per unit (units that return at once), the same sweep run unwatched (the
baseline) and watched by `_watcher.py` (an `AttachedNode` that receives and decodes every push as the UI does,
drawing nothing), alternated, ROUNDS of each. Figures per run: units/s, the node's CPU per unit (`unit_throughput`'s
`run_on_cluster`), the pushes the watcher got per second of the sweep and its CPU from the sweep's first push to its
last.

Usage: .venv/bin/python bench/watched_sweep_cost.py [--units 10000] [--rounds 3]   (about 3 minutes)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402
from _nodes import start_cluster, stop_all  # noqa: E402
from unit_throughput import TWO_GUEST_CPUS, run_on_cluster  # noqa: E402

WATCHER = Path(__file__).resolve().parent / "_watcher.py"
LIMIT = 300.0


def sweep(node, units: int, watched: bool) -> dict:
    watcher = None
    if watched:
        watcher = subprocess.Popen([sys.executable, str(WATCHER), str(node.paths.control_socket)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)   # attached, its first push taken
    try:
        run = run_on_cluster(node, "montecarlo-pi", {"samples": units, "units": units}, LIMIT)
    finally:
        seen = json.loads(watcher.communicate(timeout=60)[0]) if watcher else None
    figures = {"watched": watched, "units_per_s": run["units_per_s"], "seconds": run["seconds"],
               "node_cpu_ms_per_unit": run["master_cpu_ms_per_unit"],
               "node_marginal_cpu_ms_per_unit": run["master_marginal_cpu_ms_per_unit"], "finished": run["finished"]}
    if seen:
        during = [cpu for at, cpu in seen["pushes"] if run["began_at"] <= at <= run["began_at"] + run["seconds"]]
        figures.update(ui_pushes=len(during), ui_pushes_per_s=round(len(during) / run["seconds"], 2),
                       ui_cpu_percent=round(100 * (during[-1] - during[0]) / run["seconds"], 2) if during else None)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="frost-watched-") as folder:
        (node,) = start_cluster(Path(folder), ["n0"], base_config=TWO_GUEST_CPUS)
        try:
            for round_ in range(args.rounds):
                for watched in ((False, True) if round_ % 2 == 0 else (True, False)):
                    runs.append({"round": round_ + 1, **sweep(node, args.units, watched)})
                    print(runs[-1], flush=True)
        finally:
            stop_all([node])

    def median(watched: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs if r["watched"] == watched)

    summary = {key: {"unwatched": median(False, key), "watched": median(True, key)}
               for key in ("units_per_s", "node_cpu_ms_per_unit", "node_marginal_cpu_ms_per_unit")}
    summary["ui_cpu_percent"] = median(True, "ui_cpu_percent")
    summary["ui_pushes_per_s"] = median(True, "ui_pushes_per_s")
    print_table(["round", "watched", "units/s", "node CPU ms/unit", "marginal", "UI pushes/s", "UI CPU % of a core"],
                [[r["round"], "yes" if r["watched"] else "no (baseline)", r["units_per_s"], r["node_cpu_ms_per_unit"],
                  r["node_marginal_cpu_ms_per_unit"], r.get("ui_pushes_per_s", "—"), r.get("ui_cpu_percent", "—")]
                 for r in runs])
    ratio = summary["units_per_s"]["watched"] / summary["units_per_s"]["unwatched"]
    cpu_ratio = summary["node_cpu_ms_per_unit"]["watched"] / summary["node_cpu_ms_per_unit"]["unwatched"]
    print(f"\nmedians of {args.rounds}: units/s watched / unwatched {ratio:.2f}, node CPU per unit {cpu_ratio:.2f}; "
          f"the UI {summary['ui_pushes_per_s']} pushes/s at {summary['ui_cpu_percent']} % of a core")
    write_results("watched_sweep_cost", {"units": args.units, "runs": runs, "medians": summary,
                                         "units_per_s_ratio": round(ratio, 3), "node_cpu_ratio": round(cpu_ratio, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())

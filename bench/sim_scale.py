"""Does the simulator (and our policy) hold at 1000 nodes? All five policies, timed, one world.

Usage: .venv/bin/python bench/sim_scale.py [--nodes 1000]
Same run by hand: .venv/bin/python -c "from frost_core.sim import main; main(['--nodes','1000','--payoff-samples','0'])"
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from frost_core.sim import SCENARIOS, compare  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    scenario = dataclasses.replace(SCENARIOS["mixed"], nodes=args.nodes)
    started = time.perf_counter()
    result = compare(scenario, 1, payoff_samples=0)
    elapsed = time.perf_counter() - started
    rows = {r.policy: r for r in result.rows}
    print_table(["policy", "makespan s", "mean sd", "p95 sd", "gap closed", "gap closed (makespan)", "migr/unit",
                 "MB moved", "ping-pong"],
                [[r.policy, r.makespan_s, r.mean_slowdown, r.p95_slowdown, r.gap_closed or 0.0,
                  r.gap_closed_makespan or 0.0, r.migrations_per_unit, r.mb_moved, r.pingpong]
                 for r in result.rows])
    ours, threshold = rows["ours"], rows["threshold"]
    print(f"\n{args.nodes} nodes, 6 runs (5 policies + the owner-free baseline) in {elapsed:.1f} s")
    print(f"ours/threshold: gap closed {ours.gap_closed:.3f}/{threshold.gap_closed:.3f}, "
          f"migrations per unit {ours.migrations_per_unit:.3f}/{threshold.migrations_per_unit:.3f}")
    write_results("sim_scale", {"nodes": args.nodes, "seconds": elapsed,
                                "rows": {k: asdict(v) for k, v in rows.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())

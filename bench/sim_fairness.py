"""Fair share against first come, first served, in simulation: fairness, small submitters' wait, throughput.

Question (issue 17, item 5): on a pool of 20 slots, two big submitters (200 units each) and six
small ones (12 units each) arrive at random within half an hour, units of exponential size
(mean 60 CPU-seconds). Does ordering the queue by decayed usage (`policies.fair_share`, as the
masters do) bring Jain's index of slot-time over max-min fair share to >= 0.9 where first come
scores lower, cut the small submitters' slowdown, and keep throughput within 3 %? One world per
seed, both orders on it (common random numbers): `core/sim/fairness.py`.

Usage: .venv/bin/python bench/sim_fairness.py [--seeds 20] [--slots 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402

from frost_core.policies.fair_share import ShareSettings  # noqa: E402
from frost_core.sim.fairness import measure, run, workload  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--slots", type=int, default=20)
    args = parser.parse_args()
    rows, figures = [], []
    for seed in range(1, args.seeds + 1):
        world = workload(random.Random(seed), slots=args.slots)
        first, fair = (measure(world, run(world, ShareSettings(enabled=on))) for on in (False, True))
        change = fair.throughput / first.throughput - 1
        rows.append([seed, first.jain, fair.jain, first.small_slowdown, fair.small_slowdown, f"{change:+.2%}"])
        figures.append({"seed": seed, "first_come": vars(first), "fair_share": vars(fair), "throughput_change": change})
    print_table(["seed", "Jain FCFS", "Jain fair", "small slowdown FCFS", "small slowdown fair", "throughput"], rows)
    jain_fair = [f["fair_share"]["jain"] for f in figures]
    jain_first = [f["first_come"]["jain"] for f in figures]
    changes = [f["throughput_change"] for f in figures]
    worst = max(abs(c) for c in changes)
    # Both orders keep every slot busy while units wait: throughput differs only in which unit ends last.
    print(f"\nJain's index: fair share min {min(jain_fair):.3f} (mean {statistics.mean(jain_fair):.3f}), "
          f"first come mean {statistics.mean(jain_first):.3f}; throughput fair vs first come "
          f"{statistics.mean(changes):+.2%} on average, at most {worst:.1%} apart on one seed")
    write_results("sim_fairness", {"slots": args.slots, "seeds": args.seeds, "runs": figures})


if __name__ == "__main__":
    main()

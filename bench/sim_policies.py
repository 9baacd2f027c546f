"""Do our policies beat the classic ones? none/random/threshold/ours/ideal on the same simulated worlds.

Worlds: FROST's owner pattern (30 nodes, seeds 1-8: with 10 units a world, one unlucky unit moves a
seed's figures by a few points, so fewer seeds decide nothing) and on/off owners with heavy-tailed units on
mixed-speed machines (100 nodes). Baselines (none, random, threshold, ideal) run in the same call
with common random numbers. Usage: .venv/bin/python bench/sim_policies.py
Same figures by hand: .venv/bin/python -c "from frost_core.sim import main; main(['--scenario','frost'])"
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, print_table, write_results  # noqa: E402

from frost_core.sim import SCENARIOS, compare  # noqa: E402
from frost_core.sim.report import write_plot  # noqa: E402

PAYOFF_SAMPLES = 15   # replays per policy, for threshold and ours only


def run(name: str, seed: int) -> dict:
    started = time.perf_counter()
    result = compare(SCENARIOS[name], seed, payoff_samples=PAYOFF_SAMPLES, payoff_for=("threshold", "ours"))
    rows = {r.policy: r for r in result.rows}
    print(f"\n== {name}, N={SCENARIOS[name].nodes}, seed {seed} ({time.perf_counter() - started:.1f} s)")
    print_table(["policy", "makespan s", "mean sd", "p95 sd", "owner removed", "gap closed", "migr/unit",
                 "MB moved", "paid off", "ping-pong"],
                [[r.policy, r.makespan_s, r.mean_slowdown, r.p95_slowdown, r.owner_removed or 0.0,
                  r.gap_closed or 0.0, r.migrations_per_unit, r.mb_moved,
                  "-" if r.paid_off is None else r.paid_off, r.pingpong] for r in result.rows])
    if seed == 1:
        write_plot(result.rows, RESULTS_DIR / f"sim_policies_{name}.png", f"{name}, N={SCENARIOS[name].nodes}")
    return {"scenario": name, "seed": seed, "rows": {k: asdict(v) for k, v in rows.items()}}


def main() -> int:
    runs = [run("frost", seed) for seed in range(1, 9)] + [run("mixed", 1)]
    frost = [r["rows"] for r in runs if r["scenario"] == "frost"]
    mixed = runs[-1]["rows"]
    ours_runs = [r["rows"]["ours"] for r in runs]
    goals = {
        "mixed: ours gap closed >= threshold's": (mixed["ours"]["gap_closed"], mixed["threshold"]["gap_closed"]),
        "mixed: ours migrations/unit <= threshold's": (mixed["ours"]["migrations_per_unit"],
                                                       mixed["threshold"]["migrations_per_unit"]),
        "frost: ours gap closed (vs threshold)": (_mean([f["ours"]["gap_closed"] for f in frost]),
                                                  _mean([f["threshold"]["gap_closed"] for f in frost])),
        "frost: ours migrations/unit (vs threshold)": (_mean([f["ours"]["migrations_per_unit"] for f in frost]),
                                                       _mean([f["threshold"]["migrations_per_unit"] for f in frost])),
        "frost: owner slowdown removed by ours (goal 0.8, FROST 0.67)": (
            _mean([f["ours"]["owner_removed"] for f in frost]), 0.8),
        "paid-off share of ours' migrations (goal 0.8)": (_mean([o["paid_off"] for o in ours_runs]), 0.8),
        "ping-pong moves of ours (goal 0)": (sum(o["pingpong"] for o in ours_runs), 0),
    }
    print("\n== goals")
    print_table(["figure", "ours", "reference"], [[k, v[0], v[1]] for k, v in goals.items()])
    write_results("sim_policies", {"runs": runs, "goals": {k: {"ours": v[0], "reference": v[1]}
                                                            for k, v in goals.items()}})
    return 0


def _mean(values: list[float | None]) -> float:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else float("nan")


if __name__ == "__main__":
    sys.exit(main())

"""The discrete-event simulator: many nodes, owners and units, under the same policy functions.

`main(argv)` is the command line (`frost-tui simulate`); `compare` is the library entry.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from frost_core.api.errors import ConfigError
from frost_core.sim.model import SCENARIOS, Scenario
from frost_core.sim.report import COLUMNS, to_json, write_plot
from frost_core.sim.runner import POLICIES, Comparison, compare, simulate

__all__ = ["SCENARIOS", "Scenario", "Comparison", "compare", "simulate", "main", "build_scenario"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="frost-tui simulate",
        description="Compare load-balancing policies (none, random, threshold, ours, ideal) on one simulated "
                    "world with common random numbers; prints a table, optionally writes JSON and a PNG plot.")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="mixed",
                        help="frost: FROST's owner pattern, 2 units per 3 nodes; mixed: on/off owners, "
                             "heavy-tailed units, mixed speeds (default)")
    parser.add_argument("--nodes", type=int, help="number of nodes (default: the scenario's)")
    parser.add_argument("--units-per-node", type=float, help="work units per node")
    parser.add_argument("--owner", choices=("frost", "onoff", "none"), help="owner model")
    parser.add_argument("--sizes", choices=("exponential", "pareto"), help="unit size distribution")
    parser.add_argument("--mean-size", type=float, help="mean unit size, seconds at speed 1")
    parser.add_argument("--tick", type=float, help="seconds between policy rounds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated subset")
    parser.add_argument("--payoff-samples", type=int, default=20,
                        help="migrations replayed without the move to see whether it paid off (0: skip)")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--plot", type=Path, help="write a PNG plot here (needs matplotlib)")
    return parser


def build_scenario(args: argparse.Namespace) -> Scenario:
    scenario = SCENARIOS[args.scenario]
    changes = {"nodes": args.nodes, "units_per_node": args.units_per_node, "owner": args.owner,
               "sizes": args.sizes, "mean_size": args.mean_size, "tick": args.tick}
    return dataclasses.replace(scenario, **{k: v for k, v in changes.items() if v is not None})


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        scenario = build_scenario(args)
        policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise ConfigError(f"unknown policy {unknown[0]!r}; choose from {', '.join(POLICIES)}")
        started = time.perf_counter()
        result = compare(scenario, args.seed, policies, args.payoff_samples)
    except ConfigError as error:
        print(f"{error.title}: {error.message}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - started
    _print_table(result)
    print(f"\n{scenario.name}: {scenario.nodes} nodes, {len(result.outcomes['none'].size)} units, "
          f"owner={scenario.owner}, sizes={scenario.sizes}, seed={args.seed}; {elapsed:.1f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"scenario": dataclasses.asdict(scenario), "seed": args.seed,
                                         "rows": to_json(result.rows)}, indent=2))
    if args.plot:
        written = write_plot(result.rows, args.plot, f"{scenario.name}, N={scenario.nodes}, seed {args.seed}")
        print(f"plot: {written}" if written else "plot skipped: install matplotlib (the 'sim' extra)")
    return 0


def _print_table(result: Comparison) -> None:
    cells = [list(COLUMNS)] + [[str(c) for c in row.row()] for row in result.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))

"""The cost of a "no move needed" check per superstep, against no check, on the node's own gang runtime.

Question (issue 16): BSPlib's selective migration asks every member at a check whether its host is
still among the best p; the answers ride on the barrier's messages and are OR-reduced. When the
answer is "stay", what does that cost? Goal: <= 1 % of a superstep.

A heat-diffusion gang (p = 2 and 3, a 512 x 512 plate, 20 iterations) runs on the node's gang
runtime (`_gang_cluster.py`: each host a real `Gangs`, messages through their wire encoding,
members in sandboxed guests at the lowest priority) on p + 2 hosts with equal figures, so every
check finds the gang's hosts among the best p and nothing moves. Two cadences, run alternately
(pairs, so the machine's drift hits both alike):

- `check`: a check at every barrier (`CheckCadence(every_supersteps=1)`): the coordinator asks,
  each host answers from its table (`GangCheck.answer`), the answers come back on the reports;
- `none`: no check ever (`CheckCadence(None, None)`).

Timed: wall time per superstep from the release of superstep 1 (the guests are up) to the
combined results, and the CPU time of this process per superstep (coordinator, hosts, wire: where
a check's work is done; the guests' CPU does not change with a check). The check's cost is the
difference: wall (noisy: guests wait for idle CPU) and CPU (what a check costs the nodes), each
over the median `none` superstep time. Both are differences of noisy figures, so beside them the
check's own work on the same code path, timed alone over 2,000 supersteps (`check_work_seconds`:
the check on the releases, the p answers, the answers on the reports, each through its wire
encoding, less the same supersteps without), over the median and the fastest `none` superstep. Min / median / max over the repeats, the load average before and
after. About 1 minute on an idle 2-core machine; `--quick`: p = 2, 2 pairs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from bench._gang_cluster import GangCluster  # noqa: E402
from frost_core.cluster.gang_site import BarrierReport, GangCheck, ReleaseStep  # noqa: E402
from frost_core.cluster.gang_wire import gang_from_wire, gang_to_wire  # noqa: E402
from frost_core.policies.gang_migration import CheckCadence, or_reduce  # noqa: E402
from frost_core.policies.views import NodeView  # noqa: E402
from frost_core.wire.messages import decode_message, encode_message  # noqa: E402

HEAT = Path(__file__).resolve().parents[1] / "plugins" / "heat_diffusion.py"
PLATE = {"height": 512, "width": 512, "iterations": 20, "tolerance": 0}
CADENCES = {"check": CheckCadence(every_supersteps=1, every_seconds=None), "none": CheckCadence(None, None)}


async def one_run(p: int, cadence: CheckCadence, folder: Path, run: int) -> dict:
    """One gang to its end: seconds and this process's CPU per superstep after superstep 0."""
    cluster = GangCluster([f"h{i}" for i in range(p + 2)], folder)
    gang_id = f"chk{run:04d}"
    async with cluster.running():
        outcome = cluster.submit(gang_id, HEAT, {**PLATE, "members": p}, p, cadence)
        while cluster.released(gang_id, 1) is None and not outcome.ended.is_set():
            await trio.sleep(0.005)
        began, cpu = cluster.released(gang_id, 1) or 0.0, time.process_time()
        await outcome.ended.wait()
        cpu = time.process_time() - cpu
        view = cluster.view(gang_id)
    if outcome.results is None:
        raise SystemExit(f"the gang failed: {outcome.failure}")
    if view.moves or view.restarts:
        raise SystemExit(f"a check moved the gang ({view.moves} moves, {view.restarts} restarts): the table is not level")
    supersteps = view.superstep   # released 1..superstep, timed
    return {"seconds_per_superstep": (outcome.at - began) / supersteps, "cpu_per_superstep": cpu / supersteps,
            "supersteps": supersteps, "messages": cluster.messages, "wire_bytes": cluster.wire_bytes}


def check_work_seconds(p: int, repeats: int = 2000) -> tuple[float, float]:
    """The work a check adds to one superstep, all nodes together, on the code path alone (no guests, no waits).

    Per superstep with a check: the coordinator's GangCheck, p releases carrying it (to the wire and
    back), p answers (`GangCheck.answer` on the level table of p + 2 hosts), p reports carrying
    `move=False`, the OR; without: the same releases and reports bare. Returns (with, without) seconds.
    """
    table = [NodeView(f"h{i}", available=1.0, guests=1 if i < p else 0) for i in range(p + 2)]
    hosts = frozenset(f"h{i}" for i in range(p))

    def superstep(checked: bool) -> None:
        check = GangCheck(hosts, 1.0) if checked else None
        answers = []
        for rank in range(p):
            release = through_wire(ReleaseStep("g", rank, 1, 5, frozenset(r for r in range(p) if r != rank), check))
            move = None if release.check is None else release.check.answer(table, p, f"h{rank}")
            report = through_wire(BarrierReport("g", 1, rank, 5, frozenset(r for r in range(p) if r != rank), move, False))
            answers.append(report.move)
        if checked:
            or_reduce(answers)

    timed = {}
    for checked in (True, False, True, False):
        began = time.process_time()
        for _ in range(repeats):
            superstep(checked)
        timed[checked] = min(timed.get(checked, 1e9), (time.process_time() - began) / repeats)
    return timed[True], timed[False]


def through_wire(message: object) -> object:
    header, data = gang_to_wire(message)
    return gang_from_wire(decode_message(header.CODE, encode_message(header)), data)


def spread(values: list[float], scale: float = 1000.0) -> str:
    return f"{min(values) * scale:.2f} / {statistics.median(values) * scale:.2f} / {max(values) * scale:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="p = 2, 2 pairs of runs")
    parser.add_argument("--pairs", type=int, default=None, help="pairs of runs (check, none) per p (default 4)")
    args = parser.parse_args()
    pairs = args.pairs or (2 if args.quick else 4)
    load_before = os.getloadavg()[0]
    rows, figures, run = [], [], 0
    for p in (2,) if args.quick else (2, 3):
        runs: dict[str, list[dict]] = {"check": [], "none": []}
        for pair in range(pairs):
            for name in ("check", "none") if pair % 2 == 0 else ("none", "check"):
                with tempfile.TemporaryDirectory(prefix="gang-check-") as folder:
                    runs[name].append(trio.run(one_run, p, CADENCES[name], Path(folder), run))
                run += 1
        wall = {name: [r["seconds_per_superstep"] for r in runs[name]] for name in runs}
        cpu = {name: [r["cpu_per_superstep"] for r in runs[name]] for name in runs}
        base = statistics.median(wall["none"])
        wall_cost = statistics.median(wall["check"]) - base
        cpu_cost = statistics.median(cpu["check"]) - statistics.median(cpu["none"])
        with_check, without = check_work_seconds(p)
        work = with_check - without
        fastest = min(wall["none"])
        rows.append([p, runs["none"][0]["supersteps"], spread(wall["none"]), spread(wall["check"]),
                     f"{wall_cost / base:+.2%}", spread(cpu["none"]), spread(cpu["check"]),
                     f"{cpu_cost * 1e6:+.0f} us = {cpu_cost / base:+.3%}",
                     f"{work * 1e6:.0f} us = {work / base:.3%} ({work / fastest:.3%})"])
        figures.append({"p": p, "plate": PLATE, "pairs": pairs, "runs": runs,
                        "median_seconds_per_superstep_none": base, "wall_cost_ratio": wall_cost / base,
                        "cpu_cost_seconds_per_superstep": cpu_cost, "cpu_cost_ratio": cpu_cost / base,
                        "check_work_seconds": work, "check_work_ratio": work / base,
                        "check_work_ratio_fastest": work / fastest})
    print_table(["p", "supersteps", "none ms/ss min/med/max", "check ms/ss min/med/max", "wall cost",
                 "none CPU ms/ss", "check CPU ms/ss", "CPU cost per superstep", "check's work/ss (of fastest)"], rows)
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.1f} before, {load_after:.1f} after; goal: a check <= 1 % of a superstep")
    write_results("gang_check_cost", {"runs": figures, "load_average": [load_before, load_after]})


if __name__ == "__main__":
    main()

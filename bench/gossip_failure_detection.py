"""Failure detection with 50 nodes at 5 % loss while one node is starved 10 s every minute, for a simulated hour.

The live membership service on the in-memory network under MockClock. The hour is cut into
independent segments (each its own cluster, seed and 15 s warm-up, not counted) run in
parallel processes. In every simulated minute one node is starved for 10 s and one other node
crashes at a random moment (so some crashes fall inside the starvation); each crash is timed
until the crashed node is dead in every running node's table. A false death is any running
node declared dead by anyone. Messages travel as objects without latency (codec off): the wire
format is covered by the tests and gossip_traffic.py, and 0.5 ms of LAN latency is noise
against 100 ms probe timeouts. Baseline, same run (fewer segments): memberlist's LAN timings
(1 s probes, 0.5 s timeout, suspicion 4 × log10 N intervals), which this project's defaults replace.
Usage: gossip_failure_detection.py [simulated minutes, default 60] [segment minutes, default 5]
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import trio
import trio.testing

from _common import print_table, write_results
from frost_core.membership import MembershipConfig, MemberState
from frost_core.membership.testing import SimCluster, SimNode, open_sim_cluster

N = 50
LOSS = 0.05
STALL = 10.0
WARMUP = 15.0
CRASH_GOAL = 12.0
CRASH_WATCH = 30.0
MEMBERLIST_LAN = MembershipConfig(
    probe_interval=1.0, probe_timeout=0.5, suspicion_multiplier=4.0, suspicion_max_multiplier=6.0, suspicion_min=1.0
)
BASELINE_SHARE = 1 / 6
"""The baseline runs this share of the segments: its false deaths are many, so fewer minutes measure it."""


async def _time_crash(cluster: SimCluster, victim: SimNode, starved: SimNode, results: list[dict]) -> None:
    cluster.crash(victim)
    crashed_at = trio.current_time()
    during_stall = cluster.network.is_stalled(starved.address)
    last: list[SimNode] = []
    while trio.current_time() - crashed_at < CRASH_WATCH:
        behind = [n for n in cluster.running() if n.state_of(victim.node_id) != MemberState.DEAD]
        if not behind:
            break
        last = behind
        await trio.sleep(0.01)
    results.append({
        "seconds": trio.current_time() - crashed_at,
        "during_stall": during_stall,
        "last_was_starved": last == [starved],
    })


async def segment(config: MembershipConfig, minutes: int, seed: int) -> dict:
    crash_times: list[dict] = []
    async with open_sim_cluster(seed, loss=LOSS, latency=0.0, config=config, codec=False) as cluster:
        nodes = [await cluster.start_node() for _ in range(N)]
        await trio.sleep(WARMUP)
        starved = nodes[7]
        async with trio.open_nursery() as crashes:
            for _ in range(minutes):
                minute_start = trio.current_time()
                cluster.network.stall(starved.address, STALL)
                await trio.sleep(cluster.rng.uniform(0, 60 - CRASH_WATCH))
                victim = cluster.rng.choice([n for n in cluster.running() if n is not starved])
                crashes.start_soon(_time_crash, cluster, victim, starved, crash_times)
                await trio.sleep_until(minute_start + 60)
        crashed = {n.node_id for n in cluster.nodes if n.scope.cancel_called}
        false_deaths = sum(
            1 for n in cluster.nodes for e in n.events if e.kind == "dead" and e.record.node_id not in crashed
        )
        return {"false_deaths": false_deaths, "crashes": crash_times, "minutes": minutes}


def run_segment(args: tuple[str, int, int]) -> tuple[str, dict]:
    name, minutes, seed = args
    config = MembershipConfig() if name == "frost defaults" else MEMBERLIST_LAN
    result: dict = {}

    async def main() -> None:
        result.update(await segment(config, minutes, seed))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return name, result


def main() -> int:
    minutes = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    per_segment = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    count = max(1, minutes // per_segment)
    jobs = [("frost defaults", per_segment, 1000 + n) for n in range(count)]
    jobs += [("memberlist LAN (baseline)", per_segment, 2000 + n) for n in range(max(1, round(count * BASELINE_SHARE)))]
    started = time.perf_counter()
    merged: dict[str, dict] = {}
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for name, result in pool.map(run_segment, jobs):
            total = merged.setdefault(name, {"false_deaths": 0, "crashes": [], "minutes": 0})
            total["false_deaths"] += result["false_deaths"]
            total["crashes"] += result["crashes"]
            total["minutes"] += result["minutes"]
    rows, figures = [], {"n": N, "loss": LOSS, "stall_seconds": STALL, "segment_minutes": per_segment}
    for name, r in merged.items():
        times = sorted(c["seconds"] for c in r["crashes"])
        per_hour = r["false_deaths"] * 60 / r["minutes"]
        worst = max(times)
        met = r["false_deaths"] == 0 and worst <= CRASH_GOAL
        quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else times * 3
        rows.append([name, r["minutes"], r["false_deaths"], round(per_hour, 1), len(times), round(min(times), 2),
                     round(quartiles[1], 2), round(quartiles[2], 2), round(worst, 2), "yes" if met else "NO"])
        figures[name] = dict(r, crash_to_dead_everywhere=[round(t, 2) for t in times], false_deaths_per_hour=per_hour,
                             median_crash_seconds=quartiles[1], worst_crash_seconds=worst, goal_met=met)
        slowest = max(r["crashes"], key=lambda c: c["seconds"])
        print(f"{name}: slowest crash {slowest['seconds']:.2f} s, during the stall: {slowest['during_stall']}, "
              f"last to learn was the starved node: {slowest['last_was_starved']}")
    print(f"N = {N}, {LOSS:.0%} loss, one node starved {STALL:.0f} s and one node crashed every simulated minute, "
          f"{per_segment}-minute segments in parallel\n")
    print_table(["timings", "sim minutes", "false deaths", "per hour", "crashes", "min s", "median s", "p75 s",
                 "worst dead-everywhere s", "met (0 / <= 12 s)"], rows)
    times = [c["seconds"] for c in merged["frost defaults"]["crashes"]]
    histogram = {f"{lo}-{lo + 1} s": sum(1 for t in times if lo <= t < lo + 1) for lo in range(int(min(times)), int(max(times)) + 1)}
    print("\nfrost defaults, crash to dead everywhere:", histogram)
    figures["crash_histogram"] = histogram
    figures["seconds"] = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures["cpu_seconds"] = children.ru_utime + children.ru_stime
    print(f"wall time {figures['seconds']:.0f} s, {figures['cpu_seconds']:.0f} CPU-seconds on {os.cpu_count()} CPUs")
    write_results("gossip_failure_detection", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Failure detection with 50 nodes at 5 % loss while one node is starved 10 s every minute.

The live membership service on the in-memory network under MockClock. Reports false deaths
(a live node declared dead by anyone) per simulated hour, and for crashes injected at random
moments the time until the crashed node is dead in every table. Baseline, same run: the same
scenario with memberlist's LAN timings (1 s probes, 0.5 s timeout, suspicion 4 × log10 N
intervals), which this project's defaults replace.
Usage: gossip_failure_detection.py [simulated minutes per configuration, default 6]
"""

from __future__ import annotations

import sys
import time

import trio
import trio.testing

from _common import print_table, write_results
from frost_core.membership import MembershipConfig, MemberState
from frost_core.membership.testing import open_sim_cluster

N = 50
LOSS = 0.05
STALL = 10.0
CRASH_GOAL = 12.0
MEMBERLIST_LAN = MembershipConfig(
    probe_interval=1.0, probe_timeout=0.5, suspicion_multiplier=4.0, suspicion_max_multiplier=6.0, suspicion_min=1.0
)


async def scenario(config: MembershipConfig, minutes: int, seed: int) -> dict:
    async with open_sim_cluster(seed, loss=LOSS, config=config) as cluster:
        nodes = [await cluster.start_node() for _ in range(N)]
        await trio.sleep(15)
        starved = nodes[7]
        crash_times = []
        for minute in range(minutes):
            cluster.network.stall(starved.address, STALL)
            await trio.sleep(30)
            # a crash in the second half of every other minute, of a node that is not the starved one
            if minute % 2 == 1:
                victim = cluster.rng.choice([n for n in cluster.running() if n is not starved])
                cluster.crash(victim)
                crashed_at = trio.current_time()
                others = [n for n in cluster.running()]
                while not all(n.state_of(victim.node_id) == MemberState.DEAD for n in others):
                    if trio.current_time() - crashed_at > 29:
                        break
                    await trio.sleep(0.05)
                crash_times.append(trio.current_time() - crashed_at)
                await trio.sleep(max(0.0, 30 - (trio.current_time() - crashed_at)))
            else:
                await trio.sleep(30)
        crashed = {n.node_id for n in cluster.nodes if n.scope.cancel_called}
        false_deaths = sum(
            1 for n in cluster.nodes for e in n.events if e.kind == "dead" and e.record.node_id not in crashed
        )
        return {"false_deaths": false_deaths, "crash_to_dead_everywhere": crash_times, "minutes": minutes}


def run(config: MembershipConfig, minutes: int, seed: int) -> dict:
    result = {}

    async def main() -> None:
        result.update(await scenario(config, minutes, seed))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result


def main() -> int:
    minutes = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    started = time.perf_counter()
    ours = run(MembershipConfig(), minutes, seed=31)
    base = run(MEMBERLIST_LAN, minutes, seed=31)
    rows, figures = [], {"n": N, "loss": LOSS, "stall_seconds": STALL, "simulated_minutes": minutes}
    for name, r in (("frost defaults", ours), ("memberlist LAN (baseline)", base)):
        per_hour = r["false_deaths"] * 60 / minutes
        worst = max(r["crash_to_dead_everywhere"], default=float("nan"))
        met = r["false_deaths"] == 0 and worst <= CRASH_GOAL
        rows.append([name, r["false_deaths"], round(per_hour, 1), len(r["crash_to_dead_everywhere"]),
                     round(worst, 2), "yes" if met else "NO"])
        figures[name] = dict(r, false_deaths_per_hour=per_hour, worst_crash_seconds=worst, goal_met=met)
    print(f"N = {N}, {LOSS:.0%} loss, one node starved {STALL:.0f} s every minute, {minutes} simulated minutes each\n")
    print_table(["timings", "false deaths", "per hour", "crashes", "worst dead-everywhere s", "met (0 / <= 12 s)"], rows)
    figures["seconds"] = time.perf_counter() - started
    write_results("gossip_failure_detection", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

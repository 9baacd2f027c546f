"""Rounds until one update reaches all N nodes, and the age of resource-table entries, under push-pull gossip.

A round-level simulator: each round every node exchanges with `fanout` random peers and both
sides keep the newer version of each entry (the figures rule of `merge_records`); an exchange
fails with probability 1 − (1 − loss)² (either leg lost; a lost reply still teaches the
responder). The baseline is push-only gossip with the same fanout, measured in the same run.
"""

from __future__ import annotations

import math
import random
import sys
import time

import numpy as np

from _common import print_table, write_results
from frost_core.membership import MembershipConfig

FANOUT = MembershipConfig().fanout
SEEDS = 100


def rounds_to_reach_all(n: int, loss: float, seed: int, *, pull: bool) -> int:
    """Rounds until every node holds an update that starts at node 0."""
    rng = random.Random(seed)
    informed = bytearray(n)
    informed[0] = 1
    count, rounds = 1, 0
    while count < n:
        rounds += 1
        before = bytes(informed)  # everyone acts on what it knew at the start of the round
        for node in range(n):
            for _ in range(FANOUT):
                peer = rng.randrange(n - 1)
                peer += peer >= node
                request_ok = rng.random() >= loss
                reply_ok = rng.random() >= loss
                if request_ok and before[node] and not informed[peer]:
                    informed[peer] = 1
                    count += 1
                if pull and request_ok and reply_ok and before[peer] and not informed[node]:
                    informed[node] = 1
                    count += 1
    return rounds


def entry_ages(n: int, loss: float, seed: int, rounds: int = 40) -> tuple[float, int]:
    """Steady state with every node changing its figures every round: mean and max age in rounds."""
    rng = random.Random(seed)
    versions = np.zeros((n, n), dtype=np.int32)  # versions[holder, origin] = round it was produced
    means, maxima = [], []
    for now in range(1, rounds + 1):
        np.fill_diagonal(versions, now)
        start = versions.copy()
        for node in range(n):
            for _ in range(FANOUT):
                peer = rng.randrange(n - 1)
                peer += peer >= node
                if rng.random() < loss:
                    continue
                np.maximum(versions[peer], start[node], out=versions[peer])
                if rng.random() >= loss:
                    np.maximum(versions[node], start[peer], out=versions[node])
        if now > rounds // 2:
            ages = now - versions
            means.append(float(ages.mean()))
            maxima.append(int(ages.max()))
    return sum(means) / len(means), max(maxima)


def main() -> int:
    started = time.perf_counter()
    rows, figures = [], {"fanout": FANOUT, "seeds": SEEDS, "cases": []}
    ok = True
    for n in (100, 1000):
        for loss in (0.0, 0.1):
            goal = math.ceil(math.log2(n)) + 3
            pp = sorted(rounds_to_reach_all(n, loss, s, pull=True) for s in range(SEEDS))
            push = sorted(rounds_to_reach_all(n, loss, s, pull=False) for s in range(SEEDS))
            p99, push99 = pp[98], push[98]
            mean_age, max_age = entry_ages(n, loss, seed=n)
            age_goal_mean, age_goal_max = math.log(n), 2 * math.log2(n)
            met = p99 <= goal and mean_age <= age_goal_mean and max_age <= age_goal_max
            ok &= met
            rows.append([n, f"{loss:.0%}", goal, p99, max(pp), push99, round(push99 / p99, 2),
                         round(mean_age, 2), round(age_goal_mean, 2), max_age, round(age_goal_max, 1),
                         "yes" if met else "NO"])
            figures["cases"].append({
                "n": n, "loss": loss, "rounds_goal": goal, "rounds_p99": p99, "rounds_max": max(pp),
                "push_only_rounds_p99": push99, "speedup_vs_push_only": push99 / p99,
                "mean_entry_age": mean_age, "mean_age_goal": age_goal_mean,
                "max_entry_age": max_age, "max_age_goal": age_goal_max, "goal_met": met,
            })
    print(f"push-pull with k = {FANOUT} peers per round; {SEEDS} seeds per case; rounds at the 99th percentile\n")
    print_table(
        ["N", "loss", "goal rounds", "p99 rounds", "max", "push-only p99", "push/pp",
         "mean age", "goal", "max age", "goal", "met"],
        rows,
    )
    figures["all_goals_met"] = ok
    figures["seconds"] = time.perf_counter() - started
    write_results("gossip_convergence", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

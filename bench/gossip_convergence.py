"""Rounds until one update reaches all N nodes: the real membership code, against the idealised model it was designed on.

Real: N `Membership` services (frost_core.membership) on the in-memory network with `loss`
applied to every datagram and to each leg of every exchange, trio's MockClock; probes,
suspicions and refutations run as they do on a LAN. Messages travel as the objects they are,
not encoded (the encoding is gossip_traffic.py's question; skipping it saves wall time), and
datagrams arrive at once (a LAN's 0.5 ms is 1/4000 of a round; the wake-ups cost a third of
the wall time). The cluster starts formed (every table holds every node) and runs a quarter
of an interval before anything is timed. Then UPDATES nodes, at random moments over half an interval, change their
figures: half by a move >= 5 % (pushed at once to k peers, then spread by push-pull), half by
a 1 % move (push-pull alone, as the model). An update's rounds are the simulated time until
every node's table holds it, in gossip intervals (polled every POLL s).

Model (the earlier figure of this script, kept as the baseline in the same run): a round-level
simulator in which every node exchanges with k random peers each round and both sides keep the
newer version; an exchange fails with probability 1 - (1 - loss)^2; MODEL_SEEDS seeds a case;
push-only gossip with the same k beside it; and the model's age of table entries.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import print_table, write_results  # noqa: E402
from _gossip import formed_cluster  # noqa: E402

from frost_core.membership import MembershipConfig, ResourceFigures  # noqa: E402

CONFIG = MembershipConfig()
FANOUT = CONFIG.fanout
INTERVAL = CONFIG.gossip_interval
MODEL_SEEDS = 100
UPDATES = 20
POLL = 0.1
GIVE_UP_ROUNDS = 30
GOAL_ROUNDS_N1000 = 13
"""Issue 15: <= 13 rounds to reach N = 1,000 at 10 % loss, as the model promised."""
FULL_CASES = ((100, 0.0), (100, 0.1), (1000, 0.1))
QUICK_CASES = ((100, 0.0), (100, 0.1))
LARGE_CASE = (5000, 0.01)
"""Run with --large (see bench/README.md for its memory and time); the model alone otherwise. At 1 % loss,
not 10 %: at 10 % a node of 5,000 is falsely suspected every ~30 s and refutes to every peer (as it
must, see service.py), 800,000 datagrams a simulated second for one process to carry."""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


# -- the real code --------------------------------------------------------------------------------

async def real_rounds(n: int, loss: float, seed: int) -> dict:
    """Rounds for each of UPDATES updates to reach every node, pushed and quiet ones apart."""
    async with formed_cluster(n, loss=loss, seed=seed, codec=False, latency=0.0) as cluster:
        await trio.sleep(INTERVAL / 4)
        rng = random.Random(seed)
        nodes = cluster.nodes
        origins = rng.sample(nodes, UPDATES)
        results: dict[str, list[float]] = {"pushed": [], "quiet": []}

        async def update(index: int, origin) -> None:
            await trio.sleep(rng.uniform(0, INTERVAL / 2))
            pushed = index % 2 == 0
            origin.membership.set_local_figures(ResourceFigures(available=0.5 if pushed else 0.99, cpus=4))
            version = origin.membership.table.own.figures_version
            started = trio.current_time()
            missing = [node for node in nodes if node is not origin]
            while missing and trio.current_time() - started < GIVE_UP_ROUNDS * INTERVAL:
                await trio.sleep(POLL)
                missing = [node for node in missing
                           if (held := node.membership.member(origin.node_id)) is None or held.figures_version < version]
            rounds = (trio.current_time() - started) / INTERVAL if not missing else math.inf
            results["pushed" if pushed else "quiet"].append(rounds)

        async with trio.open_nursery() as nursery:
            for index, origin in enumerate(origins):
                nursery.start_soon(update, index, origin)
    return results


def measure_real(n: int, loss: float) -> dict:
    results: dict = {}

    async def run() -> None:
        results.update(await real_rounds(n, loss, seed=n + int(loss * 100)))

    started, cpu = time.perf_counter(), time.process_time()
    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    results["wall_seconds"] = time.perf_counter() - started
    results["cpu_seconds"] = time.process_time() - cpu
    return results


# -- the idealised model (the baseline) -----------------------------------------------------------

def model_rounds(n: int, loss: float, seed: int, *, pull: bool) -> int:
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


def model_entry_ages(n: int, loss: float, seed: int, rounds: int = 40) -> tuple[float, int]:
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


def measure_model(n: int, loss: float, seeds: int) -> dict:
    pp = [model_rounds(n, loss, s, pull=True) for s in range(seeds)]
    push = [model_rounds(n, loss, s, pull=False) for s in range(seeds)]
    figures = {"seeds": seeds, "rounds_p50": percentile(pp, 0.5), "rounds_p99": percentile(pp, 0.99),
               "rounds_max": max(pp), "push_only_rounds_p99": percentile(push, 0.99)}
    if n <= 1000:
        mean_age, max_age = model_entry_ages(n, loss, seed=n)
        figures.update(mean_entry_age=mean_age, mean_age_goal=math.log(n), max_entry_age=max_age,
                       max_age_goal=2 * math.log2(n))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 100 only on the real code (seconds)")
    parser.add_argument("--large", action="store_true", help="also N = 5,000 on the real code (1-2 min more)")
    parser.add_argument("--only", type=int, help="one N on the real code (its cases above), for a run in pieces")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = QUICK_CASES if args.quick else FULL_CASES
    if args.large:
        cases += (LARGE_CASE,)
    if args.only:
        cases = tuple(case for case in FULL_CASES + (LARGE_CASE,) if case[0] == args.only)
    figures: dict = {"fanout": FANOUT, "gossip_interval": INTERVAL, "updates_per_case": UPDATES,
                     "poll_seconds": POLL, "cases": []}
    rows = []
    for n, loss in cases + (((LARGE_CASE[0], 0.1),) if LARGE_CASE not in cases and not args.only else ()):
        model = measure_model(n, loss, MODEL_SEEDS if n <= 1000 else 20)
        real = measure_real(n, loss) if (n, loss) in cases else None
        case = {"n": n, "loss": loss, "model": model, "real": None}
        row = [n, f"{loss:.0%}", model["rounds_p50"], model["rounds_p99"], model["push_only_rounds_p99"]]
        if real is None:
            row += ["not run"] + [""] * 6
        else:
            summary = {}
            for kind in ("quiet", "pushed"):
                values = real[kind]
                summary[kind] = {"samples": len(values), "rounds_p50": percentile(values, 0.5),
                                 "rounds_p99": percentile(values, 0.99), "rounds_max": max(values),
                                 "rounds_mean": statistics.fmean(values), "rounds": values}
            summary["wall_seconds"] = real["wall_seconds"]
            summary["cpu_seconds"] = real["cpu_seconds"]
            case["real"] = summary
            row += [round(summary["quiet"]["rounds_p50"], 1), round(summary["quiet"]["rounds_p99"], 1),
                    round(summary["pushed"]["rounds_p50"], 1), round(summary["pushed"]["rounds_p99"], 1),
                    round(summary["quiet"]["rounds_p99"] / model["rounds_p99"], 2), round(real["wall_seconds"]),
                    round(real["cpu_seconds"])]
        if n == 1000 and loss == 0.1 and real is not None:
            worst = max(case["real"]["quiet"]["rounds_p99"], case["real"]["pushed"]["rounds_p99"])
            figures["goal"] = {"rounds": GOAL_ROUNDS_N1000, "real_rounds_p99": worst, "met": worst <= GOAL_ROUNDS_N1000}
        figures["cases"].append(case)
        rows.append(row)
    print(f"k = {FANOUT}, one round = {INTERVAL:g} s; real: {UPDATES} updates a case (half pushed, half quiet);"
          f" model: {MODEL_SEEDS} seeds (20 at N = 5,000)\n")
    print_table(["N", "loss", "model p50", "model p99", "model push-only p99", "real quiet p50", "quiet p99",
                 "pushed p50", "pushed p99", "quiet p99 / model p99", "wall s", "CPU s"], rows)
    if "goal" in figures:
        goal = figures["goal"]
        print(f"\ngoal: <= {goal['rounds']} rounds at N = 1,000, 10 % loss; real p99 {goal['real_rounds_p99']:.1f}:"
              f" {'met' if goal['met'] else 'NOT met'}")
    for case in figures["cases"]:
        if "mean_entry_age" in case["model"]:
            m = case["model"]
            print(f"model entry age N = {case['n']}, loss {case['loss']:.0%}: mean {m['mean_entry_age']:.2f}"
                  f" (goal {m['mean_age_goal']:.2f}), max {m['max_entry_age']} (goal {m['max_age_goal']:.1f})")
    figures["quick"] = args.quick
    figures["only"] = args.only
    figures["seconds"] = time.perf_counter() - started
    write_results("gossip_convergence", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

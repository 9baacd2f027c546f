"""BSPlib's table 1, time-compressed, on the node's gang runtime: four strategies under owner load that moves.

Question (issue 16): a gang of p = 2 under owners who come and go; how long does it take on
random hosts (no checks), on the best p at start (no checks), with a forced global checkpoint
and restart on the best p every interval, and with selective migration (a check every interval,
move only when a member's host fell out of the best p)? Goal: selective <= best p, well under
random. BSPlib's figures (p = 2): 3255 / 623 / 841 / 658 s.

Where it runs: five hosts of the node's gang runtime in one process (`_gang_cluster.py`: each a
real `Gangs`, messages and checkpoint bulk through their wire encoding, the master keeping each
global checkpoint on disk, members in sandboxed guests). Not five node processes: nodes on one
machine all measure that machine's CPU, so an owner's load on one of them would show in every
node's gossiped figures, or in none; here each host's row of the resource table is set by the
owner schedule, as that host's own measurement would show it. The gang is
`bench_plugins/gang_ballast.py` (1 MB of state per member, supersteps of 100 ms of simulated
work, which a frozen guest does not do; see that file), so each host has its own virtual CPU and
the machine's other load does not count as an owner.

The owners: two of the five hosts are busy at any time, and the load moves on every 5 s (each
host busy for 10 s, then idle 15 s; h0 and h1, idle at the start, are the best p, and the load
reaches h0 at 5 s and h1 at 10 s). A busy owner takes 80 % of the host: its members are paused
(`GangHost.pause_all`, what the owner's `pause` does to them) for 800 ms of every second (the
work's 30 ms credit makes it ~77 %), and its row shows 0.2 available, as its measurement would. The strategies, each a fresh gang on the same schedule:

- `random`: hosts drawn with a seeded generator (`--seed`); the coordinator is shown a table
  that ranks them first for its placement, the true table right after; no checks;
- `best`: placed on the best p of the true table; no checks;
- `forced`: as best, and every `--interval` seconds a global checkpoint and a restart on the best
  p (`CheckCadence(forced=True)`, fresh guests even on the same hosts);
- `selective`: as best, and a check every `--interval` seconds (x = 1).

Printed: wall time from submit to the combined result, its ratio to `best`, the global
checkpoints, the seconds from their barriers to the next superstep's release (capture, restart in
fresh guests and one superstep) and the moves; the result is checked against a gang that never moved. About 1.5 min on
an idle 2-core machine; `--quick`: half the supersteps.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from bench._gang_cluster import GangCluster  # noqa: E402
from frost_core.policies.gang_migration import CheckCadence  # noqa: E402
from frost_core.policies.views import NodeView  # noqa: E402

BALLAST = Path(__file__).resolve().parent / "bench_plugins" / "gang_ballast.py"
HOSTS = ["h0", "h1", "h2", "h3", "h4"]
ROTATION = ["h3", "h0", "h1", "h4", "h2"]   # the owners' order: the k-th shift's host
SHIFT = 5.0          # seconds between owner moves; each host stays busy for two shifts
OWNER_SHARE = 0.8    # what a busy owner takes
CYCLE = 1.0          # seconds of one pause/resume cycle of a busy host's members
P = 2
PAPER = {"random": 3255, "best": 623, "forced": 841, "selective": 658}


def busy_hosts(at: float) -> set[str]:
    """The hosts whose owner is busy at `at` seconds after the start: the shift's and the one before."""
    k = int(at // SHIFT)
    return {ROTATION[k % len(ROTATION)], ROTATION[(k - 1) % len(ROTATION)]}


def rows(busy: set[str]) -> dict[str, NodeView]:
    return {host: NodeView(host, available=1.0 - OWNER_SHARE if host in busy else 1.0, guests=0) for host in HOSTS}


async def owners(cluster: GangCluster, began: float) -> None:
    """Play the owner schedule: each host's row, and its members paused for the owner's share of every cycle."""
    while True:
        busy = busy_hosts(time.monotonic() - began)
        cluster.set_rows(rows(busy))
        for host in HOSTS:
            if host in busy:
                cluster.nodes[host].host.pause_all()
        await trio.sleep(CYCLE * OWNER_SHARE)
        for host in HOSTS:
            cluster.nodes[host].host.resume_all()
        await trio.sleep(CYCLE * (1 - OWNER_SHARE))


async def one_run(strategy: str, params: dict, interval: float, seed: int, folder: Path) -> dict:
    cluster = GangCluster(HOSTS, folder)
    cadence = {"random": CheckCadence(None, None), "best": CheckCadence(None, None),
               "forced": CheckCadence(every_seconds=interval, forced=True),
               "selective": CheckCadence(every_seconds=interval)}[strategy]
    gang_id = f"t1{strategy}"
    async with cluster.running():
        began = time.monotonic()
        if strategy == "random":   # the coordinator places the gang on the drawn hosts, then sees the true table
            drawn = random.Random(seed).sample(HOSTS, P)
            cluster.set_rows({host: NodeView(host, available=1.0 if host in drawn else 0.5, guests=0) for host in HOSTS})
        else:
            cluster.set_rows(rows(busy_hosts(0.0)))
        outcome = cluster.submit(gang_id, BALLAST, params, P, cadence)
        cluster.set_rows(rows(busy_hosts(0.0)))
        placed = cluster.view(gang_id).members
        async with trio.open_nursery() as nursery:
            nursery.start_soon(owners, cluster, began)
            with trio.fail_after(600):
                await outcome.ended.wait()
            nursery.cancel_scope.cancel()
        for host in HOSTS:
            cluster.nodes[host].host.resume_all()
        view = cluster.view(gang_id)
    if outcome.results is None:
        raise SystemExit(f"{strategy}: the gang failed: {outcome.failure}")
    expected = [hashlib.sha256(random.Random(rank).randbytes(params["ballast_bytes"])).hexdigest() for rank in range(P)]
    if [r["digest"] for r in outcome.results] != expected:
        raise SystemExit(f"{strategy}: the result is not the unmoved gang's")
    taken = sorted(key[2] for key in cluster.sent if key[0] == "GangTakeCheckpoint")
    # From the barrier of each global checkpoint to the next release after it: the capture, the restart
    # (fresh guests from the images) and the first superstep after it.
    restarting = sum(cluster.released(gang_id, k + 1) - cluster.sent["GangTakeCheckpoint", gang_id, k][0]
                     for k in taken if cluster.released(gang_id, k + 1) is not None)
    return {"strategy": strategy, "seconds": outcome.at - began, "hosts_at_start": [m.host for m in placed],
            "hosts_at_end": [m.host for m in view.members], "global_checkpoints": len(taken),
            "seconds_checkpointing_and_restarting": restarting, "moves": view.moves,
            "restarts": view.restarts, "waited_at_barriers": [m.waited for m in view.members]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="half the supersteps")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between checks (forced, selective)")
    parser.add_argument("--seed", type=int, default=2, help="the random hosts' seed (1 draws h0 h1, the best p)")
    args = parser.parse_args()
    params = {"members": P, "ballast_bytes": 1 << 20, "supersteps": 50 if args.quick else 100, "step_ms": 100}
    load_before = os.getloadavg()[0]
    runs = {}
    for strategy in ("best", "selective", "forced", "random"):
        with tempfile.TemporaryDirectory(prefix="gang-table1-") as folder:
            runs[strategy] = trio.run(one_run, strategy, params, args.interval, args.seed, Path(folder))
    best = runs["best"]["seconds"]
    rows_ = [[name, run["seconds"], run["seconds"] / best, PAPER[name] / PAPER["best"], run["global_checkpoints"],
              run["seconds_checkpointing_and_restarting"], run["moves"], " ".join(run["hosts_at_start"]), " ".join(run["hosts_at_end"])] for name, run in runs.items()]
    print_table(["strategy", "wall s", "/ best", "paper / best", "global checkpoints", "s checkpointing+restarting", "moves",
                 "hosts at start",
                 "hosts at end"], rows_)
    load_after = os.getloadavg()[0]
    print(f"p = {P}, {params['supersteps']} supersteps of {params['step_ms']} ms, checks every {args.interval:g} s; "
          f"load average {load_before:.1f} before, {load_after:.1f} after")
    write_results("gang_table1", {"params": params, "interval": args.interval, "seed": args.seed, "shift": SHIFT,
                                  "owner_share": OWNER_SHARE, "runs": runs, "load_average": [load_before, load_after]})


if __name__ == "__main__":
    main()

"""BSPlib's table 1 on five real node processes: owners who come and go per host, strategies for a gang of p = 2.

Question (issue 16): the question of `gang_table1.py` (random hosts / best p at start / a forced
global checkpoint every interval / selective migration; goal: selective <= best p, well under
random), asked of whole `frost-tui --headless` nodes on loopback (gossip, the control socket,
the authenticated channel, guests started and suspended by each node's owner policy), where
`gang_table1.py` runs the gang runtime of five hosts in one process.

Owners on one machine: nodes here share one machine, so its CPU cannot tell one node's owner
from another's. Each node's config names a program of its own in `[desk] programs` ("owner-h3"
on h3), and the bench runs a copy of `sleep` under that name (no CPU) on a host while its owner
is busy: that node's desk rule suspends its guests (SIGSTOP: a busy owner here takes the whole
host, where `gang_table1.py`'s takes 80 %), its gossiped figures show it offering no CPU, and a
gang member on it is held, so its coordinator moves the gang at its next timed check. The owner
policy is `always`, as in `_nodes.py` (the machine's other load must not count as an owner);
`always` still weighs the desk rules' verdicts (`owner_evidence`: "every preset ... the desk
rules' SUSPEND/EVICT verdicts count"). `owner.resume_after` is 1 s (30 s by default), so a host
offers CPU again a second after its shift, on the time scale of the compressed schedule.

The schedule is `gang_table1.py`'s (two of five hosts busy at any time, the load moving on
every `--shift` seconds, h3 and h2 busy at the start). The gang is `bench_plugins/gang_ballast.py`
(1 MiB of incompressible state per member, supersteps of 100 ms of simulated work): its work is
timed sleeps, so the five nodes' members do not compete for the machine's two cores and a host's
speed is its owner's doing, not the machine's; heat-diffusion would burn real CPU, and members on
"idle" hosts would slow each other down. The result is checked against `run_gang_locally`.

Strategies, each a fresh gang submitted on h0 (the coordinator; it hosts members like the rest):
- `best`: placed by the master on the best p (the hosts busy at the start offer no CPU); no checks;
- `selective`: as best, `--check-every INTERVAL`;
- `forced`: as best, `--check-every INTERVAL,forced` (a global checkpoint and restart on the
  best p at every check);
- `random`: two hosts drawn with a seeded generator; the gang is pinned there by pausing the
  other three (`pause`, so they offer no CPU) until it is placed, then resuming them; the owner
  schedule starts once it is placed (about a second later than the others'); no checks;
- `selective+checkpoints`: selective, with the master's `[gang] checkpoint_interval` at the check
  interval for this gang: a held member stops where it is and reaches no barrier, so its gang
  restarts from its last global checkpoint, which is otherwise its last move or superstep 0.

Printed: wall seconds from submit to the result (min / median / max of `--repeats` runs, alternated),
the median's ratio to best p's, moves and restarts per run; results in
bench/results/gang_table1_nodes.json. Three repeats took 11 min on the 2-core machine (five node
starts, then 15-60 s per run); `--quick` runs each strategy once (~4 min).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import print_table, write_results  # noqa: E402
from bench._nodes import BENCH_CONFIG, start_cluster, stop_all  # noqa: E402
from frost_core.api.commands import SaveSettings  # noqa: E402
from frost_core.node.control import call_node  # noqa: E402
from frost_core.plugin.gang import run_gang_locally  # noqa: E402
from frost_core.plugin.loader import load_plugin_file  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

BALLAST = Path(__file__).resolve().parent / "bench_plugins" / "gang_ballast.py"
HOSTS = ["h0", "h1", "h2", "h3", "h4"]
ROTATION = ["h3", "h0", "h1", "h4", "h2"]   # the owners' order, as gang_table1.py's
P = 2
STRATEGIES = ("best", "selective", "forced", "random", "selective+checkpoints")
PAPER = {"random": 3255, "best": 623, "forced": 841, "selective": 658, "selective+checkpoints": 658}
# The owner policy stays "always" (the nodes share this machine); a host comes back 1 s after its owner leaves.
# The master's gang coordinators read the resource table once a second (`Node._watch_resources`): a submit
# waits that long after the `peers` view shows the owners, or the gang may be placed on a stale table.
TABLE_LAG = 2.5
CONFIG = BENCH_CONFIG.replace("evict_hold = 0\n", "evict_hold = 0\nresume_after = 1\n")


def busy_hosts(at: float, shift: float) -> set[str]:
    """The hosts whose owner is busy `at` seconds after the start: the shift's and the one before."""
    k = int(at // shift)
    return {ROTATION[k % len(ROTATION)], ROTATION[(k - 1) % len(ROTATION)]}


class Owners:
    """One `owner-hK` process (a copy of sleep) per busy host, started and ended as the schedule says."""

    def __init__(self, folder: Path) -> None:
        self.programs = {}
        for host in HOSTS:
            self.programs[host] = folder / f"owner-{host}"
            shutil.copy(shutil.which("sleep"), self.programs[host])
        self.running: dict[str, subprocess.Popen] = {}

    def set_busy(self, busy: set[str]) -> None:
        for host in set(self.running) - busy:
            ended = self.running.pop(host)
            ended.kill()
            ended.wait()   # a zombie keeps its name in the process table: its owner would stay "busy"
        for host in busy - set(self.running):
            self.running[host] = subprocess.Popen([str(self.programs[host]), "3600"])

    def close(self) -> None:
        for process in self.running.values():
            process.kill()
            process.wait()
        self.running.clear()


def offering_names(master) -> set[str]:
    """The hosts the master sees offering CPU (its peers' gossiped figures, and itself)."""
    return {p["name"] for p in master.call("peers") if p["state"] == "alive" and p["available"] > 0}


def one_run(nodes: dict, owners: Owners, strategy: str, params: dict, interval: float, shift: float,
            seed: int, expected: str, folder: Path) -> dict:
    master = nodes["h0"]
    by_id = {node.node_id: name for name, node in nodes.items()}
    owners.set_busy(set())
    wait_for(lambda: offering_names(master) >= set(HOSTS), timeout=60, what="every host offering CPU")
    # What `submit --check-every off / INTERVAL / INTERVAL,forced` sends.
    submit = {"plugin": "gang_ballast", "params": params, "check_interval": 0.0 if strategy in ("best", "random")
              else interval, "check_supersteps": 0, "check_forced": strategy == "forced"}
    # selective+checkpoints: the master's `[gang] checkpoint_interval` (600 s by default) at the check interval
    # for this gang only (read when the gang starts): a held member's gang then restarts from a recent checkpoint.
    periodic = interval if strategy == "selective+checkpoints" else 600.0
    call_node(master.paths, SaveSettings(values={"gang.checkpoint_interval": periodic}))
    if strategy == "random":
        drawn = random.Random(seed).sample(HOSTS, P)
        for host in set(HOSTS) - set(drawn):
            nodes[host].call("pause")
        wait_for(lambda: offering_names(master) == set(drawn), timeout=60, what="only the drawn hosts offering CPU")
        time.sleep(TABLE_LAG)
        began = time.monotonic()
        gang_id = master.call("submit", **submit)["id"]
        pinned = wait_for(lambda: placed_view(master, gang_id), timeout=60, what="the gang placed")
        for host in set(HOSTS) - set(drawn):
            nodes[host].call("resume")
        start = time.monotonic()
        placed_on = sorted(by_id[m["host"]] for m in pinned["members"])
        if placed_on != sorted(drawn):
            print(f"  random: placed on {placed_on}, not on the drawn {sorted(drawn)}", flush=True)
    else:
        owners.set_busy(busy_hosts(0.0, shift))
        wait_for(lambda: offering_names(master) == set(HOSTS) - busy_hosts(0.0, shift), timeout=60,
                 what="the hosts busy at the start offering no CPU")
        time.sleep(TABLE_LAG)
        began = start = time.monotonic()
        gang_id = master.call("submit", **submit)["id"]
    hosts_seen: list[list[str]] = []
    why: list[tuple[float, str, str]] = []   # (seconds after submit, phase, reason) at each change
    while (state := master.call("assignment", assignment=gang_id))["state"] not in ("done", "failed", "cancelled"):
        owners.set_busy(busy_hosts(time.monotonic() - start, shift))
        placed = [by_id.get(m["host"], "-") for m in state["gang"]["members"]]
        if not hosts_seen or hosts_seen[-1] != placed:
            hosts_seen.append(placed)
        if not why or why[-1][1:] != (state["gang"]["phase"], state["gang"]["reason"]):
            why.append((round(time.monotonic() - began, 1), state["gang"]["phase"], state["gang"]["reason"]))
        if time.monotonic() - began > 600:
            raise SystemExit(f"{strategy}: the gang did not end within 600 s")
        time.sleep(0.2)
    ended = time.monotonic()
    owners.set_busy(set())
    if state["state"] != "done":
        raise SystemExit(f"{strategy}: the gang {state['state']}: {state.get('error')}")
    output = folder / f"{gang_id}.out"
    master.call("result", assignment=gang_id, output=str(output))
    if hashlib.sha256(output.read_bytes()).hexdigest() != expected:
        raise SystemExit(f"{strategy}: the result is not the one-process run's")
    view = state["gang"]
    return {"strategy": strategy, "seconds": ended - began, "hosts": hosts_seen, "moves": view["moves"],
            "restarts": view["restarts"], "epoch": view["epoch"], "phases": why,
            "waited_at_barriers": [m["waited_seconds"] for m in view["members"]]}


def placed_view(master, gang_id: str) -> dict | None:
    """The gang's view once every member has a host, else None."""
    view = master.call("assignment", assignment=gang_id)["gang"]
    return view if all(m["host"] for m in view["members"]) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one run of each strategy (same as --repeats 1)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each strategy, alternated")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between checks (selective, forced)")
    parser.add_argument("--shift", type=float, default=5.0, help="seconds between owner moves")
    parser.add_argument("--supersteps", type=int, default=100,
                        help="supersteps of 100 ms (fewer than 2 shifts' worth end before the owners reach the best p)")
    parser.add_argument("--seed", type=int, default=2, help="the random hosts' seed")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--phases", action="store_true", help="print the gang's phases and their reasons in each run")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    params = {"members": P, "ballast_bytes": 1 << 20, "supersteps": args.supersteps, "step_ms": 100}
    expected = hashlib.sha256(run_gang_locally(load_plugin_file(BALLAST), params).data).hexdigest()
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {name: [] for name in args.strategies}
    with tempfile.TemporaryDirectory(prefix="gang-table1-nodes-") as folder_name:
        folder = Path(folder_name)
        owners = Owners(folder)
        nodes_list = start_cluster(folder, HOSTS, base_config=CONFIG, extra_configs={
            host: f'\n[desk]\nprograms = ["owner-{host}"]\n' for host in HOSTS})
        try:
            nodes = dict(zip(HOSTS, nodes_list))
            nodes["h0"].call("add-plugin", path=str(BALLAST))
            wait_for(lambda: any(p["name"] == "gang_ballast" and p["ok"] for p in nodes["h0"].call("plugins")),
                     timeout=30, what="the gang plugin listed", interval=0.5)
            for repeat in range(args.repeats):
                for strategy in args.strategies:
                    run = one_run(nodes, owners, strategy, params, args.interval, args.shift, args.seed, expected,
                                  folder)
                    runs[strategy].append(run)
                    if args.phases:
                        for at, phase, reason in run["phases"]:
                            print(f"  {at:6.1f} s  {phase}: {reason}")
                    print(f"run {repeat + 1} {strategy}: {run['seconds']:.1f} s, moves {run['moves']}, "
                          f"restarts {run['restarts']}, hosts {run['hosts']}", flush=True)
        finally:
            owners.close()
            stop_all(nodes_list)
    load_after = os.getloadavg()[0]
    best = statistics.median(r["seconds"] for r in runs.get("best") or next(iter(runs.values())))
    rows = []
    for name, done in runs.items():
        seconds = [r["seconds"] for r in done]
        rows.append([name, min(seconds), statistics.median(seconds), max(seconds), statistics.median(seconds) / best,
                     PAPER[name] / PAPER["best"], " ".join(str(r["moves"]) for r in done),
                     " ".join(str(r["restarts"]) for r in done)])
    print_table(["strategy", "min s", "median s", "max s", "median / best", "paper / best", "moves", "restarts"], rows)
    print(f"p = {P}, {params['supersteps']} supersteps of {params['step_ms']} ms, checks every {args.interval:g} s, "
          f"owners move every {args.shift:g} s; load average {load_before:.1f} before, {load_after:.1f} after")
    write_results("gang_table1_nodes", {"params": params, "interval": args.interval, "shift": args.shift,
                                        "seed": args.seed, "runs": runs, "load_average": [load_before, load_after]})


if __name__ == "__main__":
    main()

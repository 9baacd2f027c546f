"""What a partition costs: wasted guest-seconds and time to result for a host cut, a master cut and a master stop.

Three real nodes, each in its own network namespace on one bridge (tests/netns.py), two guest
CPUs each, run the same 6-unit ray trace four times in a row in one cluster, after a tiny warm-up assignment
that ships the plugin's code to the hosts:

- undisturbed (the baseline, measured in the same run);
- a host cut off (its veth link down) for `--host-cut` seconds while it runs two units;
- the master cut off for `--master-cut` seconds while 4 of the 6 units run on the two hosts;
- the master stopped with SIGSTOP for `--freeze` seconds (a sleeping laptop), then SIGCONT.

Timed: from the submit to the assignment being done (the master's `assignment` query). Wasted is
the master's own figure (`wasted_seconds`, master.waste), read once every copy has ended and its
late figures had SETTLE seconds to arrive. Re-formed is the time from the heal (or
SIGCONT) until every node sees every other alive. By default the timings are the issue's scaled
down (host_timeout 6 s, a failure detector that declares a peer dead in about 3 s, each cut or
stop `--cut` = 12 s), so each case runs in seconds and the whole script takes about 2 minutes.
The issue's own lengths: `--host-cut 30 --master-cut 75 --freeze 60` (about 5 minutes), with
`--host-timeout 30` for its default `cluster.host_timeout` too.
`--keep FOLDER` keeps the nodes' data and logs.
Needs root (network namespaces).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' node and namespace harness

from _common import print_table, write_results  # noqa: E402
from frost_core.wire.security import ClusterKey  # noqa: E402
from tests.multinode.cluster import CLUSTER_CONFIG  # noqa: E402
from tests.netns import Topology, netns_unavailable_reason  # noqa: E402
from tests.nodes import NodeProcess, start_node  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

PORT = 47720
SETTLE = 3.0
"""Seconds after the last copy ends for its last report, or its result held in an outbox, to reach the master."""
PICTURE = {"width": 512, "height": 96, "rows_per_unit": 16, "samples": 5}
WARM_UP = {"width": 64, "height": 16, "rows_per_unit": 8, "samples": 1}
# The test cluster's settings (one report every 0.5 s, host_timeout 6 s, checkpoints every 1-2 s)
# with two guest CPUs per node, and a failure detector that declares a peer dead in about 3 s.
CONFIG = """
[gossip]
interval = 0.3
announce_interval = 2
probe_interval = 0.2
probe_timeout = 0.1
suspicion_multiplier = 4
suspicion_min = 2

[owner]
# The nodes share this machine and would take one another (or its memory pressure) for a busy owner.
policy = "always"
memory_pressure = 100
""" + CLUSTER_CONFIG.replace("cpus = 1", "cpus = 2")


def start_cluster(topology: Topology, folder: Path, host_timeout: float) -> list[NodeProcess]:
    key_file = folder / "cluster.key"
    ClusterKey.generate().save(key_file)
    nodes: list[NodeProcess] = []
    for host, name in zip(topology.hosts, ("master", "beta", "gamma")):
        seeds = (nodes[0].address,) if nodes else ()
        nodes.append(start_node(folder / name, key_file=key_file, seeds=seeds, port=PORT, name=name,
                                listen_host="0.0.0.0", netns=host.namespace,
                                base_config=CONFIG.replace("host_timeout = 6\n", f"host_timeout = {host_timeout:g}\n"),
                                extra_config=f'\n[node]\nadvertise_host = "{host.address}"\n', log_level="info"))
    reformed(nodes)
    return nodes


def reformed(nodes: list[NodeProcess]) -> float:
    """Seconds until every node sees every other alive."""
    started = time.monotonic()
    ids = {n.node_id for n in nodes}
    for node in nodes:
        wait_for(lambda node=node: {p["node_id"] for p in node.call("peers") if p["state"] == "alive"} >= ids,
                 timeout=60, what=f"{node.name} to see every node alive", interval=0.1)
    return time.monotonic() - started


def run_case(nodes: list[NodeProcess], topology: Topology, case: str, cut: float, picture: dict = PICTURE) -> dict:
    master = nodes[0]
    started = time.monotonic()
    assignment_id = master.call("submit", plugin="raytrace", params=picture)["id"]
    units = lambda: master.call("assignment", assignment=assignment_id)["units"]  # noqa: E731
    reform = None
    if case != "undisturbed":
        wait_for(lambda: sum(u["state"] == "running" and u["host"] != master.node_id for u in units()) >= 4,
                 timeout=60, what="four units running on the hosts", interval=0.1)
        if case == "master stopped":
            os.kill(master.process.pid, signal.SIGSTOP)
            time.sleep(cut)
            os.kill(master.process.pid, signal.SIGCONT)
        else:
            victim = topology.hosts[0 if case == "master cut" else 1]
            topology.cut(victim)
            time.sleep(cut)
            topology.heal(victim)
        reform = reformed(nodes)
    wait_for(lambda: master.call("assignment", assignment=assignment_id)["state"] == "done", timeout=300,
             what=f"the {case} assignment", interval=0.1)
    seconds = time.monotonic() - started
    if case != "undisturbed":  # a healed copy's late report or result settles what it threw away
        wait_for(lambda: not any(g["assignment_id"] == assignment_id for n in nodes for g in n.call("status")["guests"]),
                 timeout=300, what=f"every copy of the {case} assignment to end", interval=0.2)
        time.sleep(SETTLE)
    record = master.call("assignment", assignment=assignment_id)
    placements = sum(1 for e in master.call("events")
                     if e["message"].startswith(f"{assignment_id}.") and " placed " in e["message"])
    refused = sum(1 for e in master.call("events")
                  if e["message"].startswith(f"{assignment_id}.") and "result refused" in e["message"])
    return {"case": case, "seconds_to_result": round(seconds, 1), "wasted_seconds": round(record["wasted_seconds"], 1),
            "waste": record["waste"], "placements": placements, "units": len(record["units"]),
            "refused_results": refused, "reformed_seconds": None if reform is None else round(reform, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cut", type=float, default=12.0, help="seconds each partition or stop lasts")
    parser.add_argument("--host-cut", type=float, help="seconds the host is cut off (default: --cut)")
    parser.add_argument("--master-cut", type=float, help="seconds the master is cut off (default: --cut)")
    parser.add_argument("--freeze", type=float, help="seconds the master is stopped (default: --cut)")
    parser.add_argument("--host-timeout", type=float, default=6.0, help="cluster.host_timeout of the nodes")
    parser.add_argument("--keep", type=Path, help="keep the nodes' data and logs in this folder")
    args = parser.parse_args()
    reason = netns_unavailable_reason()
    if reason:
        sys.exit(f"partition_cost needs network namespaces: {reason}")
    cuts = {"undisturbed": 0.0, "host cut": args.host_cut or args.cut, "master cut": args.master_cut or args.cut,
            "master stopped": args.freeze or args.cut}
    rows = []
    with tempfile.TemporaryDirectory(prefix="frost-partition-") as scratch, Topology(3) as topology:
        folder = args.keep or Path(scratch)
        nodes = start_cluster(topology, folder, args.host_timeout)
        try:
            run_case(nodes, topology, "undisturbed", args.cut, WARM_UP)
            for case, cut in cuts.items():
                rows.append(run_case(nodes, topology, case, cut))
                print(rows[-1], flush=True)
        finally:
            for node in nodes:
                node.stop()
    baseline = rows[0]["seconds_to_result"]
    print(f"\nhost_timeout {args.host_timeout:g} s; 6 units, 2 guest CPUs per node; load {os.getloadavg()[0]:.1f}")
    print_table(["case", "out of reach s", "to result s", "over baseline s", "wasted s", "placements", "refused",
                 "re-formed s"],
                [[r["case"], cuts[r["case"]], r["seconds_to_result"], round(r["seconds_to_result"] - baseline, 1),
                  r["wasted_seconds"], f'{r["placements"]}/{r["units"]}', r["refused_results"],
                  "—" if r["reformed_seconds"] is None else r["reformed_seconds"]] for r in rows])
    write_results("partition_cost", {"cuts": cuts, "host_timeout": args.host_timeout, "picture": PICTURE,
                                     "baseline_seconds": baseline, "cases": rows})


if __name__ == "__main__":
    main()

"""Real `frost-tui --headless` nodes on loopback for the benchmarks that need whole peers, and the ballast plugin.

The multi-node benchmarks measure what an operator would see, so they drive separate node
processes through the control socket, as the CLI does. The owner policy is switched off (the
benchmark itself and whatever else shares this machine would count as a busy owner), as is the
load balancer: a benchmark issues every move, evict and pause itself, so each one is counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' node harness is the one harness

from frost_core.wire.security import ClusterKey  # noqa: E402
from bench_plugins.ballast import FIRST_STEP  # noqa: E402
from tests.nodes import NodeProcess as BenchNode  # noqa: E402
from tests.nodes import start_node  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

BALLAST_PLUGIN = Path(__file__).resolve().parent / "bench_plugins" / "ballast.py"

BENCH_CONFIG = """
[gossip]
interval = 0.3
announce_interval = 2
suspicion_min = 3

[owner]
# Node benchmarks measure moves and throughput, not the owner: the nodes share this machine and
# would take one another for a busy owner. bench/sim_owner_reaction.py and bench/owner_* measure it.
policy = "always"
# A benchmark's evictions send a unit back the way it came at once: the owner's send-away (a unit the
# owner evicted stays off that machine for evict_hold seconds) would leave it nowhere to run.
evict_hold = 0

[guests]
cpus = 1

[cluster]
report_interval = 0.5
balance_interval = 0
"""
"""Fast gossip, one guest CPU per node, no owner policy, no evict hold, no balancer."""


def start_cluster(folder: Path, names: list[str], extra_config: str = "", *,
                  base_config: str = BENCH_CONFIG, extra_configs: dict[str, str] | None = None) -> list[BenchNode]:
    """Start one node per name (the first is the others' seed) and wait until all see each other alive;
    `extra_configs` adds lines to some nodes' configs only (by name)."""
    key_file = folder / "cluster.key"
    ClusterKey.generate().save(key_file)
    nodes: list[BenchNode] = []
    try:
        for name in names:
            seeds = [nodes[0].address] if nodes else []
            more = (extra_configs or {}).get(name, "")
            nodes.append(_start_node(folder / name, name, key_file, seeds, extra_config + more, base_config))
        ids = {n.call("status")["node_id"] for n in nodes}
        for node in nodes:
            node.call("plugins")  # waits for a full plugin scan (see add_ballast_plugin)
            wait_for(lambda node=node: {p["node_id"] for p in node.call("peers") if p["state"] == "alive"} >= ids,
                     timeout=30, what=f"{node.name} to see every node alive")
    except BaseException:
        stop_all(nodes)
        raise
    return nodes


def add_ballast_plugin(node: BenchNode) -> None:
    """`plugins add` the ballast plugin on `node` (its peers fetch it by hash) and make sure it is listed.

    A plugin added while the node's start-up scan still runs drops out of the list when that scan
    ends (the scan's older result replaces it); the `plugins` verb rescans, which brings it back.
    """
    node.call("add-plugin", path=str(BALLAST_PLUGIN))
    wait_for(lambda: any(p["name"] == "bench-ballast" and p["ok"] for p in node.call("plugins")), timeout=30,
             what=f"the ballast plugin to be listed on {node.name}", interval=0.5)


def stop_all(nodes: list[BenchNode]) -> None:
    for node in nodes:
        node.stop()


def _start_node(data_dir: Path, name: str, key_file: Path, seeds: list[str], extra_config: str,
                base_config: str = BENCH_CONFIG) -> BenchNode:
    return start_node(data_dir, key_file=key_file, seeds=tuple(seeds), name=name, base_config=base_config,
                      extra_config=extra_config, env={"NO_COLOR": "1"}, log_level="info")


def first_steps(node: BenchNode, task_id: str, after: float) -> list[tuple[float, int]]:
    """(unix time, steps done) of each guest process of `task_id` that began stepping on `node` after `after`.

    The ballast plugin prints one line at the first step of every guest process; the node keeps
    it as a guest-log event. The time is the plugin's own clock reading, not the event's.
    """
    found = []
    for event in node.call("events"):
        prefix = f"{task_id}: {FIRST_STEP} "
        if event["kind"] == "guest-log" and event["message"].startswith(prefix):
            at, steps = event["message"][len(prefix):].split()
            if float(at) > after:
                found.append((float(at), int(steps)))
    return found


def guest_tasks(node: BenchNode) -> list[str]:
    return [g["task_id"] for g in node.call("status")["guests"]]

"""A small real cluster for the cross-peer tests: one master and hosts, as separate processes on loopback."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from frost_core.plugin.api import parse_params, run_locally
from frost_core.plugin.loader import load_plugin_file
from tests.nodes import NodeProcess
from tests.waiting import wait_for

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"

# Each node offers one CPU to guests, reports its units twice a second and checkpoints every
# second, so moves, replicas and recovery all happen within a test's few seconds. The load
# balancer is off: these tests move units themselves (several nodes on one machine share its
# cores, so the balancer's view of who is loaded is not the test's to predict).
CLUSTER_CONFIG = """
[guests]
cpus = 1

[cluster]
report_interval = 0.5
host_timeout = 6
balance_interval = 0

[checkpoints]
min_interval = 1
max_interval = 2
"""

# Two units of a ray trace that take a few seconds each at guest priority: long enough to be
# moved while they run, short enough for CI.
RAYTRACE = {"width": 1024, "height": 32, "rows_per_unit": 16, "samples": 5}


def reference_sha256(plugin: str, params: dict) -> str:
    """The result of the same assignment computed in this process, without any node: once per test run for each
    plugin and parameters (the partition tests' picture takes 16 s here, and several tests share a picture)."""
    return _reference_sha256(plugin, tuple(sorted(params.items())))


@functools.cache
def _reference_sha256(plugin: str, params: tuple[tuple[str, object], ...]) -> str:
    module = load_plugin_file(PLUGINS / f"{plugin}.py")
    output = run_locally(module, parse_params(module, dict(params)))
    return hashlib.sha256(output.data).hexdigest()


def params_args(params: dict) -> list[str]:
    args = []
    for key, value in params.items():
        args += ["--param", f"{key}={value}"]
    return args


def wait_for_members(nodes: list[NodeProcess], timeout: float = 30) -> None:
    ids = {node.node_id for node in nodes}
    for node in nodes:
        wait_for(lambda node=node: {p["node_id"] for p in node.call("peers") if p["state"] == "alive"} >= ids,
                 timeout=timeout, what=f"{node.data_dir.name} to see every node alive")


def assignment(master: NodeProcess, assignment_id: str) -> dict:
    return master.call("assignment", assignment=assignment_id)


def running_units(master: NodeProcess, assignment_id: str) -> list[dict]:
    return [u for u in assignment(master, assignment_id)["units"] if u["state"] == "running"]


def result_sha256(master: NodeProcess, assignment_id: str, tmp_path: Path) -> str:
    output = tmp_path / f"{assignment_id}.out"
    master.call("result", assignment=assignment_id, output=str(output))
    return hashlib.sha256(output.read_bytes()).hexdigest()


def place_gang(master: NodeProcess, plugin_path: str, plugin: str, params: dict, *, nodes: int,
               **submit: object) -> tuple[str, dict]:
    """Add the gang plugin `plugin` from `plugin_path` once all `nodes` offer CPU, submit it (with the `submit`
    options), and wait until every member has a host, each a distinct one: its id and that placement (the
    assignment's `gang`)."""
    wait_for(lambda: len([p for p in master.call("peers") if p["state"] == "alive" and p["available"] > 0]) == nodes,
             timeout=60, what=f"{nodes} nodes offering CPU")
    master.cli("plugins", "add", plugin_path)
    gang_id = master.call("submit", plugin=plugin, params=params, **submit)["id"]
    placed = wait_for(lambda: (g := assignment(master, gang_id)["gang"])["phase"] == "running"
                      and all(m["host"] for m in g["members"]) and g, timeout=60, what="the gang placed")
    assert len({m["host"] for m in placed["members"]}) == len(placed["members"]), placed
    return gang_id, placed

"""A small real cluster for the cross-peer tests: one master and hosts, as separate processes on loopback."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from frost_core.plugin.api import parse_params, run_locally
from frost_core.plugin.loader import load_plugin_file
from tests.nodes import NodeProcess
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"

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
    """The result of the same assignment computed without any node (in this process, or in the one
    `reference_ahead` started): once per test run for each plugin and parameters (the partition tests' picture
    takes 16-20 s here, and several tests share a picture)."""
    key = _reference_key(plugin, params)
    if key not in _REFERENCES:
        ahead = _AHEAD.pop(key, None)
        if ahead is None:
            _REFERENCES[key] = compute_reference_sha256(plugin, params)
        else:
            out, err = ahead.communicate(timeout=300)
            assert ahead.returncode == 0, f"the reference for {plugin} {params} failed: {err}"
            _REFERENCES[key] = out.splitlines()[-1]   # (after anything the plugin printed)
    return _REFERENCES[key]


def reference_ahead(plugin: str, params: dict) -> None:
    """Start computing `reference_sha256(plugin, params)` in a process of its own, at nice 19, while the test's
    nodes work, instead of after them (CI's 20 minutes). Only for tests whose nodes run with the owner policy
    `always`: under the defaults this process is an owner at work, and the guests would rightly yield to it."""
    key = _reference_key(plugin, params)
    if key in _REFERENCES or key in _AHEAD:
        return
    script = ("import json, os, sys\nos.nice(19)\nfrom tests.multinode.cluster import compute_reference_sha256\n"
              "print(compute_reference_sha256(sys.argv[1], json.loads(sys.argv[2])))")
    _AHEAD[key] = subprocess.Popen([sys.executable, "-c", script, plugin, json.dumps(params)], cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_references_ahead() -> None:
    """Stop every reference still computing: its test ended without asking for it (it failed first), and at nice 19
    it would still be an owner at work for the next test's nodes."""
    while _AHEAD:
        _, process = _AHEAD.popitem()
        process.kill()
        process.communicate()


def compute_reference_sha256(plugin: str, params: dict) -> str:
    module = load_plugin_file(PLUGINS / f"{plugin}.py")
    output = run_locally(module, parse_params(module, params))
    return hashlib.sha256(output.data).hexdigest()


def _reference_key(plugin: str, params: dict) -> tuple:
    return plugin, tuple(sorted(params.items()))


_REFERENCES: dict[tuple, str] = {}
_AHEAD: dict[tuple, subprocess.Popen] = {}


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

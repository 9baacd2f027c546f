"""Real `frost-tui --headless` nodes on loopback for the benchmarks that need whole peers, and the ballast plugin.

The multi-node benchmarks measure what an operator would see, so they drive separate node
processes through the control socket, as the CLI does. The owner policy is switched off (the
benchmark itself and whatever else shares this machine would count as a busy owner), as is the
load balancer: a benchmark issues every move, evict and pause itself, so each one is counted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from frost_core.config import Paths
from frost_core.api.errors import NodeUnavailableError
from frost_core.wire.security import ClusterKey
from bench_plugins.ballast import FIRST_STEP

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for the tests' node client
from tests.nodes import call_verb  # noqa: E402

BALLAST_PLUGIN = Path(__file__).resolve().parent / "bench_plugins" / "ballast.py"
FROST_TUI = str(Path(sys.executable).parent / "frost-tui")

BENCH_CONFIG = """
[gossip]
interval = 0.3
announce_interval = 2
suspicion_min = 3

[owner]
busy_cpu_percent = 10000
input_idle = 0
evict_hold = 0

[guests]
cpus = 1

[cluster]
report_interval = 0.5
balance_interval = 0
"""
"""Fast gossip, one guest CPU per node, no owner policy, no evict hold, no balancer."""


@dataclass
class BenchNode:
    name: str
    data_dir: Path
    process: subprocess.Popen
    output: IO[str]

    def call(self, verb: str, **args: Any) -> Any:
        paths = Paths.resolve(config_file=self.data_dir / "config.toml", data_dir=self.data_dir)
        return call_verb(paths, verb, **args)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.output.close()


def start_cluster(folder: Path, names: list[str], extra_config: str = "") -> list[BenchNode]:
    """Start one node per name (the first is the others' seed) and wait until all see each other alive."""
    key_file = folder / "cluster.key"
    ClusterKey.generate().save(key_file)
    nodes: list[BenchNode] = []
    try:
        for name in names:
            seeds = ["--seed", nodes[0].call("status")["address"]] if nodes else []
            nodes.append(_start_node(folder / name, name, key_file, seeds, extra_config))
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


def _start_node(data_dir: Path, name: str, key_file: Path, seeds: list[str], extra_config: str) -> BenchNode:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.toml").write_text(BENCH_CONFIG + extra_config)
    command = [
        FROST_TUI, "--headless", "--data-dir", str(data_dir), "--config", str(data_dir / "config.toml"),
        "--listen-host", "127.0.0.1", "--port", "0", "--broadcast-address", "", "--cluster-key-file", str(key_file),
        "--name", name, *seeds,
    ]
    output = open(data_dir / "stdout.log", "a")  # noqa: SIM115 - closed by stop()
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "NO_COLOR": "1"})
    node = BenchNode(name=name, data_dir=data_dir, process=process, output=output)
    deadline = time.monotonic() + 30
    while True:
        try:
            node.call("status")
            return node
        except NodeUnavailableError:
            if process.poll() is not None or time.monotonic() > deadline:
                node.stop()
                raise RuntimeError(f"node {name} did not start:\n{(data_dir / 'stdout.log').read_text()}") from None
            time.sleep(0.1)


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll until predicate() is truthy (real processes: there is no clock to fake)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}; last value: {last!r}")


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

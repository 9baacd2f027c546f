"""A real desk for the UI benchmarks: an in-process Node hosting 10 sleeping guests, with 100 real peers' figures."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from frost_core.api.commands import AddPlugin, SubmitAssignment
from frost_core.config import Paths, load_config
from frost_core.node.wiring import Node
from frost_core.wire.security import ClusterKey

BENCH = Path(__file__).resolve().parent
BALLAST = BENCH / "bench_plugins" / "ballast.py"
PEERS, GUESTS = 100, 10
BALLAST_PARAMS = {"units": GUESTS, "ballast_bytes": 64 << 10, "steps": 10**9, "step_ms": 200}
"""Ten units that sleep in their steps for longer than any run: guests that are there, not busy."""


def desk_node(folder: Path) -> Node:
    """A node on loopback in `folder`, as `frost-tui` builds it, with ten guest CPUs and its own cluster key."""
    key_file = folder / "cluster.key"
    ClusterKey.generate().save(key_file)
    paths = Paths.resolve(config_file=folder / "config.toml", data_dir=folder / "data")
    return Node(load_config(paths, {
        "node.port": 0, "node.listen_host": "127.0.0.1", "node.broadcast_address": "", "node.name": "desk",
        "cluster.key_file": str(key_file), "guests.cpus": GUESTS,
        # Not about the owner: the benchmark and everything else on this shared machine would
        # count as a busy owner and stop the guests (bench/owner_* measure the policy).
        "owner.policy": "always",
        # The swarm's peers host nothing: the balancer must not try to send them guests.
        "cluster.balance_interval": 0,
        # `e` sends the guests away; with no peer to take them they come back through the master's
        # queue to this node, which the owner's evict hold would refuse for five minutes.
        "owner.evict_hold": 0,
    }))


async def populate(node: Node, folder: Path, sleep: Callable[[float], Awaitable[None]]) -> subprocess.Popen:
    """Ten running guests, then 100 peers alive in the node's table; returns the swarm's process.

    `node` must be serving (in this thread's loop or another: commands go through
    `send_nowait`, progress is read from snapshots). `sleep` is the caller's loop's sleep.
    """
    node.send_nowait(AddPlugin(path=str(BALLAST)))
    await until(lambda: any(p.name == "bench-ballast" and p.ok for p in node.snapshot().plugins), sleep, "the plugin")
    node.send_nowait(SubmitAssignment(plugin="bench-ballast", params=BALLAST_PARAMS))
    await until(lambda: active_guests(node.snapshot()) >= GUESTS, sleep, "ten guests")
    swarm = subprocess.Popen([sys.executable, str(BENCH / "_peer_swarm.py"), str(folder / "cluster.key"),
                              node.snapshot().address, str(PEERS)], stdout=subprocess.DEVNULL)
    await until(lambda: sum(p.state == "alive" and not p.is_self for p in node.snapshot().peers) >= PEERS, sleep,
                "100 peers alive", timeout=120)
    return swarm


def active_guests(snapshot) -> int:
    """Guests running or taking a checkpoint: on a loaded machine guests at the lowest priority can be
    slow to answer a checkpoint request, so all ten are seldom "running" at one instant."""
    return sum(g.state in ("running", "checkpointing") for g in snapshot.guests)


def stop_swarm(swarm: subprocess.Popen) -> None:
    swarm.terminate()
    swarm.wait(timeout=30)


async def until(condition: Callable[[], bool], sleep: Callable[[float], Awaitable[None]], what: str,
                timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:.0f} s")
        await sleep(0.2)

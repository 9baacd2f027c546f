"""`frost-tui screenshots --live`: the pictures taken from a real cluster started for them on loopback.

Three headless peers run as separate processes; this process runs the app with its own node
(as `frost-tui` does) joined to them. A peer's long Monte Carlo unit comes to this machine
(the other peers are paused meanwhile, so it has nowhere else to go), then the app's node
submits a ray trace with one unit fewer than the free guest CPUs and moves one unit into the
free CPU: the pictures show guests from two origins with progress, a running assignment with
units on every host, a move, and a minute of measured history. Everything runs in a temporary
directory that is removed afterwards, and every process started here is stopped, also when a
step fails.

The three peers share this machine with the desk, so each would take the others' guests for a
busy owner: their owner policy is `always` (a dedicated server). The desk itself runs on the
default owner settings, as a desk does (its peers are its own children, so they are not its
owner): the Settings picture shows the owner policy as it ships. On a machine busy with other
work that policy rightly holds the desk's guests, so `dedicated` makes the desk a dedicated
server too (CI does that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from frost_core import (
    AssignmentView,
    ClusterKey,
    Config,
    FrostError,
    GetStatus,
    MoveTask,
    NodeSnapshot,
    NodeUnavailableError,
    Paths,
    PauseHosting,
    ResumeHosting,
    SubmitAssignment,
    UnitView,
    call_node,
    load_config,
    save_config,
)

from frost_tui.shots.render import SHOTS, SIZE, take_shots

log = logging.getLogger("frost.tui.screenshots")

DESK = ("turing", 2)  # (name, guests.cpus) of the node the app runs
# Two peers with two CPUs: whichever host keeps the free CPU, another has two units to give.
PEERS = (("ada", 2), ("babbage", 2), ("curie", 1))
# Options every node gets: loopback only, quick gossip and progress reports, no balancer (the
# one move is ours), frequent checkpoints, and an owner who never counts as busy (see above).
CLUSTER_OPTIONS: dict[str, Any] = {
    "node.listen_host": "127.0.0.1", "node.port": 0, "node.broadcast_address": "",
    "gossip.interval": 0.5, "gossip.announce_interval": 2.0, "gossip.suspicion_min": 3.0,
    "cluster.report_interval": 0.5, "cluster.balance_interval": 0.0,
    "checkpoints.min_interval": 5.0, "checkpoints.max_interval": 15.0,
}
PEER_OPTIONS: dict[str, Any] = {"owner.policy": "always"}  # the peers only: see above
# A scene that keeps each unit busy for minutes even on a fast machine (~0.4 s of CPU a row).
SCENE = {"width": 1280, "height": 960, "samples": 4, "max_depth": 3}
PEERS_GUEST = {"samples": 200_000_000, "units": 1}  # montecarlo-pi: one unit, minutes of CPU
VISIBLE_PROGRESS = 0.02  # of the units pictured: a few rows of the ray trace
STEP_TIMEOUT = 30.0  # seconds for each stage (peers up, joined, placed, progressing, moved)
STOP_TIMEOUT = 10.0
_RUN_NODE = "import sys; from frost_tui.cli import main; sys.exit(main())"


class LiveScreenshotError(FrostError):
    """The cluster started for the live screenshots did not reach the state to picture."""

    title = "Live screenshots failed"


@dataclass
class Peer:
    name: str
    data_dir: Path
    process: subprocess.Popen
    address: str = ""

    @property
    def paths(self) -> Paths:
        return Paths.resolve(config_file=self.data_dir / "config.toml", data_dir=self.data_dir)

    def output(self) -> str:
        try:
            return (self.data_dir / "stdout.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""


def export_live_shots(shots=SHOTS, *, dedicated: bool, history: float) -> dict[str, str]:
    """Start the cluster, stage it, take every shot, stop it all; the SVG of each shot by name.

    `dedicated`: the desk runs with the peers' owner policy (`always`) instead of the default;
    `history`: seconds of measurements the charts show before the ray trace starts.
    """
    from frost_core import Node

    with _temporary_root() as root:
        key_file = root / "cluster.key"
        ClusterKey.generate().save(key_file)
        with _running_peers(root, key_file) as peers:
            node = Node(node_config(root / DESK[0], DESK[0], DESK[1], key_file, [p.address for p in peers],
                                    peer=dedicated))
            for peer in peers:  # until the first peer's guest has come here
                call_node(peer.paths, PauseHosting())
            guests: list[psutil.Process] = []
            try:
                return asyncio.run(_capture(node, peers, shots, guests, history))
            finally:
                _kill_running(guests)  # the node stops its guests itself; this is for when it could not


def node_config(data_dir: Path, name: str, cpus: int, key_file: Path, seeds: list[str], *,
                peer: bool = False) -> Config:
    paths = Paths.resolve(config_file=data_dir / "config.toml", data_dir=data_dir)
    return load_config(paths, {**CLUSTER_OPTIONS, **(PEER_OPTIONS if peer else {}), "node.name": name,
                               "guests.cpus": cpus, "cluster.key_file": str(key_file), "node.seeds": seeds})


@contextlib.contextmanager
def _temporary_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="frost-live-"))  # short: control sockets live in here
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _running_peers(root: Path, key_file: Path) -> Iterator[list[Peer]]:
    """The first peer, then the others seeded with it; all of them stopped on the way out."""
    peers: list[Peer] = []
    try:
        first_name, first_cpus = PEERS[0]
        peers.append(_start_peer(root, first_name, first_cpus, key_file, seeds=[]))
        _wait_until_answering(peers[0])
        for name, cpus in PEERS[1:]:
            peers.append(_start_peer(root, name, cpus, key_file, seeds=[peers[0].address]))
        for peer in peers[1:]:
            _wait_until_answering(peer)
        yield peers
    finally:
        for peer in peers:
            _stop_peer(peer)


def _start_peer(root: Path, name: str, cpus: int, key_file: Path, seeds: list[str]) -> Peer:
    data_dir = root / name
    data_dir.mkdir()
    save_config(node_config(data_dir, name, cpus, key_file, seeds, peer=True))
    command = [sys.executable, "-c", _RUN_NODE, "--headless", "--data-dir", str(data_dir),
               "--config", str(data_dir / "config.toml"), "--port", "0", "--broadcast-address", "",
               "--cluster-key-file", str(key_file), "--name", name]
    for seed in seeds:
        command += ["--seed", seed]
    with open(data_dir / "stdout.log", "wb") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return Peer(name=name, data_dir=data_dir, process=process)


def _wait_until_answering(peer: Peer) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        try:
            peer.address = call_node(peer.paths, GetStatus()).address
            return
        except NodeUnavailableError:
            if peer.process.poll() is not None or time.monotonic() > deadline:
                raise LiveScreenshotError(f"peer {peer.name} did not start:\n{peer.output()}") from None
            time.sleep(0.1)


def _stop_peer(peer: Peer) -> None:
    """SIGTERM (the node stops its guests and says goodbye), then SIGKILL to whatever is left.

    Guests lead sessions of their own, so the peer's process group does not hold them: they are
    found as its children before it stops.
    """
    try:
        guests = psutil.Process(peer.process.pid).children(recursive=True)
    except psutil.Error:
        guests = []
    if peer.process.poll() is None:
        peer.process.send_signal(signal.SIGTERM)
        try:
            peer.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("peer %s did not stop in %s s; killing its process group", peer.name, STOP_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(peer.process.pid, signal.SIGKILL)  # its own session: pgid == pid
            peer.process.wait()
    _kill_running(guests)


def _kill_running(processes: list[psutil.Process]) -> None:
    """Kill those still running (psutil checks the start time, so a reused pid is left alone)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.is_running():
                process.kill()


async def _capture(node, peers: list[Peer], shots, guests: list[psutil.Process], history: float) -> dict[str, str]:
    """Stage the cluster through the app's node and take the shots; `guests` learns the guest processes here."""
    from frost_tui.app import create_app

    app = create_app(node)
    app.animation_level = "none"   # a picture shows where a transition ends; waiting it out shows nothing more
    async with app.run_test(size=SIZE) as pilot:
        try:
            return await _stage_and_shoot(app, pilot, peers, shots, history)
        finally:
            for pid in node.supervisor.guest_pids():
                with contextlib.suppress(psutil.Error):
                    guests.append(psutil.Process(pid))


async def _stage_and_shoot(app, pilot, peers: list[Peer], shots, history: float) -> dict[str, str]:
    """Bring the cluster to the state the pictures show, then take them."""
    stage = _Stage(app, pilot)
    names = {peer.name for peer in peers}
    await stage.reach(lambda s: s.address != "" and names <= _alive_peers(s), "every peer alive")
    await asyncio.to_thread(call_node, peers[0].paths, SubmitAssignment(plugin="montecarlo-pi", params=PEERS_GUEST))
    await stage.reach(lambda s: any(g.origin == peers[0].name and g.progress > 0 for g in s.guests),
                      f"a guest from {peers[0].name} running here")
    for peer in peers:
        await asyncio.to_thread(call_node, peer.paths, ResumeHosting())
    await stage.reach(lambda s: s.history[-1].at - s.history[0].at >= history,
                      f"{history:g} s of measurements", timeout=history + STEP_TIMEOUT)
    slots = DESK[1] + sum(cpus for _, cpus in PEERS)
    units = slots - 2  # one CPU holds the peer's guest, one stays free for the move
    rows = math.ceil(SCENE["height"] / units)
    app.send(SubmitAssignment(plugin="raytrace", params={**SCENE, "rows_per_unit": rows}))
    await stage.reach(lambda s: _running(s) is not None and len(_running_units(s)) == units,
                      f"{units} units of the ray trace running")
    await stage.reach(lambda s: sum(u.progress > 0 for u in _running_units(s)) >= 3, "units making progress")
    task_id, destination = _planned_move(app.snapshot)
    app.send(MoveTask(task_id=task_id, node=destination))
    await stage.reach(lambda s: _unit(s, task_id).host == destination and _unit(s, task_id).moves > 0
                      and _unit(s, task_id).state == "running", f"{task_id} moved")
    await stage.reach(lambda s: sum(u.progress >= VISIBLE_PROGRESS for u in _running_units(s)) >= 3
                      and all(g.progress > 0 for g in s.guests), "units and guests making visible progress")
    await pilot.press("1")
    await pilot.pause(0.5)
    return await take_shots(app, pilot, shots)


class _Stage:
    """Waits for the app's latest snapshot to show a state, or fails naming it."""

    def __init__(self, app, pilot) -> None:
        self.app, self.pilot = app, pilot

    async def reach(self, condition: Callable[[NodeSnapshot], bool], what: str, *,
                    timeout: float = STEP_TIMEOUT) -> None:
        started = time.monotonic()
        while not (self.app.snapshot is not None and condition(self.app.snapshot)):
            if time.monotonic() > started + timeout:
                hosting = self.app.snapshot.hosting if self.app.snapshot is not None else None
                why = (f" (this machine: {hosting.reason}; on a machine busy with other work, add --dedicated)"
                       if hosting is not None and hosting.state == "owner-active" else "")
                raise LiveScreenshotError(f"the cluster did not reach this state in {timeout:.0f} s: {what}{why}")
            await self.pilot.pause(0.2)
        log.info("reached in %.1f s: %s", time.monotonic() - started, what)


def _alive_peers(snapshot: NodeSnapshot) -> set[str]:
    return {p.name for p in snapshot.peers if p.state == "alive" and not p.is_self}


def _running(snapshot: NodeSnapshot) -> AssignmentView | None:
    return next((a for a in snapshot.assignments if a.state == "running"), None)


def _running_units(snapshot: NodeSnapshot) -> list[UnitView]:
    assignment = _running(snapshot)
    return [u for u in assignment.units if u.state == "running"] if assignment else []


def _unit(snapshot: NodeSnapshot, task_id: str) -> UnitView:
    return next(u for u in _running(snapshot).units if u.task_id == task_id)


def _planned_move(snapshot: NodeSnapshot) -> tuple[str, str]:
    """(task, destination): into the host with a free CPU, from the peer running the most units.

    The app's own machine is never the source, so it keeps its guests in the pictures.
    """
    units = _running_units(snapshot)
    capacity = {p.node_id: DESK[1] if p.is_self else dict(PEERS).get(p.name, 0)
                for p in snapshot.peers if p.state == "alive"}
    held = {node: sum(u.host == node for u in units) for node in capacity}
    busy = {**held, snapshot.node_id: len(snapshot.guests)}  # here, the peer's guest too
    free = [node for node in capacity if busy[node] < capacity[node]]
    if not free:
        raise LiveScreenshotError(f"no host has a free CPU for the move; units per host: {held}")
    destination = snapshot.node_id if snapshot.node_id in free else free[0]
    sources = [node for node in held if node not in (snapshot.node_id, destination) and held[node]]
    source = max(sources, key=lambda node: (held[node], node))
    return next(u.task_id for u in units if u.host == source), destination

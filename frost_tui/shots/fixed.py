"""The screenshots' fixed state: a small demo cluster at a fixed moment, and the shots taken of it.

`demo_snapshot` comes out the same on every machine, so the pictures (and the snapshot tests
that use the same state) do too; `shots.live` takes the same shots from a real cluster instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from frost_core import (
    EMBEDDED,
    AssignmentView,
    Command,
    EventView,
    GuestView,
    HostingView,
    Link,
    NodeSnapshot,
    ParamView,
    PeerView,
    PluginView,
    ResourceSample,
    UnitView,
    counted,
)

from frost_tui.shots.render import SHOTS, SIZE, take_shots

DEMO_NOW = 1_767_000_000.0  # a fixed moment, so every run draws the same times
_NAMES = ("ada", "babbage", "curie", "dijkstra", "euler", "fermat", "gauss", "hopper", "ising", "jacobi")
_GiB = 1024**3


def demo_snapshot(now: float = DEMO_NOW, *, peers: int = 6, guests: int = 3) -> NodeSnapshot:
    """A desk in a busy cluster: hosting guests, master of a running and a finished assignment."""
    self_id = "f00dfeed" + "0" * 24
    peer_views = [
        PeerView(
            node_id=self_id, name="turing", address="10.0.4.17:47631", state="alive", available=0.62, cpus=8,
            free_memory=9 * _GiB, guests=guests, mode="neutral", last_seen=now, rtt_ms=None,
            idle_extremity=0.91, heavy_extremity=0.18, incarnation=3, protocol_version=1, is_self=True,
        )
    ]
    for i in range(peers):
        name = _NAMES[i % len(_NAMES)] + ("" if i < len(_NAMES) else str(i // len(_NAMES)))
        state = "suspect" if i == 3 else "dead" if i == 5 else "alive"
        peer_views.append(
            PeerView(
                node_id=f"{i + 1:02x}" + "c0ffee" + f"{i:024x}",
                name=name,
                address=f"10.0.{4 + i // 200}.{20 + i % 200}:47631",
                state=state,
                available=round(0.2 + (i * 37 % 80) / 100, 2),
                cpus=(4, 8, 16, 12)[i % 4],
                free_memory=(2 + i * 3 % 14) * _GiB,
                guests=i % 3,
                mode=("receiver", "sender", "neutral")[i % 3],
                last_seen=now - (1 + i * 7 % 5) - (9 if state == "suspect" else 0) - (95 if state == "dead" else 0),
                rtt_ms=None if state == "dead" else round(0.4 + i * 0.37 % 3, 1),
                idle_extremity=0.9,
                heavy_extremity=0.2,
                incarnation=1 + i % 4,
                protocol_version=1,
                is_self=False,
            )
        )
    guest_views = tuple(
        GuestView(
            task_id=f"{('b7e1a2c9', 'a91f3d20')[g % 2]}-{4 + g % 2}.{g}",
            assignment_id=f"{('b7e1a2c9', 'a91f3d20')[g % 2]}-{4 + g % 2}",
            plugin=("raytrace", "montecarlo-pi")[g % 2],
            origin=_NAMES[g % len(_NAMES)],
            state="running" if g != 1 else "checkpointing",
            progress=round(0.15 + (g * 0.29) % 0.8, 2),
            cpu_seconds=300 + g * 171,
            wall_seconds=340 + g * 190,
            since_checkpoint_seconds=40 + g * 23 % 300,
            cpu_since_checkpoint_seconds=38 + g * 21 % 280,
            checkpoint_bytes=(420 + g * 60) * 1024,
            memory_bytes=(60 + g * 25) * 1024 * 1024,
            explanation="kept here: R=0.62 is above the lower threshold 0.35 (system average 0.58)",
        )
        for g in range(guests)
    )
    history = tuple(  # as the node keeps it: ten minutes of one-second samples
        ResourceSample(
            at=now - (599 - k),
            available=round(0.55 + 0.25 * math.sin(k / 45) + (0.2 if 300 < k < 400 else 0), 3),
            owner_cpu_percent=round(max(0.0, 35 + 30 * math.sin(k / 35) - (30 if k > 450 else 0)) / 8, 1),
            guest_cpu_percent=round(min(400.0, 150 + 120 * math.cos(k / 55)) / 8, 1),  # 8 cores: % of the machine
        )
        for k in range(600)
    )
    hosts = [p.node_id for p in peer_views if p.state == "alive"]
    names = {p.node_id: p.name for p in peer_views}
    unit_states = ("done", "running", "running", "queued", "running", "done")
    running_units = tuple(
        UnitView(
            index=u, task_id=f"f00dfeed-7.{u}", state=unit_states[u],
            host="" if unit_states[u] == "queued" else hosts[u % len(hosts)],
            progress=(1.0, 0.62, 0.35, 0.0, 0.81, 1.0)[u], moves=(0, 1, 0, 0, 2, 0)[u], failures=0, error=None,
            host_name="" if unit_states[u] == "queued" else names[hosts[u % len(hosts)]],
            eta_seconds=(None, 291.0, 534.0, None, 88.0, None)[u],
        )
        for u in range(6)
    )
    done_units = tuple(
        UnitView(index=u, task_id=f"f00dfeed-6.{u}", state="done", host=hosts[(u + 1) % len(hosts)], progress=1.0,
                 moves=0, failures=0, error=None, host_name=names[hosts[(u + 1) % len(hosts)]])
        for u in range(4)
    )
    assignments = (
        AssignmentView(
            id="f00dfeed-7", plugin="raytrace", state="running", progress=0.63, created_at=now - 754,
            finished_at=None, eta_seconds=412, params={"width": 640, "height": 480, "samples": 16},
            units=running_units, result_media_type=None, result_filename=None, result_path=None, error=None,
        ),
        AssignmentView(
            id="f00dfeed-6", plugin="montecarlo-pi", state="done", progress=1.0, created_at=now - 3900,
            finished_at=now - 3011, eta_seconds=None, params={"samples": 400_000_000},
            units=done_units, result_media_type="text/plain", result_filename="pi.txt",
            result_path="/home/owner/.local/share/frost-tui/results/f00dfeed-6-pi.txt",
            error=None,
        ),
    )
    plugins = (
        PluginView(
            name="raytrace", version="1.2.0", hash="9f2c4e81d07a5b3362cf18aa", source="bundled",
            path="frost_plugins/raytrace.py", ok=True, error=None, description="Renders a scene of spheres, row bands per unit.",
            params=(
                ParamView("width", "int", 640, "image width in pixels", 16, 4096, ()),
                ParamView("height", "int", 480, "image height in pixels", 16, 4096, ()),
                ParamView("samples", "int", 16, "rays per pixel", 1, 1024, ()),
            ),
        ),
        PluginView(
            name="montecarlo-pi", version="1.0.1", hash="41d8e2ab6c03f9e7d1b25c40", source="bundled",
            path="frost_plugins/montecarlo_pi.py", ok=True, error=None, description="Estimates pi by random sampling.",
            params=(ParamView("samples", "int", 100_000_000, "points to draw", 1000, 10**12, ()),),
        ),
        PluginView(
            name="mandelbrot", version="0.9.0", hash="c7a0913e55b2d6f48e1a0c3b", source="bundled",
            path="frost_plugins/mandelbrot.py", ok=True, error=None, description="Renders the Mandelbrot set.",
            params=(ParamView("size", "int", 512, "image side in pixels", 16, 8192, ()),
                    ParamView("palette", "str", "ice", "colour palette", None, None, ("ice", "fire", "grey"))),
        ),
        PluginView(
            name="fluid", version="0.1.0", hash="0e13f7c2a9d84b6615ea7d90", source="added",
            path="/home/owner/plugins/fluid.py", ok=False, error="step() returned a float, expected Done or bytes",
            description="", params=(),
        ),
    )
    events = (
        EventView(now - 3011, "assignment", "f00dfeed-6 (montecarlo-pi) done in 14m49s"),
        EventView(now - 760, "join", "hopper joined from 10.0.4.27:47631"),
        EventView(now - 754, "assignment", "f00dfeed-7 (raytrace) submitted: 6 units"),
        EventView(now - 420, "move-out", "f00dfeed-7.1 moved to babbage (R 0.31 → 0.74)"),
        EventView(now - 300, "checkpoint", "b7e1a2c9-4.0 checkpointed: 420 KiB in 0.21 s"),
        EventView(now - 180, "move-in", "a91f3d20-5.1 arrived from curie"),
        EventView(now - 95, "dead", "fermat is dead: no answer for 95 s", "warning"),
        EventView(now - 12, "suspect", "dijkstra is suspect: 3 probes unanswered", "warning"),
        EventView(now - 5, "error", "fluid.py: step() returned a float, expected Done or bytes", "error", "Plugin error"),
    )
    hosting = HostingView(
        state="hosting" if guests else "idle",
        reason=f"the owner has been away 6m12s; {counted(guests, 'guest')} use 2 of 8 CPUs" if guests else "waiting for work",
        paused_until=None, finishing=False, transfer_mode="neutral", system_average=0.58, lower_threshold=0.35,
        upper_threshold=0.81, memory_pool_bytes=8 * _GiB, memory_used_bytes=sum(g.memory_bytes for g in guest_views),
        guest_cpus=8, presence="GNOME Mutter IdleMonitor: input 372 s ago",
        sleep="sleep watched: logind waits up to 4.5 s for the guests to be handed on",
        sleep_brief="watched: 4.5 s to hand the guests on",
        owner=("run by rule 'quiet': owner not contending [cpu_share 9.5]",
               "temperature: hottest sensor coretemp Package id 0 at 61 °C"),
    )
    settings = {
        "guests.cpus": 0, "guests.memory_pool_mb": 8192, "owner.busy_cpu_percent": 25.0, "owner.input_idle": 60.0,
        "owner.evict_after": 120.0, "owner.resume_after": 30.0, "checkpoints.min_interval": 30.0,
        "checkpoints.max_interval": 900.0, "checkpoints.owner_interruptions_per_hour": 2.0,
        "cluster.allow_cluster_plugins": True, "desk.on_battery": True, "desk.max_temperature": 90.0,
    }
    return NodeSnapshot(
        node_id=self_id, name="turing", address="10.0.4.17:47631", cluster_join_code="frost1-7QX4-M2KD-9PLR-WE3T",
        taken_at=now, hosting=hosting, history=history, peers=tuple(peer_views), guests=guest_views,
        assignments=assignments, plugins=plugins, events=events, settings=settings,
    )


class StillNode:
    """A node that shows one fixed snapshot and ignores commands: what a screenshot needs."""

    def __init__(self, snapshot: NodeSnapshot) -> None:
        self._snapshot = snapshot

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()

    def snapshot(self) -> NodeSnapshot:
        return self._snapshot

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        pass

    def link(self) -> Link:
        return EMBEDDED

    def next_target(self) -> None:
        pass

    def send_nowait(self, command: Command) -> None:
        pass


async def export_shots(shots=SHOTS, *, size: tuple[int, int] = SIZE) -> dict[str, str]:
    """Run the app once, headless, on the demo state; return the SVG of each shot by name."""
    from frost_tui.app import create_app

    app = create_app(StillNode(demo_snapshot()), clock=lambda: DEMO_NOW)
    app.animation_level = "none"   # a picture shows where a transition ends; waiting it out shows nothing more
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        return await take_shots(app, pilot, shots)

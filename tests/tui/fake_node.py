"""A stand-in for frost_core.node.wiring.Node with the same API, for states a real node cannot reach in a test.

It starts from the demo cluster (several peers, guests, a running assignment) or any size asked
for (100 peers), and answers each command the way the node's contract says: by publishing a
new snapshot, with an error event when the command cannot be carried out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import trio

from frost_core.api.commands import (
    AddPlugin,
    CancelAssignment,
    ClearQuarantine,
    Command,
    EvictGuests,
    FinishThenPause,
    MoveTask,
    PauseHosting,
    RemovePlugin,
    ResumeHosting,
    SaveSettings,
    SubmitAssignment,
)
from frost_core.config import Config, save_config
from frost_core.api.errors import ConfigError
from frost_core.api.node_api import EMBEDDED, Link
from frost_core.api.snapshot import AssignmentView, EventView, NodeSnapshot, PluginView, UnitView
from frost_tui.shots.fixed import DEMO_NOW, demo_snapshot


class FakeNode:
    def __init__(self, config: Config | None = None, *, peers: int = 6, guests: int = 3,
                 snapshot: NodeSnapshot | None = None, tick_hz: float = 0.0,
                 clock: Callable[[], float] | None = None) -> None:
        self.config = config
        self.clock = clock  # benches: stamp snapshots with this clock; tests: a counter from DEMO_NOW
        self.now = clock() if clock else DEMO_NOW
        self._snapshot = snapshot or demo_snapshot(self.now, peers=peers, guests=guests)
        self._listener: Callable[[NodeSnapshot], None] | None = None
        self._crash: BaseException | None = None
        self._wake = trio.Event()
        self.serving = False
        self.stopped_cleanly = False
        self.tick_hz = tick_hz  # > 0: publish a fresh snapshot this often, like a live node
        self.link_state: Link = EMBEDDED  # tests of an attached UI set another

    # ------------------------------------------------------------------ the Node API

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        self.serving = True
        task_status.started()
        try:
            if self.tick_hz:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._tick)
                    await self._wake.wait()
                    nursery.cancel_scope.cancel()
            else:
                await self._wake.wait()
            if self._crash is not None:
                raise self._crash
        except trio.Cancelled:
            self.stopped_cleanly = True
            raise
        finally:
            self.serving = False

    def snapshot(self) -> NodeSnapshot:
        return self._snapshot

    def set_snapshot_listener(self, callback: Callable[[NodeSnapshot], None] | None) -> None:
        self._listener = callback

    def link(self) -> Link:
        return self.link_state

    def next_target(self) -> None:
        pass

    def send_nowait(self, command: Command) -> None:
        handler = getattr(self, "_on_" + type(command).__name__)
        handler(command)

    async def _tick(self) -> None:
        """What an idle node publishes: each peer heard from again every two seconds, and once a
        second (as the node measures, FIGURES_INTERVAL) one more history sample."""
        ticks = 0
        per_second = max(1, round(self.tick_hz))
        while True:
            await trio.sleep(1 / self.tick_hz)
            ticks += 1
            snapshot = self._snapshot
            heard_at = self.clock() if self.clock else self.now
            peers = tuple(dataclasses.replace(p, last_seen=heard_at) if i % (2 * per_second) == ticks % (2 * per_second)
                          and p.state == "alive" else p for i, p in enumerate(snapshot.peers))
            history = snapshot.history
            if ticks % per_second == 0:
                last = history[-1]
                sample = dataclasses.replace(last, at=last.at + 1, guest_cpu_percent=(last.guest_cpu_percent + 7) % 100)
                history = history[1:] + (sample,)
            self.publish(peers=peers, history=history)

    # ------------------------------------------------------------------ test controls

    def crash(self, error: BaseException) -> None:
        """Make serve() fail as a real node would on a bug or a lost socket."""
        self._crash = error
        self._wake.set()

    def publish(self, **changes) -> NodeSnapshot:
        """Publish a new snapshot with some fields changed (as the node does after any change)."""
        self.now = self.clock() if self.clock else self.now + 1
        self._snapshot = dataclasses.replace(self._snapshot, taken_at=self.now, **changes)
        if self._listener is not None:
            self._listener(self._snapshot)
        return self._snapshot

    def _event(self, kind: str, message: str, severity: str = "info", title: str = "") -> tuple[EventView, ...]:
        return self._snapshot.events + (EventView(self.now + 1, kind, message, severity, title),)

    def _hosting(self, **changes):
        return dataclasses.replace(self._snapshot.hosting, **changes)

    # ------------------------------------------------------------------ command handlers

    def _on_PauseHosting(self, command: PauseHosting) -> None:
        guests = tuple(dataclasses.replace(g, state="paused") for g in self._snapshot.guests)
        self.publish(
            hosting=self._hosting(state="paused", reason="paused by the owner", paused_until=command.until),
            guests=guests, events=self._event("pause", "hosting paused by the owner"),
        )

    def _on_ResumeHosting(self, command: ResumeHosting) -> None:
        guests = tuple(dataclasses.replace(g, state="running") for g in self._snapshot.guests)
        self.publish(
            hosting=self._hosting(state="hosting" if guests else "idle", reason="resumed by the owner",
                                  paused_until=None, finishing=False),
            guests=guests, events=self._event("resume", "hosting resumed"),
        )

    def _on_FinishThenPause(self, command: FinishThenPause) -> None:
        self.publish(hosting=self._hosting(state="finishing", reason="finishing current guests", finishing=True))

    def _on_ClearQuarantine(self, command: ClearQuarantine) -> None:
        peers = tuple(dataclasses.replace(p, quarantined="") if p.node_id.startswith(command.node) else p
                      for p in self._snapshot.peers)
        self.publish(peers=peers, events=self._event("quarantine", f"{command.node[:8]} cleared by the owner"))

    def _on_EvictGuests(self, command: EvictGuests) -> None:
        guests = self._snapshot.guests
        if command.task_id is not None and all(g.task_id != command.task_id for g in guests):
            self.publish(events=self._event("error", f"no guest {command.task_id} runs here", "error", "Unknown guest"))
            return
        leaving = [g for g in guests if command.task_id in (None, g.task_id)]
        staying = tuple(g for g in guests if g not in leaving)
        events = self._snapshot.events
        for guest in leaving:
            events += (EventView(self.now + 1, "evict", f"{guest.task_id} evicted by the owner"),)
        self.publish(
            guests=staying, events=events,
            hosting=self._hosting(state="hosting" if staying else "idle", reason="guests evicted by the owner"),
        )

    def _on_MoveTask(self, command: MoveTask) -> None:
        assignments = []
        moved = False
        for assignment in self._snapshot.assignments:
            units = []
            for unit in assignment.units:
                if unit.task_id == command.task_id:
                    name = next((p.name for p in self._snapshot.peers if p.node_id == command.node), command.node[:8])
                    unit = dataclasses.replace(unit, host=command.node, host_name=name, moves=unit.moves + 1)
                    moved = True
                units.append(unit)
            assignments.append(dataclasses.replace(assignment, units=tuple(units), moves=sum(u.moves for u in units)))
        if not moved:
            self.publish(events=self._event("error", f"no unit {command.task_id}", "error", "Cannot move"))
            return
        self.publish(assignments=tuple(assignments),
                     events=self._event("move-out", f"{command.task_id} moved to {command.node[:8]}"))

    def _on_SubmitAssignment(self, command: SubmitAssignment) -> None:
        plugin = next((p for p in self._snapshot.plugins if p.name == command.plugin and p.ok), None)
        if plugin is None:
            self.publish(events=self._event("error", f"no working plugin {command.plugin!r}", "error", "Plugin error"))
            return
        assignment_id = f"{self._snapshot.node_id[:8]}-{len(self._snapshot.assignments) + 10}"
        units = tuple(
            UnitView(index=i, task_id=f"{assignment_id}.{i}", state="queued", host="", progress=0.0, moves=0,
                     failures=0, error=None)
            for i in range(4)
        )
        assignment = AssignmentView(
            id=assignment_id, plugin=plugin.name, state="running", progress=0.0, created_at=self.now + 1,
            finished_at=None, eta_seconds=None, params=dict(command.params), units=units,
            result_media_type=None, result_filename=None, result_path=None, error=None,
        )
        self.publish(assignments=self._snapshot.assignments + (assignment,),
                     events=self._event("assignment", f"{assignment_id} ({plugin.name}) submitted"))

    def _on_CancelAssignment(self, command: CancelAssignment) -> None:
        assignments = tuple(
            dataclasses.replace(a, state="cancelled") if a.id == command.assignment_id else a
            for a in self._snapshot.assignments
        )
        self.publish(assignments=assignments)

    def _on_AddPlugin(self, command: AddPlugin) -> None:
        path = Path(command.path)
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as error:
            self.publish(events=self._event("error", f"{path}: {error.strerror}", "error", "Plugin error"))
            return
        ok = "def step" in source
        plugin = PluginView(
            name=path.stem, version="0.0.1", hash=f"{abs(hash(source)):024x}"[:24], source="added", path=str(path),
            ok=ok, error=None if ok else "the module defines no step()", description="", params=(),
        )
        events = self._snapshot.events
        if not ok:
            events = self._event("error", f"{path.name}: the module defines no step()", "error", "Plugin error")
        self.publish(plugins=self._snapshot.plugins + (plugin,), events=events)

    def _on_RemovePlugin(self, command: RemovePlugin) -> None:
        kept = tuple(p for p in self._snapshot.plugins if p.name != command.name or p.source not in ("added", "cluster"))
        if len(kept) == len(self._snapshot.plugins):
            self.publish(events=self._event("error", f"no added plugin is called {command.name!r}", "error",
                                            "Plugin error"))
            return
        self.publish(plugins=kept, events=self._event("plugin", f"plugin {command.name} removed"))

    def _on_SaveSettings(self, command: SaveSettings) -> None:
        settings = {**self._snapshot.settings, **command.values}
        if self.config is not None:
            try:
                self.config = self.config.replace(**{k.replace(".", "__"): v for k, v in command.values.items()})
            except ConfigError as error:
                self.publish(events=self._event("error", error.message, "error", error.title))
                return
            save_config(self.config)
        self.publish(settings=settings, events=self._event("settings", "settings saved"))


def live_node(*, peers: int = 100, guests: int = 10, tick_hz: float = 10.0) -> FakeNode:
    """A fake that behaves like a live node for the benches: wall-clock times, so "last heard"
    ticks over as it would, and a fresh snapshot `tick_hz` times a second."""
    now = time.time()
    return FakeNode(snapshot=demo_snapshot(now, peers=peers, guests=guests), tick_hz=tick_hz, clock=time.time)
